//! The worker protocol: claim, heartbeat, start, settle (complete / fail / release / park),
//! running cost, and the reaper. Every write after the claim is fenced by (pk, epoch).

use super::Shared;
use super::rows::{self, TASK_COLS};
use super::tx::{Ev, Move, WriteTx};
use crate::domain::dispatch::{choose_agent, fallbacks_from_json, with_full_agents};
use crate::domain::{Action, Status, Usd, budget_allows, transition};
use crate::store::error::{StoreError, StoreResult};
use crate::store::event_types as et;
use crate::store::sql_common::{encode_json, millis, outcome_payload, payload};
use crate::store::types::*;
use serde_json::Value;
use sqlx::sqlite::{Sqlite, SqliteRow};
use sqlx::{AssertSqlSafe, Row};
use std::time::Duration;

/// Candidates looked at per claim: enough to find a cheaper task that fits the budget.
const CLAIM_WINDOW: i64 = 16;

fn check(t: &TaskRecord, action: Action) -> StoreResult<Status> {
    transition(t.status, action).map_err(|source| StoreError::Illegal {
        task_id: t.id.clone(),
        source,
    })
}

/// Ready tasks that fit the request, best first. The budget rule is applied in SQL to skip what
/// cannot fit; the caller applies it again with the one shared rule (`budget_allows`). A task
/// whose key files a running task holds (claimed or in progress, lease live at `?6`) is not a
/// candidate: inside the claim's `BEGIN IMMEDIATE` this check and the claim are one step for
/// every process on the file. The plan's own pause is asked once, before any task is looked at
/// (a term without the tasks in it is evaluated before the loop): a paused plan's engine
/// otherwise walked every ready task at each safety poll.
const CANDIDATES: &str = "SELECT t.pk, t.estimate_micros, p.budget_micros, p.spent_micros, \
       p.reserved_micros \
     FROM tasks t JOIN plans p ON p.id = t.plan_id \
     WHERE t.status = 'PENDING' AND t.pending_deps = 0 AND p.paused = 0 \
       AND (?1 IS NULL OR t.plan_id = ?1) \
       AND (?1 IS NULL OR EXISTS (SELECT 1 FROM plans q WHERE q.id = ?1 AND q.paused = 0)) \
       AND t.pk NOT IN (SELECT value FROM json_each(?2)) \
       AND NOT EXISTS (SELECT 1 FROM json_each(t.required_tags) r \
                       WHERE r.value NOT IN (SELECT value FROM json_each(?3))) \
       AND (p.budget_micros IS NULL OR CASE WHEN COALESCE(t.estimate_micros, ?4) = 0 \
            THEN p.spent_micros + p.reserved_micros < p.budget_micros \
            ELSE p.spent_micros + p.reserved_micros + COALESCE(t.estimate_micros, ?4) \
                 <= p.budget_micros END) \
       AND NOT EXISTS (SELECT 1 FROM json_each(t.claim_keys) mine \
                       JOIN tasks r ON r.status IN ('CLAIMED', 'IN_PROGRESS') \
                         AND r.lease_expires_at > ?6 AND r.pk <> t.pk \
                       JOIN json_each(r.claim_keys) theirs ON theirs.value = mine.value \
                         OR substr(theirs.value, 1, length(mine.value) + 1) = mine.value || '/' \
                         OR substr(mine.value, 1, length(theirs.value) + 1) = theirs.value || '/') \
       AND (?7 = '[]' \
            OR COALESCE(json_extract(t.spec, '$.agent'), json_extract(p.spec, '$.agent'), ?8) \
               NOT IN (SELECT value FROM json_each(?7)) \
            OR EXISTS (SELECT 1 FROM json_each(p.spec, '$.extra.fallback_agents') f \
                       WHERE f.type = 'text' AND f.value NOT IN (SELECT value FROM json_each(?7)))) \
     ORDER BY t.priority_rank, t.task_id, t.plan_id LIMIT ?5";

/// The candidate to claim: its pk and the estimate to reserve.
struct Pick {
    pk: i64,
    estimate: Usd,
}

/// The first candidate the budget allows.
fn pick(candidates: &[SqliteRow], req: &ClaimRequest) -> StoreResult<Option<Pick>> {
    for c in candidates {
        let estimate = Usd(c
            .try_get::<Option<i64>, _>("estimate_micros")?
            .unwrap_or(req.default_estimate.micros()));
        let budget = c.try_get::<Option<i64>, _>("budget_micros")?.map(Usd);
        let spent = Usd(c.try_get("spent_micros")?);
        let reserved = Usd(c.try_get("reserved_micros")?);
        if budget_allows(budget, spent, reserved, estimate) {
            return Ok(Some(Pick {
                pk: c.try_get("pk")?,
                estimate,
            }));
        }
    }
    Ok(None)
}

