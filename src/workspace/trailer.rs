//! The trailer every commit whilly lands or pushes carries: which task of which plan, by the
//! attempt holding which lease epoch, from which queue. Another clone, another machine, sees
//! the same commits on the shared remote, so the trailer is how a worker there recognises a
//! landing of its task that the queue never recorded (it records it instead of landing again),
//! and how a push tells a newer attempt's branch from an older one (a lower epoch may be
//! replaced, a higher one never). Pure text; no repository access here.

use sha2::{Digest, Sha256};

const TASK: &str = "Whilly-Task";
const PLAN: &str = "Whilly-Plan";
const EPOCH: &str = "Whilly-Epoch";
const QUEUE: &str = "Whilly-Queue";

/// One attempt's mark on its commits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskMark {
    pub plan_id: String,
    pub task_id: String,
    pub epoch: i64,
    /// [`queue_tag`] of the queue's plan: a commit from a queue started afresh is history.
    pub queue: String,
}

/// A short digest of a queue mark (`DeliveryFence::queue_mark`): the mark names where the queue
/// lives, which has no business in a commit message on a shared remote.
pub fn queue_tag(queue_mark: &str) -> String {
    let digest = Sha256::digest(queue_mark.as_bytes());
    hex::encode(&digest[..8])
}

impl TaskMark {
    /// The mark of the attempt at `epoch` on (`plan_id`, `task_id`) in the queue `queue_mark`
    /// names (`DeliveryFence::queue_mark`, kept only as its [`queue_tag`]).
    pub fn of_attempt(plan_id: &str, task_id: &str, epoch: i64, queue_mark: &str) -> TaskMark {
        TaskMark {
            plan_id: plan_id.to_string(),
            task_id: task_id.to_string(),
            epoch,
            queue: queue_tag(queue_mark),
        }
    }

    /// Whether `other` marks the same task of the same queue's plan (any epoch).
    pub fn same_task(&self, other: &TaskMark) -> bool {
        self.plan_id == other.plan_id && self.task_id == other.task_id && self.queue == other.queue
    }

    /// `message` with this mark as its trailer, replacing any whilly mark it had: a commit
    /// carried over from an earlier attempt is this attempt's once it lands with it.
    pub fn stamp(&self, message: &str) -> String {
        let kept: Vec<&str> = message
            .trim_end()
            .lines()
            .filter(|l| trailer_value(l).is_none())
            .collect();
        let body = kept.join("\n");
        let body = body.trim_end();
        // Git reads trailers from the last paragraph; a message ending in one ("Plan: p")
        // gets ours appended to it, anything else a paragraph of its own.
        let ends_in_trailers = body
            .rsplit("\n\n")
            .next()
            .is_some_and(|last| last.lines().all(looks_like_trailer) && body.contains("\n\n"));
        let sep = if body.is_empty() {
            ""
        } else if ends_in_trailers {
            "\n"
        } else {
            "\n\n"
        };
        format!(
            "{body}{sep}{TASK}: {}\n{PLAN}: {}\n{EPOCH}: {}\n{QUEUE}: {}\n",
            self.task_id, self.plan_id, self.epoch, self.queue
        )
    }

    /// The mark in a commit message, when it has a whole one.
    pub fn parse(message: &str) -> Option<TaskMark> {
        let (mut task, mut plan, mut epoch, mut queue) = (None, None, None, None);
        for line in message.lines() {
            match trailer_value(line) {
                Some((TASK, v)) => task = Some(v.to_string()),
                Some((PLAN, v)) => plan = Some(v.to_string()),
                Some((EPOCH, v)) => epoch = v.parse::<i64>().ok(),
                Some((QUEUE, v)) => queue = Some(v.to_string()),
                _ => {}
            }
        }
        Some(TaskMark {
            plan_id: plan?,
            task_id: task?,
            epoch: epoch?,
            queue: queue?,
        })
    }
}

/// `(key, value)` of a whilly trailer line.
fn trailer_value(line: &str) -> Option<(&'static str, &str)> {
    let (k, v) = line.split_once(':')?;
    [TASK, PLAN, EPOCH, QUEUE]
        .into_iter()
        .find(|key| *key == k.trim())
        .map(|key| (key, v.trim()))
}

fn looks_like_trailer(line: &str) -> bool {
    line.split_once(": ").is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn mark(epoch: i64) -> TaskMark {
        TaskMark {
            plan_id: "p".into(),
            task_id: "T-1".into(),
            epoch,
            queue: queue_tag("postgres:db:1"),
        }
    }

    #[test]
    fn a_stamped_message_reads_back_and_joins_the_last_trailer_paragraph() {
        let m = mark(3).stamp("whilly: T-1 — do it\n\nPlan: p\nAttempt: 2\n");
        assert_eq!(TaskMark::parse(&m), Some(mark(3)));
        assert!(m.contains("Attempt: 2\nWhilly-Task: T-1\n"), "{m}");
        let agent = mark(3).stamp("fix the parser\n\nIt was wrong.");
        assert!(
            agent.contains("It was wrong.\n\nWhilly-Task: T-1"),
            "{agent}"
        );
        assert_eq!(TaskMark::parse(&agent), Some(mark(3)));
    }

    #[test]
    fn stamping_again_replaces_the_earlier_attempts_mark() {
        let once = mark(1).stamp("work\n");
        let twice = mark(4).stamp(&once);
        assert_eq!(TaskMark::parse(&twice).unwrap().epoch, 4);
        assert_eq!(twice.matches("Whilly-Epoch").count(), 1, "{twice}");
    }

    #[test]
    fn a_partial_or_foreign_mark_is_none() {
        assert_eq!(TaskMark::parse("Whilly-Task: T-1\nWhilly-Plan: p\n"), None);
        assert_eq!(TaskMark::parse("plain commit"), None);
        assert!(!mark(1).same_task(&TaskMark {
            queue: queue_tag("other"),
            ..mark(1)
        }));
        assert!(!queue_tag("sqlite:/home/u/.whilly/x.db:1").contains("home"));
    }
}
