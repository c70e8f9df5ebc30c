//! Work that was done and checked but could not land (the operator's checkout of the base
//! branch has uncommitted changes to the task's files, or replaying it conflicts) is not DONE:
//! the task waits in HUMAN_LOOP with the reason `ready_to_merge`, its branch (and worktree)
//! kept, until the operator cleans up and merges it (`m` in the console's inbox, `whilly merge`)
//! or sends it back. One implementation of that merge for both.

use super::decision::{self, Source};
use super::fence::{LANDED_EPOCH, ParkedFence};
use crate::domain::Status;
use crate::store::{Event, Store, StoreError, TaskRecord, event_types as et};
use crate::workspace::{Delivery, MergeMode, WorkspaceError, Workspaces};
use serde_json::{Value, json};
use std::sync::Arc;

pub(crate) use super::delivery::{READY_TO_MERGE, did_not_land, unlanded_detail, waits_to_merge};

pub(crate) use super::outcome::Unlanded;

/// The parked task's delivery, read from the newest event that parked it.
pub(crate) fn unlanded_of(task: &TaskRecord, events: &[Event]) -> Option<Unlanded> {
    if !waits_to_merge(task) {
        return None;
    }
    let parked = events
        .iter()
        .rev()
        .filter(|e| e.task_id.as_deref() == Some(task.id.as_str()))
        .find(|e| e.event_type == et::TASK_HUMAN_LOOP)?;
    // Attempt evidence sits at the payload's top level (`store::sql_common::outcome_payload`).
    let delivery = parked.payload.get("delivery")?;
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    Some(Unlanded {
        task_id: task.id.clone(),
        branch: delivery["branch"].as_str().unwrap_or_default().to_string(),
        files: strings(&delivery["files"]),
        kind: delivery["kind"].as_str().unwrap_or_default().to_string(),
        detail: parked.payload["detail"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    })
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum LandError {
    #[error("{task} is not waiting to be merged (it is {status}{})", reason.as_deref().map(|r| format!(", {r}")).unwrap_or_default())]
    NotWaiting {
        task: String,
        status: Status,
        reason: Option<String>,
    },
    /// The base is still dirty, or the replay still conflicts: nothing changed.
    #[error("{task} did not land yet: {detail}")]
    NotYet { task: String, detail: String },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Workspace(#[from] WorkspaceError),
    #[error("merging stopped unexpectedly: {0}")]
    Join(String),
}

/// What a merge did: the task is DONE, its work on the base branch.
#[derive(Debug, Clone)]
pub(crate) struct Merged {
    pub task: TaskRecord,
    /// One line for a status bar or a terminal.
    pub text: String,
}

/// Lands the parked task's work and approves it (DONE), recording the operator's decision
/// first. The base must be clean where the task's files are, and the replay must apply.
pub(crate) async fn merge_parked(
    store: &Arc<dyn Store>,
    workspaces: &Arc<Workspaces>,
    plan_id: &str,
    task_id: &str,
    mode: MergeMode,
    source: Source,
) -> Result<Merged, LandError> {
    let task = store.get_task(plan_id, task_id).await?;
    if !waits_to_merge(&task) {
        return Err(LandError::NotWaiting {
            task: task.id.clone(),
            status: task.status,
            reason: task.reason.clone(),
        });
    }
    let plan = store.get_plan(plan_id).await?;
    decision::record(
        store.as_ref(),
        plan_id,
        task_id,
        "merge",
        "",
        READY_TO_MERGE,
        source,
    )
    .await?;
    let fence = ParkedFence::new(store.clone(), &plan, &task);
    let (ws, plan_owned, task_owned) =
        (workspaces.clone(), plan_id.to_string(), task_id.to_string());
    // Merge mode `none` never parks a task; the operator asking to merge means merge.
    let mode = if mode == MergeMode::None {
        MergeMode::Ff
    } else {
        mode
    };
    let delivery =
        tokio::task::spawn_blocking(move || ws.land(&plan_owned, &task_owned, mode, &fence))
            .await
            .map_err(|e| LandError::Join(e.to_string()))??;
    if did_not_land(&delivery) {
        return Err(LandError::NotYet {
            task: task_id.to_string(),
            detail: unlanded_detail(task_id, &delivery),
        });
    }
    if delivery == Delivery::LeaseLost {
        let now = store.get_task(plan_id, task_id).await?;
        return Err(LandError::NotWaiting {
            task: now.id,
            status: now.status,
            reason: now.reason,
        });
    }
    let text = match &delivery {
        Delivery::FastForwarded {
            base_branch,
            commit,
        }
        | Delivery::Merged {
            base_branch,
            commit,
            ..
        }
        | Delivery::AlreadyLanded {
            base_branch,
            commit,
            ..
        } => format!(
            "{task_id} merged into {base_branch} ({})",
            commit.get(..8).unwrap_or(commit)
        ),
        _ => format!("{task_id}: its work was already on the base branch"),
    };
    let payload = json!({
        "by": source.as_str(),
        "delivery": super::delivery::delivery_json(&delivery),
        LANDED_EPOCH: task.epoch,
    });
    let task = store.approve_task(plan_id, task_id, payload).await?;
    Ok(Merged { task, text })
}
