//! One write transaction: its events (mirrored after COMMIT) and at most one wakeup.

use super::Inner;
use super::rows::{EventRow, TaskRow, event_cols, task_cols};
use crate::domain::{Status, Usd};
pub(super) use crate::store::sql_common::Ev;
use crate::store::sql_common::children_delta;
use crate::store::{Event, StoreResult, TaskRecord};
use crate::store::{Lease, StoreError};
use sqlx::{Postgres, Transaction};

pub(super) struct Tx {
    pub tx: Transaction<'static, Postgres>,
    events: Vec<Event>,
    wake: Option<String>,
}

const INSERT_EVENTS: &str = concat!(
    "INSERT INTO events (event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload) \
     SELECT e.event_type, e.plan_id, e.task_id, e.worker_id, e.epoch, e.from_status, e.to_status, e.payload::jsonb \
     FROM UNNEST($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::text[], $7::text[], $8::text[]) \
       WITH ORDINALITY AS e(event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload, n) \
     ORDER BY e.n RETURNING ",
    event_cols!()
);

impl Tx {
    pub(super) async fn begin(inner: &Inner) -> StoreResult<Tx> {
        Ok(Tx {
            tx: inner.pool.begin().await?,
            events: Vec::new(),
            wake: None,
        })
    }

    /// Marks the transaction as one that may make work claimable in `plan_id`.
    pub(super) fn wake(&mut self, plan_id: &str) {
        if self.wake.is_none() {
            self.wake = Some(plan_id.to_string());
        }
    }

    pub(super) async fn event(&mut self, ev: Ev) -> StoreResult<Event> {
        let mut out = self.events_batch(vec![ev]).await?;
        out.pop()
            .ok_or_else(|| crate::store::StoreError::Corrupt("event insert returned no row".into()))
    }

    /// Inserts many events with one statement (imports write one per task).
    pub(super) async fn events_batch(&mut self, evs: Vec<Ev>) -> StoreResult<Vec<Event>> {
        if evs.is_empty() {
            return Ok(Vec::new());
        }
        let n = evs.len();
        let mut types = Vec::with_capacity(n);
        let mut plans = Vec::with_capacity(n);
        let mut tasks = Vec::with_capacity(n);
        let mut workers = Vec::with_capacity(n);
        let mut epochs = Vec::with_capacity(n);
        let mut froms = Vec::with_capacity(n);
        let mut tos = Vec::with_capacity(n);
        let mut payloads = Vec::with_capacity(n);
        for mut e in evs {
            // Whatever an event carries (agent output, operator text, evidence) is redacted
            // here, the one place every event passes through.
            crate::domain::payload_caps::prepare(&mut e.payload);
            types.push(e.event_type);
            plans.push(e.plan_id);
            tasks.push(e.task_id);
            workers.push(e.worker_id);
            epochs.push(e.epoch);
            froms.push(e.from.map(|s| s.as_str().to_string()));
            tos.push(e.to.map(|s| s.as_str().to_string()));
            payloads.push(e.payload.to_string());
        }
        let rows: Vec<EventRow> = sqlx::query_as(INSERT_EVENTS)
            .bind(types)
            .bind(plans)
            .bind(tasks)
            .bind(workers)
            .bind(epochs)
            .bind(froms)
            .bind(tos)
            .bind(payloads)
            .fetch_all(&mut *self.tx)
            .await?;
        let mut out = rows
            .into_iter()
            .map(EventRow::into_event)
            .collect::<StoreResult<Vec<_>>>()?;
        out.sort_by_key(|e| e.id);
        self.events.extend(out.iter().cloned());
        Ok(out)
    }

    /// Commits; the notification (if any) is delivered by Postgres at COMMIT, and the mirror is
    /// written only once the events are durable.
    pub(super) async fn commit(mut self, inner: &Inner) -> StoreResult<Vec<Event>> {
        if let Some(plan_id) = self.wake.take()
            && inner.notify_enabled()
        {
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(super::wake::CHANNEL)
                .bind(plan_id)
                .execute(&mut *self.tx)
                .await?;
        }
        self.tx.commit().await?;
        inner.mirror(&self.events);
        Ok(self.events)
    }
}

impl Tx {
    /// The task, locked for this transaction.
    pub(super) async fn task_by_id(
        &mut self,
        plan_id: &str,
        task_id: &str,
    ) -> StoreResult<TaskRecord> {
        let row: Option<TaskRow> = sqlx::query_as(concat!(
            "SELECT ",
            task_cols!(),
            " FROM tasks WHERE plan_id = $1 AND task_id = $2 FOR UPDATE"
        ))
        .bind(plan_id)
        .bind(task_id)
        .fetch_optional(&mut *self.tx)
        .await?;
        match row {
            Some(r) => r.into_record(),
            None => Err(StoreError::NotFound {
                kind: "task",
                id: format!("{plan_id}/{task_id}"),
            }),
        }
    }

