//! The worker protocol: claim, heartbeat, start, the ways an attempt ends, and the reaper.
//!
//! Every write after a claim presents (task, epoch); the row is locked and matched on it, so a
//! worker that was presumed dead changes nothing when it wakes up.

use super::Inner;
use super::rows::{PlanRow, TaskRow, plan_cols, task_cols};
use super::tx::{Ev, Move, Tx};
use crate::domain::dispatch::{choose_agent, fallbacks_from_json, with_full_agents};
use crate::domain::{Action, Status, Usd, budget_allows, transition};
use crate::store::event_types as et;
use crate::store::sql_common::{millis, outcome_payload, payload};
use crate::store::{
    ClaimRequest, Claimed, FailMode, Lease, Outcome, Park, PlanRecord, ReapReport, StoreError,
    StoreResult, TaskRecord,
};
use std::future::Future;
use std::time::Duration;

/// Ready tasks locked per claim: enough to step past a few whose plan budget has no room.
const CLAIM_CANDIDATES: i64 = 8;
/// Rows one reaper pass handles; the next pass takes the rest.
const REAP_BATCH: i64 = 500;

/// Runs `f` again when Postgres aborted it for a deadlock or serialization failure: the
/// transaction rolled back whole, so a retry is safe.
pub(super) async fn retrying<T, F, Fut>(mut f: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut tries = 0;
    loop {
        match f().await {
            Err(StoreError::Db(sqlx::Error::Database(e)))
                if tries < 5 && matches!(e.code().as_deref(), Some("40P01" | "40001")) =>
            {
                tries += 1;
            }
            other => return other,
        }
    }
}

fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

#[derive(sqlx::FromRow)]
struct Candidate {
    pk: i64,
    plan_id: String,
    estimate_micros: Option<i64>,
    has_budget: bool,
    claim_keys: Vec<String>,
    /// The task's own agent (its, else its plan's, else the worker's default).
    agent: String,
    /// Its plan's `fallback_agents`, as written.
    fallbacks: Option<serde_json::Value>,
}

/// Two claim keys meet: the same path, or one a directory the other lies in (keys are
/// `scope\tpath`, so a prefix match stays within its scope).
macro_rules! keys_meet {
    ($a:literal, $b:literal) => {
        concat!(
            "(",
            $a,
            " = ",
            $b,
            " OR starts_with(",
            $a,
            ", ",
            $b,
            " || '/') OR starts_with(",
            $b,
            ", ",
            $a,
            " || '/'))"
        )
    };
}

/// A running task holds the keys of `t`: claimed or in progress with a live lease. Tasks never
/// share keys across a claim: this filter skips what is held, and a claim of a task with keys
/// takes a transaction advisory lock per key before it checks again (`keys_free`), so two
/// claimers of different tasks with one key cannot both pass the check.
macro_rules! held_elsewhere {
    ($t:literal) => {
        concat!(
            "EXISTS (SELECT 1 FROM tasks r WHERE r.status IN ('CLAIMED', 'IN_PROGRESS') \
               AND r.lease_expires_at > now() AND r.pk <> ",
            $t,
            ".pk AND EXISTS (SELECT 1 FROM unnest(r.claim_keys) h, unnest(",
            $t,
            ".claim_keys) m WHERE ",
            keys_meet!("m", "h"),
            "))"
        )
    };
}

/// A task may start on its agent (its own, else its plan's, else the worker's default): the
/// agent is not blocked (rate-limited or at its `max_parallel`), or the plan names a fallback
/// that is not. `$b` binds the blocked agents (text[]), `$d` the default agent.
macro_rules! agent_free {
    ($b:literal, $d:literal) => {
        concat!(
            "(cardinality(",
            $b,
            "::text[]) = 0 \
               OR COALESCE(t.spec->>'agent', p.spec->>'agent', ",
            $d,
            "::text) <> ALL(",
            $b,
            "::text[]) \
               OR EXISTS (SELECT 1 FROM jsonb_array_elements_text(CASE \
                   WHEN jsonb_typeof(p.spec->'extra'->'fallback_agents') = 'array' \
                   THEN p.spec->'extra'->'fallback_agents' ELSE '[]'::jsonb END) f \
                 WHERE f <> ALL(",
            $b,
            "::text[])))"
        )
    };
}

