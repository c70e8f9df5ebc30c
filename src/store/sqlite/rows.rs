//! Row → record decoding for the SQLite store. Times are integer milliseconds since the epoch.

use crate::domain::{PlanSpec, Priority, TaskSpec, Usd};
use crate::store::error::{StoreError, StoreResult};
use crate::store::sql_common::{decode_json, event_cols, parse_status, plan_cols, task_cols};
use crate::store::types::{Event, PlanRecord, TaskRecord, WorkerRecord};
use chrono::{DateTime, TimeZone, Utc};
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

/// The database clock in milliseconds. Rounded: `unixepoch('subsec')` is a float.
pub(super) const NOW_MS: &str = "SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)";

/// The task columns every task query selects, in the order [`task`] reads them.
pub(super) const TASK_COLS: &str = task_cols!();

pub(super) const PLAN_COLS: &str = plan_cols!();

pub(super) const EVENT_COLS: &str = event_cols!();

pub(super) const WORKER_COLS: &str = "id, host, slots, tags, started_at, heartbeat_at, offline_at";

pub(super) fn time(ms: i64) -> StoreResult<DateTime<Utc>> {
    Utc.timestamp_millis_opt(ms)
        .single()
        .ok_or_else(|| StoreError::Corrupt(format!("timestamp {ms} ms is out of range")))
}

fn opt_time(ms: Option<i64>) -> StoreResult<Option<DateTime<Utc>>> {
    ms.map(time).transpose()
}

pub(super) fn task(r: &SqliteRow) -> StoreResult<TaskRecord> {
    let spec_text: String = r.try_get("spec")?;
    let spec: TaskSpec = decode_json(&spec_text, "tasks.spec")?;
    Ok(TaskRecord {
        pk: r.try_get("pk")?,
        plan_id: r.try_get("plan_id")?,
        id: r.try_get("task_id")?,
        status: parse_status(&r.try_get::<String, _>("status")?, "tasks.status")?,
        priority: Priority::from_rank(r.try_get("priority_rank")?),
        pending_deps: r.try_get("pending_deps")?,
        epoch: r.try_get("epoch")?,
        attempts: r.try_get("attempts")?,
        max_attempts: r.try_get("max_attempts")?,
        worker_id: r.try_get("worker_id")?,
        lease_expires_at: opt_time(r.try_get("lease_expires_at")?)?,
        deadline_at: opt_time(r.try_get("deadline_at")?)?,
        cost: Usd(r.try_get("cost_micros")?),
        reserved: Usd(r.try_get("reserved_micros")?),
        reason: r.try_get("reason")?,
        spec,
        updated_at: time(r.try_get("updated_at")?)?,
    })
}

pub(super) fn plan(r: &SqliteRow) -> StoreResult<PlanRecord> {
    let spec_text: String = r.try_get("spec")?;
    let spec: PlanSpec = decode_json(&spec_text, "plans.spec")?;
    Ok(PlanRecord {
        id: r.try_get("id")?,
        project: r.try_get("project")?,
        paused: r.try_get::<i64, _>("paused")? != 0,
        budget: r.try_get::<Option<i64>, _>("budget_micros")?.map(Usd),
        spent: Usd(r.try_get("spent_micros")?),
        reserved: Usd(r.try_get("reserved_micros")?),
        spec,
        created_at: time(r.try_get("created_at")?)?,
        updated_at: time(r.try_get("updated_at")?)?,
        archived_at: opt_time(r.try_get("archived_at")?)?,
    })
}

pub(super) fn event(r: &SqliteRow) -> StoreResult<Event> {
    let payload: String = r.try_get("payload")?;
    let status = |col: &str| -> StoreResult<_> {
        r.try_get::<Option<String>, _>(col)?
            .as_deref()
            .map(|s| parse_status(s, col))
            .transpose()
    };
    Ok(Event {
        id: r.try_get("id")?,
        ts: time(r.try_get("ts")?)?,
        event_type: r.try_get("event_type")?,
        plan_id: r.try_get("plan_id")?,
        task_id: r.try_get("task_id")?,
        worker_id: r.try_get("worker_id")?,
        epoch: r.try_get("epoch")?,
        from_status: status("from_status")?,
        to_status: status("to_status")?,
        payload: decode_json(&payload, "events.payload")?,
    })
}

pub(super) fn worker(r: &SqliteRow) -> StoreResult<WorkerRecord> {
    let tags: String = r.try_get("tags")?;
    Ok(WorkerRecord {
        id: r.try_get("id")?,
        host: r.try_get("host")?,
        slots: r.try_get("slots")?,
        tags: decode_json(&tags, "workers.tags")?,
        started_at: time(r.try_get("started_at")?)?,
        heartbeat_at: time(r.try_get("heartbeat_at")?)?,
        offline: r.try_get::<Option<i64>, _>("offline_at")?.is_some(),
    })
}
