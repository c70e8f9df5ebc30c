//! The names of audit-trail events. Both stores write exactly these; readers match on them.
//! Every name written anywhere is declared here and listed in [`ALL`]: a test scans the source
//! for event-shaped string literals and fails on one that is not.

pub const PLAN_CREATED: &str = "plan.created";
pub const PLAN_UPDATED: &str = "plan.updated";
pub const PLAN_PAUSED: &str = "plan.paused";
pub const PLAN_RESUMED: &str = "plan.resumed";
pub const PLAN_RESET: &str = "plan.reset";
/// The plan and its tasks were deleted; its events stay (the audit trail is append-only).
pub const PLAN_DELETED: &str = "plan.deleted";
/// Hidden from plan lists (`whilly plan archive`); `plan.unarchived` lists it again.
pub const PLAN_ARCHIVED: &str = "plan.archived";
pub const PLAN_UNARCHIVED: &str = "plan.unarchived";

pub const TASK_CREATED: &str = "task.created";
pub const TASK_UPDATED: &str = "task.updated";
pub const TASK_CLAIMED: &str = "task.claimed";
pub const TASK_STARTED: &str = "task.started";
pub const TASK_DONE: &str = "task.done";
pub const TASK_FAILED: &str = "task.failed";
/// A failed attempt that goes back to PENDING because attempts remain.
pub const TASK_RETRY: &str = "task.retry";
pub const TASK_RELEASED: &str = "task.released";
pub const TASK_HUMAN_LOOP: &str = "task.human_loop";
pub const TASK_BLOCKED: &str = "task.blocked";
pub const TASK_SKIPPED: &str = "task.skipped";
pub const TASK_APPROVED: &str = "task.approved";
pub const TASK_REJECTED: &str = "task.rejected";
pub const TASK_RESET: &str = "task.reset";
/// The reaper found the lease expired (worker gone).
pub const TASK_LEASE_EXPIRED: &str = "task.lease_expired";
/// The reaper found the task past its deadline (task too long).
pub const TASK_DEADLINE_PASSED: &str = "task.deadline_passed";
pub const TASK_COST: &str = "task.cost";
/// An unstarted task replaced by its subtasks (`whilly plan decompose`, the console's split):
/// its row is gone, `{subtasks, dependents}` name what took its place.
pub const TASK_SPLIT: &str = "task.split";

pub const BUDGET_WARNING: &str = "budget.warning";
pub const BUDGET_EXHAUSTED: &str = "budget.exhausted";

pub const WORKER_REGISTERED: &str = "worker.registered";
pub const WORKER_STOPPED: &str = "worker.stopped";
/// A worker's heartbeat is older than the offline threshold (it was killed, or cut off).
pub const WORKER_OFFLINE: &str = "worker.offline";

/// A human's `result.json` could not be read; the handoff keeps waiting for a fixed one.
pub const HANDOFF_MALFORMED: &str = "handoff.malformed";

/// The operator decided about a task waiting for a human (approve / reject / send back).
pub const OPERATOR_DECISION: &str = "operator.decision";

/// A pull request was opened for a task's pushed branch: `{url, number, draft, branch}`.
pub const GITHUB_PR_OPENED: &str = "github.pr_opened";
/// An existing pull request of the task's branch was updated (a re-run): `{url, number}`.
pub const GITHUB_PR_UPDATED: &str = "github.pr_updated";
/// The pull request was marked ready for review (every required check passed).
pub const GITHUB_PR_READY: &str = "github.pr_ready";
/// Labels of the task's issue changed: `{issue, added, removed}`.
pub const GITHUB_LABEL_CHANGED: &str = "github.label_changed";
/// The task's one status comment was written or edited: `{issue, url, created}`.
pub const GITHUB_COMMENT_UPDATED: &str = "github.comment_updated";
/// A GitHub call that should have changed something failed: `{call, error}`.
pub const GITHUB_CALL_FAILED: &str = "github.call_failed";
/// A task's card put on the project board (payload: issue, card, board url).
pub const BOARD_CARD_ADDED: &str = "board.card_added";
/// A card moved to its task's column (payload: issue, from, to, board url).
pub const BOARD_CARD_MOVED: &str = "board.card_moved";
/// Keeping the board in step failed; a later sync retries (payload: error, issue when one).
pub const BOARD_SYNC_FAILED: &str = "board.sync_failed";
/// A Jira issue moved to its task's status (payload: key, from, to, url).
pub const JIRA_TRANSITIONED: &str = "jira.transitioned";
/// The workflow does not allow the move; said once (payload: key, to, allowed).
pub const JIRA_TRANSITION_REFUSED: &str = "jira.transition_refused";
/// The issue's one Whilly comment written or edited (payload: key, url, created).
pub const JIRA_COMMENT_UPDATED: &str = "jira.comment_updated";
/// Keeping Jira in step failed; retried later (payload: key when one, error).
pub const JIRA_SYNC_FAILED: &str = "jira.sync_failed";
/// An agent backend reported a rate or usage limit: no task starts on it until `until`
/// (payload: `agent`, `until` RFC 3339, `reason`, `parsed`).
pub const AGENT_PAUSED: &str = "agent.paused";

