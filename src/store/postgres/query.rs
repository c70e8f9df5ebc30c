//! Reads: plans, tasks, counts, events and workers. None of them take locks.

use super::Inner;
use super::rows::{
    EventRow, PlanRow, TaskRow, WorkerRow, event_cols, parse_status, plan_cols, task_cols,
};
use crate::domain::{PlanSpec, Status};
use crate::store::{
    Event, EventFilter, PlanRecord, PlanSummary, StatusCounts, StoreError, StoreResult, TaskRecord,
    WorkerRecord,
};
use futures::TryStreamExt;
use std::collections::HashMap;

pub(super) async fn get_plan(inner: &Inner, plan_id: &str) -> StoreResult<PlanRecord> {
    let row: Option<PlanRow> = sqlx::query_as(concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE id = $1"
    ))
    .bind(plan_id)
    .fetch_optional(&inner.pool)
    .await?;
    match row {
        Some(r) => r.into_record(),
        None => Err(StoreError::NotFound {
            kind: "plan",
            id: plan_id.to_string(),
        }),
    }
}

pub(super) async fn list_plans(inner: &Inner) -> StoreResult<Vec<PlanSummary>> {
    let plans: Vec<PlanRow> = sqlx::query_as(concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans ORDER BY created_at, id"
    ))
    .fetch_all(&inner.pool)
    .await?;
    let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
        "SELECT plan_id, status, count(*), count(*) FILTER (WHERE pending_deps = 0) \
         FROM tasks GROUP BY plan_id, status",
    )
    .fetch_all(&inner.pool)
    .await?;
    let mut by_plan: HashMap<String, StatusCounts> = HashMap::new();
    for (plan_id, status, n, free) in rows {
        add_count(
            by_plan.entry(plan_id.clone()).or_default(),
            &status,
            (n, free),
            &plan_id,
        )?;
    }
    plans
        .into_iter()
        .map(|p| {
            let counts = by_plan.remove(&p.id).unwrap_or_default();
            Ok(PlanSummary {
                plan: p.into_record()?,
                counts,
            })
        })
        .collect()
}

/// Adds `n` tasks in `status`, `free` of them without a pending dependency.
fn add_count(
    c: &mut StatusCounts,
    status: &str,
    (n, free): (i64, i64),
    plan_id: &str,
) -> StoreResult<()> {
    let s: Status = parse_status(status, &format!("plan {plan_id}"))?;
    let n = u64::try_from(n).unwrap_or(0);
    *c.by_status.entry(s).or_insert(0) += n;
    c.total += n;
    if s == Status::Pending {
        c.ready += u64::try_from(free).unwrap_or(0);
    }
    Ok(())
}

pub(super) async fn counts(inner: &Inner, plan_id: &str) -> StoreResult<StatusCounts> {
    get_plan(inner, plan_id).await?;
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT status, count(*), count(*) FILTER (WHERE pending_deps = 0) \
         FROM tasks WHERE plan_id = $1 GROUP BY status",
    )
    .bind(plan_id)
    .fetch_all(&inner.pool)
    .await?;
    let mut c = StatusCounts::default();
    for (status, n, free) in rows {
        add_count(&mut c, &status, (n, free), plan_id)?;
    }
    Ok(c)
}

pub(super) async fn list_tasks(inner: &Inner, plan_id: &str) -> StoreResult<Vec<TaskRecord>> {
    get_plan(inner, plan_id).await?;
    // Row by row: a plan may have 100,000 tasks; see the SQLite store's list_tasks.
    let mut rows = sqlx::query_as::<_, TaskRow>(concat!(
        "SELECT ",
        task_cols!(),
        " FROM tasks WHERE plan_id = $1 ORDER BY ord, pk"
    ))
    .bind(plan_id)
    .fetch(&inner.pool);
    let mut tasks = Vec::new();
    while let Some(r) = rows.try_next().await? {
        tasks.push(r.into_record()?);
    }
    Ok(tasks)
}

