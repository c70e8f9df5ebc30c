//! The delivery vocabulary the attempt, its fence and the landing of parked work share, pure:
//! what a delivery means for the task (landed, or waiting for the operator to merge), how it
//! is said in an event and to the operator. Its own module so that those three depend on it
//! and not on each other.

use crate::domain::Status;
use crate::store::TaskRecord;
use crate::workspace::Delivery;
use serde_json::{Value, json};

/// The key of an approval's payload that names the epoch whose landing it records.
pub(crate) const LANDED_EPOCH: &str = "landed_epoch";

/// The reason a task waits with when its work could not land.
pub(crate) const READY_TO_MERGE: &str = "ready_to_merge";

/// Whether the task waits for the operator to merge its work.
pub(crate) fn waits_to_merge(t: &TaskRecord) -> bool {
    t.status == Status::HumanLoop && t.reason.as_deref() == Some(READY_TO_MERGE)
}

/// Whether a delivery means the work did not land and the task must wait for the operator.
pub(crate) fn did_not_land(d: &Delivery) -> bool {
    matches!(
        d,
        Delivery::BaseDirty { .. }
            | Delivery::Conflict { .. }
            | Delivery::BaseBusy { .. }
            | Delivery::NotPushed { .. }
    )
}

/// Why the work did not land and what to do, for the task's detail, the inbox and the run's
/// last lines.
pub(crate) fn unlanded_detail(task_id: &str, d: &Delivery) -> String {
    let next = format!(
        "then merge it (m in the console's inbox, or `whilly merge {task_id}`), or send the task back"
    );
    match d {
        Delivery::BaseDirty {
            branch,
            base_branch,
            worktree,
            files,
        } => format!(
            "the work is on {branch}: {base_branch} is checked out in {} with uncommitted changes to {}; commit or stash them there, {next}",
            worktree.display(),
            files.join(", ")
        ),
        Delivery::BaseBusy {
            branch,
            base_branch,
            worktree,
            operation,
        } => format!(
            "the work is on {branch}: a {operation} of {base_branch} is in progress in {}, and whilly never moves a branch under one; finish it (or abort it) there, {next}",
            worktree.display()
        ),
        Delivery::Conflict { branch, files } => format!(
            "the work is on {branch}: replaying it onto the base branch conflicts in {}; resolve that (merge or rebase the branch yourself), {next}",
            files.join(", ")
        ),
        Delivery::NotPushed {
            branch,
            base_branch,
            remote,
            detail,
        } => format!(
            "the work is on {branch}: landing it on {remote}'s {base_branch}, which the workers share, failed: {detail}; fix that, {next}"
        ),
        other => format!("{other:?}"),
    }
}

/// A delivery as the `delivery` field of a `task.done` (or a park) says it.
pub(crate) fn delivery_json(d: &Delivery) -> Value {
    match d {
        Delivery::FastForwarded {
            base_branch,
            commit,
        } => json!({"kind": "fast_forwarded", "base_branch": base_branch, "commit": commit}),
        Delivery::Merged {
            base_branch,
            commit,
            commits,
        } => {
            json!({"kind": "merged", "base_branch": base_branch, "commit": commit, "commits": commits})
        }
        Delivery::LeftForReview { branch } => json!({"kind": "left_for_review", "branch": branch}),
        Delivery::Conflict { branch, files } => {
            json!({"kind": "conflict", "branch": branch, "files": files, "note": "the branch is left for review"})
        }
        Delivery::BaseDirty {
            branch,
            base_branch,
            worktree,
            files,
        } => {
            json!({"kind": "base_dirty", "branch": branch, "base_branch": base_branch, "worktree": worktree, "files": files})
        }
        Delivery::BaseBusy {
            branch,
            base_branch,
            worktree,
            operation,
        } => {
            json!({"kind": "base_busy", "branch": branch, "base_branch": base_branch, "worktree": worktree, "operation": operation})
        }
        Delivery::NothingToDo => json!({"kind": "nothing_to_do"}),
        Delivery::AlreadyLanded {
            base_branch,
            commit,
            epoch,
        } => json!({"kind": "already_landed", "base_branch": base_branch, "commit": commit,
            "landed_by_epoch": epoch, "note": "an earlier attempt landed this work; nothing landed again"}),
        Delivery::LeaseLost => json!({"kind": "lease_lost"}),
        Delivery::NotPushed {
            branch,
            base_branch,
            remote,
            detail,
        } => {
            json!({"kind": "not_pushed", "branch": branch, "base_branch": base_branch, "remote": remote, "detail": detail})
        }
    }
}