/// The candidates' filter is a plain per-row test against the keys held right now (gathered
/// once from the few leased rows): a correlated `EXISTS` per candidate lets the planner turn the
/// scan into an anti-join over every ready task, which grows with the queue. The plan's own
/// pause is a one-time filter (a term without the tasks in it): a paused plan's engine does not
/// walk every ready task at each safety poll.
const SELECT_CANDIDATES: &str = concat!(
    "WITH held AS ( \
       SELECT COALESCE(array_agg(k), '{}'::text[]) AS keys \
       FROM tasks r, unnest(r.claim_keys) AS k \
       WHERE r.status IN ('CLAIMED', 'IN_PROGRESS') AND r.lease_expires_at > now()), \
     cand AS MATERIALIZED ( \
       SELECT t.pk, t.plan_id, t.estimate_micros, t.priority_rank, t.task_id, t.claim_keys, \
              p.budget_micros IS NOT NULL AS has_budget, \
              COALESCE(t.spec->>'agent', p.spec->>'agent', $6::text) AS agent, \
              p.spec->'extra'->'fallback_agents' AS fallbacks \
       FROM tasks t JOIN plans p ON p.id = t.plan_id CROSS JOIN held \
       WHERE t.status = 'PENDING' AND t.pending_deps = 0 AND NOT p.paused \
         AND ($1::text IS NULL OR t.plan_id = $1) \
         AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM plans q WHERE q.id = $1 AND NOT q.paused)) \
         AND t.pk <> ALL($2::bigint[]) \
         AND t.required_tags <@ $3::text[] \
         AND (p.budget_micros IS NULL OR p.spent_micros + p.reserved_micros < p.budget_micros) \
         AND NOT EXISTS (SELECT 1 FROM unnest(t.claim_keys) m, unnest(held.keys) h WHERE ",
    keys_meet!("m", "h"),
    ") \
         AND ",
    agent_free!("$5", "$6"),
    " \
       ORDER BY t.priority_rank, t.task_id \
       LIMIT $4 \
       FOR UPDATE OF t SKIP LOCKED) \
     SELECT pk, plan_id, estimate_micros, has_budget, claim_keys, agent, fallbacks FROM cand \
     ORDER BY priority_rank, task_id"
);

/// Takes the keys' advisory locks (held to the end of the transaction) and then looks again, in
/// a statement of its own: under READ COMMITTED it sees every claim committed before the locks
/// were ours. A key another claimer is locking right now means that claimer is taking a task
/// with it, so this candidate would be held anyway: try, never wait (waiting serialised every
/// claimer behind every other one in plans where all tasks have keys).
async fn keys_free(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    pk: i64,
    keys: &[String],
) -> StoreResult<bool> {
    // Each key exclusively, the directories above it shared: a claim of `src` and one of
    // `src/a.rs` made at the same moment meet on `src`; two files in `src` do not.
    let mut above: Vec<String> = keys
        .iter()
        .flat_map(|k| crate::domain::graph::claim_key_ancestors(k))
        .collect();
    above.sort();
    above.dedup();
    let locked: bool = sqlx::query_scalar(
        "SELECT COALESCE((SELECT bool_and(pg_try_advisory_xact_lock(hashtextextended(k, 0))) \
                          FROM unnest($1::text[]) AS k), true) \
            AND COALESCE((SELECT bool_and(pg_try_advisory_xact_lock_shared(hashtextextended(k, 0))) \
                          FROM unnest($2::text[]) AS k), true)",
    )
    .bind(keys)
    .bind(&above)
    .fetch_one(&mut **tx)
    .await?;
    if !locked {
        return Ok(false);
    }
    let held: bool = sqlx::query_scalar(concat!(
        "SELECT ",
        held_elsewhere!("t"),
        " FROM tasks t WHERE t.pk = $1"
    ))
    .bind(pk)
    .fetch_one(&mut **tx)
    .await?;
    Ok(!held)
}

