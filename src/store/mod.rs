//! The queue: one [`Store`] interface, two implementations (SQLite embedded, Postgres shared),
//! one contract test suite (`tests/store_contract.rs`) run against both.
//!
//! Every state change happens in one transaction together with its event; every transition is
//! checked by [`crate::domain::transition`] first.

pub(crate) mod error;
pub mod event_types;
pub(crate) mod mirror;
pub mod open;
pub mod postgres;
pub(crate) mod sql_common;
pub mod sqlite;
pub(crate) mod types;

pub use error::{StoreError, StoreResult};
pub use types::*;

use crate::domain::PlanSpec;
use async_trait::async_trait;
use std::time::Duration;

/// Plans and their tasks as stored: import, read, pause, archive, delete.
#[async_trait]
pub trait PlanStore: Send + Sync {
    /// Writes the plan, its tasks, dependency edges and one event each in ONE transaction.
    /// Idempotent on plan id: unchanged tasks are left alone, changed tasks that have not started
    /// are updated, started ones are kept and reported.
    async fn import_plan(&self, plan: &PlanSpec, opts: &ImportOptions)
    -> StoreResult<ImportReport>;

    async fn list_plans(&self) -> StoreResult<Vec<PlanSummary>>;

    async fn get_plan(&self, plan_id: &str) -> StoreResult<PlanRecord>;

    /// The plan's spec with its tasks (in import order) and their live statuses.
    async fn export_plan(&self, plan_id: &str) -> StoreResult<PlanSpec>;

    async fn set_plan_paused(&self, plan_id: &str, paused: bool) -> StoreResult<()>;

    async fn reset_plan(&self, plan_id: &str, mode: ResetMode) -> StoreResult<()>;

    /// Hides the plan from lists (or lists it again), with a `plan.archived` / `plan.unarchived`
    /// event; nothing else about it changes. Already so: nothing is written.
    async fn set_plan_archived(&self, plan_id: &str, archived: bool) -> StoreResult<()>;

    /// Deletes the plan and its tasks and writes `plan.deleted` (its events stay: the audit
    /// trail is append-only). `Refused` while a task of it is leased (running).
    async fn delete_plan(&self, plan_id: &str) -> StoreResult<()>;

    /// The plan's tasks in import order.
    async fn list_tasks(&self, plan_id: &str) -> StoreResult<Vec<TaskRecord>>;

    async fn get_task(&self, plan_id: &str, task_id: &str) -> StoreResult<TaskRecord>;

