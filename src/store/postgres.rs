//! The Postgres store: the shared queue that several whilly processes and remote workers use.
//!
//! Claims lock rows with `FOR UPDATE SKIP LOCKED`, every write after a claim is fenced by the
//! task's epoch, all times are the database clock, and `LISTEN/NOTIFY` wakes idle workers (with a
//! polling fallback, since notifications sent while a listener is disconnected are lost).

mod import;
mod lease;
mod lifecycle;
mod location;
mod operator;
mod panes;
mod query;
mod rows;
mod split;
mod tx;
mod wake;

pub use location::location_of;

use super::mirror::JsonlMirror;
use super::{
    ClaimRequest, Claimed, Event, EventFilter, EventLog, FailMode, ImportOptions, ImportReport,
    Lease, NewEvent, Outcome, PaneChunk, PaneInput, PaneRelay, PaneWatch, Park, PlanRecord,
    PlanStore, PlanSummary, ReapReport, ResetMode, StatusCounts, Store, StoreError, StoreInfo,
    StoreResult, TaskQueue, TaskRecord, WorkerRecord, WorkerRegistry,
};
use crate::domain::{PlanSpec, Usd};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tokio::sync::watch;

/// The migrations compiled into the binary.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// How long connecting may take before the server counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Knobs for [`PgStore::connect_with`]; `Default` is what [`PgStore::connect`] uses.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Apply pending migrations while connecting.
    pub migrate: bool,
    /// Send `pg_notify` on commits that may make work claimable and wake on them. When off,
    /// `wait_for_work` is pure polling (every `max_wait`).
    pub notify: bool,
    /// Bursts of notifications within this window collapse into one extra wakeup.
    pub debounce: Duration,
    pub max_connections: u32,
    pub connect_timeout: Duration,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            migrate: true,
            notify: true,
            debounce: Duration::from_millis(20),
            max_connections: 16,
            connect_timeout: CONNECT_TIMEOUT,
        }
    }
}

/// State shared by the store and its background listener.
pub(crate) struct Inner {
    pool: PgPool,
    notify: AtomicBool,
    mirror: Option<JsonlMirror>,
    hub: Arc<wake::WakeHub>,
    /// The last claim needed the full transaction (keys or a budget): the next one goes there
    /// straight away, skipping a one-statement try that would lock a row (and sync the WAL)
    /// only to hand over.
    claim_full: AtomicBool,
    location: String,
    migrations: RwLock<(Vec<i64>, Vec<i64>)>,
    shutdown: watch::Sender<bool>,
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Inner {
    fn notify_enabled(&self) -> bool {
        self.notify.load(Ordering::Relaxed)
    }

    fn mirror(&self, events: &[Event]) {
        if let Some(m) = &self.mirror {
            m.append(events);
        }
    }
}

/// The Postgres queue. Cheap to clone (all clones share one pool and one listener).
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.inner.location)
            .finish()
    }
}

impl PgStore {
    /// Connects (failing fast with `Unreachable` when the server is not there), applies the
    /// embedded migrations and starts the LISTEN connection.
    pub async fn connect(url: &str, mirror: Option<PathBuf>) -> StoreResult<PgStore> {
        Self::connect_with(url, mirror, PgOptions::default()).await
    }

