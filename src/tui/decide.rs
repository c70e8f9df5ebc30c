//! Carrying out the operator's inbox decisions and loading what an inbox item shows. Every
//! decision is recorded as an `operator.decision` event before it is applied, so the audit
//! trail says who decided what even if applying it fails.

use super::model::{Decision, InboxKind};
use super::model::{InboxDetail, InboxTarget};
use crate::agent::{HandoffDir, HandoffStatus};
use crate::store::{Store, TaskRecord};
use crate::workspace::{Workspaces, diff_worktree};
use serde_json::json;
use std::sync::Arc;

/// The patch shown in the inbox is cut here: enough to review, bounded in memory.
pub(super) const MAX_DIFF_BYTES: usize = 256 * 1024;

/// Applies `decision` to one item; the text is a note for the status line.
pub(super) async fn apply(
    store: &Arc<dyn Store>,
    handoff: &HandoffDir,
    workspaces: &Arc<Workspaces>,
    plan_id: &str,
    target: &InboxTarget,
    decision: &Decision,
) -> Result<String, String> {
    let id = target.task_id.as_str();
    match (target.kind, decision) {
        // Approving work that did not land would be a DONE that lies: both land it.
        (InboxKind::ReadyToMerge, Decision::Approve | Decision::Merge) => {
            let mode = workspaces.config().merge;
            return crate::engine::landing::merge_parked(
                store,
                workspaces,
                plan_id,
                id,
                mode,
                crate::engine::decision::Source::Console,
            )
            .await
            .map(|m| m.text)
            .map_err(|e| e.to_string());
        }
        // Work that was never committed (a secret, a huge file) cannot be approved into DONE.
        (InboxKind::HumanLoop, Decision::Approve)
            if store.get_task(plan_id, id).await.is_ok_and(|t| {
                t.reason.as_deref() == Some(crate::engine::attempt::UNSAFE_FILES)
            }) =>
        {
            return Err(format!(
                "{id}: its work was not committed (a secret or a file over the size limit, see the detail); fix it in the worktree and send it back (b), or reject it (x)"
            ));
        }
        (_, Decision::Merge) => {
            return Err(format!(
                "{id} is not waiting to be merged ({}): approve it with a",
                target.kind.label()
            ));
        }
        _ => {}
    }
    crate::engine::decision::record(
        store.as_ref(),
        plan_id,
        id,
        &decision.verb().replace(' ', "_"),
        decision.text(),
        target.kind.label(),
        crate::engine::decision::Source::Console,
    )
    .await
    .map_err(|e| format!("{id}: recording the decision: {e}"))?;
    match target.kind {
        InboxKind::Handoff => {
            let (status, message) = match decision {
                Decision::Approve => (HandoffStatus::Complete, "approved by the operator"),
                Decision::Reject(r) => (HandoffStatus::Failed, r.as_str()),
                Decision::SendBack(c) => (HandoffStatus::Partial, c.as_str()),
                Decision::Merge => unreachable_merge()?,
            };
            let handoff = handoff.clone();
            let (plan, task, msg) = (plan_id.to_string(), id.to_string(), message.to_string());
            tokio::task::spawn_blocking(move || {
                let dir = handoff.find(&task, Some(&plan))?;
                crate::agent::handoff::complete(&dir, status, &msg, None)
            })
            .await
            .map_err(|e| format!("{id}: {e}"))?
            .map_err(|e| format!("{id}: {e}"))?;
            Ok(format!("{id}: {} (the engine applies it)", decision.verb()))
        }
        InboxKind::HumanLoop | InboxKind::Blocked | InboxKind::ReadyToMerge => {
            let done = match decision {
                Decision::Merge => return unreachable_merge(),
                Decision::Approve => {
                    store
                        .approve_task(plan_id, id, json!({"by": "console"}))
                        .await
                }
                Decision::Reject(r) => {
                    store
                        .reject_task(plan_id, id, json!({"by": "console", "reason": r}))
                        .await
                }
                Decision::SendBack(c) => {
                    store
                        .reset_task(plan_id, id, &format!("sent back by the operator: {c}"))
                        .await
                }
            };
            let t = done.map_err(|e| format!("{id}: {e}"))?;
            Ok(format!("{id} is {}", t.status))
        }
    }
}

/// Merge decisions are handled before the generic path; reaching it is a bug, reported as an
/// error rather than a panic.
fn unreachable_merge<T>() -> Result<T, String> {
    Err("internal: a merge decision reached the approval path".to_string())
}

/// What the inbox shows for one item: the task itself (not the agent's prompt, whose envelope
/// is for the agent), what the agent said (`said`, from its last events), where a handoff's
/// files are, and the diff of the task's worktree against the commit it started from.
pub(super) fn load_detail(
    workspaces: &Workspaces,
    handoff: &HandoffDir,
    target: &InboxTarget,
    task: Option<&TaskRecord>,
    said: Option<String>,
    bounced: Option<String>,
) -> InboxDetail {
    let brief = task
        .map(|t| t.spec.brief())
        .unwrap_or_else(|| "(the task is gone)".to_string());
    let handoff_dir = match (target.kind, task) {
        (InboxKind::Handoff, Some(t)) => handoff.find(&t.id, Some(&t.plan_id)).ok(),
        _ => None,
    };
    let mut worktree = None;
    let (diff, diff_note) = match task.map(|t| workspaces.find(&t.plan_id, &t.id)) {
        Some(Ok(Some(wt))) => {
            worktree = Some(wt.path.clone());
            match diff_worktree(&wt.path, &wt.base_commit, MAX_DIFF_BYTES) {
                // A secret the agent wrote (the reason such a task waits) never reaches the
                // screen: the patch is shown redacted.
                Ok(mut d) => {
                    d.patch = crate::domain::secrets::redact_secrets(&d.patch);
                    (Some(d), None)
                }
                Err(e) => (None, Some(e.to_string())),
            }
        }
        Some(Ok(None)) | None => (None, Some("no worktree is kept for this task".to_string())),
        Some(Err(e)) => (None, Some(e.to_string())),
    };
    // A bounce inside the attempt is in the new handoff's files; one that ended the attempt
    // is in the trail.
    let bounced = handoff_dir
        .as_deref()
        .and_then(|d| crate::agent::handoff::read_meta(d).ok())
        .and_then(|m| m.bounced)
        .or(bounced);
    InboxDetail {
        task_pk: target.task_pk,
        brief,
        said,
        bounced,
        handoff_dir,
        diff,
        worktree,
        diff_note,
    }
}