/// The common claim as ONE statement (one round trip, one implicit transaction): lock the best
/// ready task, and when its plan has no budget to check and it holds no key files, claim it,
/// reserve and write the event right there. Lock order is the same as everywhere: task, then
/// plan.
const FAST_CLAIM: &str = concat!(
    "WITH cand AS MATERIALIZED ( \
       SELECT t.pk, p.budget_micros IS NULL AND cardinality(t.claim_keys) = 0 AS free, \
              COALESCE(t.spec->>'agent', p.spec->>'agent', $11::text) AS agent \
       FROM tasks t JOIN plans p ON p.id = t.plan_id \
       WHERE t.status = 'PENDING' AND t.pending_deps = 0 AND NOT p.paused \
         AND ($1::text IS NULL OR t.plan_id = $1) \
         AND ($1::text IS NULL OR EXISTS (SELECT 1 FROM plans q WHERE q.id = $1 AND NOT q.paused)) \
         AND t.pk <> ALL($2::bigint[]) \
         AND t.required_tags <@ $3::text[] \
         AND (p.budget_micros IS NULL OR p.spent_micros + p.reserved_micros < p.budget_micros) \
         AND ",
    agent_free!("$10", "$11"),
    " \
       ORDER BY t.priority_rank, t.task_id \
       LIMIT 1 \
       FOR UPDATE OF t SKIP LOCKED), \
     upd AS ( \
       UPDATE tasks t SET status = $4, epoch = t.epoch + 1, attempts = t.attempts + 1, worker_id = $5, \
         lease_expires_at = now() + $6 * interval '1 microsecond', deadline_at = NULL, \
         reserved_micros = COALESCE(t.estimate_micros, $7), reason = NULL, updated_at = now(), \
         agent = cand.agent \
       FROM cand WHERE t.pk = cand.pk AND cand.free \
       RETURNING t.*), \
     pl AS ( \
       UPDATE plans p SET reserved_micros = p.reserved_micros + upd.reserved_micros \
       FROM upd WHERE p.id = upd.plan_id AND upd.reserved_micros <> 0 RETURNING p.id), \
     ev AS ( \
       INSERT INTO events (event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload) \
       SELECT $8, upd.plan_id, upd.task_id, $5, upd.epoch, 'PENDING', $4, \
         jsonb_build_object('attempt', upd.attempts, \
           'reserved_usd', round(upd.reserved_micros::numeric / 1000000, 6), 'lease_ms', $9::bigint, \
           'agent', upd.agent) \
       FROM upd RETURNING id, ts, payload) \
     SELECT cand.free, cand.agent AS chosen_agent, ev.id AS event_id, ev.ts AS event_ts, \
       ev.payload AS event_payload, ",
    "upd.pk, upd.plan_id, upd.task_id, upd.status, upd.priority_rank, upd.pending_deps, upd.epoch, \
     upd.attempts, upd.max_attempts, upd.worker_id, upd.lease_expires_at, upd.deadline_at, \
     upd.cost_micros, upd.reserved_micros, upd.reason, upd.spec, upd.updated_at \
     FROM cand LEFT JOIN upd ON true LEFT JOIN ev ON true"
);

pub(super) async fn claim(inner: &Inner, req: &ClaimRequest) -> StoreResult<Option<Claimed>> {
    use std::sync::atomic::Ordering;
    inner.hub.note_claim_start();
    if inner.claim_full.load(Ordering::Relaxed) {
        // Plans with key files or a budget keep taking the full path; a claim of a task that
        // needed neither sends the next one back to the fast statement.
        let claimed = retrying(|| claim_once(inner, req)).await?;
        if claimed
            .as_ref()
            .is_some_and(|c| c.task.spec.key_files.is_empty())
        {
            inner.claim_full.store(false, Ordering::Relaxed);
        }
        return Ok(claimed);
    }
    // The one statement takes a task on its own agent: while an agent is blocked or limited,
    // choosing a fallback and counting leases need the full transaction.
    if !req.blocked_agents.is_empty() || !req.agent_limits.is_empty() {
        return retrying(|| claim_once(inner, req)).await;
    }
    match retrying(|| fast_claim(inner, req)).await? {
        FastClaim::Claimed(c) => Ok(Some(*c)),
        FastClaim::Nothing => Ok(None),
        FastClaim::NeedsFull => {
            inner.claim_full.store(true, Ordering::Relaxed);
            retrying(|| claim_once(inner, req)).await
        }
    }
}