    pub async fn connect_with(
        url: &str,
        mirror: Option<PathBuf>,
        opts: PgOptions,
    ) -> StoreResult<PgStore> {
        let connect_opts = PgConnectOptions::from_str(url).map_err(|e| {
            StoreError::Invalid(format!(
                "database url {:?} is not a valid postgres:// URL: {e}; fix [database] url or WHILLY_DATABASE_URL",
                crate::store::redact_url(url)
            ))
        })?;
        let location = location_of(&connect_opts);
        let unreachable = |detail: String, refused: bool| StoreError::Unreachable {
            backend: "postgres",
            location: location.clone(),
            detail,
            hint: location::hint(
                connect_opts.get_host(),
                refused,
                location::LocalServer::detect(),
            ),
        };
        // One connection first, tried once: a pool retries refused connections until its
        // acquire timeout, so a server that is not there would take seconds to say so.
        let full = |e: &sqlx::Error| {
            e.as_database_error()
                .and_then(|d| d.code())
                .is_some_and(|c| c == "53300")
                .then(|| StoreError::Full {
                    backend: "postgres",
                    location: location.clone(),
                    detail: e.to_string(),
                })
        };
        match probe(&connect_opts, opts.connect_timeout).await {
            Ok(()) => {}
            Err(Probe::Refused(e)) if full(&e).is_some() => {
                return Err(full(&e).unwrap_or_else(|| unreachable(e.to_string(), false)));
            }
            Err(Probe::Refused(e)) => {
                let (detail, refused) =
                    location::connect_failure(connect_opts.get_host(), connect_opts.get_port(), &e);
                return Err(unreachable(detail, refused));
            }
            Err(Probe::Silent(detail)) => return Err(unreachable(detail, false)),
        }
        let pool = PgPoolOptions::new()
            .max_connections(opts.max_connections.max(2))
            .acquire_timeout(opts.connect_timeout)
            .connect_with(connect_opts.clone());
        let pool = match tokio::time::timeout(opts.connect_timeout, pool).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => return Err(full(&e).unwrap_or_else(|| unreachable(e.to_string(), false))),
            Err(_) => {
                return Err(unreachable(
                    format!("no answer within {:?}", opts.connect_timeout),
                    false,
                ));
            }
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let inner = Arc::new(Inner {
            pool,
            notify: AtomicBool::new(opts.notify),
            mirror: mirror.map(JsonlMirror::new),
            hub: Arc::new(wake::WakeHub::default()),
            claim_full: AtomicBool::new(false),
            location,
            migrations: RwLock::new((Vec::new(), Vec::new())),
            shutdown,
            listener: Mutex::new(None),
        });
        let store = PgStore { inner };
        if opts.migrate {
            store.migrate().await?;
        } else {
            store.migration_status().await?;
        }
        store
            .start_listener(connect_opts, opts.debounce, shutdown_rx)
            .await;
        Ok(store)
    }

    async fn start_listener(
        &self,
        opts: PgConnectOptions,
        debounce: Duration,
        shutdown: watch::Receiver<bool>,
    ) {
        let listen_pool = PgPoolOptions::new()
            .max_connections(1)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(opts);
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let handle = tokio::spawn(wake::run_listener(
            listen_pool,
            self.inner.hub.clone(),
            debounce,
            ready_tx,
            shutdown,
        ));
        if let Ok(mut slot) = self.inner.listener.lock() {
            *slot = Some(handle);
        }
        // Until LISTEN is in place notifications would be missed; waiting briefly for it keeps
        // the first wakeups prompt. If it is slow, the polling fallback still covers us.
        let _ = tokio::time::timeout(CONNECT_TIMEOUT, ready_rx).await;
    }

    /// Applies pending migrations (safe with several processes at once: sqlx holds an advisory
    /// lock) and returns the versions applied now.
    pub async fn migrate(&self) -> StoreResult<Vec<i64>> {
        let (before, _) = self.migration_status().await?;
        MIGRATOR.run(&self.inner.pool).await?;
        let (after, _) = self.migration_status().await?;
        Ok(after.into_iter().filter(|v| !before.contains(v)).collect())
    }

    /// (applied, pending) migration versions, also cached for [`Store::info`].
    pub async fn migration_status(&self) -> StoreResult<(Vec<i64>, Vec<i64>)> {
        let exists: Option<String> =
            sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations')::text")
                .fetch_one(&self.inner.pool)
                .await?;
        let applied: Vec<i64> = if exists.is_some() {
            sqlx::query_scalar(
                "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
            )
            .fetch_all(&self.inner.pool)
            .await?
        } else {
            Vec::new()
        };
        let pending: Vec<i64> = MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect();
        if let Ok(mut m) = self.inner.migrations.write() {
            *m = (applied.clone(), pending.clone());
        }
        Ok((applied, pending))
    }

    /// The connection pool (benchmarks and tests look at the tables directly).
    pub fn pool(&self) -> &PgPool {
        &self.inner.pool
    }
}

/// Opens and closes one connection: `Err((detail, refused))` when the server does not take it.
/// How the first connection failed: with an error from the network or the server, or not at
/// all within the timeout.
enum Probe {
    Refused(sqlx::Error),
    Silent(String),
}

