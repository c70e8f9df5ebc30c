//! What makes delivery happen at most once: a note, written under the merge lock in the same
//! step that moves the base branch, that this task's work landed (which commit, by the attempt
//! holding which lease epoch).
//!
//! The queue's fenced `complete` comes after the merge; if it fails (the lease was lost, the
//! connection dropped and never came back), the task runs again elsewhere. The next attempt
//! finds the note, sees that the queue never recorded that landing as DONE, and finishes the
//! task without landing anything a second time. A note whose landing *was* recorded is history
//! (the operator reset the task to run it again) and is ignored.
//!
//! Notes live in the shared git directory, `<git dir>/whilly/landed/<plan>/<task>.json`, named
//! by `safe_id`s only; they are replaced atomically (write, then rename).

use std::path::{Path, PathBuf};

use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use super::error::WorkspaceError;
use crate::domain::safe_id;

/// One landing of one task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landed {
    /// The base branch's tip after the landing.
    pub commit: String,
    pub base_branch: String,
    /// The lease epoch of the attempt that landed it.
    pub epoch: i64,
    /// Which queue's plan it was ([`DeliveryFence::queue_mark`]): a note from another queue (a
    /// database started afresh, another plan of the same id) is history, not a landing to
    /// finish the task with.
    #[serde(default)]
    pub queue: String,
}

/// What delivery asks the queue, under the merge lock: the answers decide whether the base
/// may move. Implemented by the engine over its store; `AlwaysOurs` for callers without one.
pub trait DeliveryFence: Send + Sync {
    /// The lease epoch of this attempt.
    fn epoch(&self) -> i64;
    /// Names the queue's plan this attempt belongs to (where it lives and when the plan was
    /// created there), written into the landing note.
    fn queue_mark(&self) -> String;
    /// Whether this attempt still holds its lease. `Err`: the queue did not answer (delivery
    /// then fails and is retried; the base is not touched).
    fn still_ours(&self) -> Result<bool, String>;
    /// Whether the landing by the attempt at `epoch` was recorded as DONE in the queue.
    fn recorded(&self, epoch: i64) -> Result<bool, String>;
}

/// A fence for deliveries outside the queue (tests, tools): always ours, and every earlier
/// landing final (there is no queue whose record could be missing).
pub struct AlwaysOurs;

impl DeliveryFence for AlwaysOurs {
    fn epoch(&self) -> i64 {
        0
    }
    fn queue_mark(&self) -> String {
        String::new()
    }
    fn still_ours(&self) -> Result<bool, String> {
        Ok(true)
    }
    fn recorded(&self, _epoch: i64) -> Result<bool, String> {
        Ok(true)
    }
}

pub(super) fn path(common_dir: &Path, plan_id: &str, task_id: &str) -> PathBuf {
    common_dir
        .join("whilly")
        .join("landed")
        .join(safe_id(plan_id))
        .join(format!("{}.json", safe_id(task_id)))
}

/// The task's landing note, if there is one and it parses (an unreadable note is no landing).
pub(super) fn read(common_dir: &Path, plan_id: &str, task_id: &str) -> Option<Landed> {
    let text = std::fs::read_to_string(path(common_dir, plan_id, task_id)).ok()?;
    match serde_json::from_str(&text) {
        Ok(l) => Some(l),
        Err(e) => {
            tracing::warn!(
                plan = plan_id,
                task = task_id,
                "unreadable landing note: {e}"
            );
            None
        }
    }
}

pub(super) fn write(
    common_dir: &Path,
    plan_id: &str,
    task_id: &str,
    landed: &Landed,
) -> Result<(), WorkspaceError> {
    let path = path(common_dir, plan_id, task_id);
    let dir = path.parent().unwrap_or(common_dir);
    std::fs::create_dir_all(dir).map_err(WorkspaceError::io("could not create", dir))?;
    let tmp = path.with_extension("json.tmp");
    let body = serde_json::to_vec(landed).unwrap_or_default();
    std::fs::write(&tmp, body).map_err(WorkspaceError::io("could not write", &tmp))?;
    std::fs::rename(&tmp, &path).map_err(WorkspaceError::io("could not write", &path))
}

/// The note counts when its commit is still on the base branch (reachable from its tip) and
/// the queue never recorded that landing. `Err`: the queue did not answer.
pub(super) fn unrecorded_landing(
    repo: &Repository,
    note: Option<Landed>,
    base_tip: Oid,
    fence: &dyn DeliveryFence,
) -> Result<Option<Landed>, WorkspaceError> {
    let Some(note) = note else { return Ok(None) };
    if note.queue != fence.queue_mark() {
        return Ok(None);
    }
    let Ok(commit) = Oid::from_str(&note.commit) else {
        return Ok(None);
    };
    let on_base = commit == base_tip || repo.graph_descendant_of(base_tip, commit).unwrap_or(false);
    if !on_base {
        return Ok(None);
    }
    match fence.recorded(note.epoch) {
        Ok(true) => Ok(None),
        Ok(false) => Ok(Some(note)),
        Err(detail) => Err(WorkspaceError::FenceUnanswered { detail }),
    }
}