enum FastClaim {
    Claimed(Box<Claimed>),
    Nothing,
    /// The best ready task is in a plan with a budget, or holds key files: the full transaction
    /// decides.
    NeedsFull,
}

async fn fast_claim(inner: &Inner, req: &ClaimRequest) -> StoreResult<FastClaim> {
    use sqlx::{FromRow, Row};
    let to = transition(Status::Pending, Action::Claim).map_err(|source| StoreError::Illegal {
        task_id: String::new(),
        source,
    })?;
    let row = sqlx::query(FAST_CLAIM)
        .bind(&req.plan_id)
        .bind(&req.exclude)
        .bind(&req.tags)
        .bind(to.as_str())
        .bind(&req.worker_id)
        .bind(micros(req.lease))
        .bind(req.default_estimate.micros())
        .bind(et::TASK_CLAIMED)
        .bind(millis(req.lease))
        .bind(&req.blocked_agents)
        .bind(&req.default_agent)
        .fetch_optional(&inner.pool)
        .await?;
    let Some(row) = row else {
        return Ok(FastClaim::Nothing);
    };
    if !row.try_get::<bool, _>("free")? {
        return Ok(FastClaim::NeedsFull);
    }
    let task = TaskRow::from_row(&row)?.into_record()?;
    let agent: String = row.try_get("chosen_agent")?;
    let event = crate::store::Event {
        id: row.try_get("event_id")?,
        ts: row.try_get("event_ts")?,
        event_type: et::TASK_CLAIMED.to_string(),
        plan_id: Some(task.plan_id.clone()),
        task_id: Some(task.id.clone()),
        worker_id: Some(req.worker_id.clone()),
        epoch: Some(task.epoch),
        from_status: Some(Status::Pending),
        to_status: Some(to),
        payload: row.try_get("event_payload")?,
    };
    inner.mirror(std::slice::from_ref(&event));
    let lease = Lease {
        task_pk: task.pk,
        epoch: task.epoch,
    };
    Ok(FastClaim::Claimed(Box::new(Claimed { lease, task, agent })))
}

/// The agents no task may start on: the request's (paused) and those whose live leases reach
/// their `agent_limits`. Each limited agent's advisory lock is taken first, in name order, and
/// held to the end of the transaction: a concurrent claimer counts only after this one's claim
/// is committed, so two cannot both take the last free place. Nothing waiting on these locks
/// holds a row lock (they come first in every claim), so they cannot deadlock.
async fn blocked_agents(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    req: &ClaimRequest,
) -> StoreResult<Vec<String>> {
    if req.agent_limits.is_empty() {
        return Ok(req.blocked_agents.clone());
    }
    // BTreeMap keys: already in name order, the same in every claimer.
    for agent in req.agent_limits.keys() {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended('whilly.agent:' || $1, 0))")
            .bind(agent)
            .execute(&mut **tx)
            .await?;
    }
    let limited: Vec<String> = req.agent_limits.keys().cloned().collect();
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT agent, count(*) FROM tasks \
         WHERE status IN ('CLAIMED', 'IN_PROGRESS') AND lease_expires_at > now() \
           AND agent = ANY($1::text[]) GROUP BY agent",
    )
    .bind(limited)
    .fetch_all(&mut **tx)
    .await?;
    Ok(with_full_agents(
        &req.blocked_agents,
        &rows,
        &req.agent_limits,
    ))
}