/// The agent the claimed task `pk` runs on: its own unless blocked, else its plan's first free
/// fallback. Read for the one task picked, not in the candidates' query: parsing every
/// candidate's spec there slowed every claim by a fifth.
async fn chosen_agent(
    tx: &mut WriteTx<'_>,
    pk: i64,
    req: &ClaimRequest,
    blocked: &[String],
) -> StoreResult<String> {
    let (own, fallbacks): (String, Option<String>) = sqlx::query_as(
        "SELECT COALESCE(json_extract(t.spec, '$.agent'), json_extract(p.spec, '$.agent'), ?1), \
           json_extract(p.spec, '$.extra.fallback_agents') \
         FROM tasks t JOIN plans p ON p.id = t.plan_id WHERE t.pk = ?2",
    )
    .bind(&req.default_agent)
    .bind(pk)
    .fetch_one(tx.conn())
    .await?;
    let fallbacks = fallbacks
        .and_then(|j| serde_json::from_str(&j).ok())
        .map(|v| fallbacks_from_json(&v))
        .unwrap_or_default();
    Ok(choose_agent(&own, &fallbacks, blocked))
}

/// The agents no task may start on: the request's (paused) and those whose live leases reach
/// their `agent_limits`.
async fn blocked_agents<'e, E>(e: E, req: &ClaimRequest, now_ms: i64) -> StoreResult<Vec<String>>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    if req.agent_limits.is_empty() {
        return Ok(req.blocked_agents.clone());
    }
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT agent, COUNT(*) FROM tasks \
         WHERE status IN ('CLAIMED', 'IN_PROGRESS') AND lease_expires_at > ? \
           AND agent IS NOT NULL GROUP BY agent",
    )
    .bind(now_ms)
    .fetch_all(e)
    .await?;
    Ok(with_full_agents(
        &req.blocked_agents,
        &rows,
        &req.agent_limits,
    ))
}

async fn candidates<'e, E>(
    e: E,
    req: &ClaimRequest,
    blocked: &[String],
    window: i64,
    now_ms: i64,
) -> StoreResult<Vec<SqliteRow>>
where
    E: sqlx::Executor<'e, Database = Sqlite>,
{
    let exclude = encode_json(&req.exclude, "claim exclude list")?;
    let tags = encode_json(&req.tags, "claim tags")?;
    let blocked = encode_json(&blocked, "claim blocked agents")?;
    Ok(sqlx::query(CANDIDATES)
        .bind(&req.plan_id)
        .bind(exclude)
        .bind(tags)
        .bind(req.default_estimate.micros())
        .bind(window)
        .bind(now_ms)
        .bind(blocked)
        .bind(&req.default_agent)
        .fetch_all(e)
        .await?)
}

