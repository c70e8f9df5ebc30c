//! `whilly bench queue`: claim → complete throughput and wake latency of the real `Store`,
//! against a raw-SQL ceiling measured in the same run on the same database.
//!
//! The ceiling drives the same essential statements the store runs (claim with the same
//! predicate and order, an event insert per transition, complete with the children update) as
//! two short transactions per task, straight through sqlx with no Rust logic in between.

use crate::domain::{PlanSpec, Priority, TaskSpec};
use crate::store::postgres::PgStore;
use crate::store::sqlite::SqliteStore;
use crate::store::{ClaimRequest, ImportOptions, Outcome, Store};
use anyhow::Context as _;
use serde::Serialize;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub(crate) struct QueueBenchOptions {
    pub tasks: usize,
    pub workers: usize,
    pub wake_samples: usize,
    pub sqlite: bool,
    /// Each task lists one of this many key files (0: none), so claims take the key check; the
    /// raw ceiling does not check keys, so the ratio is what the check costs.
    pub key_files: usize,
    /// Every task on one agent limited to this many live leases (`max_parallel`), so every
    /// claim takes the limit's count; `None`: no limit, the one-statement claim on Postgres.
    pub max_parallel: Option<u32>,
    /// Server URL for Postgres (a scratch database is created on it and dropped); `None` skips it.
    pub postgres: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct BackendFigures {
    pub backend: &'static str,
    pub tasks: usize,
    pub workers: usize,
    /// The one agent's `max_parallel`, when the run had one.
    pub max_parallel: Option<u32>,
    pub import_ms: f64,
    pub store_tasks_per_sec: f64,
    pub raw_tasks_per_sec: f64,
    /// store / raw.
    pub ratio: f64,
    pub wake_p50_ms: f64,
    pub wake_p99_ms: f64,
    pub wake_samples: usize,
}

impl fmt::Display for BackendFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} — {} tasks, {} workers",
            self.backend, self.tasks, self.workers
        )?;
        match self.max_parallel {
            Some(n) => writeln!(f, ", one agent with max_parallel = {n}")?,
            None => writeln!(f)?,
        }
        writeln!(
            f,
            "  import (one transaction):     {:>10.1} ms",
            self.import_ms
        )?;
        writeln!(
            f,
            "  claim→complete, whilly Store: {:>10.0} tasks/s",
            self.store_tasks_per_sec
        )?;
        writeln!(
            f,
            "  claim→complete, raw SQL:      {:>10.0} tasks/s",
            self.raw_tasks_per_sec
        )?;
        writeln!(
            f,
            "  ratio whilly / raw:           {:>10.1} %",
            self.ratio * 100.0
        )?;
        write!(
            f,
            "  wake latency ready→claimed:   p50 {:.2} ms, p99 {:.2} ms ({} samples)",
            self.wake_p50_ms, self.wake_p99_ms, self.wake_samples
        )
    }
}

pub(crate) async fn run(opts: &QueueBenchOptions) -> anyhow::Result<Vec<BackendFigures>> {
    let mut out = Vec::new();
    if opts.sqlite {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("bench.db");
        let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, None).await?);
        let url = format!("sqlite:{}", path.display());
        out.push(
            bench_backend("sqlite", store, Raw::Sqlite(sqlite_pool(&url).await?), opts).await?,
        );
    }
    if let Some(server) = &opts.postgres {
        let scratch = Scratch::create(server).await?;
        let result = async {
            let store: Arc<dyn Store> = Arc::new(PgStore::connect(&scratch.url, None).await?);
            let pool = sqlx::postgres::PgPoolOptions::new()
                .max_connections(opts.workers as u32 + 2)
                .connect(&scratch.url)
                .await?;
            let figures = bench_backend("postgres", store.clone(), Raw::Postgres(pool), opts).await;
            store.close().await;
            figures
        }
        .await;
        scratch.drop_db().await;
        out.push(result?);
    }
    Ok(out)
}

async fn sqlite_pool(url: &str) -> anyhow::Result<sqlx::SqlitePool> {
    use sqlx::sqlite::{
        SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
    };
    use std::str::FromStr;
    let opts = SqliteConnectOptions::from_str(url)?
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(Duration::from_secs(10));
    // One connection: SQLite has one writer; competing writers would measure busy-timeout
    // sleeps, not the statements (the store also writes through one connection).
    Ok(SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(opts)
        .await?)
}