async fn claim_once(inner: &Inner, req: &ClaimRequest) -> StoreResult<Option<Claimed>> {
    let to = transition(Status::Pending, Action::Claim).map_err(|source| StoreError::Illegal {
        task_id: String::new(),
        source,
    })?;
    let mut tx = Tx::begin(inner).await?;
    let blocked = blocked_agents(&mut tx.tx, req).await?;
    let cands: Vec<Candidate> = sqlx::query_as(SELECT_CANDIDATES)
        .bind(&req.plan_id)
        .bind(&req.exclude)
        .bind(&req.tags)
        .bind(CLAIM_CANDIDATES)
        .bind(&blocked)
        .bind(&req.default_agent)
        .fetch_all(&mut *tx.tx)
        .await?;
    for c in cands {
        let estimate = c.estimate_micros.map(Usd).unwrap_or(req.default_estimate);
        let fallbacks = c
            .fallbacks
            .as_ref()
            .map(fallbacks_from_json)
            .unwrap_or_default();
        let agent = choose_agent(&c.agent, &fallbacks, &blocked);
        // Lock order task → keys → plan, the same in every claimer.
        if !c.claim_keys.is_empty() && !keys_free(&mut tx.tx, c.pk, &c.claim_keys).await? {
            continue;
        }
        if c.has_budget {
            // Lock order task → plan: the candidate rows are already ours.
            let plan: Option<PlanRow> = sqlx::query_as(concat!(
                "SELECT ",
                plan_cols!(),
                " FROM plans WHERE id = $1 FOR UPDATE"
            ))
            .bind(&c.plan_id)
            .fetch_optional(&mut *tx.tx)
            .await?;
            let Some(plan) = plan else { continue };
            if !budget_allows(
                plan.budget_micros.map(Usd),
                Usd(plan.spent_micros),
                Usd(plan.reserved_micros),
                estimate,
            ) {
                continue;
            }
        }
        let row: TaskRow = sqlx::query_as(concat!(
            "UPDATE tasks SET status = $2, epoch = epoch + 1, attempts = attempts + 1, worker_id = $3, \
               lease_expires_at = now() + $4 * interval '1 microsecond', deadline_at = NULL, \
               reserved_micros = $5, reason = NULL, updated_at = now(), agent = $6 \
             WHERE pk = $1 RETURNING ",
            task_cols!()
        ))
        .bind(c.pk)
        .bind(to.as_str())
        .bind(&req.worker_id)
        .bind(micros(req.lease))
        .bind(estimate.micros())
        .bind(&agent)
        .fetch_one(&mut *tx.tx)
        .await?;
        if estimate != Usd::ZERO {
            sqlx::query("UPDATE plans SET reserved_micros = reserved_micros + $2 WHERE id = $1")
                .bind(&c.plan_id)
                .bind(estimate.micros())
                .execute(&mut *tx.tx)
                .await?;
        }
        let task = row.into_record()?;
        let ev = Ev {
            event_type: et::TASK_CLAIMED.to_string(),
            plan_id: Some(task.plan_id.clone()),
            task_id: Some(task.id.clone()),
            worker_id: Some(req.worker_id.clone()),
            epoch: Some(task.epoch),
            from: Some(Status::Pending),
            to: Some(to),
            payload: payload::claimed(task.attempts, estimate, millis(req.lease), &agent),
        };
        tx.event(ev).await?;
        tx.commit(inner).await?;
        let lease = Lease {
            task_pk: task.pk,
            epoch: task.epoch,
        };
        return Ok(Some(Claimed { lease, task, agent }));
    }
    Ok(None)
}

pub(super) async fn heartbeat(inner: &Inner, lease: Lease, extend: Duration) -> StoreResult<()> {
    let n = sqlx::query(
        "UPDATE tasks SET lease_expires_at = now() + $3 * interval '1 microsecond' \
         WHERE pk = $1 AND epoch = $2 AND status IN ('CLAIMED', 'IN_PROGRESS')",
    )
    .bind(lease.task_pk)
    .bind(lease.epoch)
    .bind(micros(extend))
    .execute(&inner.pool)
    .await?
    .rows_affected();
    if n == 0 {
        return Err(StoreError::Stale {
            task_pk: lease.task_pk,
            epoch: lease.epoch,
        });
    }
    Ok(())
}

