//! The write transaction every SQLite state change runs in: `BEGIN IMMEDIATE` (so two processes
//! never deadlock upgrading a read lock), the database clock read once, the events written
//! collected for the JSONL mirror, and a wakeup after commit when work may have become claimable.

use super::Shared;
use super::rows::{self, EVENT_COLS, NOW_MS, TASK_COLS};
use crate::domain::{Status, Usd};
use crate::store::error::{StoreError, StoreResult};
pub(super) use crate::store::sql_common::Ev;
use crate::store::sql_common::{children_delta, encode_json};
use crate::store::types::{Event, Lease, TaskRecord};
use sqlx::sqlite::{Sqlite, SqliteConnection};
use sqlx::{AssertSqlSafe, QueryBuilder, Transaction};

pub(super) struct WriteTx<'s> {
    tx: Transaction<'static, Sqlite>,
    /// The database clock at the start of the transaction, in ms.
    pub now: i64,
    events: Vec<Event>,
    wake: bool,
    shared: &'s Shared,
}

impl<'s> WriteTx<'s> {
    pub(super) async fn begin(shared: &'s Shared) -> StoreResult<WriteTx<'s>> {
        let mut tx = shared.writer.begin_with("BEGIN IMMEDIATE").await?;
        let now: i64 = sqlx::query_scalar(NOW_MS).fetch_one(&mut *tx).await?;
        Ok(WriteTx {
            tx,
            now,
            events: Vec::new(),
            wake: false,
            shared,
        })
    }

    pub(super) fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.tx
    }

    /// Marks that this transaction may make work claimable (waiters are woken after commit).
    pub(super) fn wake(&mut self) {
        self.wake = true;
    }

    /// Commits, then mirrors the events and wakes waiters. Returns the events written.
    pub(super) async fn commit(self) -> StoreResult<Vec<Event>> {
        self.tx.commit().await?;
        if let Some(m) = &self.shared.mirror {
            m.append(&self.events);
        }
        if self.wake {
            self.shared.wake_waiters();
        }
        if !self.events.is_empty() {
            self.shared
                .events_written
                .send_modify(|n| *n = n.wrapping_add(1));
        }
        Ok(self.events)
    }

