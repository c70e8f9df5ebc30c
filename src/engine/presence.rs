//! This process on the queue's worker list while it works: registered, heartbeating, removed
//! when it stops (the workers view of every console sharing the queue shows it).

use super::setup::host_name;
use super::worker::EngineConfig;
use crate::store::{Store, StoreResult, WorkerRecord};
use std::sync::Arc;
use std::time::Duration;

pub struct WorkerPresence {
    store: Arc<dyn Store>,
    id: String,
    beat: tokio::task::JoinHandle<()>,
}

impl WorkerPresence {
    pub async fn start(store: Arc<dyn Store>, cfg: &EngineConfig) -> StoreResult<WorkerPresence> {
        let record = WorkerRecord {
            id: cfg.worker_id.clone(),
            host: host_name(),
            slots: cfg.slots as i64,
            tags: cfg.tags.clone(),
            started_at: chrono::Utc::now(),
            heartbeat_at: chrono::Utc::now(),
            offline: false,
        };
        store.register_worker(&record).await?;
        let (beat_store, beat_id, every) = (store.clone(), cfg.worker_id.clone(), cfg.heartbeat);
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

    pub async fn stop(self) {
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
