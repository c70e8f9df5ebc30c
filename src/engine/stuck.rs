//! Why a task that has not ended cannot run: parked for a human or as blocked, or waiting on a
//! dependency that failed (or is itself stuck). Pure, over the plan's tasks; the run's summary,
//! `whilly plan show` and `whilly task show` say it in the same words.

use crate::domain::Status;
use crate::store::TaskRecord;
use serde::Serialize;
use std::collections::HashMap;

/// A task the run could not finish, and why, for the run's summary and its `complete` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stuck {
    pub task_id: String,
    pub status: Status,
    pub why: String,
}

impl std::fmt::Display for Stuck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.task_id, self.why)
    }
}

/// The status of each task of a plan by id, for [`why_stuck`].
pub(crate) fn statuses(tasks: &[TaskRecord]) -> HashMap<&str, Status> {
    tasks.iter().map(|t| (t.id.as_str(), t.status)).collect()
}

/// Why `t` cannot run now, or `None` when it can (or has ended, or is running). A pending task
/// whose dependencies are only pending or running is waiting, not stuck.
pub(crate) fn why_stuck(t: &TaskRecord, status_of: &HashMap<&str, Status>) -> Option<String> {
    let reason = t.reason.as_deref().filter(|r| !r.trim().is_empty());
    match t.status {
        Status::HumanLoop => Some(match reason {
            Some(r) => format!("waits for a human: {r}; answer with `whilly handoff list`"),
            None => "waits for a human; answer with `whilly handoff list`".to_string(),
        }),
        Status::Blocked => Some(match reason {
            Some(r) => format!("BLOCKED: {r}"),
            None => "BLOCKED".to_string(),
        }),
        Status::Pending if t.pending_deps > 0 => {
            let held: Vec<(&str, Status)> = t
                .spec
                .dependencies
                .iter()
                .filter_map(|d| status_of.get(d.as_str()).map(|s| (d.as_str(), *s)))
                .filter(|(_, s)| {
                    matches!(
                        s,
                        Status::Failed | Status::Skipped | Status::Blocked | Status::HumanLoop
                    )
                })
                .collect();
            if held.is_empty() {
                return None;
            }
            let words: Vec<String> = held.iter().map(|(d, s)| format!("{d} {s}")).collect();
            Some(format!("blocked: {}", words.join(", ")))
        }
        _ => None,
    }
}

/// Every task of `tasks` that cannot run, with why; a pending task waiting on a stuck pending
/// one (a chain behind a failure) is stuck too, named by the task it waits on.
pub(crate) fn stuck_tasks(tasks: &[TaskRecord]) -> Vec<Stuck> {
    let status_of = statuses(tasks);
    let direct: HashMap<&str, String> = tasks
        .iter()
        .filter_map(|t| why_stuck(t, &status_of).map(|w| (t.id.as_str(), w)))
        .collect();
    tasks
        .iter()
        .filter_map(|t| {
            let why = direct.get(t.id.as_str()).cloned().or_else(|| {
                (t.status == Status::Pending && t.pending_deps > 0)
                    .then(|| {
                        t.spec
                            .dependencies
                            .iter()
                            .find(|d| direct.contains_key(d.as_str()))
                            .map(|d| format!("waits on {d}, which is stuck"))
                    })
                    .flatten()
            })?;
            Some(Stuck {
                task_id: t.id.clone(),
                status: t.status,
                why,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::TaskSpec;

    fn task(id: &str, status: Status, deps: &[&str], reason: Option<&str>) -> TaskRecord {
        TaskRecord {
            pk: 0,
            plan_id: "p".into(),
            id: id.into(),
            status,
            priority: crate::domain::Priority::Medium,
            pending_deps: deps.len() as i64,
            epoch: 0,
            attempts: 0,
            max_attempts: 3,
            worker_id: None,
            lease_expires_at: None,
            deadline_at: None,
            cost: crate::domain::Usd::ZERO,
            reserved: crate::domain::Usd::ZERO,
            reason: reason.map(str::to_string),
            spec: TaskSpec {
                id: id.into(),
                dependencies: deps.iter().map(|d| (*d).to_string()).collect(),
                ..TaskSpec::default()
            },
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn says_which_dependency_failed_and_what_waits_for_a_human() {
        let tasks = vec![
            task("A", Status::Failed, &[], Some("check_failed")),
            task("B", Status::Pending, &["A"], None),
            task("C", Status::Pending, &["B"], None),
            task("D", Status::HumanLoop, &[], Some("needs a password")),
            task("E", Status::Pending, &["F"], None),
            task("F", Status::InProgress, &[], None),
        ];
        let stuck = stuck_tasks(&tasks);
        let said: Vec<String> = stuck.iter().map(ToString::to_string).collect();
        assert_eq!(
            said,
            [
                "B (blocked: A FAILED)",
                "C (waits on B, which is stuck)",
                "D (waits for a human: needs a password; answer with `whilly handoff list`)",
            ]
        );
    }
}
