//! The handoff inbox: every task of the plan that waits for a human, in one list, and the
//! decisions the operator can take on them. Pure: built from the data the console already has;
//! which tasks wait is `engine::inbox`'s rule, shared with the status page.

use super::state::PaneMeta;
use crate::engine::sessions::SessionState;
use crate::store::{Event, TaskRecord};
use std::collections::BTreeSet;

pub use crate::engine::inbox::{InboxItem, InboxKind};

/// What the operator decided about one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The work is accepted: DONE (a handoff still runs its verification first).
    Approve,
    /// Not accepted: FAILED, with the reason.
    Reject(String),
    /// Another attempt, with the operator's comment for it: back to PENDING.
    SendBack(String),
    /// Land work that is ready to merge: DONE once it is on the base branch.
    Merge,
}

impl Decision {
    pub fn verb(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject(_) => "reject",
            Decision::SendBack(_) => "send back",
            Decision::Merge => "merge",
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Decision::Approve | Decision::Merge => "",
            Decision::Reject(t) | Decision::SendBack(t) => t,
        }
    }
}

/// The items, in task order: handoffs waiting for a human (this console's sessions, or any
/// process's handoff directory: `waiting`), then parked tasks.
pub fn inbox_items(
    tasks: &[TaskRecord],
    panes: &[PaneMeta],
    events: &[Event],
    waiting: &BTreeSet<String>,
) -> Vec<InboxItem> {
    crate::engine::inbox::inbox_items(tasks, events, |t| {
        waiting.contains(&t.id)
            || panes
                .iter()
                .any(|p| p.task_pk == t.pk && p.state == SessionState::WaitingForHuman)
    })
}
