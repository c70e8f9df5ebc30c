//! Operator actions (no lease), plan pause/reset, free-form events and worker registrations.

use super::Shared;
use super::rows::{self, TASK_COLS};
use super::tx::{Ev, Move, WriteTx};
use crate::domain::{Action, Status, transition};
use crate::store::NewEvent;
use crate::store::error::{StoreError, StoreResult};
use crate::store::event_types as et;
use crate::store::sql_common::{encode_json, millis, payload};
use crate::store::types::*;
use serde_json::{Value, json};
use sqlx::AssertSqlSafe;
use std::time::Duration;

fn check(t: &TaskRecord, action: Action) -> StoreResult<Status> {
    transition(t.status, action).map_err(|source| StoreError::Illegal {
        task_id: t.id.clone(),
        source,
    })
}

/// Whether the plan is paused; `NotFound` when there is no such plan.
async fn plan_paused(tx: &mut WriteTx<'_>, plan_id: &str) -> StoreResult<bool> {
    let row: Option<i64> = sqlx::query_scalar("SELECT paused FROM plans WHERE id = ?")
        .bind(plan_id)
        .fetch_optional(tx.conn())
        .await?;
    match row {
        Some(p) => Ok(p != 0),
        None => Err(StoreError::NotFound {
            kind: "plan",
            id: plan_id.to_string(),
        }),
    }
}

pub(super) async fn set_plan_paused(s: &Shared, plan_id: &str, paused: bool) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    let was = plan_paused(&mut tx, plan_id).await?;
    if was == paused {
        // Already so: nothing changes, so nothing is recorded.
        return Ok(());
    }
    sqlx::query("UPDATE plans SET paused = ?, updated_at = ? WHERE id = ?")
        .bind(paused)
        .bind(tx.now)
        .bind(plan_id)
        .execute(tx.conn())
        .await?;
    let ev = if paused {
        et::PLAN_PAUSED
    } else {
        et::PLAN_RESUMED
    };
    tx.event(Ev::plan(ev, plan_id, payload::empty())).await?;
    if !paused {
        tx.wake();
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn reset_plan(s: &Shared, plan_id: &str, mode: ResetMode) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    plan_paused(&mut tx, plan_id).await?;
    let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE plan_id = ? ORDER BY pk");
    let tasks = sqlx::query(AssertSqlSafe(sql))
        .bind(plan_id)
        .fetch_all(tx.conn())
        .await?
        .iter()
        .map(rows::task)
        .collect::<StoreResult<Vec<_>>>()?;
    let mut evs = Vec::new();
    match mode {
        ResetMode::KeepTasks => {
            // Leased work is refused rather than yanked from a worker mid-attempt.
            if let Some(t) = tasks
                .iter()
                .find(|t| transition(t.status, Action::Reset).is_err())
            {
                return Err(StoreError::Refused {
                    task_id: t.id.clone(),
                    status: t.status,
                    message: format!(
                        "plan {plan_id} still has work under a lease; stop its workers (or wait \
                         for the reaper) and reset again"
                    ),
                });
            }
            sqlx::query(
                "UPDATE tasks SET status = 'PENDING', attempts = 0, cost_micros = 0, \
                   reserved_micros = 0, reason = NULL, worker_id = NULL, lease_expires_at = NULL, \
                   deadline_at = NULL, \
                   pending_deps = (SELECT COUNT(*) FROM task_deps d WHERE d.task_pk = tasks.pk), \
                   updated_at = ? \
                 WHERE plan_id = ?",
            )
            .bind(tx.now)
            .bind(plan_id)
            .execute(tx.conn())
            .await?;
            // One task.reset per task that moved, so replaying events reproduces the states.
            for t in tasks
                .iter()
                .filter(|t| t.status != Status::Pending || t.attempts != 0)
            {
                evs.push(Ev::task(
                    et::TASK_RESET,
                    t,
                    Status::Pending,
                    payload::plan_reset_task(),
                ));
            }
        }
        ResetMode::Hard => {
            sqlx::query("DELETE FROM tasks WHERE plan_id = ?")
                .bind(plan_id)
                .execute(tx.conn())
                .await?;
        }
    }
    sqlx::query(
        "UPDATE plans SET spent_micros = 0, reserved_micros = 0, updated_at = ? WHERE id = ?",
    )
    .bind(tx.now)
    .bind(plan_id)
    .execute(tx.conn())
    .await?;
    let hard = mode == ResetMode::Hard;
    evs.push(Ev::plan(
        et::PLAN_RESET,
        plan_id,
        payload::plan_reset(hard, tasks.len()),
    ));
    tx.events_bulk(evs).await?;
    tx.wake();
    tx.commit().await?;
    Ok(())
}

async fn operator_move(
    s: &Shared,
    plan_id: &str,
    task_id: &str,
    action: Action,
    build: impl FnOnce(&TaskRecord, Status) -> Move,
) -> StoreResult<TaskRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.task_by_id(plan_id, task_id).await?;
    let to = check(&t, action)?;
    let m = build(&t, to);
    let after = tx
        .apply_move(&t, m)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("task {task_id} changed under a write lock")))?;
    tx.commit().await?;
    Ok(after)
}

