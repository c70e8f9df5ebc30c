//! Watching the audit trail of a SQLite queue: this process's commits wake at once; other
//! processes' are seen by looking at the newest event id every `poll` (one index lookup).

use super::Shared;
use super::read::last_event_id;
use crate::store::EventWatch;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

pub(super) struct SqliteEventWatch {
    shared: Arc<Shared>,
    local: watch::Receiver<u64>,
    /// The newest event id when the watch last resolved (`None`: not known, so the first look
    /// reports a change).
    seen: Option<i64>,
    poll: Duration,
}

impl SqliteEventWatch {
    pub(super) async fn new(shared: Arc<Shared>, poll: Duration) -> SqliteEventWatch {
        let local = shared.events_written.subscribe();
        let seen = last_event_id(&shared).await;
        SqliteEventWatch {
            shared,
            local,
            seen,
            poll,
        }
    }

    /// Whether the newest event is newer than the last one reported (remembering it if so).
    async fn newer(&mut self) -> bool {
        let Some(latest) = last_event_id(&self.shared).await else {
            return false;
        };
        let newer = self.seen.is_none_or(|s| latest > s);
        self.seen = Some(latest);
        newer
    }
}

#[async_trait]
impl EventWatch for SqliteEventWatch {
    async fn changed(&mut self, max_wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + max_wait;
        loop {
            if self.newer().await {
                self.local.borrow_and_update();
                return true;
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return false;
            }
            tokio::select! {
                r = self.local.changed() => {
                    if r.is_ok() {
                        // Remember the newest id, so the next look does not report it again.
                        self.newer().await;
                        return true;
                    }
                    // The store is gone: only the clock is left.
                    tokio::time::sleep_until(deadline).await;
                    return false;
                }
                _ = tokio::time::sleep((deadline - now).min(self.poll)) => {}
            }
        }
    }
}