    pub(super) async fn event(&mut self, mut ev: Ev) -> StoreResult<Event> {
        // Whatever an event carries (agent output, operator text, evidence) is redacted here,
        // the one place every event passes through.
        crate::domain::payload_caps::prepare(&mut ev.payload);
        let payload = encode_json(&ev.payload, "event payload")?;
        let sql = format!(
            "INSERT INTO events (ts, event_type, plan_id, task_id, worker_id, epoch, from_status, \
             to_status, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING {EVENT_COLS}"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(self.now)
            .bind(&ev.event_type)
            .bind(&ev.plan_id)
            .bind(&ev.task_id)
            .bind(&ev.worker_id)
            .bind(ev.epoch)
            .bind(ev.from.map(Status::as_str))
            .bind(ev.to.map(Status::as_str))
            .bind(payload)
            .fetch_one(&mut *self.tx)
            .await?;
        let e = rows::event(&row)?;
        self.events.push(e.clone());
        Ok(e)
    }

    /// Writes many events with multi-row inserts (imports of thousands of tasks).
    pub(super) async fn events_bulk(&mut self, evs: Vec<Ev>) -> StoreResult<()> {
        // 9 values per row: well under SQLite's 32,766 bound parameters.
        const CHUNK: usize = 2_000;
        let ts = rows::time(self.now)?;
        let mut evs = evs.into_iter().peekable();
        while evs.peek().is_some() {
            let mut chunk: Vec<Ev> = evs.by_ref().take(CHUNK).collect();
            let mut payloads = Vec::with_capacity(chunk.len());
            for ev in &mut chunk {
                crate::domain::payload_caps::prepare(&mut ev.payload);
                payloads.push(encode_json(&ev.payload, "event payload")?);
            }
            let mut qb = QueryBuilder::<Sqlite>::new(
                "INSERT INTO events (ts, event_type, plan_id, task_id, worker_id, epoch, \
                 from_status, to_status, payload) ",
            );
            qb.push_values(chunk.iter().zip(payloads), |mut b, (ev, payload)| {
                b.push_bind(self.now)
                    .push_bind(ev.event_type.clone())
                    .push_bind(ev.plan_id.clone())
                    .push_bind(ev.task_id.clone())
                    .push_bind(ev.worker_id.clone())
                    .push_bind(ev.epoch)
                    .push_bind(ev.from.map(Status::as_str))
                    .push_bind(ev.to.map(Status::as_str))
                    .push_bind(payload);
            });
            qb.push(" RETURNING id");
            let mut ids: Vec<i64> = qb.build_query_scalar().fetch_all(&mut *self.tx).await?;
            if ids.len() != chunk.len() {
                return Err(StoreError::Corrupt(format!(
                    "inserted {} events but got {} ids back",
                    chunk.len(),
                    ids.len()
                )));
            }
            // The rows of one INSERT take consecutive ids in VALUES order under the write lock;
            // RETURNING's row order is not promised, the ids are.
            ids.sort_unstable();
            for (id, ev) in ids.into_iter().zip(chunk) {
                self.events.push(Event {
                    id,
                    ts,
                    event_type: ev.event_type,
                    plan_id: ev.plan_id,
                    task_id: ev.task_id,
                    worker_id: ev.worker_id,
                    epoch: ev.epoch,
                    from_status: ev.from,
                    to_status: ev.to,
                    payload: ev.payload,
                });
            }
        }
        Ok(())
    }

    pub(super) async fn task_by_pk(&mut self, pk: i64) -> StoreResult<Option<TaskRecord>> {
        let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE pk = ?");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(pk)
            .fetch_optional(&mut *self.tx)
            .await?;
        row.as_ref().map(rows::task).transpose()
    }

    pub(super) async fn task_by_id(
        &mut self,
        plan_id: &str,
        task_id: &str,
    ) -> StoreResult<TaskRecord> {
        let sql = format!("SELECT {TASK_COLS} FROM tasks WHERE plan_id = ? AND task_id = ?");
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(plan_id)
            .bind(task_id)
            .fetch_optional(&mut *self.tx)
            .await?;
        match row {
            Some(r) => rows::task(&r),
            None => Err(StoreError::NotFound {
                kind: "task",
                id: format!("{plan_id}/{task_id}"),
            }),
        }
    }

    /// The task a lease names, if the lease is still the task's; `Stale` otherwise.
    pub(super) async fn leased(&mut self, lease: Lease) -> StoreResult<TaskRecord> {
        let sql = format!(
            "SELECT {TASK_COLS} FROM tasks WHERE pk = ? AND epoch = ? \
             AND status IN ('CLAIMED', 'IN_PROGRESS')"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(lease.task_pk)
            .bind(lease.epoch)
            .fetch_optional(&mut *self.tx)
            .await?;
        match row {
            Some(r) => rows::task(&r),
            None => Err(StoreError::Stale {
                task_pk: lease.task_pk,
                epoch: lease.epoch,
            }),
        }
    }

    /// Moves `t` out of where it is to `m.to`: settles cost, releases any reservation, clears the
    /// lease, keeps children's `pending_deps` right and writes the event, all guarded by the
    /// row's current (epoch, status) so a row changed meanwhile is left alone (`Ok(None)`).
    pub(super) async fn apply_move(
        &mut self,
        t: &TaskRecord,
        m: Move,
    ) -> StoreResult<Option<TaskRecord>> {
        let sql = format!(
            "UPDATE tasks SET status = ?, epoch = epoch + ?, \
               attempts = CASE WHEN ? THEN 0 ELSE MAX(0, attempts + ?) END, \
               cost_micros = CASE WHEN ? THEN 0 ELSE cost_micros + ? END, \
               reserved_micros = 0, worker_id = NULL, lease_expires_at = NULL, \
               deadline_at = NULL, reason = ?, updated_at = ? \
             WHERE pk = ? AND epoch = ? AND status = ? RETURNING {TASK_COLS}"
        );
        let row = sqlx::query(AssertSqlSafe(sql))
            .bind(m.to.as_str())
            .bind(i64::from(m.bump_epoch))
            .bind(m.reset_attempts)
            .bind(m.attempts_delta)
            .bind(m.reset_cost)
            .bind(m.cost.micros())
            .bind(&m.reason)
            .bind(self.now)
            .bind(t.pk)
            .bind(t.epoch)
            .bind(t.status.as_str())
            .fetch_optional(&mut *self.tx)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let after = rows::task(&row)?;
        if m.cost != Usd::ZERO || t.reserved != Usd::ZERO {
            sqlx::query(
                "UPDATE plans SET spent_micros = spent_micros + ?, \
                 reserved_micros = MAX(0, reserved_micros - ?), updated_at = ? WHERE id = ?",
            )
            .bind(m.cost.micros())
            .bind(t.reserved.micros())
            .bind(self.now)
            .bind(&t.plan_id)
            .execute(&mut *self.tx)
            .await?;
        }
        self.adjust_children(t.pk, t.status, m.to).await?;
        let mut ev = Ev::task(&m.event_type, t, m.to, m.payload);
        if m.bump_epoch {
            ev.epoch = Some(after.epoch);
        }
        self.event(ev).await?;
        if m.to == Status::Pending || m.to == Status::Done || frees_keys(t) {
            self.wake();
        }
        Ok(Some(after))
    }

    /// The one place the DONE rule lives: a move into DONE unblocks children, out of DONE
    /// re-blocks them.
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
        sqlx::query(
            "UPDATE tasks SET pending_deps = MAX(0, pending_deps + ?), updated_at = ? \
             WHERE pk IN (SELECT task_pk FROM task_deps WHERE depends_on_pk = ?)",
        )
        .bind(delta)
        .bind(self.now)
        .bind(pk)
        .execute(&mut *self.tx)
        .await?;
        if delta < 0 {
            self.wake();
        }
        Ok(())
    }
}

pub(super) use crate::store::sql_common::{Move, frees_keys};
