//! Operator actions (no lease): skip, reset, approve, reject, pause, plan reset; plus the writes
//! that are not task transitions (free events, worker registrations).

use super::Inner;
use super::lease::{illegal, retrying};
use super::rows::{PlanRow, TaskRow, plan_cols, task_cols};
use super::tx::{Ev, Move, Tx};
use crate::domain::{Action, Status, transition};
use crate::store::event_types as et;
use crate::store::sql_common::{millis, payload};
use crate::store::{Event, NewEvent, ResetMode, StoreError, StoreResult, TaskRecord, WorkerRecord};
use serde_json::json;
use std::time::Duration;

async fn lock_plan(tx: &mut Tx, plan_id: &str) -> StoreResult<PlanRow> {
    let row: Option<PlanRow> = sqlx::query_as(concat!(
        "SELECT ",
        plan_cols!(),
        " FROM plans WHERE id = $1 FOR UPDATE"
    ))
    .bind(plan_id)
    .fetch_optional(&mut *tx.tx)
    .await?;
    row.ok_or_else(|| StoreError::NotFound {
        kind: "plan",
        id: plan_id.to_string(),
    })
}

/// Moves one task by an operator's `action`. A leased task that is moved gets a new epoch, so
/// the worker still running it is fenced out.
async fn operate(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
    action: Action,
    build: impl Fn(&TaskRecord, Status) -> Move,
) -> StoreResult<TaskRecord> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let t = tx.task_by_id(plan_id, task_id).await?;
        let to = transition(t.status, action).map_err(illegal(&t))?;
        let mut m = build(&t, to);
        m.bump_epoch = t.status.is_leased();
        let after = tx.apply_move(&t, m).await?;
        tx.commit(inner).await?;
        Ok(after)
    })
    .await
}

pub(super) async fn skip_task(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
    reason: &str,
) -> StoreResult<TaskRecord> {
    operate(inner, plan_id, task_id, Action::Skip, |_, to| Move {
        reason: Some(reason.to_string()),
        ..Move::new(to, et::TASK_SKIPPED, payload::operator(reason))
    })
    .await
}

pub(super) async fn reset_task(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
    reason: &str,
) -> StoreResult<TaskRecord> {
    operate(inner, plan_id, task_id, Action::Reset, |_, to| Move {
        // A fresh start: the why of the reset lives in the event, not on the row.
        reason: None,
        reset_attempts: true,
        ..Move::new(to, et::TASK_RESET, payload::operator(reason))
    })
    .await
}

pub(super) async fn approve_task(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
    payload: serde_json::Value,
) -> StoreResult<TaskRecord> {
    operate(inner, plan_id, task_id, Action::Approve, |_, to| {
        Move::new(to, et::TASK_APPROVED, payload.clone())
    })
    .await
}

pub(super) async fn reject_task(
    inner: &Inner,
    plan_id: &str,
    task_id: &str,
    payload: serde_json::Value,
) -> StoreResult<TaskRecord> {
    operate(inner, plan_id, task_id, Action::Reject, |_, to| {
        Move::new(to, et::TASK_REJECTED, payload.clone())
    })
    .await
}

pub(super) async fn set_plan_paused(inner: &Inner, plan_id: &str, paused: bool) -> StoreResult<()> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let plan = lock_plan(&mut tx, plan_id).await?;
        if plan.paused == paused {
            return Ok(());
        }
        sqlx::query("UPDATE plans SET paused = $2, updated_at = now() WHERE id = $1")
            .bind(plan_id)
            .bind(paused)
            .execute(&mut *tx.tx)
            .await?;
        let event_type = if paused {
            et::PLAN_PAUSED
        } else {
            et::PLAN_RESUMED
        };
        tx.event(Ev::plan(event_type, plan_id, payload::empty()))
            .await?;
        if !paused {
            tx.wake(plan_id);
        }
        tx.commit(inner).await?;
        Ok(())
    })
    .await
}

pub(super) async fn reset_plan(inner: &Inner, plan_id: &str, mode: ResetMode) -> StoreResult<()> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        lock_plan(&mut tx, plan_id).await?;
        match mode {
            ResetMode::KeepTasks => reset_keep_tasks(&mut tx, plan_id).await?,
            ResetMode::Hard => {
                let n = sqlx::query("DELETE FROM tasks WHERE plan_id = $1")
                    .bind(plan_id)
                    .execute(&mut *tx.tx)
                    .await?
                    .rows_affected();
                sqlx::query("UPDATE plans SET spent_micros = 0, reserved_micros = 0, updated_at = now() WHERE id = $1")
                    .bind(plan_id)
                    .execute(&mut *tx.tx)
                    .await?;
                tx.event(Ev::plan(et::PLAN_RESET, plan_id, payload::plan_reset(true, usize::try_from(n).unwrap_or(usize::MAX)))).await?;
            }
        }
        tx.commit(inner).await?;
        Ok(())
    })
    .await
}

