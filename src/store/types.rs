//! Records and requests the `Store` interface speaks in.

use crate::domain::{PlanSpec, Priority, Status, TaskSpec, Usd};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A plan row: its spec (without tasks) and its live budget and pause state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanRecord {
    pub id: String,
    pub project: String,
    pub paused: bool,
    pub budget: Option<Usd>,
    pub spent: Usd,
    pub reserved: Usd,
    /// The plan's spec with `tasks` empty; the tasks live in their own rows.
    pub spec: PlanSpec,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When the operator archived the plan (hidden from lists); `None` while it is listed.
    pub archived_at: Option<DateTime<Utc>>,
}

/// Counts of a plan's tasks by live status.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatusCounts {
    pub by_status: BTreeMap<Status, u64>,
    pub total: u64,
    /// PENDING tasks with no dependency left (claimable unless the plan is paused, the budget
    /// refuses them or their tags do not match): what an idle engine asks the plan, in one
    /// aggregate instead of reading every task.
    #[serde(skip)]
    pub ready: u64,
}

impl StatusCounts {
    pub fn get(&self, s: Status) -> u64 {
        self.by_status.get(&s).copied().unwrap_or(0)
    }

    /// Every task has ended (DONE, FAILED or SKIPPED) and there is at least one: nothing of the
    /// plan will run again unless someone resets it.
    pub fn all_terminal(&self) -> bool {
        self.total > 0
            && self
                .by_status
                .iter()
                .all(|(s, n)| *n == 0 || s.is_terminal())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanSummary {
    pub plan: PlanRecord,
    pub counts: StatusCounts,
}

/// A task row: the spec as imported plus its queue state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskRecord {
    /// Surrogate key, unique across plans.
    pub pk: i64,
    pub plan_id: String,
    pub id: String,
    pub status: Status,
    pub priority: Priority,
    /// Dependencies not yet DONE. A PENDING task is claimable only at zero.
    pub pending_deps: i64,
    /// Fencing token: bumped by every claim.
    pub epoch: i64,
    /// Claims made so far (a shutdown release gives its attempt back).
    pub attempts: i64,
    pub max_attempts: i64,
    pub worker_id: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    /// Actual spend settled by completed attempts.
    pub cost: Usd,
    /// Reserved by the current claim, if any.
    pub reserved: Usd,
    /// Why the task is where it is (`decision_gate_failed`, `verification_failed`, …).
    pub reason: Option<String>,
    pub spec: TaskSpec,
    pub updated_at: DateTime<Utc>,
}

impl TaskRecord {
    /// Attempts made, against the most there may be: `1/3`. A task that has ended (DONE,
    /// FAILED, SKIPPED) gets no more tries, so `1/3` there would promise retries that never
    /// come; it shows the count alone.
    pub fn tries_text(&self) -> String {
        if self.status.is_terminal() {
            self.attempts.to_string()
        } else {
            format!("{}/{}", self.attempts, self.max_attempts)
        }
    }
}

/// What a worker presents for every write after a claim. A write whose epoch is no longer the
/// task's changes nothing and writes no event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    pub task_pk: i64,
    pub epoch: i64,
}

/// A successful claim.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Claimed {
    pub lease: Lease,
    pub task: TaskRecord,
    /// The agent this attempt runs on: the task's own, or the fallback the claim chose because
    /// its own was blocked (`domain::dispatch::choose_agent`). Recorded on the task's row, so
    /// claims on every worker count the live attempts per agent against `agent_limits`.
    pub agent: String,
}

/// What a worker asks the queue for.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub worker_id: String,
    /// Only this plan, or any plan.
    pub plan_id: Option<String>,
    /// The worker's tags; a task that requires tags is only given to a worker with all of them.
    pub tags: Vec<String>,
    /// How long the lease lasts without a heartbeat.
    pub lease: Duration,
    /// Reserved per claim when the task has no `budget_usd` of its own.
    pub default_estimate: Usd,
    /// Task ids that must not be handed out (e.g. their key_files overlap running work).
    pub exclude: Vec<i64>,
    /// Agents no task may start on now (paused by a rate limit, or at their `max_parallel`): a
    /// task whose agent (its own, else its plan's, else `default_agent`) is one of them is not
    /// handed out, unless its plan's `fallback_agents` names one that is not.
    pub blocked_agents: Vec<String>,
    /// The agent of tasks and plans that name none (the worker's `[run] agent`).
    pub default_agent: String,
    /// `[agents.<name>] max_parallel`: an agent with this many live leases on the queue (every
    /// worker's, counted inside the claim's transaction) is blocked like a paused one.
    pub agent_limits: BTreeMap<String, i64>,
}

impl ClaimRequest {
    pub fn new(worker_id: impl Into<String>) -> Self {
        ClaimRequest {
            worker_id: worker_id.into(),
            plan_id: None,
            tags: Vec::new(),
            lease: Duration::from_secs(30),
            default_estimate: Usd::ZERO,
            exclude: Vec::new(),
            blocked_agents: Vec::new(),
            default_agent: String::new(),
            agent_limits: BTreeMap::new(),
        }
    }
}

/// How a leased attempt ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Outcome {
    /// What the attempt cost (settles the reservation).
    pub cost: Usd,
    /// Why (for fail/release/park), e.g. `verification_failed`, `shutdown`.
    pub reason: Option<String>,
    /// Free-form evidence stored in the event payload.
    pub payload: serde_json::Value,
}

