//! This process on the queue's worker list while it works: registered, heartbeating, removed
//! when it stops (the workers view of every console sharing the queue shows it).

use super::engine_config::EngineConfig;
use super::setup::host_name;
use crate::store::{Store, StoreResult, WorkerRecord};
use std::sync::Arc;
use std::time::Duration;

/// The longest between two presence beats: the workers view marks a beat older than a minute.
const MAX_BEAT: Duration = Duration::from_secs(30);

/// How often the presence row is refreshed. Its readers are the offline threshold (the reaper
/// pass marks workers silent for longer than `offline_after` offline) and the workers view's
/// age column; leases have heartbeats of their own in the engine loop. A quarter of the
/// threshold leaves three missed beats of margin, capped at [`MAX_BEAT`]; never more often
/// than the lease heartbeat, as before.
pub(crate) fn beat_every(cfg: &EngineConfig) -> Duration {
    if cfg.offline_after.is_zero() {
        return cfg.heartbeat.max(MAX_BEAT);
    }
    cfg.heartbeat.max((cfg.offline_after / 4).min(MAX_BEAT))
}

pub(crate) struct WorkerPresence {
    store: Arc<dyn Store>,
    id: String,
    beat: tokio::task::JoinHandle<()>,
}

impl WorkerPresence {
    pub(crate) async fn start(
        store: Arc<dyn Store>,
        cfg: &EngineConfig,
    ) -> StoreResult<WorkerPresence> {
        let record = WorkerRecord {
            id: cfg.worker_id.clone(),
            host: host_name(),
            // A console that only watches is listed with no slots: it takes no work.
            slots: if cfg.observer { 0 } else { cfg.slots as i64 },
            tags: cfg.tags.clone(),
            started_at: chrono::Utc::now(),
            heartbeat_at: chrono::Utc::now(),
            offline: false,
        };
        store.register_worker(&record).await?;
        let (beat_store, beat_id, every) = (store.clone(), cfg.worker_id.clone(), beat_every(cfg));
        let beat = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = beat_store.worker_heartbeat(&beat_id).await {
                    tracing::warn!("worker heartbeat: {e}");
                }
            }
        });
        Ok(WorkerPresence {
            store,
            id: cfg.worker_id.clone(),
            beat,
        })
    }

    pub(crate) async fn stop(self) {
        self.beat.abort();
        // A queue that does not answer must not hold the exit up: the row then goes offline.
        let removed =
            tokio::time::timeout(Duration::from_secs(2), self.store.remove_worker(&self.id));
        match removed.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("removing worker {}: {e}", self.id),
            Err(_) => tracing::warn!("removing worker {}: the queue did not answer", self.id),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beats_a_quarter_of_the_offline_threshold_within_bounds() {
        let mut cfg = EngineConfig::new("w");
        // The defaults: 10 s lease heartbeat, offline after 120 s.
        assert_eq!(beat_every(&cfg), Duration::from_secs(30));
        cfg.offline_after = Duration::from_secs(600);
        assert_eq!(beat_every(&cfg), MAX_BEAT);
        // A short threshold: the lease heartbeat's pace, as before.
        cfg.offline_after = Duration::from_secs(20);
        assert_eq!(beat_every(&cfg), Duration::from_secs(10));
        cfg.offline_after = Duration::ZERO;
        assert_eq!(beat_every(&cfg), MAX_BEAT);
    }
}