pub(super) fn illegal(
    t: &TaskRecord,
) -> impl FnOnce(crate::domain::IllegalTransition) -> StoreError + '_ {
    move |source| StoreError::Illegal {
        task_id: t.id.clone(),
        source,
    }
}

pub(super) async fn start(
    inner: &Inner,
    lease: Lease,
    deadline: Option<Duration>,
) -> StoreResult<()> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let t = tx.leased(lease).await?;
        let to = transition(t.status, Action::Start).map_err(illegal(&t))?;
        sqlx::query(
            "UPDATE tasks SET status = $2, \
               deadline_at = CASE WHEN $3::bigint IS NULL THEN NULL ELSE now() + $3 * interval '1 microsecond' END, \
               updated_at = now() WHERE pk = $1",
        )
        .bind(t.pk)
        .bind(to.as_str())
        .bind(deadline.map(micros))
        .execute(&mut *tx.tx)
        .await?;
        tx.event(Ev::task(et::TASK_STARTED, &t, to, payload::started(deadline.map(millis)))).await?;
        tx.commit(inner).await?;
        Ok(())
    })
    .await
}

/// Ends the attempt under `lease` with `action`, the move built by `build` from the locked row.
async fn end_attempt<F>(
    inner: &Inner,
    lease: Lease,
    action: Action,
    build: F,
) -> StoreResult<TaskRecord>
where
    F: Fn(&TaskRecord, Status) -> Move,
{
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let t = tx.leased(lease).await?;
        let to = transition(t.status, action).map_err(illegal(&t))?;
        let m = build(&t, to);
        let after = tx.apply_move(&t, m).await?;
        tx.commit(inner).await?;
        Ok(after)
    })
    .await
}

pub(super) async fn complete(inner: &Inner, lease: Lease, o: &Outcome) -> StoreResult<TaskRecord> {
    end_attempt(inner, lease, Action::Complete, |_, to| Move {
        cost: o.cost,
        reason: o.reason.clone(),
        ..Move::new(to, et::TASK_DONE, outcome_payload(o, &[]))
    })
    .await
}

pub(super) async fn fail(
    inner: &Inner,
    lease: Lease,
    mode: FailMode,
    o: &Outcome,
) -> StoreResult<TaskRecord> {
    let action = Action::Fail;
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let t = tx.leased(lease).await?;
        let retry = mode == FailMode::Retry && t.attempts < t.max_attempts;
        let (action, event_type) = if retry {
            (Action::Release, et::TASK_RETRY)
        } else {
            (action, et::TASK_FAILED)
        };
        let to = transition(t.status, action).map_err(illegal(&t))?;
        let extra = payload::attempt_extra(&t);
        let m = Move {
            cost: o.cost,
            reason: o.reason.clone(),
            ..Move::new(to, event_type, outcome_payload(o, &extra))
        };
        let after = tx.apply_move(&t, m).await?;
        tx.commit(inner).await?;
        Ok(after)
    })
    .await
}

pub(super) async fn release(inner: &Inner, lease: Lease, o: &Outcome) -> StoreResult<TaskRecord> {
    end_attempt(inner, lease, Action::Release, |_, to| Move {
        cost: o.cost,
        reason: o.reason.clone(),
        attempts_delta: -1,
        ..Move::new(to, et::TASK_RELEASED, outcome_payload(o, &[]))
    })
    .await
}

pub(super) async fn park(
    inner: &Inner,
    lease: Lease,
    park: Park,
    o: &Outcome,
) -> StoreResult<TaskRecord> {
    let (action, event_type) = match park {
        Park::HumanLoop => (Action::AwaitHuman, et::TASK_HUMAN_LOOP),
        Park::Blocked => (Action::Block, et::TASK_BLOCKED),
    };
    end_attempt(inner, lease, action, |_, to| Move {
        cost: o.cost,
        reason: o.reason.clone(),
        ..Move::new(to, event_type, outcome_payload(o, &[]))
    })
    .await
}