    /// The task with this id in `plan_id`, or (`None`) in every plan that has one, in plan
    /// order: what a command given a bare task id looks up.
    async fn find_task(
        &self,
        plan_id: Option<&str>,
        task_id: &str,
    ) -> StoreResult<Vec<TaskRecord>> {
        let plans: Vec<String> = match plan_id {
            Some(p) => vec![p.to_string()],
            None => self
                .list_plans()
                .await?
                .into_iter()
                .map(|p| p.plan.id)
                .collect(),
        };
        let mut found = Vec::new();
        for p in &plans {
            match self.get_task(p, task_id).await {
                Ok(t) => found.push(t),
                Err(StoreError::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }

    async fn get_task_by_pk(&self, task_pk: i64) -> StoreResult<TaskRecord>;

    /// The plan's tasks with these ids, in import order; ids the plan does not have are left
    /// out. What a follower of the events reloads: only the tasks they name.
    async fn tasks_by_ids(
        &self,
        plan_id: &str,
        task_ids: &[String],
    ) -> StoreResult<Vec<TaskRecord>>;

    async fn counts(&self, plan_id: &str) -> StoreResult<StatusCounts>;
}

/// The queue's work: claims and leases, how attempts end, the operator's decisions, waiting for work.
#[async_trait]
pub trait TaskQueue: Send + Sync {
    /// Claims the best ready task: PENDING, all dependencies DONE, plan not paused, budget room,
    /// tags satisfied; ordered by priority then id. Reserves the estimate against the plan budget
    /// and bumps the epoch and attempt count.
    async fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claimed>>;

    /// Extends the lease. `Stale` if the lease is no longer the task's.
    async fn heartbeat(&self, lease: Lease, extend: Duration) -> StoreResult<()>;

    /// CLAIMED → IN_PROGRESS, setting the deadline from the task's timeout.
    async fn start(&self, lease: Lease, deadline: Option<Duration>) -> StoreResult<()>;

    /// → DONE: settles cost (task and plan, releasing the reservation) and unblocks children.
    async fn complete(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord>;

    /// → PENDING (retry, attempts left) or FAILED; settles cost.
    async fn fail(
        &self,
        lease: Lease,
        mode: FailMode,
        outcome: &Outcome,
    ) -> StoreResult<TaskRecord>;

    /// → PENDING without counting the attempt (shutdown, operator pause); settles cost.
    async fn release(&self, lease: Lease, outcome: &Outcome) -> StoreResult<TaskRecord>;

    /// → HUMAN_LOOP or BLOCKED; settles cost, keeps the task for an operator.
    async fn park(&self, lease: Lease, park: Park, outcome: &Outcome) -> StoreResult<TaskRecord>;

    /// Adds spend to a running attempt (and its plan) without ending it, so budgets are watched
    /// while agents run. Returns the plan's total committed spend.
    async fn add_cost(&self, lease: Lease, cost: crate::domain::Usd) -> StoreResult<PlanRecord>;

    /// Returns expired leases to PENDING (attempt counted) or FAILED after max attempts, and
    /// tasks past their deadline likewise. Safe to run from any number of workers at once.
    async fn reap(&self) -> StoreResult<ReapReport>;

    async fn skip_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord>;

    async fn reset_task(
        &self,
        plan_id: &str,
        task_id: &str,
        reason: &str,
    ) -> StoreResult<TaskRecord>;

    async fn approve_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord>;

    async fn reject_task(
        &self,
        plan_id: &str,
        task_id: &str,
        payload: serde_json::Value,
    ) -> StoreResult<TaskRecord>;

    /// Replaces the unstarted task `split.parent` (PENDING, never claimed; else `Refused`) by
    /// its subtasks in ONE transaction: the subtasks are inserted in its place with their edges
    /// and claim keys, the dependents' specs and edges rewired as the split says, `pending_deps`
    /// recounted, and the parent's row deleted. Events: `task.split` on the parent (naming the
    /// subtasks), `task.created` per subtask, `task.updated` per dependent. `Invalid` when the
    /// split no longer fits the stored plan (see [`crate::domain::TaskSplit::check`]).
    async fn split_task(
        &self,
        plan_id: &str,
        split: &crate::domain::TaskSplit,
    ) -> StoreResult<SplitReport>;

    /// Resolves when work may have become claimable (a notification, or the polling fallback
    /// after `max_wait`). Spurious wakeups are allowed; missed ones are not.
    async fn wait_for_work(&self, max_wait: Duration);

    /// Whether [`Store::wait_for_work`] wakes for every change by any process that may make
    /// work claimable (a notification, or the store's own cheap cross-process check), so that a
    /// waiting worker needs only a slow safety poll of its own.
    fn wakes_for_work(&self) -> bool;
}

/// The append-only audit trail.
#[async_trait]
pub trait EventLog: Send + Sync {
    async fn events(&self, filter: &EventFilter) -> StoreResult<Vec<Event>>;

    /// The id of the newest event, 0 when there is none: what comes after it is news (a
    /// follower's, a stream's or a run report's starting point).
    async fn newest_event_id(&self) -> StoreResult<i64> {
        let newest = self
            .events(&EventFilter {
                limit: Some(1),
                newest: true,
                ..EventFilter::default()
            })
            .await?;
        Ok(newest.last().map_or(0, |e| e.id))
    }

    /// Appends an event that is not a task transition (budget warnings, verification evidence, …).
    async fn append_event(&self, event: NewEvent) -> StoreResult<Event>;

    /// A watch on the audit trail: it says when events may have been written since it last
    /// said so, by this process or any other.
    async fn watch_events(&self) -> Box<dyn EventWatch>;
}

/// The processes sharing the queue.
#[async_trait]
pub trait WorkerRegistry: Send + Sync {
    async fn register_worker(&self, worker: &WorkerRecord) -> StoreResult<()>;

    async fn worker_heartbeat(&self, worker_id: &str) -> StoreResult<()>;

    async fn list_workers(&self) -> StoreResult<Vec<WorkerRecord>>;

    async fn remove_worker(&self, worker_id: &str) -> StoreResult<()>;

    /// Marks workers whose heartbeat is older than `older_than` offline (one event each) and
    /// returns their ids; a later heartbeat brings a worker back online.
    async fn mark_offline_workers(&self, older_than: Duration) -> StoreResult<Vec<String>>;
}

/// Agents' screens and input relayed between processes (remote panes).
#[async_trait]
pub trait PaneRelay: Send + Sync {
    /// `viewer` watches task `task_pk`'s terminal; refreshed every few seconds while it does.
    async fn watch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()>;

    /// `viewer` stopped watching (a watch also ends by itself when it is not refreshed).
    async fn unwatch_pane(&self, task_pk: i64, viewer: &str) -> StoreResult<()>;

    /// The live watches (refreshed within `ttl`) of these tasks; older ones are removed.
    async fn pane_watches(&self, task_pks: &[i64], ttl: Duration) -> StoreResult<Vec<PaneWatch>>;

    /// Appends a chunk of a task's terminal output (its `id` is ignored); returns its id.
    async fn publish_pane(&self, chunk: &PaneChunk) -> StoreResult<i64>;

    /// Chunks after a cursor per task (`(task_pk, after_id)`), in id order, at most `limit`.
    async fn pane_chunks(&self, cursors: &[(i64, i64)], limit: i64) -> StoreResult<Vec<PaneChunk>>;

    /// The id of the newest snapshot of the task's terminal, if any.
    async fn latest_pane_snapshot(&self, task_pk: i64) -> StoreResult<Option<i64>>;

    /// Removes a task's chunks older than `before_id` (all of them with `None`) and, with
    /// `None`, its pending input too; returns how many chunks went.
    async fn prune_pane(&self, task_pk: i64, before_id: Option<i64>) -> StoreResult<u64>;

    /// Queues keys typed into a task's remote pane.
    async fn send_pane_input(&self, task_pk: i64, viewer: &str, data: &[u8]) -> StoreResult<()>;

    /// Takes (removes and returns, in order) the keys queued for these tasks.
    async fn take_pane_input(&self, task_pks: &[i64]) -> StoreResult<Vec<PaneInput>>;
}

/// The queue: every concern above, in one backend (SQLite or Postgres). Code that needs only
/// one concern takes that trait (`&dyn EventLog`); `Arc<dyn Store>` coerces to it.
#[async_trait]
pub trait Store: PlanStore + TaskQueue + EventLog + WorkerRegistry + PaneRelay {
    fn info(&self) -> StoreInfo;

    async fn close(&self);
}

/// See [`Store::watch_events`].
#[async_trait]
pub trait EventWatch: Send {
    /// Resolves `true` when events may have been written since the watch was made or since it
    /// last resolved `true` (spurious wakes allowed, missed ones not), or `false` after
    /// `max_wait` with nothing seen. Safe to cancel: a write in between is still reported.
    async fn changed(&mut self, max_wait: Duration) -> bool;
}

/// An event to append that is not a transition.
#[derive(Debug, Clone, Default)]
pub struct NewEvent {
    pub event_type: String,
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    pub worker_id: Option<String>,
    pub epoch: Option<i64>,
    pub payload: serde_json::Value,
}

/// A database URL with its password replaced by `***`, safe to print and log.
pub fn redact_url(url: &str) -> String {
    let url = &redact_query_password(url);
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let user = userinfo.split(':').next().unwrap_or("");
            let masked = if userinfo.contains(':') {
                format!("{user}:***")
            } else {
                user.to_string()
            };
            format!("{}{}{}", &url[..scheme_end + 3], masked, &rest[at..])
        }
        None => url.to_string(),
    }
}

fn redact_query_password(url: &str) -> String {
    let Some(q) = url.find('?') else {
        return url.to_string();
    };
    let (head, query) = url.split_at(q + 1);
    let parts: Vec<String> = query
        .split('&')
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
            _ => kv.to_string(),
        })
        .collect();
    format!("{head}{}", parts.join("&"))
}

/// Appends a side effect's event (a PR opened, a card moved, an issue transitioned). Such an
/// event records what already happened elsewhere: failing to write it must not undo or fail
/// that, so the failure is logged, not returned.
pub async fn record_event(
    store: &dyn EventLog,
    kind: &str,
    plan_id: &str,
    task_id: Option<&str>,
    payload: serde_json::Value,
) {
    let appended = store
        .append_event(NewEvent {
            event_type: kind.to_string(),
            plan_id: Some(plan_id.to_string()),
            task_id: task_id.map(str::to_string),
            payload,
            ..Default::default()
        })
        .await;
    if let Err(e) = appended {
        tracing::warn!(task = ?task_id, "recording {kind}: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn passwords_never_survive_redaction() {
        assert_eq!(
            redact_url("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            redact_url("postgres://h/db?sslmode=off&password=x"),
            "postgres://h/db?sslmode=off&password=***"
        );
        assert_eq!(
            redact_url("sqlite:.whilly/whilly.db"),
            "sqlite:.whilly/whilly.db"
        );
        assert!(!redact_url("postgresql://a:p%40ss@h/db").contains("p%40ss"));
    }
}
