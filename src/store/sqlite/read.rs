//! Reads: plans, tasks, counts, events, workers, export, and waiting for work.

use super::Shared;
use super::rows::{self, EVENT_COLS, PLAN_COLS, TASK_COLS, WORKER_COLS};
use crate::domain::{PlanSpec, Status};
use crate::store::error::{StoreError, StoreResult};
use crate::store::sql_common::parse_status;
use crate::store::types::*;
use futures::TryStreamExt;
use sqlx::sqlite::{Sqlite, SqlitePool};
use sqlx::{AssertSqlSafe, QueryBuilder, Row};
use std::collections::BTreeMap;

pub(super) async fn get_plan(pool: &SqlitePool, plan_id: &str) -> StoreResult<PlanRecord> {
    let sql = format!("SELECT {PLAN_COLS} FROM plans WHERE id = ?");
    match sqlx::query(AssertSqlSafe(sql))
        .bind(plan_id)
        .fetch_optional(pool)
        .await?
    {
        Some(r) => rows::plan(&r),
        None => Err(StoreError::NotFound {
            kind: "plan",
            id: plan_id.to_string(),
        }),
    }
}

pub(super) async fn list_plans(s: &Shared) -> StoreResult<Vec<PlanSummary>> {
    let sql = format!("SELECT {PLAN_COLS} FROM plans ORDER BY created_at, id");
    let plans = sqlx::query(AssertSqlSafe(sql)).fetch_all(&s.reader).await?;
    let count_rows = sqlx::query(
        "SELECT plan_id, status, COUNT(*) AS n, SUM(pending_deps = 0) AS free \
         FROM tasks GROUP BY plan_id, status",
    )
    .fetch_all(&s.reader)
    .await?;
    let mut counts: BTreeMap<String, StatusCounts> = BTreeMap::new();
    for r in &count_rows {
        let plan_id: String = r.try_get("plan_id")?;
        add_count(counts.entry(plan_id).or_default(), r)?;
    }
    plans
        .iter()
        .map(|r| {
            let plan = rows::plan(r)?;
            let counts = counts.remove(&plan.id).unwrap_or_default();
            Ok(PlanSummary { plan, counts })
        })
        .collect()
}

pub(super) async fn list_tasks(s: &Shared, plan_id: &str) -> StoreResult<Vec<TaskRecord>> {
    get_plan(&s.reader, plan_id).await?;
    let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE plan_id = ? ORDER BY ord, pk");
    // Row by row: a plan may have 100,000 tasks, and holding all the raw rows besides the
    // records doubled the peak (the allocator keeps most of a peak as resident memory).
    let mut rows = sqlx::query(AssertSqlSafe(sql))
        .bind(plan_id)
        .fetch(&s.reader);
    let mut tasks = Vec::new();
    while let Some(r) = rows.try_next().await? {
        tasks.push(rows::task(&r)?);
    }
    Ok(tasks)
}

pub(super) async fn get_task(s: &Shared, plan_id: &str, task_id: &str) -> StoreResult<TaskRecord> {
    let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE plan_id = ? AND task_id = ?");
    match sqlx::query(AssertSqlSafe(sql))
        .bind(plan_id)
        .bind(task_id)
        .fetch_optional(&s.reader)
        .await?
    {
        Some(r) => rows::task(&r),
        None => Err(StoreError::NotFound {
            kind: "task",
            id: format!("{plan_id}/{task_id}"),
        }),
    }
}

pub(super) async fn get_task_by_pk(s: &Shared, pk: i64) -> StoreResult<TaskRecord> {
    let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE pk = ?");
    match sqlx::query(AssertSqlSafe(sql))
        .bind(pk)
        .fetch_optional(&s.reader)
        .await?
    {
        Some(r) => rows::task(&r),
        None => Err(StoreError::NotFound {
            kind: "task",
            id: pk.to_string(),
        }),
    }
}

/// Ids bound per statement (well under SQLite's parameter limit).
const IDS_PER_QUERY: usize = 500;

