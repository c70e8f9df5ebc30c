//! Task states and the one state machine every backend uses.
//!
//! Both stores call [`transition`] before touching a row, so an illegal move is refused in exactly
//! one place, with no IO involved.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a task is in its life.
///
/// `Blocked` and `HumanLoop` are the "held" states: the task waits for an operator (a handoff
/// answered `blocked`, or a review gate) and is never claimable until someone moves it.
/// Waiting on dependencies is *not* a state: it is the `pending_deps` counter on a PENDING row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    Pending,
    Claimed,
    InProgress,
    Blocked,
    HumanLoop,
    Done,
    Failed,
    Skipped,
}

impl Status {
    pub const ALL: [Status; 8] = [
        Status::Pending,
        Status::Claimed,
        Status::InProgress,
        Status::Blocked,
        Status::HumanLoop,
        Status::Done,
        Status::Failed,
        Status::Skipped,
    ];

    /// DONE, FAILED and SKIPPED end a task's life (until an operator resets it).
    pub fn is_terminal(self) -> bool {
        matches!(self, Status::Done | Status::Failed | Status::Skipped)
    }

    /// Held by a worker under a lease.
    pub fn is_leased(self) -> bool {
        matches!(self, Status::Claimed | Status::InProgress)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "PENDING",
            Status::Claimed => "CLAIMED",
            Status::InProgress => "IN_PROGRESS",
            Status::Blocked => "BLOCKED",
            Status::HumanLoop => "HUMAN_LOOP",
            Status::Done => "DONE",
            Status::Failed => "FAILED",
            Status::Skipped => "SKIPPED",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown status {0:?} (expected one of pending, claimed, in_progress, blocked, human_loop, done, failed, skipped)"
)]
pub struct UnknownStatus(pub String);

impl FromStr for Status {
    type Err = UnknownStatus;

    /// Case-insensitive, as the original's files use both `pending` and `PENDING`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let norm = s.trim().to_ascii_uppercase().replace(['-', ' '], "_");
        Ok(match norm.as_str() {
            "PENDING" | "TODO" => Status::Pending,
            "CLAIMED" => Status::Claimed,
            "IN_PROGRESS" => Status::InProgress,
            "BLOCKED" => Status::Blocked,
            "HUMAN_LOOP" => Status::HumanLoop,
            "DONE" | "COMPLETE" | "COMPLETED" => Status::Done,
            "FAILED" => Status::Failed,
            "SKIPPED" => Status::Skipped,
            _ => return Err(UnknownStatus(s.to_string())),
        })
    }
}

/// Every way a task's status can change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// A worker takes a ready task: PENDING → CLAIMED.
    Claim,
    /// The worker's agent has started: CLAIMED → IN_PROGRESS.
    Start,
    /// Finished with evidence: CLAIMED | IN_PROGRESS → DONE.
    Complete,
    /// Failed for good: CLAIMED | IN_PROGRESS → FAILED.
    Fail,
    /// Given back to the queue (shutdown, lease expiry, retry): CLAIMED | IN_PROGRESS → PENDING.
    Release,
    /// Parked for a human: CLAIMED | IN_PROGRESS → HUMAN_LOOP.
    AwaitHuman,
    /// Parked as blocked: CLAIMED | IN_PROGRESS → BLOCKED.
    Block,
    /// Not to be done: any non-terminal (and FAILED) → SKIPPED.
    Skip,
    /// An operator approved held work: HUMAN_LOOP | BLOCKED → DONE.
    Approve,
    /// An operator rejected held work: HUMAN_LOOP | BLOCKED → FAILED.
    Reject,
    /// Back to the start, by an operator: any state but CLAIMED/IN_PROGRESS → PENDING.
    Reset,
}

impl Action {
    pub const ALL: [Action; 11] = [
        Action::Claim,
        Action::Start,
        Action::Complete,
        Action::Fail,
        Action::Release,
        Action::AwaitHuman,
        Action::Block,
        Action::Skip,
        Action::Approve,
        Action::Reject,
        Action::Reset,
    ];