/// Every declared event name.
pub const ALL: &[&str] = &[
    PLAN_CREATED,
    PLAN_UPDATED,
    PLAN_PAUSED,
    PLAN_RESUMED,
    PLAN_RESET,
    PLAN_DELETED,
    TASK_CREATED,
    TASK_UPDATED,
    TASK_CLAIMED,
    TASK_STARTED,
    TASK_DONE,
    TASK_FAILED,
    TASK_RETRY,
    TASK_RELEASED,
    TASK_HUMAN_LOOP,
    TASK_BLOCKED,
    TASK_SKIPPED,
    TASK_APPROVED,
    TASK_REJECTED,
    TASK_RESET,
    TASK_LEASE_EXPIRED,
    TASK_DEADLINE_PASSED,
    TASK_COST,
    TASK_SPLIT,
    BUDGET_WARNING,
    BUDGET_EXHAUSTED,
    WORKER_REGISTERED,
    WORKER_STOPPED,
    WORKER_OFFLINE,
    HANDOFF_MALFORMED,
    OPERATOR_DECISION,
    GITHUB_PR_OPENED,
    GITHUB_PR_UPDATED,
    GITHUB_PR_READY,
    GITHUB_LABEL_CHANGED,
    GITHUB_COMMENT_UPDATED,
    GITHUB_CALL_FAILED,
    BOARD_CARD_ADDED,
    BOARD_CARD_MOVED,
    BOARD_SYNC_FAILED,
    JIRA_TRANSITIONED,
    JIRA_TRANSITION_REFUSED,
    JIRA_COMMENT_UPDATED,
    JIRA_SYNC_FAILED,
    AGENT_PAUSED,
];

/// Whether `name` is a declared event name.
pub fn is_declared(name: &str) -> bool {
    ALL.contains(&name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::{Path, PathBuf};

    /// What follows the dot in names that are file names, not events (`plan.json`).
    const FILE_EXTENSIONS: &[&str] = &["json", "jsonl", "md", "toml", "log", "txt", "sh"];

    /// Event-shaped string literals in `text` (`"<namespace>.<word>"`, the namespace one of the
    /// declared names') that are neither declared nor a configuration key nor a file name.
    fn undeclared_in(text: &str) -> Vec<(usize, String)> {
        let namespaces: BTreeSet<&str> = ALL.iter().filter_map(|n| n.split('.').next()).collect();
        let config_keys: BTreeSet<&str> = crate::config::schema::FIXED_KEYS
            .iter()
            .map(|(k, _)| *k)
            .collect();
        let literal = regex::Regex::new(r#""([a-z]+)\.([a-z_]+)""#).unwrap();
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            for c in literal.captures_iter(line) {
                let name = format!("{}.{}", &c[1], &c[2]);
                if namespaces.contains(&c[1])
                    && !is_declared(&name)
                    && !config_keys.contains(name.as_str())
                    && !FILE_EXTENSIONS.contains(&&c[2])
                {
                    out.push((i + 1, name));
                }
            }
        }
        out
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                rust_files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }

    #[test]
    fn the_list_is_complete_and_without_repeats() {
        let unique: BTreeSet<&str> = ALL.iter().copied().collect();
        assert_eq!(unique.len(), ALL.len());
        // Every name of the state machine's transitions.
        for action in crate::domain::Action::ALL {
            assert!(is_declared(action.event_type()), "{action:?}");
        }
    }

    #[test]
    fn the_scan_finds_an_undeclared_name() {
        let text = "let e = NewEvent { event_type: \"task.exploded\".into(), ..};\n\
                    Ev::plan(\"plan.created\", id, p); read(\"plan.json\"); key(\"handoff.timeout_secs\")";
        assert_eq!(undeclared_in(text), [(1, "task.exploded".to_string())]);
    }

    /// An event written under a name nobody declared is invisible to every reader that matches
    /// on these constants; so no such literal may appear anywhere in the source or its tests.
    #[test]
    fn every_event_name_in_the_source_is_declared() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = Vec::new();
        rust_files(&root.join("src"), &mut files);
        rust_files(&root.join("tests"), &mut files);
        assert!(
            files.len() > 50,
            "the scan must see the source: {}",
            files.len()
        );
        let mut undeclared = Vec::new();
        // This file declares the names (and its tests make up an undeclared one on purpose).
        files.retain(|f| !f.ends_with("src/store/event_types.rs"));
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            for (line, name) in undeclared_in(&text) {
                let rel = file.strip_prefix(root).unwrap_or(file);
                undeclared.push(format!("{}:{line}: {name}", rel.display()));
            }
        }
        assert!(
            undeclared.is_empty(),
            "event names used but not declared in src/store/event_types.rs (declare them there \
             and use the constant):\n{}",
            undeclared.join("\n")
        );
    }
}