pub(super) async fn get_task(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
) -> StoreResult<TaskRecord> {
    let row: Option<TaskRow> = sqlx::query_as(concat!(
        "SELECT ",
        task_cols!(),
        " FROM tasks WHERE plan_id = $1 AND task_id = $2"
    ))
    .bind(plan_id)
    .bind(task_id)
    .fetch_optional(&inner.pool)
    .await?;
    match row {
        Some(r) => r.into_record(),
        None => Err(StoreError::NotFound {
            kind: "task",
            id: format!("{plan_id}/{task_id}"),
        }),
    }
}

pub(super) async fn get_task_by_pk(inner: &Inner, pk: i64) -> StoreResult<TaskRecord> {
    let row: Option<TaskRow> = sqlx::query_as(concat!(
        "SELECT ",
        task_cols!(),
        " FROM tasks WHERE pk = $1"
    ))
    .bind(pk)
    .fetch_optional(&inner.pool)
    .await?;
    match row {
        Some(r) => r.into_record(),
        None => Err(StoreError::NotFound {
            kind: "task",
            id: pk.to_string(),
        }),
    }
}

pub(super) async fn tasks_by_ids(
    inner: &Inner,
    plan_id: &str,
    task_ids: &[String],
) -> StoreResult<Vec<TaskRecord>> {
    let rows: Vec<TaskRow> = sqlx::query_as(concat!(
        "SELECT ",
        task_cols!(),
        " FROM tasks WHERE plan_id = $1 AND task_id = ANY($2::text[]) ORDER BY ord, pk"
    ))
    .bind(plan_id)
    .bind(task_ids)
    .fetch_all(&inner.pool)
    .await?;
    rows.into_iter().map(TaskRow::into_record).collect()
}

/// The plan's spec with its tasks in import order, each carrying its LIVE status.
pub(super) async fn export_plan(inner: &Inner, plan_id: &str) -> StoreResult<PlanSpec> {
    let plan = get_plan(inner, plan_id).await?;
    let tasks = list_tasks(inner, plan_id).await?;
    let mut spec = plan.spec;
    spec.tasks = tasks
        .into_iter()
        .map(|t| {
            let mut s = t.spec;
            s.status = Some(t.status);
            s
        })
        .collect();
    Ok(spec)
}

pub(super) async fn events(inner: &Inner, f: &EventFilter) -> StoreResult<Vec<Event>> {
    let newest = f.newest && f.limit.is_some();
    let rows: Vec<EventRow> = sqlx::query_as(concat!(
        "SELECT ",
        event_cols!(),
        " FROM events WHERE ($1::text IS NULL OR plan_id = $1) AND ($2::text IS NULL OR task_id = $2) \
         AND ($3::bigint IS NULL OR id > $3) \
         AND (cardinality($6::text[]) = 0 OR event_type = ANY($6)) \
         ORDER BY CASE WHEN $5 THEN -id ELSE id END LIMIT $4"
    ))
    .bind(&f.plan_id)
    .bind(&f.task_id)
    .bind(f.after_id)
    .bind(f.limit.filter(|n| *n >= 0))
    .bind(newest)
    .bind(&f.event_types)
    .fetch_all(&inner.pool)
    .await?;
    let mut out: Vec<Event> = rows
        .into_iter()
        .map(EventRow::into_event)
        .collect::<StoreResult<_>>()?;
    if newest {
        out.reverse();
    }
    Ok(out)
}

pub(super) async fn list_workers(inner: &Inner) -> StoreResult<Vec<WorkerRecord>> {
    let rows: Vec<WorkerRow> = sqlx::query_as(
        "SELECT id, host, slots, tags, started_at, heartbeat_at, offline_at IS NOT NULL AS offline \
         FROM workers ORDER BY id",
    )
    .fetch_all(&inner.pool)
    .await?;
    Ok(rows.into_iter().map(WorkerRecord::from).collect())
}