async fn reset_keep_tasks(tx: &mut Tx, plan_id: &str) -> StoreResult<()> {
    let rows: Vec<TaskRow> = sqlx::query_as(concat!(
        "SELECT ",
        task_cols!(),
        " FROM tasks WHERE plan_id = $1 ORDER BY pk FOR UPDATE"
    ))
    .bind(plan_id)
    .fetch_all(&mut *tx.tx)
    .await?;
    let tasks = rows
        .into_iter()
        .map(TaskRow::into_record)
        .collect::<StoreResult<Vec<_>>>()?;
    for t in &tasks {
        if transition(t.status, Action::Reset).is_err() {
            return Err(StoreError::Refused {
                task_id: t.id.clone(),
                status: t.status,
                message: format!(
                    "plan {plan_id} still has work under a lease; stop its workers (or wait for the reaper) \
                     and reset again"
                ),
            });
        }
    }
    sqlx::query(
        "UPDATE tasks t SET status = 'PENDING', attempts = 0, cost_micros = 0, reserved_micros = 0, \
           worker_id = NULL, lease_expires_at = NULL, deadline_at = NULL, reason = NULL, updated_at = now(), \
           pending_deps = (SELECT count(*) FROM task_deps d WHERE d.task_pk = t.pk) \
         WHERE t.plan_id = $1",
    )
    .bind(plan_id)
    .execute(&mut *tx.tx)
    .await?;
    sqlx::query(
        "UPDATE plans SET spent_micros = 0, reserved_micros = 0, updated_at = now() WHERE id = $1",
    )
    .bind(plan_id)
    .execute(&mut *tx.tx)
    .await?;
    let mut events: Vec<Ev> = tasks
        .iter()
        .filter(|t| t.status != Status::Pending || t.attempts != 0)
        .map(|t| {
            Ev::task(
                et::TASK_RESET,
                t,
                Status::Pending,
                payload::plan_reset_task(),
            )
        })
        .collect();
    events.push(Ev::plan(
        et::PLAN_RESET,
        plan_id,
        payload::plan_reset(false, tasks.len()),
    ));
    tx.events_batch(events).await?;
    tx.wake(plan_id);
    Ok(())
}

pub(super) async fn append_event(inner: &Inner, e: NewEvent) -> StoreResult<Event> {
    let ev = Ev::appended(e)?;
    let mut tx = Tx::begin(inner).await?;
    let ev = tx.event(ev).await?;
    tx.commit(inner).await?;
    Ok(ev)
}

pub(super) async fn register_worker(inner: &Inner, w: &WorkerRecord) -> StoreResult<()> {
    let mut tx = Tx::begin(inner).await?;
    sqlx::query(
        "INSERT INTO workers (id, host, slots, tags, started_at, heartbeat_at) VALUES ($1, $2, $3, $4, now(), now()) \
         ON CONFLICT (id) DO UPDATE SET host = EXCLUDED.host, slots = EXCLUDED.slots, tags = EXCLUDED.tags, \
           started_at = now(), heartbeat_at = now()",
    )
    .bind(&w.id)
    .bind(&w.host)
    .bind(w.slots)
    .bind(&w.tags)
    .execute(&mut *tx.tx)
    .await?;
    let ev = Ev {
        event_type: et::WORKER_REGISTERED.to_string(),
        worker_id: Some(w.id.clone()),
        payload: json!({ "host": w.host, "slots": w.slots, "tags": w.tags }),
        ..Ev::default()
    };
    tx.event(ev).await?;
    tx.commit(inner).await?;
    Ok(())
}

pub(super) async fn worker_heartbeat(inner: &Inner, worker_id: &str) -> StoreResult<()> {
    let n = sqlx::query("UPDATE workers SET heartbeat_at = now(), offline_at = NULL WHERE id = $1")
        .bind(worker_id)
        .execute(&inner.pool)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(StoreError::NotFound {
            kind: "worker",
            id: worker_id.to_string(),
        });
    }
    Ok(())
}

pub(super) async fn mark_offline_workers(
    inner: &Inner,
    older_than: Duration,
) -> StoreResult<Vec<String>> {
    let mut tx = Tx::begin(inner).await?;
    let gone: Vec<(String, i64)> = sqlx::query_as(
        "UPDATE workers SET offline_at = now() \
         WHERE offline_at IS NULL AND heartbeat_at < now() - $1 * interval '1 millisecond' \
         RETURNING id, (extract(epoch FROM now() - heartbeat_at) * 1000)::bigint",
    )
    .bind(millis(older_than))
    .fetch_all(&mut *tx.tx)
    .await?;
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    for (id, silent_ms) in &gone {
        let ev = Ev {
            event_type: et::WORKER_OFFLINE.to_string(),
            worker_id: Some(id.clone()),
            payload: json!({ "silent_ms": silent_ms }),
            ..Ev::default()
        };
        tx.event(ev).await?;
    }
    tx.commit(inner).await?;
    Ok(gone.into_iter().map(|(id, _)| id).collect())
}

pub(super) async fn remove_worker(inner: &Inner, worker_id: &str) -> StoreResult<()> {
    let mut tx = Tx::begin(inner).await?;
    let n = sqlx::query("DELETE FROM workers WHERE id = $1")
        .bind(worker_id)
        .execute(&mut *tx.tx)
        .await?
        .rows_affected();
    if n == 0 {
        return Err(StoreError::NotFound {
            kind: "worker",
            id: worker_id.to_string(),
        });
    }
    let ev = Ev {
        event_type: et::WORKER_STOPPED.to_string(),
        worker_id: Some(worker_id.to_string()),
        ..Ev::default()
    };
    tx.event(ev).await?;
    tx.commit(inner).await?;
    Ok(())
}