impl Outcome {
    pub fn reason(reason: impl Into<String>) -> Self {
        Outcome {
            reason: Some(reason.into()),
            ..Default::default()
        }
    }
}

/// How `fail` treats the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// Back to PENDING while attempts remain, else FAILED.
    Retry,
    /// FAILED now (auth errors, exhausted repairs, blocked prompts).
    Final,
}

/// Where a held task goes when a worker parks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Park {
    HumanLoop,
    Blocked,
}

#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Overrides the file's `budget_usd`.
    pub budget: Option<Usd>,
    /// Overrides the file's `plan_id`.
    pub plan_id: Option<String>,
    /// Tasks to import as SKIPPED, with their reason (the strict decision gate).
    pub skip: BTreeMap<String, String>,
    /// Attempts allowed when a task does not say (`max_attempts`).
    pub default_max_attempts: u32,
}

/// What an import did, task by task.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ImportReport {
    pub plan_id: String,
    pub created_plan: bool,
    pub plan_changed: bool,
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Changed in the file but already started: left as they are.
    pub kept_started: Vec<String>,
    /// In the store but gone from the file: left as they are.
    pub missing_from_file: Vec<String>,
    pub skipped: Vec<String>,
}

impl ImportReport {
    pub fn changed_anything(&self) -> bool {
        self.created_plan
            || self.plan_changed
            || !self.created.is_empty()
            || !self.updated.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetMode {
    /// Every task back to PENDING, costs and attempts kept as history in events only.
    KeepTasks,
    /// The plan's tasks and edges deleted (events stay: they are append-only).
    Hard,
}

/// What one reaper pass did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReapReport {
    /// Lease expired (worker gone): back to PENDING.
    pub requeued: Vec<String>,
    /// Lease expired or deadline passed with no attempts left: FAILED.
    pub failed: Vec<String>,
    /// Deadline passed (task too long): back to PENDING.
    pub timed_out: Vec<String>,
}

/// One audit-trail entry. Append-only.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: i64,
    pub ts: DateTime<Utc>,
    pub event_type: String,
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    pub worker_id: Option<String>,
    pub epoch: Option<i64>,
    pub from_status: Option<Status>,
    pub to_status: Option<Status>,
    pub payload: serde_json::Value,
}

#[derive(Debug, Clone, Default)]
pub struct EventFilter {
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    /// Only events with an id greater than this.
    pub after_id: Option<i64>,
    pub limit: Option<i64>,
    /// With `limit`: the newest `limit` events instead of the oldest (still returned oldest
    /// first). What a viewer that starts late wants: the recent past, not the whole history.
    pub newest: bool,
    /// Only events of these types; empty: every type.
    pub event_types: Vec<String>,
}

/// A worker's registration, for the workers view and liveness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkerRecord {
    pub id: String,
    pub host: String,
    pub slots: i64,
    pub tags: Vec<String>,
    pub started_at: DateTime<Utc>,
    pub heartbeat_at: DateTime<Utc>,
    /// Marked offline by a reaper pass: no heartbeat for longer than the offline threshold.
    pub offline: bool,
}

impl WorkerRecord {
    /// Counted as working at `now`: not marked offline, and heard from within `offline_after`
    /// (a worker killed with SIGKILL never removes itself, and no reaper may have run yet).
    pub fn online(&self, now: DateTime<Utc>, offline_after: std::time::Duration) -> bool {
        let silent = (now - self.heartbeat_at).to_std().unwrap_or_default();
        !self.offline && silent <= offline_after
    }
}

/// Which backend a store is and where it lives, for messages and `db status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StoreInfo {
    pub backend: &'static str,
    /// A path (SQLite) or a host/database with the password removed (Postgres).
    pub location: String,
    pub applied_migrations: Vec<i64>,
    pub pending_migrations: Vec<i64>,
}

/// A piece of a remote pane's output (the terminal of an agent in another process), in order
/// per task: a snapshot of the whole screen to start or resync from, or the bytes after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneChunk {
    /// Increases per task in the order the publisher wrote them.
    pub id: i64,
    pub task_pk: i64,
    /// The attempt's epoch: a new attempt starts over from its own first snapshot.
    pub attempt: i64,
    pub snapshot: bool,
    pub rows: u16,
    pub cols: u16,
    /// `data` is deflate-compressed.
    pub compressed: bool,
    pub data: Vec<u8>,
}

/// Someone watching a task's terminal (a watch not refreshed within the TTL has ended).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneWatch {
    pub task_pk: i64,
    pub viewer: String,
    /// When this watch began: a publisher sends a fresh snapshot to each new watch.
    pub since: DateTime<Utc>,
}

/// Keys typed into a remote pane, for the worker that runs its agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaneInput {
    pub id: i64,
    pub task_pk: i64,
    pub viewer: String,
    pub data: Vec<u8>,
}

/// What [`crate::store::TaskQueue::split_task`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SplitReport {
    pub plan_id: String,
    /// The task replaced (its row is gone; its events stay).
    pub parent: String,
    /// The subtasks created, in plan order.
    pub subtasks: Vec<String>,
    /// The tasks that depended on the parent, with their dependencies after the split.
    pub dependents: BTreeMap<String, Vec<String>>,
}
