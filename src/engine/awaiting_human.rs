//! Which tasks wait for a human and why: the one rule the console's inbox and the status page
//! both show. Pure: built from task rows and the events that parked them.

use crate::domain::Status;
use crate::store::{Event, TaskRecord, event_types as et};
use serde::Serialize;

/// Why a task waits for a human.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxItem {
    pub task_pk: i64,
    pub task_id: String,
    pub kind: InboxKind,
    /// The reason and message recorded when the task was parked, if any.
    pub note: String,
}

/// The items, in task order. `waiting_handoff` says whether a leased task is a handoff that
/// waits for its human (what counts as waiting depends on what the caller can see: a console
/// its sessions and the handoff directory, a server the task's agent).
pub(crate) fn inbox_items(
    tasks: &[TaskRecord],
    events: &[Event],
    waiting_handoff: impl Fn(&TaskRecord) -> bool,
) -> Vec<InboxItem> {
    let mut items = Vec::new();
    for t in tasks {
        let kind = match t.status {
            _ if t.status.is_leased() && waiting_handoff(t) => InboxKind::Handoff,
            _ if super::landing::waits_to_merge(t) => InboxKind::ReadyToMerge,
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

/// The event types [`inbox_items`] reads its notes from.
pub(crate) const NOTE_EVENTS: [&str; 2] = [et::TASK_HUMAN_LOOP, et::TASK_BLOCKED];

/// The task's reason plus the message of the event that parked it.
fn park_note(task: &TaskRecord, events: &[Event]) -> String {
    let message = events
        .iter()
        .rev()
        .filter(|e| e.task_id.as_deref() == Some(task.id.as_str()))
        .find(|e| NOTE_EVENTS.contains(&e.event_type.as_str()))
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