enum Raw {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

fn plan(id: &str, n: usize, key_files: usize) -> PlanSpec {
    PlanSpec {
        id: id.to_string(),
        project: id.to_string(),
        tasks: (0..n)
            .map(|i| TaskSpec {
                id: format!("T-{i:06}"),
                priority: Priority::Medium,
                description: format!("benchmark task {i} with a long enough description"),
                acceptance_criteria: vec!["done".into()],
                test_steps: vec!["true".into()],
                key_files: if key_files > 0 {
                    vec![format!("src/k{}.rs", i % key_files)]
                } else {
                    Vec::new()
                },
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

async fn bench_backend(
    backend: &'static str,
    store: Arc<dyn Store>,
    raw: Raw,
    opts: &QueueBenchOptions,
) -> anyhow::Result<BackendFigures> {
    let workers = opts.workers.max(1);
    let opts_import = ImportOptions {
        default_max_attempts: 3,
        ..Default::default()
    };

    // Whilly's Store.
    let started = Instant::now();
    store
        .import_plan(
            &plan("bench-store", opts.tasks, opts.key_files),
            &opts_import,
        )
        .await?;
    let import_ms = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let mut joins = tokio::task::JoinSet::new();
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for w in 0..workers {
        let store = store.clone();
        let finished = finished.clone();
        let total = opts.tasks;
        let max_parallel = opts.max_parallel;
        joins.spawn(async move {
            use std::sync::atomic::Ordering;
            let mut req = ClaimRequest::new(format!("bench-{w}"));
            req.plan_id = Some("bench-store".into());
            if let Some(n) = max_parallel {
                req.default_agent = "bench-agent".into();
                req.agent_limits.insert("bench-agent".into(), i64::from(n));
            }
            let mut n = 0usize;
            loop {
                match store.claim(&req).await? {
                    Some(c) => {
                        store.complete(c.lease, &Outcome::default()).await?;
                        finished.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                    // With key files, what is left may be held by the other workers' claims
                    // for a moment: wait as the engine does, until everything is done.
                    None if finished.load(Ordering::Relaxed) < total => {
                        store.wait_for_work(Duration::from_millis(20)).await;
                    }
                    None => break,
                }
            }
            Ok::<_, crate::store::StoreError>(n)
        });
    }
    let mut done = 0;
    while let Some(j) = joins.join_next().await {
        done += j??;
    }
    let store_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        done == opts.tasks,
        "store bench completed {done} of {} tasks",
        opts.tasks
    );

    // The raw-SQL ceiling, on rows the same import wrote.
    store
        .import_plan(&plan("bench-raw", opts.tasks, opts.key_files), &opts_import)
        .await?;
    let started = Instant::now();
    let raw_done = match &raw {
        Raw::Postgres(pool) => raw_pg(pool, workers).await?,
        Raw::Sqlite(pool) => raw_sqlite(pool, workers).await?,
    };
    let raw_secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        raw_done == opts.tasks,
        "raw bench completed {raw_done} of {} tasks",
        opts.tasks
    );

    let (p50, p99) = wake_latency(&store, opts.wake_samples).await?;
    let store_tps = opts.tasks as f64 / store_secs;
    let raw_tps = opts.tasks as f64 / raw_secs;
    Ok(BackendFigures {
        backend,
        tasks: opts.tasks,
        workers,
        max_parallel: opts.max_parallel,
        import_ms,
        store_tasks_per_sec: store_tps,
        raw_tasks_per_sec: raw_tps,
        ratio: store_tps / raw_tps,
        wake_p50_ms: p50,
        wake_p99_ms: p99,
        wake_samples: opts.wake_samples,
    })
}

const PG_CLAIM: &str = "WITH c AS MATERIALIZED ( \
    SELECT pk FROM tasks WHERE status = 'PENDING' AND pending_deps = 0 AND plan_id = $1 \
    ORDER BY priority_rank, task_id LIMIT 1 FOR UPDATE SKIP LOCKED) \
  UPDATE tasks t SET status = 'CLAIMED', epoch = t.epoch + 1, attempts = t.attempts + 1, \
    worker_id = $2, lease_expires_at = now() + interval '30 seconds', updated_at = now() \
  FROM c WHERE t.pk = c.pk RETURNING t.pk, t.epoch, t.task_id";
const PG_EVENT: &str = "INSERT INTO events (event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload) \
  VALUES ($1, $2, $3, $4, $5, $6, $7, '{}'::jsonb)";
const PG_COMPLETE: &str = "UPDATE tasks SET status = 'DONE', worker_id = NULL, lease_expires_at = NULL, updated_at = now() \
  WHERE pk = $1 AND epoch = $2 AND status IN ('CLAIMED', 'IN_PROGRESS')";
const PG_CHILDREN: &str = "UPDATE tasks SET pending_deps = pending_deps - 1 \
  WHERE pk IN (SELECT task_pk FROM task_deps WHERE depends_on_pk = $1)";

async fn raw_pg(pool: &sqlx::PgPool, workers: usize) -> anyhow::Result<usize> {
    let mut joins = tokio::task::JoinSet::new();
    for w in 0..workers {
        let pool = pool.clone();
        joins.spawn(async move {
            let worker = format!("raw-{w}");
            let mut n = 0usize;
            loop {
                let mut tx = pool.begin().await?;
                let row: Option<(i64, i64, String)> = sqlx::query_as(PG_CLAIM)
                    .bind("bench-raw")
                    .bind(&worker)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some((pk, epoch, task_id)) = row else {
                    break;
                };
                sqlx::query(PG_EVENT)
                    .bind("task.claimed")
                    .bind("bench-raw")
                    .bind(&task_id)
                    .bind(&worker)
                    .bind(epoch)
                    .bind("PENDING")
                    .bind("CLAIMED")
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                let mut tx = pool.begin().await?;
                sqlx::query(PG_COMPLETE)
                    .bind(pk)
                    .bind(epoch)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(PG_CHILDREN).bind(pk).execute(&mut *tx).await?;
                sqlx::query(PG_EVENT)
                    .bind("task.done")
                    .bind("bench-raw")
                    .bind(&task_id)
                    .bind(&worker)
                    .bind(epoch)
                    .bind("CLAIMED")
                    .bind("DONE")
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                n += 1;
            }
            Ok::<_, sqlx::Error>(n)
        });
    }
    let mut total = 0;
    while let Some(j) = joins.join_next().await {
        total += j??;
    }
    Ok(total)
}

const NOW_MS: &str = "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)";

async fn raw_sqlite(pool: &sqlx::SqlitePool, workers: usize) -> anyhow::Result<usize> {
    let claim = format!(
        "UPDATE tasks SET status = 'CLAIMED', epoch = epoch + 1, attempts = attempts + 1, worker_id = ?1, \
           lease_expires_at = {NOW_MS} + 30000, updated_at = {NOW_MS} \
         WHERE pk = (SELECT pk FROM tasks WHERE status = 'PENDING' AND pending_deps = 0 AND plan_id = ?2 \
                     ORDER BY priority_rank, task_id LIMIT 1) \
         RETURNING pk, epoch, task_id"
    );
    let event = format!(
        "INSERT INTO events (ts, event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload) \
         VALUES ({NOW_MS}, ?1, ?2, ?3, ?4, ?5, ?6, ?7, '{{}}')"
    );
    let complete = format!(
        "UPDATE tasks SET status = 'DONE', worker_id = NULL, lease_expires_at = NULL, updated_at = {NOW_MS} \
         WHERE pk = ?1 AND epoch = ?2 AND status IN ('CLAIMED', 'IN_PROGRESS')"
    );
    let children = "UPDATE tasks SET pending_deps = pending_deps - 1 WHERE pk IN (SELECT task_pk FROM task_deps WHERE depends_on_pk = ?1)";
    let mut joins = tokio::task::JoinSet::new();
    for w in 0..workers {
        let pool = pool.clone();
        let (claim, event, complete) = (claim.clone(), event.clone(), complete.clone());
        joins.spawn(async move {
            let worker = format!("raw-{w}");
            let mut n = 0usize;
            loop {
                let mut conn = pool.acquire().await?;
                sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
                let row: Option<(i64, i64, String)> =
                    sqlx::query_as(sqlx::AssertSqlSafe(claim.as_str()))
                        .bind(&worker)
                        .bind("bench-raw")
                        .fetch_optional(&mut *conn)
                        .await?;
                let Some((pk, epoch, task_id)) = row else {
                    sqlx::query("COMMIT").execute(&mut *conn).await?;
                    break;
                };
                sqlx::query(sqlx::AssertSqlSafe(event.as_str()))
                    .bind("task.claimed")
                    .bind("bench-raw")
                    .bind(&task_id)
                    .bind(&worker)
                    .bind(epoch)
                    .bind("PENDING")
                    .bind("CLAIMED")
                    .execute(&mut *conn)
                    .await?;
                sqlx::query("COMMIT").execute(&mut *conn).await?;
                sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
                sqlx::query(sqlx::AssertSqlSafe(complete.as_str()))
                    .bind(pk)
                    .bind(epoch)
                    .execute(&mut *conn)
                    .await?;
                sqlx::query(children).bind(pk).execute(&mut *conn).await?;
                sqlx::query(sqlx::AssertSqlSafe(event.as_str()))
                    .bind("task.done")
                    .bind("bench-raw")
                    .bind(&task_id)
                    .bind(&worker)
                    .bind(epoch)
                    .bind("CLAIMED")
                    .bind("DONE")
                    .execute(&mut *conn)
                    .await?;
                sqlx::query("COMMIT").execute(&mut *conn).await?;
                n += 1;
            }
            Ok::<_, sqlx::Error>(n)
        });
    }
    let mut total = 0;
    while let Some(j) = joins.join_next().await {
        total += j??;
    }
    Ok(total)
}

/// Ready → claimed: a worker waits for work; a one-task plan is imported; the time until that
/// worker holds the task is one sample.
async fn wake_latency(store: &Arc<dyn Store>, samples: usize) -> anyhow::Result<(f64, f64)> {
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples {
        let id = format!("wake-{i}");
        let waiter = {
            let store = store.clone();
            let id = id.clone();
            tokio::spawn(async move {
                let mut req = ClaimRequest::new("bench-waiter");
                req.plan_id = Some(id);
                loop {
                    if let Some(c) = store.claim(&req).await? {
                        let at = Instant::now();
                        store.complete(c.lease, &Outcome::default()).await?;
                        return Ok::<_, crate::store::StoreError>(at);
                    }
                    store.wait_for_work(Duration::from_secs(2)).await;
                }
            })
        };
        // Let the waiter reach its wait before the work appears.
        tokio::time::sleep(Duration::from_millis(15)).await;
        let t0 = Instant::now();
        store
            .import_plan(
                &plan(&id, 1, 0),
                &ImportOptions {
                    default_max_attempts: 3,
                    ..Default::default()
                },
            )
            .await?;
        let claimed_at = waiter.await.context("wake waiter")??;
        lat.push(claimed_at.saturating_duration_since(t0).as_secs_f64() * 1000.0);
    }
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let idx = ((lat.len() as f64 - 1.0) * p).round() as usize;
        lat[idx.min(lat.len() - 1)]
    };
    Ok((pct(0.50), pct(0.99)))
}

/// A throwaway database on a Postgres server.
pub(crate) struct Scratch {
    admin: String,
    pub(crate) name: String,
    pub(crate) url: String,
}

impl Scratch {
    pub(crate) async fn create(server: &str) -> anyhow::Result<Scratch> {
        use sqlx::Connection;
        let name = format!("whilly_bench_{:08x}", rand::random::<u32>());
        let mut conn = sqlx::PgConnection::connect(server).await.with_context(|| {
            format!(
                "cannot reach Postgres at {}",
                crate::store::redact_url(server)
            )
        })?;
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await?;
        let url = replace_db(server, &name);
        Ok(Scratch {
            admin: server.to_string(),
            name,
            url,
        })
    }

    pub(crate) async fn drop_db(&self) {
        use sqlx::Connection;
        if let Ok(mut conn) = sqlx::PgConnection::connect(&self.admin).await {
            let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            )))
            .execute(&mut conn)
            .await;
        }
    }
}

/// `url` with its database name replaced.
fn replace_db(url: &str, db: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let path_start = base[scheme_end..].find('/').map(|i| i + scheme_end);
    let host = match path_start {
        Some(i) => &base[..i],
        None => base,
    };
    match query {
        Some(q) => format!("{host}/{db}?{q}"),
        None => format!("{host}/{db}"),
    }
}

#[cfg(test)]
mod tests {
    use super::replace_db;

    #[test]
    fn database_name_is_replaced() {
        assert_eq!(
            replace_db("postgres://u@h:5432/postgres", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(replace_db("postgres://h", "x"), "postgres://h/x");
        assert_eq!(
            replace_db("postgres://h/db?sslmode=disable", "x"),
            "postgres://h/x?sslmode=disable"
        );
    }
}