pub(super) async fn claim(s: &Shared, req: &ClaimRequest) -> StoreResult<Option<Claimed>> {
    // Idle workers poll: look without the write lock first, so they do not queue up behind (and
    // in front of) the writers doing real work.
    let seen = super::read::last_event_id(s).await;
    let now_ms = chrono::Utc::now().timestamp_millis();
    let blocked = blocked_agents(&s.reader, req, now_ms).await?;
    let cands = candidates(&s.reader, req, &blocked, CLAIM_WINDOW, now_ms).await?;
    if pick(&cands, req)?.is_none() {
        if let Some(id) = seen {
            s.seen_event_id
                .store(id, std::sync::atomic::Ordering::SeqCst);
        }
        return Ok(None);
    }
    let mut tx = WriteTx::begin(s).await?;
    let now = tx.now;
    // Inside the write transaction the counts and the claim are one step for every process.
    let blocked = blocked_agents(tx.conn(), req, now).await?;
    let cands = candidates(tx.conn(), req, &blocked, CLAIM_WINDOW, now).await?;
    let Some(Pick { pk, estimate }) = pick(&cands, req)? else {
        return Ok(None);
    };
    let agent = chosen_agent(&mut tx, pk, req, &blocked).await?;
    let Some(before) = tx.task_by_pk(pk).await? else {
        return Ok(None);
    };
    check(&before, Action::Claim)?;
    let lease_until = tx.now.saturating_add(millis(req.lease));
    let sql = format!(
        "UPDATE tasks SET status = 'CLAIMED', epoch = epoch + 1, attempts = attempts + 1, \
           worker_id = ?, lease_expires_at = ?, deadline_at = NULL, reserved_micros = ?, \
           reason = NULL, updated_at = ?, agent = ? \
         WHERE pk = ? AND status = 'PENDING' RETURNING {TASK_COLS}"
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(&req.worker_id)
        .bind(lease_until)
        .bind(estimate.micros())
        .bind(tx.now)
        .bind(&agent)
        .bind(pk)
        .fetch_one(tx.conn())
        .await?;
    let task = rows::task(&row)?;
    if estimate != Usd::ZERO {
        sqlx::query(
            "UPDATE plans SET reserved_micros = reserved_micros + ?, updated_at = ? WHERE id = ?",
        )
        .bind(estimate.micros())
        .bind(tx.now)
        .bind(&task.plan_id)
        .execute(tx.conn())
        .await?;
    }
    let mut ev = Ev::task(
        et::TASK_CLAIMED,
        &before,
        Status::Claimed,
        payload::claimed(task.attempts, estimate, millis(req.lease), &agent),
    );
    ev.worker_id = Some(req.worker_id.clone());
    ev.epoch = Some(task.epoch);
    tx.event(ev).await?;
    tx.commit().await?;
    Ok(Some(Claimed {
        lease: Lease {
            task_pk: task.pk,
            epoch: task.epoch,
        },
        task,
        agent,
    }))
}

pub(super) async fn heartbeat(s: &Shared, lease: Lease, extend: Duration) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    let until = tx.now.saturating_add(millis(extend));
    let done = sqlx::query(
        "UPDATE tasks SET lease_expires_at = ?, updated_at = ? \
         WHERE pk = ? AND epoch = ? AND status IN ('CLAIMED', 'IN_PROGRESS')",
    )
    .bind(until)
    .bind(tx.now)
    .bind(lease.task_pk)
    .bind(lease.epoch)
    .execute(tx.conn())
    .await?;
    if done.rows_affected() == 0 {
        return Err(StoreError::Stale {
            task_pk: lease.task_pk,
            epoch: lease.epoch,
        });
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn start(s: &Shared, lease: Lease, deadline: Option<Duration>) -> StoreResult<()> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    let to = check(&t, Action::Start)?;
    let deadline_at = deadline.map(|d| tx.now.saturating_add(millis(d)));
    sqlx::query(
        "UPDATE tasks SET status = ?, deadline_at = ?, updated_at = ? \
         WHERE pk = ? AND epoch = ? AND status = 'CLAIMED'",
    )
    .bind(to.as_str())
    .bind(deadline_at)
    .bind(tx.now)
    .bind(t.pk)
    .bind(t.epoch)
    .execute(tx.conn())
    .await?;
    let payload = payload::started(deadline.map(millis));
    tx.event(Ev::task(et::TASK_STARTED, &t, to, payload))
        .await?;
    tx.commit().await?;
    Ok(())
}

/// Ends a leased attempt: `t` must be the row the lease names.
async fn settle(
    tx: &mut WriteTx<'_>,
    t: &TaskRecord,
    to: Status,
    event_type: &str,
    o: &Outcome,
    attempts_delta: i64,
    extra: &[(&str, Value)],
) -> StoreResult<TaskRecord> {
    let mut m = Move::new(to, event_type, outcome_payload(o, extra));
    m.cost = o.cost;
    m.reason = o.reason.clone();
    m.attempts_delta = attempts_delta;
    tx.apply_move(t, m).await?.ok_or(StoreError::Stale {
        task_pk: t.pk,
        epoch: t.epoch,
    })
}

pub(super) async fn complete(s: &Shared, lease: Lease, o: &Outcome) -> StoreResult<TaskRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    let to = check(&t, Action::Complete)?;
    let after = settle(&mut tx, &t, to, et::TASK_DONE, o, 0, &[]).await?;
    tx.commit().await?;
    Ok(after)
}

pub(super) async fn fail(
    s: &Shared,
    lease: Lease,
    mode: FailMode,
    o: &Outcome,
) -> StoreResult<TaskRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    let retry = mode == FailMode::Retry && t.attempts < t.max_attempts;
    let (action, event_type) = if retry {
        (Action::Release, et::TASK_RETRY)
    } else {
        (Action::Fail, et::TASK_FAILED)
    };
    let to = check(&t, action)?;
    let after = settle(
        &mut tx,
        &t,
        to,
        event_type,
        o,
        0,
        &payload::attempt_extra(&t),
    )
    .await?;
    tx.commit().await?;
    Ok(after)
}

pub(super) async fn release(s: &Shared, lease: Lease, o: &Outcome) -> StoreResult<TaskRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    let to = check(&t, Action::Release)?;
    // Shutdown and operator pauses are not the task's fault: the attempt is given back.
    let after = settle(&mut tx, &t, to, et::TASK_RELEASED, o, -1, &[]).await?;
    tx.commit().await?;
    Ok(after)
}