async fn probe(opts: &PgConnectOptions, timeout: Duration) -> Result<(), Probe> {
    use sqlx::{ConnectOptions as _, Connection as _};
    match tokio::time::timeout(timeout, opts.connect()).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(Probe::Refused(e)),
        Err(_) => Err(Probe::Silent(format!("no answer within {timeout:?}"))),
    }
}

#[async_trait]
impl PlanStore for PgStore {
    async fn import_plan(
        &self,
        plan: &PlanSpec,
        opts: &ImportOptions,
    ) -> StoreResult<ImportReport> {
        import::import_plan(&self.inner, plan, opts).await
    }

    async fn list_plans(&self) -> StoreResult<Vec<PlanSummary>> {
        query::list_plans(&self.inner).await
    }

    async fn get_plan(&self, plan_id: &str) -> StoreResult<PlanRecord> {
        query::get_plan(&self.inner, plan_id).await
    }

    async fn export_plan(&self, plan_id: &str) -> StoreResult<PlanSpec> {
        query::export_plan(&self.inner, plan_id).await
    }

    async fn set_plan_paused(&self, plan_id: &str, paused: bool) -> StoreResult<()> {
        operator::set_plan_paused(&self.inner, plan_id, paused).await
    }

    async fn reset_plan(&self, plan_id: &str, mode: ResetMode) -> StoreResult<()> {
        operator::reset_plan(&self.inner, plan_id, mode).await
    }

    async fn set_plan_archived(&self, plan_id: &str, archived: bool) -> StoreResult<()> {
        lifecycle::set_plan_archived(&self.inner, plan_id, archived).await
    }

    async fn delete_plan(&self, plan_id: &str) -> StoreResult<()> {
        lifecycle::delete_plan(&self.inner, plan_id).await
    }

    async fn list_tasks(&self, plan_id: &str) -> StoreResult<Vec<TaskRecord>> {
        query::list_tasks(&self.inner, plan_id).await
    }

    async fn get_task(&self, plan_id: &str, task_id: &str) -> StoreResult<TaskRecord> {
        query::get_task(&self.inner, plan_id, task_id).await
    }

    async fn get_task_by_pk(&self, task_pk: i64) -> StoreResult<TaskRecord> {
        query::get_task_by_pk(&self.inner, task_pk).await
    }

    async fn tasks_by_ids(
        &self,
        plan_id: &str,
        task_ids: &[String],
    ) -> StoreResult<Vec<TaskRecord>> {
        query::tasks_by_ids(&self.inner, plan_id, task_ids).await
    }

    async fn counts(&self, plan_id: &str) -> StoreResult<StatusCounts> {
        query::counts(&self.inner, plan_id).await
    }
}

#[async_trait]
impl TaskQueue for PgStore {
    async fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claimed>> {
        lease::claim(&self.inner, req).await
    }

    async fn heartbeat(&self, lease: Lease, extend: Duration) -> StoreResult<()> {
        lease::heartbeat(&self.inner, lease, extend).await
    }

    async fn start(&self, lease: Lease, deadline: Option<Duration>) -> StoreResult<()> {
        lease::start(&self.inner, lease, deadline).await
    }

    async fn complete(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::complete(&self.inner, lease, outcome).await
    }

    async fn fail(
        &self,
        lease: Lease,
        mode: FailMode,
        outcome: &Outcome,
    ) -> StoreResult<TaskRecord> {
        lease::fail(&self.inner, lease, mode, outcome).await
    }

    async fn release(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::release(&self.inner, lease, outcome).await
    }

    async fn park(&self, lease: Lease, park: Park, outcome: &Outcome) -> StoreResult<TaskRecord> {
        lease::park(&self.inner, lease, park, outcome).await
    }

    async fn add_cost(&self, lease: Lease, cost: Usd) -> StoreResult<PlanRecord> {
        lease::add_cost(&self.inner, lease, cost).await
    }

    async fn reap(&self) -> StoreResult<ReapReport> {
        lease::reap(&self.inner).await
    }

    async fn skip_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord> {
        operator::skip_task(&self.inner, plan_id, task_id, reason).await
    }

    async fn reset_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord> {
        operator::reset_task(&self.inner, plan_id, task_id, reason).await
    }

    async fn approve_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord> {
        operator::approve_task(&self.inner, plan_id, task_id, payload).await
    }

    async fn reject_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord> {
        operator::reject_task(&self.inner, plan_id, task_id, payload).await
    }

