//! Watching the audit trail of a SQLite queue: this process's commits wake at once; other
//! processes' are seen by looking at the database's files every `poll` (two `stat`s), and only
//! when they changed at the newest event id (one index lookup): an idle watcher costs no query.

use super::Shared;
use super::read::last_event_id;
use crate::store::EventWatch;
use async_trait::async_trait;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

pub(super) struct SqliteEventWatch {
    shared: Arc<Shared>,
    local: watch::Receiver<u64>,
    /// The newest event id when the watch last resolved (`None`: not known, so the first look
    /// reports a change).
    seen: Option<i64>,
    poll: Duration,
    /// The database file and its write-ahead log: another process's commit changes one.
    files: [PathBuf; 2],
    /// How they looked at the last lookup of the newest id.
    stamp: Option<Stamp>,
}

/// Size and modification time of each file (`None`: not there).
type Stamp = [Option<(u64, SystemTime)>; 2];

fn stamp(files: &[PathBuf; 2]) -> Stamp {
    files.each_ref().map(|f| {
        let md = std::fs::metadata(f).ok()?;
        Some((md.len(), md.modified().ok()?))
    })
}

impl SqliteEventWatch {
    pub(super) async fn new(shared: Arc<Shared>, db: PathBuf, poll: Duration) -> SqliteEventWatch {
        let local = shared.events_written.subscribe();
        let mut wal = db.clone().into_os_string();
        wal.push("-wal");
        let files = [db, PathBuf::from(wal)];
        // Taken before the lookup: a commit in between shows as a change next time.
        let first = stamp(&files);
        let seen = last_event_id(&shared).await;
        SqliteEventWatch {
            shared,
            local,
            seen,
            poll,
            stamp: seen.map(|_| first),
            files,
        }
    }

    /// Whether the newest event is newer than the last one reported (remembering it if so).
    /// Unless `force`, files that look as they did at the last lookup mean no.
    async fn newer(&mut self, force: bool) -> bool {
        let now = stamp(&self.files);
        let known = now.iter().any(Option::is_some);
        if !force && known && self.seen.is_some() && self.stamp.as_ref() == Some(&now) {
            return false;
        }
        let Some(latest) = last_event_id(&self.shared).await else {
            return false;
        };
        self.stamp = Some(now);
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
            if self.newer(false).await {
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
                        self.newer(true).await;
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