pub(super) async fn park(
    s: &Shared,
    lease: Lease,
    park: Park,
    o: &Outcome,
) -> StoreResult<TaskRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    let (action, event_type) = match park {
        Park::HumanLoop => (Action::AwaitHuman, et::TASK_HUMAN_LOOP),
        Park::Blocked => (Action::Block, et::TASK_BLOCKED),
    };
    let to = check(&t, action)?;
    let after = settle(&mut tx, &t, to, event_type, o, 0, &[]).await?;
    tx.commit().await?;
    Ok(after)
}

pub(super) async fn add_cost(s: &Shared, lease: Lease, cost: Usd) -> StoreResult<PlanRecord> {
    let mut tx = WriteTx::begin(s).await?;
    let t = tx.leased(lease).await?;
    sqlx::query("UPDATE tasks SET cost_micros = cost_micros + ?, updated_at = ? WHERE pk = ?")
        .bind(cost.micros())
        .bind(tx.now)
        .bind(t.pk)
        .execute(tx.conn())
        .await?;
    let sql = format!(
        "UPDATE plans SET spent_micros = spent_micros + ?, updated_at = ? WHERE id = ? \
         RETURNING {}",
        super::rows::PLAN_COLS
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(cost.micros())
        .bind(tx.now)
        .bind(&t.plan_id)
        .fetch_one(tx.conn())
        .await?;
    let plan = rows::plan(&row)?;
    let mut ev = Ev::task(
        et::TASK_COST,
        &t,
        t.status,
        payload::cost(cost, t.cost + cost, plan.spent),
    );
    // Not a transition: the status columns stay empty.
    ev.from = None;
    ev.to = None;
    tx.event(ev).await?;
    tx.commit().await?;
    Ok(plan)
}

pub(super) async fn reap(s: &Shared) -> StoreResult<ReapReport> {
    let due = "SELECT COUNT(*) FROM tasks WHERE status IN ('CLAIMED', 'IN_PROGRESS') \
               AND (lease_expires_at < ?1 OR (status = 'IN_PROGRESS' AND deadline_at < ?1))";
    // Cheap look first, without taking the write lock that every other writer waits on.
    let now: i64 = sqlx::query_scalar(super::rows::NOW_MS)
        .fetch_one(&s.reader)
        .await?;
    let n: i64 = sqlx::query_scalar(due)
        .bind(now)
        .fetch_one(&s.reader)
        .await?;
    let mut report = ReapReport::default();
    if n == 0 {
        return Ok(report);
    }
    let mut tx = WriteTx::begin(s).await?;
    let sql = format!(
        "SELECT {TASK_COLS} FROM tasks WHERE status IN ('CLAIMED', 'IN_PROGRESS') \
         AND (lease_expires_at < ?1 OR (status = 'IN_PROGRESS' AND deadline_at < ?1)) ORDER BY pk"
    );
    let all = sqlx::query(AssertSqlSafe(sql))
        .bind(tx.now)
        .fetch_all(tx.conn())
        .await?;
    let now = tx.now;
    for r in &all {
        let t = rows::task(r)?;
        let past_deadline = t.deadline_at.is_some_and(|at| at.timestamp_millis() < now)
            && t.status == crate::domain::Status::InProgress;
        let lost_before: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM events WHERE plan_id = ?1 AND task_id = ?2 AND event_type = ?3",
        )
        .bind(&t.plan_id)
        .bind(&t.id)
        .bind(et::TASK_LEASE_EXPIRED)
        .fetch_one(tx.conn())
        .await?;
        let d = crate::domain::reap::reap_decision(
            past_deadline,
            t.attempts,
            t.max_attempts,
            lost_before,
        );
        let (event_type, reason) = crate::store::sql_common::reaped_as(d.why);
        let lease_expired = d.why == crate::domain::reap::Why::LeaseExpired;
        let exhausted = d.to == crate::domain::Status::Failed;
        let to = check(&t, d.action)?;
        let mut m = Move::new(to, event_type, payload::reaped(reason, &t));
        m.reason = Some(reason.to_string());
        if d.refund_attempt {
            m.attempts_delta = -1;
        }
        // The row is re-checked by (pk, epoch, status) in the UPDATE: changed meanwhile → left.
        if tx.apply_move(&t, m).await?.is_none() {
            continue;
        }
        let list = match (exhausted, lease_expired) {
            (true, _) => &mut report.failed,
            (false, true) => &mut report.requeued,
            (false, false) => &mut report.timed_out,
        };
        list.push(t.id.clone());
    }
    tx.commit().await?;
    Ok(report)
}
