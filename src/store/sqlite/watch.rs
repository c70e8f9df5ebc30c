//! Watching the audit trail of a SQLite queue: this process's commits wake at once; other
//! processes' are seen by looking at the database's files every `poll` (two `stat`s), and only
//! when they changed at the newest event id (one index lookup): an idle watcher costs no query.
//! The engine's wait for work ([`wait_for_work`]) and the console's event watch look the same
//! way.

use super::Shared;
use super::read::last_event_id;
use crate::store::EventWatch;
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::sync::watch;

/// A file changed this recently may change again within the file system's timestamp tick
/// without its size or time showing it: such a stamp is not trusted.
const SETTLED: Duration = Duration::from_secs(1);

/// The database file and its write-ahead log, and how they looked when the newest event id was
/// last read: another process's commit changes one of them.
struct DbFiles {
    files: [PathBuf; 2],
    stamp: Option<Stamp>,
}

/// Size and modification time of each file (`None`: not there).
type Stamp = [Option<(u64, SystemTime)>; 2];

impl DbFiles {
    fn new(db: &Path) -> DbFiles {
        let mut wal = db.as_os_str().to_os_string();
        wal.push("-wal");
        DbFiles {
            files: [db.to_path_buf(), PathBuf::from(wal)],
            stamp: None,
        }
    }

    fn look(&self) -> Stamp {
        self.files.each_ref().map(|f| {
            let md = std::fs::metadata(f).ok()?;
            Some((md.len(), md.modified().ok()?))
        })
    }

    /// The files as they are now, and whether they look as they did at the last [`Self::read`]
    /// and have been still long enough for that to mean nothing was committed since.
    fn unchanged(&self) -> (Stamp, bool) {
        let now = self.look();
        let settled = now
            .iter()
            .flatten()
            .all(|(_, modified)| modified.elapsed().is_ok_and(|since| since >= SETTLED));
        let known = now.iter().any(Option::is_some);
        (now, known && settled && self.stamp == Some(now))
    }

    /// The newest event id, read when the files changed since the last read (or `force`);
    /// `None` when they did not, or the read failed.
    async fn newest_if_changed(&mut self, shared: &Shared, force: bool) -> Option<i64> {
        let (now, unchanged) = self.unchanged();
        if unchanged && !force {
            return None;
        }
        // The stamp is taken before the read: a commit in between shows as a change next time.
        let latest = last_event_id(shared).await?;
        self.stamp = Some(now);
        Some(latest)
    }
}

/// Returns on an in-process wakeup, as soon as an event newer than the last fruitless claim's
/// exists (another process committed: seen by looking at the files every `poll`), or after
/// `max_wait`.
pub(super) async fn wait_for_work(s: &Shared, db: &Path, max_wait: Duration, poll: Duration) {
    let deadline = tokio::time::Instant::now() + max_wait;
    let notified = s.notify.notified();
    tokio::pin!(notified);
    // Registered before looking at the database, so a commit in between is not missed.
    notified.as_mut().enable();
    let seen = s.seen_event_id.load(std::sync::atomic::Ordering::SeqCst);
    let mut files = DbFiles::new(db);
    // The first look reads: a commit since the fruitless claim may predate the files' stamp.
    let mut force = true;
    loop {
        if files
            .newest_if_changed(s, force)
            .await
            .is_some_and(|latest| latest > seen)
        {
            return;
        }
        force = false;
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        tokio::select! {
            _ = &mut notified => return,
            _ = tokio::time::sleep((deadline - now).min(poll)) => {}
        }
    }
}

pub(super) struct SqliteEventWatch {
    shared: Arc<Shared>,
    local: watch::Receiver<u64>,
    /// The newest event id when the watch last resolved (`None`: not known, so the first look
    /// reports a change).
    seen: Option<i64>,
    poll: Duration,
    files: DbFiles,
}

impl SqliteEventWatch {
    pub(super) async fn new(shared: Arc<Shared>, db: PathBuf, poll: Duration) -> SqliteEventWatch {
        let local = shared.events_written.subscribe();
        let mut files = DbFiles::new(&db);
        let seen = files.newest_if_changed(&shared, true).await;
        SqliteEventWatch {
            shared,
            local,
            seen,
            poll,
            files,
        }
    }

    /// Whether the newest event is newer than the last one reported (remembering it if so).
    /// Unless `force`, files that look as they did at the last lookup mean no.
    async fn newer(&mut self, force: bool) -> bool {
        let force = force || self.seen.is_none();
        let Some(latest) = self.files.newest_if_changed(&self.shared, force).await else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, secs: u64) {
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn only_settled_unchanged_files_spare_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("q.db");
        std::fs::write(&db, b"db").unwrap();
        std::fs::write(dir.path().join("q.db-wal"), b"wal").unwrap();
        let mut files = DbFiles::new(&db);
        // Never read: the first look must read.
        assert!(!files.unchanged().1);
        // Just written: a commit within the same timestamp tick would not show.
        files.stamp = Some(files.look());
        assert!(
            !files.unchanged().1,
            "a file changed just now is not trusted"
        );
        age(&db, 5);
        age(&dir.path().join("q.db-wal"), 5);
        files.stamp = Some(files.look());
        assert!(files.unchanged().1, "settled and as last read");
        // Another process appends to the log.
        std::fs::write(dir.path().join("q.db-wal"), b"wal+commit").unwrap();
        age(&dir.path().join("q.db-wal"), 5);
        assert!(!files.unchanged().1, "a new size is a change");
    }
}
