//! The embedded SQLite store: one file (`.whilly/whilly.db` by default) in WAL mode that several
//! processes may share. Writers take the lock up front (`BEGIN IMMEDIATE`); in-process they are
//! also queued on a single writer connection so they wait in order instead of busy-looping.

mod import;
mod lease;
mod lifecycle;
mod operator;
mod panes;
mod read;
mod rows;
mod split;
mod tx;
mod watch;

use super::mirror::JsonlMirror;
use super::types::*;
use super::{
    EventLog, NewEvent, PaneRelay, PlanStore, Store, StoreError, StoreResult, TaskQueue,
    WorkerRegistry,
};
use crate::domain::{PlanSpec, Usd};
use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicI64;
use std::time::Duration;
use tokio::sync::Notify;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How often `wait_for_work` looks for commits made by other processes.
const CROSS_PROCESS_POLL: Duration = Duration::from_millis(250);

/// What every operation needs: the pools, the mirror and the in-process wakeup.
pub(crate) struct Shared {
    writer: SqlitePool,
    reader: SqlitePool,
    mirror: Option<JsonlMirror>,
    notify: Notify,
    /// The newest event id seen when a claim last found nothing: `wait_for_work` returns as soon
    /// as anything newer exists, so a commit by another process between that claim and the wait
    /// is not missed.
    seen_event_id: AtomicI64,
    /// Bumped after every commit that wrote events, for this process's event watches.
    events_written: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    fn wake_waiters(&self) {
        self.notify.notify_waiters();
        // A worker between a failed claim and its wait is not yet a waiter: leave it a permit.
        self.notify.notify_one();
    }
}

/// The SQLite implementation of [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    shared: Arc<Shared>,
    path: PathBuf,
    applied: Vec<i64>,
    pending: Vec<i64>,
}

/// How long opening waits for another process that holds the file while it creates or migrates
/// it (setting WAL mode on a new file takes an exclusive lock the busy timeout does not cover).
const OPEN_RETRY_FOR: Duration = Duration::from_secs(10);