    /// The event a transition by this action writes (declared in `store::event_types`).
    pub fn event_type(self) -> &'static str {
        match self {
            Action::Claim => "task.claimed",
            Action::Start => "task.started",
            Action::Complete => "task.done",
            Action::Fail => "task.failed",
            Action::Release => "task.released",
            Action::AwaitHuman => "task.human_loop",
            Action::Block => "task.blocked",
            Action::Skip => "task.skipped",
            Action::Approve => "task.approved",
            Action::Reject => "task.rejected",
            Action::Reset => "task.reset",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal transition: cannot {action:?} a task that is {from}")]
pub struct IllegalTransition {
    pub from: Status,
    pub action: Action,
}

/// The state machine: the status `action` leads to from `from`, or why it may not happen.
pub fn transition(from: Status, action: Action) -> Result<Status, IllegalTransition> {
    use Status::*;
    let to = match (action, from) {
        (Action::Claim, Pending) => Claimed,
        (Action::Start, Claimed) => InProgress,
        (Action::Complete, Claimed | InProgress) => Done,
        (Action::Fail, Claimed | InProgress) => Failed,
        (Action::Release, Claimed | InProgress) => Pending,
        (Action::AwaitHuman, Claimed | InProgress) => HumanLoop,
        (Action::Block, Claimed | InProgress) => Blocked,
        (Action::Skip, Pending | Claimed | InProgress | Blocked | HumanLoop | Failed) => Skipped,
        (Action::Approve, HumanLoop | Blocked) => Done,
        (Action::Reject, HumanLoop | Blocked) => Failed,
        (Action::Reset, Pending | Blocked | HumanLoop | Done | Failed | Skipped) => Pending,
        _ => return Err(IllegalTransition { from, action }),
    };
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ACTIONS: [Action; 11] = [
        Action::Claim,
        Action::Start,
        Action::Complete,
        Action::Fail,
        Action::Release,
        Action::AwaitHuman,
        Action::Block,
        Action::Skip,
        Action::Approve,
        Action::Reject,
        Action::Reset,
    ];

    #[test]
    fn original_edges_hold() {
        assert_eq!(
            transition(Status::Pending, Action::Claim),
            Ok(Status::Claimed)
        );
        assert_eq!(
            transition(Status::Claimed, Action::Start),
            Ok(Status::InProgress)
        );
        assert_eq!(
            transition(Status::InProgress, Action::Complete),
            Ok(Status::Done)
        );
        assert_eq!(
            transition(Status::Claimed, Action::Complete),
            Ok(Status::Done)
        );
        assert_eq!(
            transition(Status::InProgress, Action::Fail),
            Ok(Status::Failed)
        );
        assert_eq!(
            transition(Status::InProgress, Action::Release),
            Ok(Status::Pending)
        );
        assert_eq!(
            transition(Status::Pending, Action::Skip),
            Ok(Status::Skipped)
        );
    }

    #[test]
    fn terminal_states_only_leave_by_reset_or_skip() {
        for from in [Status::Done, Status::Failed, Status::Skipped] {
            for action in ACTIONS {
                let allowed = matches!(action, Action::Reset)
                    || (from == Status::Failed && action == Action::Skip);
                assert_eq!(
                    transition(from, action).is_ok(),
                    allowed,
                    "{from} {action:?}"
                );
            }
        }
    }

    #[test]
    fn leased_tasks_cannot_be_reset_or_reclaimed() {
        for from in [Status::Claimed, Status::InProgress] {
            assert!(transition(from, Action::Reset).is_err());
            assert!(transition(from, Action::Claim).is_err());
        }
    }

    #[test]
    fn status_parses_case_insensitively() {
        assert_eq!("pending".parse::<Status>(), Ok(Status::Pending));
        assert_eq!("In_Progress".parse::<Status>(), Ok(Status::InProgress));
        assert_eq!("human_loop".parse::<Status>(), Ok(Status::HumanLoop));
        assert!("wat".parse::<Status>().is_err());
        for s in Status::ALL {
            assert_eq!(s.as_str().parse::<Status>(), Ok(s));
        }
    }
}