pub(super) async fn skip_task(
    s: &Shared,
    plan_id: &str,
    task_id: &str,
    reason: &str,
) -> StoreResult<TaskRecord> {
    operator_move(s, plan_id, task_id, Action::Skip, |t, to| {
        let mut m = Move::new(to, et::TASK_SKIPPED, payload::operator(reason));
        m.reason = Some(reason.to_string());
        // A worker still holding the task is fenced out: its next write is stale.
        m.bump_epoch = t.status.is_leased();
        m
    })
    .await
}

pub(super) async fn reset_task(
    s: &Shared,
    plan_id: &str,
    task_id: &str,
    reason: &str,
) -> StoreResult<TaskRecord> {
    operator_move(s, plan_id, task_id, Action::Reset, |_, to| {
        let mut m = Move::new(to, et::TASK_RESET, payload::operator(reason));
        m.reset_attempts = true;
        m
    })
    .await
}

pub(super) async fn approve_task(
    s: &Shared,
    plan_id: &str,
    task_id: &str,
    payload: Value,
) -> StoreResult<TaskRecord> {
    operator_move(s, plan_id, task_id, Action::Approve, |_, to| {
        Move::new(to, et::TASK_APPROVED, payload)
    })
    .await
}

pub(super) async fn reject_task(
    s: &Shared,
    plan_id: &str,
    task_id: &str,
    payload: Value,
) -> StoreResult<TaskRecord> {
    operator_move(s, plan_id, task_id, Action::Reject, |_, to| {
        Move::new(to, et::TASK_REJECTED, payload)
    })
    .await
}

pub(super) async fn append_event(s: &Shared, e: NewEvent) -> StoreResult<Event> {
    let ev = Ev::appended(e)?;
    let mut tx = WriteTx::begin(s).await?;
    let ev = tx.event(ev).await?;
    tx.commit().await?;
    Ok(ev)
}

pub(super) async fn register_worker(s: &Shared, w: &WorkerRecord) -> StoreResult<()> {
    let tags = encode_json(&w.tags, "worker tags")?;
    let mut tx = WriteTx::begin(s).await?;
    sqlx::query(
        "INSERT INTO workers (id, host, slots, tags, started_at, heartbeat_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?5) \
         ON CONFLICT (id) DO UPDATE SET host = excluded.host, slots = excluded.slots, \
           tags = excluded.tags, started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at",
    )
    .bind(&w.id)
    .bind(&w.host)
    .bind(w.slots)
    .bind(tags)
    .bind(tx.now)
    .execute(tx.conn())
    .await?;
    let ev = Ev {
        event_type: et::WORKER_REGISTERED.to_string(),
        worker_id: Some(w.id.clone()),
        payload: json!({ "host": w.host, "slots": w.slots, "tags": w.tags }),
        ..Default::default()
    };
    tx.event(ev).await?;
    tx.commit().await?;
    Ok(())
}

pub(super) async fn worker_heartbeat(s: &Shared, worker_id: &str) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    let done = sqlx::query("UPDATE workers SET heartbeat_at = ?, offline_at = NULL WHERE id = ?")
        .bind(tx.now)
        .bind(worker_id)
        .execute(tx.conn())
        .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::NotFound {
            kind: "worker",
            id: worker_id.to_string(),
        });
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn mark_offline_workers(
    s: &Shared,
    older_than: Duration,
) -> StoreResult<Vec<String>> {
    // Read first: an idle queue has nothing to mark, and that must not take the write lock.
    let cutoff = chrono::Utc::now().timestamp_millis() - millis(older_than);
    let any: Option<String> = sqlx::query_scalar(
        "SELECT id FROM workers WHERE offline_at IS NULL AND heartbeat_at < ? LIMIT 1",
    )
    .bind(cutoff)
    .fetch_optional(&s.reader)
    .await?;
    if any.is_none() {
        return Ok(Vec::new());
    }
    let mut tx = WriteTx::begin(s).await?;
    let cutoff = tx.now - millis(older_than);
    let gone: Vec<(String, i64)> = sqlx::query_as(
        "UPDATE workers SET offline_at = ?1 WHERE offline_at IS NULL AND heartbeat_at < ?2 \
         RETURNING id, ?1 - heartbeat_at",
    )
    .bind(tx.now)
    .bind(cutoff)
    .fetch_all(tx.conn())
    .await?;
    for (id, silent_ms) in &gone {
        let ev = Ev {
            event_type: et::WORKER_OFFLINE.to_string(),
            worker_id: Some(id.clone()),
            payload: json!({ "silent_ms": silent_ms }),
            ..Default::default()
        };
        tx.event(ev).await?;
    }
    tx.commit().await?;
    Ok(gone.into_iter().map(|(id, _)| id).collect())
}

pub(super) async fn remove_worker(s: &Shared, worker_id: &str) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    let done = sqlx::query("DELETE FROM workers WHERE id = ?")
        .bind(worker_id)
        .execute(tx.conn())
        .await?;
    if done.rows_affected() > 0 {
        let ev = Ev {
            event_type: et::WORKER_STOPPED.to_string(),
            worker_id: Some(worker_id.to_string()),
            ..Default::default()
        };
        tx.event(ev).await?;
    }
    tx.commit().await?;
    Ok(())
}