/// Connects, retrying while SQLite answers "locked" or "busy": a second `whilly` (say `events
/// --follow` beside a `run`) must not fail because the first is creating the file.
async fn connect_retrying(
    pool: SqlitePoolOptions,
    opts: &SqliteConnectOptions,
) -> Result<sqlx::SqlitePool, sqlx::Error> {
    let give_up = std::time::Instant::now() + OPEN_RETRY_FOR;
    let mut pause = Duration::from_millis(20);
    loop {
        match pool.clone().connect_with(opts.clone()).await {
            Ok(p) => return Ok(p),
            Err(e) if is_locked(&e) && std::time::Instant::now() < give_up => {
                tracing::debug!(error = %e, "the SQLite queue is locked while opening; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(250));
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_locked(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            matches!(db.code().as_deref(), Some("5" | "6" | "517" | "261"))
        }
        _ => false,
    }
}

impl SqliteStore {
    /// Opens (creating the directory and file, and migrating) the database at `path`. With a
    /// mirror path, every committed event is also appended there as a JSON line.
    pub async fn open(path: &Path, mirror: Option<PathBuf>) -> StoreResult<SqliteStore> {
        let unreachable = |detail: String| StoreError::Unreachable {
            backend: "sqlite",
            location: path.display().to_string(),
            detail,
            hint: "the directory must be writable and the file a SQLite database (move a damaged \
                   file aside to start over)"
                .to_string(),
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::fsutil::private_dir(dir)
                .map_err(|e| unreachable(format!("cannot create {}: {e}", dir.display())))?;
        }
        let opts = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        let writer = connect_retrying(
            SqlitePoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(120)),
            &opts,
        )
        .await
        .map_err(|e| unreachable(e.to_string()))?;
        // SQLite creates the file (and its -wal/-shm, which take its mode) world-readable.
        if let Err(e) = crate::fsutil::make_private(path) {
            tracing::warn!("making {} private: {e}", path.display());
        }
        if let Err(first) = MIGRATOR.run(&writer).await {
            // Two processes opening a brand-new file race to create the schema; the loser sees
            // it applied on a second look.
            tracing::debug!(error = %first, "migrating the SQLite queue failed once; retrying");
            tokio::time::sleep(Duration::from_millis(200)).await;
            MIGRATOR.run(&writer).await?;
        }
        let reader = connect_retrying(
            SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(60)),
            &opts,
        )
        .await
        .map_err(|e| unreachable(e.to_string()))?;
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success = 1 ORDER BY version",
        )
        .fetch_all(&reader)
        .await?;
        let pending = MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect();
        Ok(SqliteStore {
            shared: Arc::new(Shared {
                writer,
                reader,
                mirror: mirror.map(JsonlMirror::new),
                notify: Notify::new(),
                seen_event_id: AtomicI64::new(0),
                events_written: tokio::sync::watch::Sender::new(0),
            }),
            path: path.to_path_buf(),
            applied,
            pending,
        })
    }

    /// The default store of a repository: `.whilly/whilly.db`, mirrored to `.whilly/events.jsonl`,
    /// with `.whilly/` kept out of git.
    pub async fn open_in_repo(repo_root: &Path) -> StoreResult<SqliteStore> {
        let dir = repo_root.join(".whilly");
        let store =
            SqliteStore::open(&dir.join("whilly.db"), Some(dir.join("events.jsonl"))).await?;
        SqliteStore::exclude_state_dir(repo_root);
        Ok(store)
    }

    /// Adds `.whilly/` to the repository's `info/exclude` (the common dir's, so worktrees share
    /// it) once. Not a git repository, or not writable: nothing happens, quietly.
    pub fn exclude_state_dir(repo_root: &Path) {
        let Ok(repo) = git2::Repository::open(repo_root) else {
            return;
        };
        let file = repo.commondir().join("info").join("exclude");
        if let Err(e) = add_exclude_line(&file, ".whilly/") {
            tracing::debug!(path = %file.display(), error = %e, "could not add .whilly/ to git excludes");
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// Appends `line` to an exclude file unless a line already says it.
fn add_exclude_line(file: &Path, line: &str) -> std::io::Result<()> {
    let existing = match std::fs::read_to_string(file) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    let bare = line.trim_end_matches('/');
    if existing.lines().any(|l| {
        let l = l.trim();
        l == line || l == bare || l == format!("/{line}") || l == format!("/{bare}")
    }) {
        return Ok(());
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut text = existing;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(line);
    text.push('\n');
    std::fs::write(file, text)
}

#[async_trait]
impl PlanStore for SqliteStore {
    async fn import_plan(
        &self,
        plan: &PlanSpec,
        opts: &ImportOptions,
    ) -> StoreResult<ImportReport> {
        import::import_plan(self.shared(), plan, opts).await
    }

    async fn list_plans(&self) -> StoreResult<Vec<PlanSummary>> {
        read::list_plans(self.shared()).await
    }

    async fn get_plan(&self, plan_id: &str) -> StoreResult<PlanRecord> {
        read::get_plan(&self.shared().reader, plan_id).await
    }

    async fn export_plan(&self, plan_id: &str) -> StoreResult<PlanSpec> {
        read::export_plan(self.shared(), plan_id).await
    }

    async fn set_plan_paused(&self, plan_id: &str, paused: bool) -> StoreResult<()> {
        operator::set_plan_paused(self.shared(), plan_id, paused).await
    }

    async fn reset_plan(&self, plan_id: &str, mode: ResetMode) -> StoreResult<()> {
        operator::reset_plan(self.shared(), plan_id, mode).await
    }

    async fn set_plan_archived(&self, plan_id: &str, archived: bool) -> StoreResult<()> {
        lifecycle::set_plan_archived(self.shared(), plan_id, archived).await
    }

    async fn delete_plan(&self, plan_id: &str) -> StoreResult<()> {
        lifecycle::delete_plan(self.shared(), plan_id).await
    }

    async fn list_tasks(&self, plan_id: &str) -> StoreResult<Vec<TaskRecord>> {
        read::list_tasks(self.shared(), plan_id).await
    }

    async fn get_task(&self, plan_id: &str, task_id: &str) -> StoreResult<TaskRecord> {
        read::get_task(self.shared(), plan_id, task_id).await
    }

    async fn get_task_by_pk(&self, task_pk: i64) -> StoreResult<TaskRecord> {
        read::get_task_by_pk(self.shared(), task_pk).await
    }

    async fn tasks_by_ids(
        &self,
        plan_id: &str,
        task_ids: &[String],
    ) -> StoreResult<Vec<TaskRecord>> {
        read::tasks_by_ids(self.shared(), plan_id, task_ids).await
    }

    async fn counts(&self, plan_id: &str) -> StoreResult<StatusCounts> {
        read::counts(self.shared(), plan_id).await
    }
}

#[async_trait]
impl TaskQueue for SqliteStore {
    async fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claimed>> {
        lease::claim(self.shared(), req).await
    }

    async fn heartbeat(&self, lease: Lease, extend: Duration) -> StoreResult<()> {
        lease::heartbeat(self.shared(), lease, extend).await
    }

    async fn start(&self, lease: Lease, deadline: Option<Duration>) -> StoreResult<()> {
        lease::start(self.shared(), lease, deadline).await
    }

    async fn complete(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::complete(self.shared(), lease, outcome).await
    }

    async fn fail(
        &self,
        lease: Lease,
        mode: FailMode,
        outcome: &Outcome,
    ) -> StoreResult<TaskRecord> {
        lease::fail(self.shared(), lease, mode, outcome).await
    }

    async fn release(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::release(self.shared(), lease, outcome).await
    }

    async fn park(&self, lease: Lease, park: Park, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::park(self.shared(), lease, park, outcome).await
    }

    async fn add_cost(&self, lease: Lease, cost: Usd) -> StoreResult<PlanRecord> {
        lease::add_cost(self.shared(), lease, cost).await
    }

    async fn reap(&self) -> StoreResult<ReapReport> {
        lease::reap(self.shared()).await
    }

    async fn skip_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord> {
        operator::skip_task(self.shared(), plan_id, task_id, reason).await
    }

    async fn reset_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord> {
        operator::reset_task(self.shared(), plan_id, task_id, reason).await
    }

    async fn approve_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord> {
        operator::approve_task(self.shared(), plan_id, task_id, payload).await
    }

    async fn reject_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord> {
        operator::reject_task(self.shared(), plan_id, task_id, payload).await
    }

    async fn split_task(
        &self,
        plan_id: &str,
        split: &crate::domain::TaskSplit,
    ) -> StoreResult<SplitReport> {
        split::split_task(self.shared(), plan_id, split).await
    }

    async fn wait_for_work(&self, max_wait: Duration) {
        watch::wait_for_work(self.shared(), &self.path, max_wait, CROSS_PROCESS_POLL).await
    }

    /// Every change that can make work claimable writes an event, and the wait looks for new
    /// events of other processes every [`CROSS_PROCESS_POLL`].
    fn wakes_for_work(&self) -> bool {
        true
    }
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn events(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        read::events(self.shared(), filter).await
    }

    async fn append_event(&self, event: NewEvent) -> StoreResult<Event> {
        operator::append_event(self.shared(), event).await
    }

    async fn watch_events(&self) -> Box<dyn super::EventWatch> {
        Box::new(
            watch::SqliteEventWatch::new(
                self.shared.clone(),
                self.path.clone(),
                CROSS_PROCESS_POLL,
            )
            .await,
        )
    }
}

#[async_trait]
impl WorkerRegistry for SqliteStore {
    async fn register_worker(&self, worker: &WorkerRecord) -> StoreResult<()> {
        operator::register_worker(self.shared(), worker).await
    }

    async fn worker_heartbeat(&self, worker_id: &str) -> StoreResult<()> {
        operator::worker_heartbeat(self.shared(), worker_id).await
    }

    async fn mark_offline_workers(&self, older_than: Duration) -> StoreResult<Vec<String>> {
        operator::mark_offline_workers(self.shared(), older_than).await
    }

    async fn list_workers(&self) -> StoreResult<Vec<WorkerRecord>> {
        read::list_workers(self.shared()).await
    }

    async fn remove_worker(&self, worker_id: &str) -> StoreResult<()> {
        operator::remove_worker(self.shared(), worker_id).await
    }
}

#[async_trait]
impl PaneRelay for SqliteStore {
    async fn watch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()> {
        panes::watch_pane(self.shared(), task_pk, viewer).await
    }

    async fn unwatch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()> {
        panes::unwatch_pane(self.shared(), task_pk, viewer).await
    }

    async fn pane_watches(&self, task_pks: &[i64], ttl: Duration) -> StoreResult<Vec<PaneWatch>> {
        panes::pane_watches(self.shared(), task_pks, ttl).await
    }

    async fn publish_pane(&self, chunk: &PaneChunk) -> StoreResult<i64> {
        panes::publish_pane(self.shared(), chunk).await
    }

    async fn pane_chunks(&self, cursors: &[(i64, i64)], limit: i64) -> StoreResult<Vec<PaneChunk>> {
        panes::pane_chunks(self.shared(), cursors, limit).await
    }

    async fn latest_pane_snapshot(&self, task_pk: i64) -> StoreResult<Option<i64>> {
        panes::latest_pane_snapshot(self.shared(), task_pk).await
    }

    async fn prune_pane(&self, task_pk: i64, before_id: Option<i64>) -> StoreResult<u64> {
        panes::prune_pane(self.shared(), task_pk, before_id).await
    }

    async fn send_pane_input(&self, task_pk: i64, viewer: &str, data: &[u8]) -> StoreResult<()> {
        panes::send_pane_input(self.shared(), task_pk, viewer, data).await
    }

    async fn take_pane_input(&self, task_pks: &[i64]) -> StoreResult<Vec<PaneInput>> {
        panes::take_pane_input(self.shared(), task_pks).await
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn info(&self) -> StoreInfo {
        StoreInfo {
            backend: "sqlite",
            location: self.path.display().to_string(),
            applied_migrations: self.applied.clone(),
            pending_migrations: self.pending.clone(),
        }
    }

    async fn close(&self) {
        self.shared.writer.close().await;
        self.shared.reader.close().await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn exclude_line_added_once() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("info/exclude");
        add_exclude_line(&f, ".whilly/").unwrap();
        add_exclude_line(&f, ".whilly/").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), ".whilly/\n");
        std::fs::write(&f, "# comment\n/.whilly").unwrap();
        add_exclude_line(&f, ".whilly/").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "# comment\n/.whilly");
    }
}