pub(super) async fn add_cost(inner: &Inner, lease: Lease, cost: Usd) -> StoreResult<PlanRecord> {
    retrying(|| async {
        let mut tx = Tx::begin(inner).await?;
        let t = tx.leased(lease).await?;
        sqlx::query("UPDATE tasks SET cost_micros = cost_micros + $2, updated_at = now() WHERE pk = $1")
            .bind(t.pk)
            .bind(cost.micros())
            .execute(&mut *tx.tx)
            .await?;
        let plan: PlanRow = sqlx::query_as(concat!(
            "UPDATE plans SET spent_micros = spent_micros + $2, updated_at = now() WHERE id = $1 RETURNING ",
            plan_cols!()
        ))
        .bind(&t.plan_id)
        .bind(cost.micros())
        .fetch_one(&mut *tx.tx)
        .await?;
        let ev = Ev {
            event_type: et::TASK_COST.to_string(),
            plan_id: Some(t.plan_id.clone()),
            task_id: Some(t.id.clone()),
            worker_id: t.worker_id.clone(),
            epoch: Some(t.epoch),
            payload: payload::cost(cost, t.cost + cost, Usd(plan.spent_micros)),
            ..Ev::default()
        };
        tx.event(ev).await?;
        tx.commit(inner).await?;
        plan.into_record()
    })
    .await
}

pub(super) async fn reap(inner: &Inner) -> StoreResult<ReapReport> {
    retrying(|| reap_once(inner)).await
}

async fn reap_once(inner: &Inner) -> StoreResult<ReapReport> {
    let mut report = ReapReport::default();
    // Every live worker reaps every few seconds: the common answer (nothing is due) costs one
    // statement, not a transaction of three.
    let due: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE status IN ('CLAIMED', 'IN_PROGRESS') \
           AND (lease_expires_at <= now() OR deadline_at <= now()))",
    )
    .fetch_one(&inner.pool)
    .await?;
    if !due {
        return Ok(report);
    }
    let mut tx = Tx::begin(inner).await?;
    // SKIP LOCKED: rows another reaper (or their own worker, completing right now) holds are
    // left to them.
    let rows: Vec<(TaskRow, bool)> = sqlx::query_as::<_, ReapRow>(concat!(
        "SELECT ",
        task_cols!(),
        ", (deadline_at IS NOT NULL AND deadline_at <= now()) AS past_deadline \
         FROM tasks WHERE status IN ('CLAIMED', 'IN_PROGRESS') \
           AND (lease_expires_at <= now() OR deadline_at <= now()) \
         ORDER BY pk LIMIT $1 FOR UPDATE SKIP LOCKED"
    ))
    .bind(REAP_BATCH)
    .fetch_all(&mut *tx.tx)
    .await?
    .into_iter()
    .map(|r| (r.task, r.past_deadline))
    .collect();
    if rows.is_empty() {
        return Ok(report);
    }
    for (row, past_deadline) in rows {
        let t = row.into_record()?;
        let lost_before: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM events WHERE plan_id = $1 AND task_id = $2 AND event_type = $3",
        )
        .bind(&t.plan_id)
        .bind(&t.id)
        .bind(et::TASK_LEASE_EXPIRED)
        .fetch_one(&mut *tx.tx)
        .await?;
        let d = crate::domain::reap::reap_decision(
            past_deadline,
            t.attempts,
            t.max_attempts,
            lost_before,
        );
        let (event_type, reason) = crate::store::sql_common::reaped_as(d.why);
        let to = transition(t.status, d.action).map_err(illegal(&t))?;
        let m = Move {
            reason: Some(reason.to_string()),
            attempts_delta: if d.refund_attempt { -1 } else { 0 },
            ..Move::new(to, event_type, payload::reaped(reason, &t))
        };
        tx.apply_move(&t, m).await?;
        match (to, past_deadline) {
            (Status::Failed, _) => report.failed.push(t.id),
            (_, true) => report.timed_out.push(t.id),
            _ => report.requeued.push(t.id),
        }
    }
    tx.commit(inner).await?;
    Ok(report)
}

#[derive(sqlx::FromRow)]
struct ReapRow {
    #[sqlx(flatten)]
    task: TaskRow,
    past_deadline: bool,
}