    async fn split_task(
        &self,
        plan_id: &str,
        split: &crate::domain::TaskSplit,
    ) -> StoreResult<crate::store::SplitReport> {
        split::split_task(&self.inner, plan_id, split).await
    }

    async fn wait_for_work(&self, max_wait: Duration) {
        if self.inner.notify_enabled() {
            self.inner.hub.wait(max_wait).await;
        } else {
            tokio::time::sleep(max_wait).await;
        }
    }

    /// With NOTIFY on: every transaction that may make work claimable notifies, and a
    /// reconnected listener wakes everyone (what it may have missed).
    fn wakes_for_work(&self) -> bool {
        self.inner.notify_enabled()
    }
}

#[async_trait]
impl EventLog for PgStore {
    async fn events(&self, filter: &EventFilter) -> StoreResult<Vec<Event>> {
        query::events(&self.inner, filter).await
    }

    async fn append_event(&self, event: NewEvent) -> StoreResult<Event> {
        operator::append_event(&self.inner, event).await
    }

    async fn watch_events(&self) -> Box<dyn super::EventWatch> {
        Box::new(wake::PgEventWatch::new(self.inner.clone()))
    }
}

#[async_trait]
impl WorkerRegistry for PgStore {
    async fn register_worker(&self, worker: &WorkerRecord) -> StoreResult<()> {
        operator::register_worker(&self.inner, worker).await
    }

    async fn worker_heartbeat(&self, worker_id: &str) -> StoreResult<()> {
        operator::worker_heartbeat(&self.inner, worker_id).await
    }

    async fn mark_offline_workers(&self, older_than: Duration) -> StoreResult<Vec<String>> {
        operator::mark_offline_workers(&self.inner, older_than).await
    }

    async fn list_workers(&self) -> StoreResult<Vec<WorkerRecord>> {
        query::list_workers(&self.inner).await
    }

    async fn remove_worker(&self, worker_id: &str) -> StoreResult<()> {
        operator::remove_worker(&self.inner, worker_id).await
    }
}

#[async_trait]
impl PaneRelay for PgStore {
    async fn watch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()> {
        panes::watch_pane(&self.inner, task_pk, viewer).await
    }

    async fn unwatch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()> {
        panes::unwatch_pane(&self.inner, task_pk, viewer).await
    }

    async fn pane_watches(&self, task_pks: &[i64], ttl: Duration) -> StoreResult<Vec<PaneWatch>> {
        panes::pane_watches(&self.inner, task_pks, ttl).await
    }

    async fn publish_pane(&self, chunk: &PaneChunk) -> StoreResult<i64> {
        panes::publish_pane(&self.inner, chunk).await
    }

    async fn pane_chunks(&self, cursors: &[(i64, i64)], limit: i64) -> StoreResult<Vec<PaneChunk>> {
        panes::pane_chunks(&self.inner, cursors, limit).await
    }

    async fn latest_pane_snapshot(&self, task_pk: i64) -> StoreResult<Option<i64>> {
        panes::latest_pane_snapshot(&self.inner, task_pk).await
    }

    async fn prune_pane(&self, task_pk: i64, before_id: Option<i64>) -> StoreResult<u64> {
        panes::prune_pane(&self.inner, task_pk, before_id).await
    }

    async fn send_pane_input(&self, task_pk: i64, viewer: &str, data: &[u8]) -> StoreResult<()> {
        panes::send_pane_input(&self.inner, task_pk, viewer, data).await
    }

    async fn take_pane_input(&self, task_pks: &[i64]) -> StoreResult<Vec<PaneInput>> {
        panes::take_pane_input(&self.inner, task_pks).await
    }
}

#[async_trait]
impl Store for PgStore {
    fn info(&self) -> StoreInfo {
        let (applied, pending) = self
            .inner
            .migrations
            .read()
            .map(|m| m.clone())
            .unwrap_or_default();
        StoreInfo {
            backend: "postgres",
            location: self.inner.location.clone(),
            applied_migrations: applied,
            pending_migrations: pending,
        }
    }

    async fn close(&self) {
        let _ = self.inner.shutdown.send(true);
        let handle = self.inner.listener.lock().ok().and_then(|mut h| h.take());
        if let Some(h) = handle {
            let _ = h.await;
        }
        self.inner.pool.close().await;
    }
}