    /// The task a lease names, locked, if the lease is still the task's; `Stale` otherwise.
    pub(super) async fn leased(&mut self, lease: Lease) -> StoreResult<TaskRecord> {
        let row: Option<TaskRow> = sqlx::query_as(concat!(
            "SELECT ",
            task_cols!(),
            " FROM tasks WHERE pk = $1 AND epoch = $2 AND status IN ('CLAIMED', 'IN_PROGRESS') FOR UPDATE"
        ))
        .bind(lease.task_pk)
        .bind(lease.epoch)
        .fetch_optional(&mut *self.tx)
        .await?;
        match row {
            Some(r) => r.into_record(),
            None => Err(StoreError::Stale {
                task_pk: lease.task_pk,
                epoch: lease.epoch,
            }),
        }
    }

    /// Moves the (already locked) `t` to `m.to`: settles cost, releases any reservation, clears
    /// the lease, keeps children's `pending_deps` right and writes the event.
    ///
    /// Locks are taken task → children (by pk) → plan, the same order as everywhere else, so
    /// two completions never wait on each other in a cycle.
    pub(super) async fn apply_move(&mut self, t: &TaskRecord, m: Move) -> StoreResult<TaskRecord> {
        let row: TaskRow = sqlx::query_as(concat!(
            "UPDATE tasks SET status = $2, epoch = epoch + $3, \
               attempts = CASE WHEN $4 THEN 0 ELSE GREATEST(0, attempts + $5) END, \
               cost_micros = CASE WHEN $6 THEN 0 ELSE cost_micros + $7 END, \
               reserved_micros = 0, worker_id = NULL, lease_expires_at = NULL, \
               deadline_at = NULL, reason = $8, updated_at = now() \
             WHERE pk = $1 RETURNING ",
            task_cols!()
        ))
        .bind(t.pk)
        .bind(m.to.as_str())
        .bind(i64::from(m.bump_epoch))
        .bind(m.reset_attempts)
        .bind(m.attempts_delta)
        .bind(m.reset_cost)
        .bind(m.cost.micros())
        .bind(&m.reason)
        .fetch_one(&mut *self.tx)
        .await?;
        let after = row.into_record()?;
        self.adjust_children(t.pk, t.status, m.to).await?;
        if m.cost != Usd::ZERO || t.reserved != Usd::ZERO {
            sqlx::query(
                "UPDATE plans SET spent_micros = spent_micros + $2, \
                 reserved_micros = GREATEST(0, reserved_micros - $3), updated_at = now() WHERE id = $1",
            )
            .bind(&t.plan_id)
            .bind(m.cost.micros())
            .bind(t.reserved.micros())
            .execute(&mut *self.tx)
            .await?;
        }
        let mut ev = Ev::task(&m.event_type, t, m.to, m.payload);
        if m.bump_epoch {
            ev.epoch = Some(after.epoch);
        }
        self.event(ev).await?;
        // Back in the queue, a reservation handed back that a budget-bound claim may be
        // waiting for, or key files let go that another task waits for.
        if m.to == Status::Pending || t.reserved != Usd::ZERO || frees_keys(t) {
            self.wake(&t.plan_id);
        }
        Ok(after)
    }

    /// The one place the DONE rule lives: a move into DONE unblocks children, out of DONE
    /// re-blocks them. Children are locked in pk order so concurrent parents never deadlock.
    pub(super) async fn adjust_children(
        &mut self,
        pk: i64,
        from: Status,
        to: Status,
    ) -> StoreResult<()> {
        let delta = children_delta(from, to);
        if delta == 0 {
            return Ok(());
        }
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "WITH locked AS MATERIALIZED ( \
               SELECT t.pk FROM tasks t JOIN task_deps d ON d.task_pk = t.pk \
               WHERE d.depends_on_pk = $1 ORDER BY t.pk FOR UPDATE OF t) \
             UPDATE tasks SET pending_deps = GREATEST(0, pending_deps + $2), updated_at = now() \
             FROM locked WHERE tasks.pk = locked.pk \
             RETURNING tasks.plan_id, tasks.status, tasks.pending_deps",
        )
        .bind(pk)
        .bind(delta)
        .fetch_all(&mut *self.tx)
        .await?;
        if let Some((plan_id, _, _)) = rows.iter().find(|(_, s, n)| s == "PENDING" && *n == 0) {
            let plan_id = plan_id.clone();
            self.wake(&plan_id);
        }
        Ok(())
    }
}

pub(super) use crate::store::sql_common::{Move, frees_keys};
