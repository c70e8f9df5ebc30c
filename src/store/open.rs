//! Choosing and opening the queue: SQLite under `.whilly/` by default, Postgres when configured.

use super::postgres::PgStore;
use super::sqlite::SqliteStore;
use super::{Store, StoreError, StoreResult};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the queue lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseTarget {
    Sqlite(PathBuf),
    Postgres(String),
}

/// The directory Whilly keeps its state in, inside the repository it works on.
pub fn state_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(".whilly")
}

/// The JSONL mirror of the audit trail.
pub fn events_mirror_path(repo_root: &Path) -> PathBuf {
    state_dir(repo_root).join("events.jsonl")
}

/// Reads a database URL: none → `.whilly/whilly.db`; `sqlite:PATH` / `sqlite://PATH`; or
/// `postgres://` / `postgresql://`.
pub fn target_from(url: Option<&str>, repo_root: &Path) -> StoreResult<DatabaseTarget> {
    let Some(url) = url.map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(DatabaseTarget::Sqlite(
            state_dir(repo_root).join("whilly.db"),
        ));
    };
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(DatabaseTarget::Postgres(url.to_string()));
    }
    if let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let path = PathBuf::from(rest);
        let path = if path.is_absolute() {
            path
        } else {
            repo_root.join(path)
        };
        return Ok(DatabaseTarget::Sqlite(path));
    }
    Err(StoreError::Invalid(format!(
        "database url {:?} is neither postgres://… nor sqlite:PATH; fix [database] url or WHILLY_DATABASE_URL",
        crate::store::redact_url(url)
    )))
}

/// How a shared queue wakes its workers (`[queue] notify`, `notify_debounce_ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wakeups {
    /// Postgres: `pg_notify` on commits that make work claimable; off, workers poll.
    pub notify: bool,
    /// Bursts of notifications within this window collapse into one more wakeup.
    pub debounce: std::time::Duration,
}

impl Default for Wakeups {
    fn default() -> Self {
        let pg = super::postgres::PgOptions::default();
        Wakeups {
            notify: pg.notify,
            debounce: pg.debounce,
        }
    }
}

/// Opens (creating and migrating as needed) the store for `target`.
pub async fn open(target: &DatabaseTarget, repo_root: &Path) -> StoreResult<Arc<dyn Store>> {
    open_with(target, repo_root, Wakeups::default()).await
}

/// [`open`] with the queue's wakeup settings.
pub async fn open_with(
    target: &DatabaseTarget,
    repo_root: &Path,
    wakeups: Wakeups,
) -> StoreResult<Arc<dyn Store>> {
    let mirror = Some(events_mirror_path(repo_root));
    match target {
        DatabaseTarget::Sqlite(path) => {
            let store = SqliteStore::open(path, mirror).await?;
            if path.starts_with(state_dir(repo_root)) {
                SqliteStore::exclude_state_dir(repo_root);
            }
            Ok(Arc::new(store))
        }
        DatabaseTarget::Postgres(url) => {
            let opts = super::postgres::PgOptions {
                notify: wakeups.notify,
                debounce: wakeups.debounce,
                ..Default::default()
            };
            Ok(Arc::new(PgStore::connect_with(url, mirror, opts).await?))
        }
    }
}
