//! The handoff inbox: every task of the plan that waits for a human, in one list, and the
//! decisions the operator can take on them. Pure: built from the data the console already has.

use super::state::PaneMeta;
use crate::domain::Status;
use crate::engine::sessions::SessionState;
use crate::store::{Event, TaskRecord, event_types as et};
use std::collections::BTreeSet;

/// Why a task waits for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxKind {
    /// A handoff task: a human does the work; the engine waits for its `result.json`.
    Handoff,
    /// Parked in HUMAN_LOOP (the agent or a handoff asked for a human decision).
    HumanLoop,
    /// Parked in BLOCKED (something outside the task stops it).
    Blocked,
    /// Done and checked, but its work could not land (a dirty base, a conflict): merging it
    /// is the decision (`engine::landing`).
    ReadyToMerge,
}

impl InboxKind {
    pub fn label(self) -> &'static str {
        match self {
            InboxKind::Handoff => "handoff",
            InboxKind::HumanLoop => "human loop",
            InboxKind::Blocked => "blocked",
            InboxKind::ReadyToMerge => "ready to merge",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    pub task_pk: i64,
    pub task_id: String,
    pub kind: InboxKind,
    /// The reason and message recorded when the task was parked, if any.
    pub note: String,
}

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
    let mut items = Vec::new();
    for t in tasks {
        let waiting_handoff = t.status.is_leased()
            && (waiting.contains(&t.id)
                || panes
                    .iter()
                    .any(|p| p.task_pk == t.pk && p.state == SessionState::WaitingForHuman));
        let kind = match t.status {
            _ if waiting_handoff => InboxKind::Handoff,
            _ if crate::engine::landing::waits_to_merge(t) => InboxKind::ReadyToMerge,
            Status::HumanLoop => InboxKind::HumanLoop,
            Status::Blocked => InboxKind::Blocked,
            _ => continue,
        };
        items.push(InboxItem {
            task_pk: t.pk,
            task_id: t.id.clone(),
            kind,
            note: match kind {
                InboxKind::Handoff => {
                    "a human does this task; approve when the work is there".to_string()
                }
                _ => park_note(t, events),
            },
        });
    }
    items
}

/// The task's reason plus the message of the event that parked it.
fn park_note(task: &TaskRecord, events: &[Event]) -> String {
    let message = events
        .iter()
        .rev()
        .filter(|e| e.task_id.as_deref() == Some(task.id.as_str()))
        .find(|e| e.event_type == et::TASK_HUMAN_LOOP || e.event_type == et::TASK_BLOCKED)
        .and_then(|e| {
            ["message", "detail", "reason"]
                .iter()
                .find_map(|k| e.payload.get(*k).and_then(|v| v.as_str()))
                .map(str::to_string)
        });
    match (task.reason.as_deref(), message) {
        (Some(r), Some(m)) if m != r => format!("{r}: {m}"),
        (_, Some(m)) => m,
        (Some(r), None) => r.to_string(),
        (None, None) => String::new(),
    }
}