pub(super) async fn tasks_by_ids(
    s: &Shared,
    plan_id: &str,
    task_ids: &[String],
) -> StoreResult<Vec<TaskRecord>> {
    let mut out = Vec::with_capacity(task_ids.len());
    for chunk in task_ids.chunks(IDS_PER_QUERY) {
        let mut qb = QueryBuilder::<Sqlite>::new(format!(
            "SELECT {TASK_COLS}, ord FROM tasks WHERE plan_id = "
        ));
        qb.push_bind(plan_id).push(" AND task_id IN (");
        let mut ids = qb.separated(", ");
        for id in chunk {
            ids.push_bind(id.clone());
        }
        qb.push(")");
        for r in qb.build().fetch_all(&s.reader).await? {
            out.push((r.try_get::<i64, _>("ord")?, rows::task(&r)?));
        }
    }
    out.sort_by_key(|(ord, t)| (*ord, t.pk));
    Ok(out.into_iter().map(|(_, t)| t).collect())
}

pub(super) async fn counts(s: &Shared, plan_id: &str) -> StoreResult<StatusCounts> {
    get_plan(&s.reader, plan_id).await?;
    let all = sqlx::query(
        "SELECT status, COUNT(*) AS n, SUM(pending_deps = 0) AS free \
         FROM tasks WHERE plan_id = ? GROUP BY status",
    )
    .bind(plan_id)
    .fetch_all(&s.reader)
    .await?;
    let mut c = StatusCounts::default();
    for r in &all {
        add_count(&mut c, r)?;
    }
    Ok(c)
}

/// Adds a `status, n, free` row (`free`: tasks without a pending dependency).
fn add_count(c: &mut StatusCounts, r: &sqlx::sqlite::SqliteRow) -> StoreResult<()> {
    let status: Status = parse_status(&r.try_get::<String, _>("status")?, "tasks.status")?;
    let n = u64::try_from(r.try_get::<i64, _>("n")?).unwrap_or(0);
    *c.by_status.entry(status).or_default() += n;
    c.total += n;
    if status == Status::Pending {
        c.ready += u64::try_from(r.try_get::<i64, _>("free")?).unwrap_or(0);
    }
    Ok(())
}

/// The plan spec with its tasks in import order, each carrying its live status.
pub(super) async fn export_plan(s: &Shared, plan_id: &str) -> StoreResult<PlanSpec> {
    let plan = get_plan(&s.reader, plan_id).await?;
    let tasks = list_tasks(s, plan_id).await?;
    let mut spec = plan.spec;
    spec.id = plan.id;
    spec.budget_usd = plan.budget;
    spec.tasks = tasks
        .into_iter()
        .map(|t| {
            let mut ts = t.spec;
            ts.status = Some(t.status);
            ts
        })
        .collect();
    Ok(spec)
}

pub(super) async fn events(s: &Shared, f: &EventFilter) -> StoreResult<Vec<Event>> {
    let mut qb =
        QueryBuilder::<Sqlite>::new(format!("SELECT {EVENT_COLS} FROM events WHERE 1 = 1"));
    if let Some(p) = &f.plan_id {
        qb.push(" AND plan_id = ").push_bind(p.clone());
    }
    if let Some(t) = &f.task_id {
        qb.push(" AND task_id = ").push_bind(t.clone());
    }
    if let Some(a) = f.after_id {
        qb.push(" AND id > ").push_bind(a);
    }
    if !f.event_types.is_empty() {
        qb.push(" AND event_type IN (");
        let mut types = qb.separated(", ");
        for t in &f.event_types {
            types.push_bind(t.clone());
        }
        qb.push(")");
    }
    qb.push(if f.newest && f.limit.is_some() {
        " ORDER BY id DESC"
    } else {
        " ORDER BY id"
    });
    if let Some(l) = f.limit {
        qb.push(" LIMIT ").push_bind(l.max(0));
    }
    let all = qb.build().fetch_all(&s.reader).await?;
    let mut out: Vec<Event> = all.iter().map(rows::event).collect::<StoreResult<_>>()?;
    if f.newest && f.limit.is_some() {
        out.reverse();
    }
    Ok(out)
}

pub(super) async fn list_workers(s: &Shared) -> StoreResult<Vec<WorkerRecord>> {
    let sql = format!("SELECT {WORKER_COLS} FROM workers ORDER BY id");
    let all = sqlx::query(AssertSqlSafe(sql)).fetch_all(&s.reader).await?;
    all.iter().map(rows::worker).collect()
}

pub(super) async fn last_event_id(s: &Shared) -> Option<i64> {
    sqlx::query_scalar::<_, i64>("SELECT COALESCE(MAX(id), 0) FROM events")
        .fetch_one(&s.reader)
        .await
        .ok()
}
