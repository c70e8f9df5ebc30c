//! The console's view of the queue: it follows the plan's events and reloads the plan and its
//! tasks when something happened, the workers and the waiting handoffs now and then.

use super::msg::Msg;
use crate::agent::HandoffDir;
use crate::store::{Event as StoreEvent, EventFilter, PlanRecord, Store, TaskRecord, WorkerRecord};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How often the console looks for new events.
const STORE_POLL: Duration = Duration::from_millis(250);
/// How often the workers and handoffs are reloaded even when nothing happened.
const FULL_RELOAD: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct FeedData {
    pub plan: PlanRecord,
    pub tasks: Vec<TaskRecord>,
    pub events: Vec<StoreEvent>,
    /// Reloaded with every full reload.
    pub workers: Option<Vec<WorkerRecord>>,
    /// With every full reload: this plan's tasks whose handoff waits for a human (any process's:
    /// a console opened beside a background run answers its handoffs).
    pub handoffs: Option<std::collections::BTreeSet<String>>,
}

/// Follows the store: new events every [`STORE_POLL`], the plan and its tasks reloaded when
/// anything happened (or every [`FULL_RELOAD`]).
pub async fn load_loop(
    store: Arc<dyn Store>,
    plan_id: String,
    handoff: HandoffDir,
    tx: mpsc::Sender<Msg>,
    reload: Arc<Notify>,
) {
    let mut after = 0i64;
    let mut last_full: Option<Instant> = None;
    loop {
        // The first load takes only the recent past (what the views keep), not a history of
        // one `task.created` per task of a large plan.
        let first = last_full.is_none() && after == 0;
        let filter = EventFilter {
            plan_id: Some(plan_id.clone()),
            after_id: Some(after),
            limit: first.then_some(super::state::MAX_EVENTS as i64),
            newest: first,
            ..Default::default()
        };
        let msg = async {
            let events = store.events(&filter).await?;
            let due = last_full.is_none_or(|t| t.elapsed() >= FULL_RELOAD);
            if events.is_empty() && !due {
                return Ok(None);
            }
            let plan = store.get_plan(&plan_id).await?;
            let tasks = store.list_tasks(&plan_id).await?;
            let workers = if due {
                Some(store.list_workers().await?)
            } else {
                None
            };
            let handoffs = if due {
                let (dir, plan) = (handoff.clone(), plan_id.clone());
                tokio::task::spawn_blocking(move || waiting_handoffs(&dir, &plan))
                    .await
                    .ok()
            } else {
                None
            };
            Ok::<_, crate::store::StoreError>(Some(FeedData {
                plan,
                tasks,
                events,
                workers,
                handoffs,
            }))
        }
        .await;
        let send = match msg {
            Ok(Some(d)) => {
                last_full = Some(Instant::now());
                if let Some(e) = d.events.last() {
                    after = e.id;
                }
                Some(Msg::Data(Box::new(d)))
            }
            Ok(None) => None,
            Err(e) => Some(Msg::FeedFailed(e.to_string())),
        };
        if let Some(m) = send
            && tx.send(m).await.is_err()
        {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(STORE_POLL) => {}
            _ = reload.notified() => last_full = None,
        }
    }
}

/// The ids of `plan_id`'s tasks whose handoff directory has no answer yet. Unreadable
/// directories are left out (the inbox shows what can be answered).
fn waiting_handoffs(dir: &HandoffDir, plan_id: &str) -> std::collections::BTreeSet<String> {
    dir.list()
        .unwrap_or_default()
        .into_iter()
        .filter(|e| !matches!(e.state, crate::agent::HandoffPoll::Result(_)))
        .filter_map(|e| e.meta.ok())
        .filter(|m| m.plan_id == plan_id)
        .map(|m| m.task_id)
        .collect()
}
