//! Side effects that follow the queue: keeping something outside (a project board, Jira) in
//! step with the tasks. A [`Follower`] reads the events after the last one seen whenever the
//! store says there are new ones, waits for a quiet moment (a task that goes PENDING → CLAIMED
//! → IN_PROGRESS within it is synced once), and syncs each plan the events touched; a plan
//! whose sync failed is tried again with backoff. Nothing here can fail a task.

use crate::store::{EventFilter, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Quiet time before the plans touched by new events are synced.
const DEBOUNCE: Duration = Duration::from_millis(800);
/// The last sync when the engine stops waits no longer than this.
const FINAL_SYNC: Duration = Duration::from_secs(60);

/// One thing kept in step, plan by plan.
#[async_trait::async_trait]
pub trait PlanSync: Send + 'static {
    /// Its events start with `<name>.`; they change nothing it syncs.
    fn name(&self) -> &'static str;
    fn store(&self) -> Arc<dyn Store>;
    /// Brings the plan in step; `Ok` with what could not be done (tried again later).
    async fn sync_plan(&mut self, plan_id: &str) -> Result<Vec<String>, String>;
}

/// A sync chosen at run time (the engine knows followers only by this trait).
#[async_trait::async_trait]
impl PlanSync for Box<dyn PlanSync> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    fn store(&self) -> Arc<dyn Store> {
        (**self).store()
    }

    async fn sync_plan(&mut self, plan_id: &str) -> Result<Vec<String>, String> {
        (**self).sync_plan(plan_id).await
    }
}

/// A [`PlanSync`] following the events in the background.
pub(crate) struct Follower {
    stop: watch::Sender<bool>,
    handle: JoinHandle<()>,
    name: &'static str,
}

impl Follower {
    /// Follows the events of `plan` (every plan when `None`) from now on, and syncs `plan`
    /// once at the start.
    pub(crate) fn spawn<S: PlanSync>(sync: S, plan: Option<String>) -> Follower {
        let (stop, stop_rx) = watch::channel(false);
        let name = sync.name();
        let handle = tokio::spawn(follow(sync, plan, stop_rx));
        Follower { stop, handle, name }
    }

    /// One last sync of what changed, then stops (waiting at most a minute).
    pub(crate) async fn finish(self) {
        let _ = self.stop.send(true);
        let mut handle = self.handle;
        if tokio::time::timeout(FINAL_SYNC, &mut handle).await.is_err() {
            tracing::warn!(
                "{}: the last sync took too long; a later sync fixes it",
                self.name
            );
            handle.abort();
        }
    }
}

async fn follow<S: PlanSync>(mut sync: S, plan: Option<String>, mut stop: watch::Receiver<bool>) {
    let store = sync.store();
    let own = format!("{}.", sync.name());
    let mut watch = store.watch_events().await;
    let mut after = store.newest_event_id().await.unwrap_or(0);
    let mut dirty: BTreeSet<String> = plan.iter().cloned().collect();
    // Plans whose last sync failed: when to try again, and the wait after that.
    let mut retry: BTreeMap<String, (Instant, Duration)> = BTreeMap::new();
    loop {
        if !*stop.borrow() && dirty.is_empty() {
            let wait = retry
                .values()
                .map(|(at, _)| at.saturating_duration_since(Instant::now()))
                .min()
                .unwrap_or(Duration::from_secs(30));
            tokio::select! {
                _ = watch.changed(wait) => {}
                _ = stop.changed() => {}
            }
            if !*stop.borrow() {
                tokio::time::sleep(DEBOUNCE).await;
            }
        }
        let stopping = *stop.borrow();
        loop {
            let events = match store
                .events(&EventFilter {
                    after_id: Some(after),
                    plan_id: plan.clone(),
                    limit: Some(1000),
                    ..EventFilter::default()
                })
                .await
            {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!("{}: reading events: {e}", sync.name());
                    break;
                }
            };
            let full = events.len() >= 1000;
            for e in &events {
                after = after.max(e.id);
                if e.event_type.starts_with(&own) {
                    continue;
                }
                if let Some(p) = &e.plan_id {
                    dirty.insert(p.clone());
                }
            }
            if !full {
                break;
            }
        }
        let now = Instant::now();
        let due: Vec<String> = retry
            .iter()
            .filter(|(_, (at, _))| *at <= now || stopping)
            .map(|(p, _)| p.clone())
            .collect();
        dirty.extend(due);
        for p in std::mem::take(&mut dirty) {
            match sync.sync_plan(&p).await {
                Ok(failed) if failed.is_empty() => {
                    retry.remove(&p);
                }
                Ok(failed) => {
                    for f in &failed {
                        tracing::warn!(plan = %p, "{}: {f}", sync.name());
                    }
                    back_off(&mut retry, &p);
                }
                Err(e) => {
                    tracing::warn!(plan = %p, "{}: {e}", sync.name());
                    back_off(&mut retry, &p);
                }
            }
        }
        if stopping {
            return;
        }
    }
}

fn back_off(retry: &mut BTreeMap<String, (Instant, Duration)>, plan: &str) {
    let next = retry.get(plan).map_or(Duration::from_secs(2), |(_, d)| {
        (*d * 2).min(Duration::from_secs(300))
    });
    retry.insert(plan.to_string(), (Instant::now() + next, next));
}
