//! What both SQL stores decide the same way, as pure functions: how an import maps file tasks to
//! rows (create / update / keep), which fields changed, how outcomes become event payloads, and the
//! "moves into and out of DONE" rule for children's `pending_deps`.
//!
//! Keeping these here (no IO) is what lets SQLite and Postgres agree exactly.

use super::NewEvent;
use super::error::{StoreError, StoreResult};
use super::types::{ImportOptions, Outcome, TaskRecord};
use crate::domain::{Action, PlanSpec, Status, TaskSpec, Usd, transition};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};

/// Attempts allowed when neither the task nor the options say.
pub(crate) const DEFAULT_MAX_ATTEMPTS: i64 = 3;

/// The status a task gets when it is first imported, from the status its file declared:
/// anything in flight in the file (claimed, in progress) starts over as PENDING.
pub(crate) fn status_from_file(declared: Option<Status>) -> Status {
    match declared {
        None | Some(Status::Pending | Status::Claimed | Status::InProgress) => Status::Pending,
        Some(s) => s,
    }
}

/// `task.max_attempts`, else the options' default, else 3; never below 1.
pub(crate) fn max_attempts_for(task: &TaskSpec, default_max_attempts: u32) -> i64 {
    let n = task.max_attempts.unwrap_or(default_max_attempts);
    if n == 0 {
        DEFAULT_MAX_ATTEMPTS
    } else {
        i64::from(n)
    }
}

/// The plan id an import writes to.
pub(crate) fn effective_plan_id(plan: &PlanSpec, opts: &ImportOptions) -> String {
    opts.plan_id.clone().unwrap_or_else(|| plan.id.clone())
}

/// The budget an import sets: the options override the file.
pub(crate) fn effective_budget(plan: &PlanSpec, opts: &ImportOptions) -> Option<Usd> {
    opts.budget.or(plan.budget_usd)
}

/// The spec stored on the plan row: tasks removed (they live in their own rows), the effective id
/// and budget set, so export gives back what the queue actually runs.
pub(crate) fn plan_row_spec(plan: &PlanSpec, opts: &ImportOptions) -> PlanSpec {
    PlanSpec {
        id: effective_plan_id(plan, opts),
        budget_usd: effective_budget(plan, opts),
        tasks: Vec::new(),
        ..plan.clone()
    }
}

/// Names of the top-level fields that differ between two serialisable values, in field order,
/// leaving out `ignore`. New fields added to the specs are compared automatically.
pub(crate) fn changed_fields<T: Serialize>(old: &T, new: &T, ignore: &[&str]) -> Vec<String> {
    let (Ok(Value::Object(a)), Ok(Value::Object(b))) =
        (serde_json::to_value(old), serde_json::to_value(new))
    else {
        return vec!["spec".to_string()];
    };
    let mut out = Vec::new();
    for (k, v) in &b {
        if !ignore.contains(&k.as_str()) && a.get(k) != Some(v) {
            out.push(k.clone());
        }
    }
    for k in a.keys() {
        if !ignore.contains(&k.as_str()) && !b.contains_key(k) {
            out.push(k.clone());
        }
    }
    out
}

/// Fields of a task spec that changed. The declared `status` is not compared: it only seeds a
/// new row, after which the queue's live status rules (export writes live statuses back).
pub(crate) fn task_changes(old: &TaskSpec, new: &TaskSpec) -> Vec<String> {
    // The common case (nothing changed) without serialising both sides.
    let mut same = old.clone();
    same.status = new.status;
    if same == *new {
        return Vec::new();
    }
    changed_fields(old, new, &["status"])
}

/// Fields of the stored plan spec that changed (both already in `plan_row_spec` form).
pub(crate) fn plan_changes(old: &PlanSpec, new: &PlanSpec) -> Vec<String> {
    changed_fields(old, new, &["tasks", "format"])
}

/// A task that has not started may be rewritten by a re-import: PENDING or SKIPPED and never
/// claimed (an operator's or the gate's skip of untouched work).
pub(crate) fn is_unstarted(status: Status, attempts: i64) -> bool {
    attempts == 0 && matches!(status, Status::Pending | Status::Skipped)
}

/// A stored task as the importer needs to see it.
#[derive(Debug, Clone)]
pub(crate) struct ExistingTask {
    pub pk: i64,
    pub status: Status,
    pub attempts: i64,
    pub spec: TaskSpec,
}

/// What to do with one task of the file.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TaskPlan {
    /// A new row with this status. `created_as` is the status the `task.created` event shows;
    /// when the gate skips the task, a `task.skipped` event follows from it to `status`.
    Create {
        created_as: Status,
        status: Status,
        reason: Option<String>,
    },
    /// An unstarted task whose spec changed: rewrite spec, priority, deps, limits; status may move
    /// between PENDING and SKIPPED (gate).
    Update {
        changed: Vec<String>,
        status: Status,
        reason: Option<String>,
    },
    /// Changed in the file but started: left as it is.
    KeepStarted {
        changed: Vec<String>,
    },
    Unchanged,
}

impl TaskPlan {
    pub(crate) fn gate_skipped(&self) -> bool {
        matches!(self, TaskPlan::Create { created_as, status: Status::Skipped, .. } if *created_as != Status::Skipped)
            || matches!(
                self,
                TaskPlan::Update {
                    status: Status::Skipped,
                    ..
                }
            )
    }
}

/// One task row an import writes: a new one (`pk` none) or an unstarted one rewritten.
#[derive(Debug, Clone)]
pub(crate) struct RowWrite<'a> {
    pub pk: Option<i64>,
    /// The task's place in the file.
    pub ord: i64,
    pub task: &'a TaskSpec,
    pub status: Status,
    pub reason: Option<String>,
    /// Its dependency edges must be written again (a new task, or changed dependencies).
    pub rewire: bool,
}

/// What an import writes besides the plan's row, decided once for both backends: the rows, and
/// their events in the order they are appended (the rewrites', then the creations', each in
/// file order). Each backend applies them in its own dialect.
#[derive(Debug, Default)]
pub(crate) struct TaskWrites<'a> {
    pub creates: Vec<RowWrite<'a>>,
    pub updates: Vec<RowWrite<'a>>,
    pub events: Vec<Ev>,
}

/// Turns `decisions` (from [`plan_import`]) into the writes, filling in the task lists of
/// `report`. `stored_order`: the stored tasks' ids in their order, for the ones the file lost.
pub(crate) fn task_writes<'a>(
    plan_id: &str,
    plan: &'a PlanSpec,
    decisions: &[TaskPlan],
    existing: &HashMap<String, ExistingTask>,
    stored_order: Vec<String>,
    opts: &ImportOptions,
    report: &mut super::types::ImportReport,
) -> TaskWrites<'a> {
    use super::event_types as et;
    let mut out = TaskWrites::default();
    let mut created_events = Vec::new();
    for (ord, (t, d)) in plan.tasks.iter().zip(decisions).enumerate() {
        let ord = i64::try_from(ord).unwrap_or(i64::MAX);
        let event = |event_type: &str, from: Option<Status>, to: Status, payload| Ev {
            event_type: event_type.to_string(),
            plan_id: Some(plan_id.to_string()),
            task_id: Some(t.id.clone()),
            from,
            to: Some(to),
            payload,
            ..Default::default()
        };
        match d {
            TaskPlan::Create {
                created_as,
                status,
                reason,
            } => {
                out.creates.push(RowWrite {
                    pk: None,
                    ord,
                    task: t,
                    status: *status,
                    reason: reason.clone(),
                    rewire: true,
                });
                created_events.push(event(
                    et::TASK_CREATED,
                    None,
                    *created_as,
                    payload::task_created(t, max_attempts_for(t, opts.default_max_attempts)),
                ));
                if status != created_as {
                    created_events.push(event(
                        et::TASK_SKIPPED,
                        Some(*created_as),
                        *status,
                        payload::gate_skip(reason.as_deref()),
                    ));
                }
                report.created.push(t.id.clone());
            }
            TaskPlan::Update {
                changed,
                status,
                reason,
            } => {
                let Some(old) = existing.get(&t.id) else {
                    continue;
                };
                out.updates.push(RowWrite {
                    pk: Some(old.pk),
                    ord,
                    task: t,
                    status: *status,
                    reason: reason.clone(),
                    rewire: changed.iter().any(|f| f == "dependencies"),
                });
                // One event carries both the rewrite and any gate move (PENDING ↔ SKIPPED).
                out.events.push(event(
                    et::TASK_UPDATED,
                    Some(old.status),
                    *status,
                    payload::fields_changed(changed),
                ));
                report.updated.push(t.id.clone());
            }
            TaskPlan::KeepStarted { .. } => report.kept_started.push(t.id.clone()),
            TaskPlan::Unchanged => report.unchanged.push(t.id.clone()),
        }
        if d.gate_skipped() {
            report.skipped.push(t.id.clone());
        }
    }
    out.events.extend(created_events);
    let in_file: HashSet<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
    report.missing_from_file = stored_order
        .into_iter()
        .filter(|id| !in_file.contains(id.as_str()))
        .collect();
    out
}

/// Decides, per task of the file (in file order), what an import does. Refuses duplicate ids and
/// dependencies that name a task neither in the file nor already stored.
pub(crate) fn plan_import(
    plan: &PlanSpec,
    opts: &ImportOptions,
    existing: &HashMap<String, ExistingTask>,
) -> StoreResult<Vec<TaskPlan>> {
    let plan_id = effective_plan_id(plan, opts);
    if plan_id.is_empty() {
        return Err(StoreError::Invalid(
            "the plan has an empty id; set plan_id in the file".into(),
        ));
    }
    let mut seen = HashSet::new();
    for t in &plan.tasks {
        if !seen.insert(t.id.as_str()) {
            return Err(StoreError::Invalid(format!(
                "plan {plan_id}: task id {:?} appears twice; task ids must be unique",
                t.id
            )));
        }
    }
    for t in &plan.tasks {
        for d in &t.dependencies {
            if !seen.contains(d.as_str()) && !existing.contains_key(d) {
                return Err(StoreError::Invalid(format!(
                    "plan {plan_id}: task {:?} depends on {d:?}, which is not a task of this plan",
                    t.id
                )));
            }
        }
    }
    let gate = |id: &str| opts.skip.get(id).cloned();
    Ok(plan
        .tasks
        .iter()
        .map(|t| match existing.get(&t.id) {
            None => {
                let created_as = status_from_file(t.status);
                match gate(&t.id) {
                    Some(reason) if transition(created_as, Action::Skip).is_ok() => {
                        TaskPlan::Create {
                            created_as,
                            status: Status::Skipped,
                            reason: Some(reason),
                        }
                    }
                    _ => TaskPlan::Create {
                        created_as,
                        status: created_as,
                        reason: None,
                    },
                }
            }
            Some(old) => {
                let changed = task_changes(&old.spec, t);
                if changed.is_empty() {
                    TaskPlan::Unchanged
                } else if is_unstarted(old.status, old.attempts) {
                    let (status, reason) = match gate(&t.id) {
                        Some(r) => (Status::Skipped, Some(r)),
                        None => (Status::Pending, None),
                    };
                    TaskPlan::Update {
                        changed,
                        status,
                        reason,
                    }
                } else {
                    TaskPlan::KeepStarted { changed }
                }
            }
        })
        .collect())
}

/// How a move from `from` to `to` changes the `pending_deps` of the task's children: moving into
/// DONE unblocks them (-1), moving out of DONE re-blocks them (+1).
pub(crate) fn children_delta(from: Status, to: Status) -> i64 {
    match (from == Status::Done, to == Status::Done) {
        (false, true) => -1,
        (true, false) => 1,
        _ => 0,
    }
}

/// Whether moving `t` (as it is before the move) out of its lease lets go of key files that
/// another task's claim may be waiting for.
pub(crate) fn frees_keys(t: &TaskRecord) -> bool {
    t.status.is_leased() && !t.spec.key_files.is_empty()
}

/// A money amount as an event field.
pub(crate) fn usd_json(v: Usd) -> Value {
    json!(v.as_f64())
}

/// `{cost_usd, reason, ...outcome.payload}`: an object payload is merged in (our keys win), any
/// other non-null payload is kept under `data`.
pub(crate) fn outcome_payload(o: &Outcome, extra: &[(&str, Value)]) -> Value {
    let mut m = Map::new();
    match &o.payload {
        Value::Object(p) => m.extend(p.clone()),
        Value::Null => {}
        other => {
            m.insert("data".into(), other.clone());
        }
    }
    m.insert("cost_usd".into(), usd_json(o.cost));
    m.insert(
        "reason".into(),
        o.reason.clone().map_or(Value::Null, Value::String),
    );
    for (k, v) in extra {
        m.insert((*k).to_string(), v.clone());
    }
    Value::Object(m)
}

/// Event payloads, built in one place so both stores write the same shapes. Readers (TUI,
/// headless printer, web) may rely on the keys documented here.
pub(crate) mod payload {
    use super::usd_json;
    use crate::domain::{TaskSpec, Usd};
    use crate::store::types::TaskRecord;
    use serde_json::{Value, json};

    /// `plan.created`: `{project, tasks, budget_usd}`.
    pub(crate) fn plan_created(project: &str, tasks: usize, budget: Option<Usd>) -> Value {
        json!({ "project": project, "tasks": tasks, "budget_usd": budget.map(usd_json) })
    }

    /// `plan.updated` / `task.updated`: `{fields: [names of the changed spec fields]}`.
    pub(crate) fn fields_changed(fields: &[String]) -> Value {
        json!({ "fields": fields })
    }

    /// `task.created`: `{priority, dependencies, max_attempts}`.
    pub(crate) fn task_created(t: &TaskSpec, max_attempts: i64) -> Value {
        json!({ "priority": t.priority, "dependencies": t.dependencies, "max_attempts": max_attempts })
    }

    /// `task.split`: `{subtasks: [ids in order], dependents: {id: [dependencies after]}}`.
    pub(crate) fn task_split(
        subtasks: &[String],
        dependents: &std::collections::BTreeMap<String, Vec<String>>,
    ) -> Value {
        json!({ "subtasks": subtasks, "dependents": dependents })
    }

    /// `task.skipped` written by an import for the decision gate: `{reason, gate: true}`.
    pub(crate) fn gate_skip(reason: Option<&str>) -> Value {
        json!({ "reason": reason, "gate": true })
    }

    /// `task.claimed`: `{attempt, reserved_usd, lease_ms, agent}`.
    pub(crate) fn claimed(attempt: i64, reserved: Usd, lease_ms: i64, agent: &str) -> Value {
        json!({
            "attempt": attempt, "reserved_usd": usd_json(reserved), "lease_ms": lease_ms,
            "agent": agent,
        })
    }

    /// `task.started`: `{deadline_ms}` (null without a deadline).
    pub(crate) fn started(deadline_ms: Option<i64>) -> Value {
        json!({ "deadline_ms": deadline_ms })
    }

    /// Extra keys of `task.retry` / `task.failed` from `fail`: the attempt that failed.
    pub(crate) fn attempt_extra(t: &TaskRecord) -> [(&'static str, Value); 2] {
        [
            ("attempt", json!(t.attempts)),
            ("max_attempts", json!(t.max_attempts)),
        ]
    }

    /// `task.cost`: `{cost_usd, task_cost_usd, plan_spent_usd}`.
    pub(crate) fn cost(cost: Usd, task_cost: Usd, plan_spent: Usd) -> Value {
        json!({
            "cost_usd": usd_json(cost),
            "task_cost_usd": usd_json(task_cost),
            "plan_spent_usd": usd_json(plan_spent),
        })
    }

    /// `task.lease_expired` / `task.deadline_passed`: `{reason, attempt, max_attempts,
    /// lease_expires_at, deadline_at}` of the row as the reaper found it.
    pub(crate) fn reaped(reason: &str, t: &TaskRecord) -> Value {
        json!({
            "reason": reason,
            "attempt": t.attempts,
            "max_attempts": t.max_attempts,
            "lease_expires_at": t.lease_expires_at,
            "deadline_at": t.deadline_at,
        })
    }

    /// `task.skipped` / `task.reset` by an operator: `{reason}`.
    pub(crate) fn operator(reason: &str) -> Value {
        json!({ "reason": reason })
    }

    /// `task.reset` written for each task a plan reset moves: `{reason: "plan reset"}`.
    pub(crate) fn plan_reset_task() -> Value {
        json!({ "reason": "plan reset" })
    }

    /// `plan.reset`: `{hard, tasks}` (tasks reset or deleted).
    pub(crate) fn plan_reset(hard: bool, tasks: usize) -> Value {
        json!({ "hard": hard, "tasks": tasks })
    }

    /// `plan.paused` / `plan.resumed`: `{}`.
    pub(crate) fn empty() -> Value {
        json!({})
    }
}

/// A status column's text; `what` names the row in the error.
pub(crate) fn parse_status(s: &str, what: &str) -> StoreResult<Status> {
    s.parse::<Status>()
        .map_err(|e| StoreError::Corrupt(format!("{what}: stored status {s:?}: {e}")))
}

/// The task columns every task query selects, in one order for both stores (a literal, so
/// Postgres queries can splice it with `concat!`).
macro_rules! task_cols {
    () => {
        "pk, plan_id, task_id, status, priority_rank, pending_deps, epoch, attempts, max_attempts, \
         worker_id, lease_expires_at, deadline_at, cost_micros, reserved_micros, reason, \
         spec, updated_at"
    };
}
pub(crate) use task_cols;

/// The plan columns every plan query selects.
macro_rules! plan_cols {
    () => {
        "id, project, paused, budget_micros, spent_micros, reserved_micros, spec, created_at, \
         updated_at, archived_at"
    };
}
pub(crate) use plan_cols;

/// The event columns every event query selects.
macro_rules! event_cols {
    () => {
        "id, ts, event_type, plan_id, task_id, worker_id, epoch, from_status, to_status, payload"
    };
}
pub(crate) use event_cols;

/// An event about to be written inside a transaction (either store's `event` / bulk insert).
#[derive(Debug, Clone, Default)]
pub(crate) struct Ev {
    pub event_type: String,
    pub plan_id: Option<String>,
    pub task_id: Option<String>,
    pub worker_id: Option<String>,
    pub epoch: Option<i64>,
    pub from: Option<Status>,
    pub to: Option<Status>,
    pub payload: Value,
}

impl Ev {
    pub(crate) fn plan(event_type: &str, plan_id: &str, payload: Value) -> Ev {
        Ev {
            event_type: event_type.to_string(),
            plan_id: Some(plan_id.to_string()),
            payload,
            ..Ev::default()
        }
    }

    /// A transition of `t` to `to`, attributed to the task's current worker and epoch.
    pub(crate) fn task(event_type: &str, t: &TaskRecord, to: Status, payload: Value) -> Ev {
        Ev {
            event_type: event_type.to_string(),
            plan_id: Some(t.plan_id.clone()),
            task_id: Some(t.id.clone()),
            worker_id: t.worker_id.clone(),
            epoch: Some(t.epoch),
            from: Some(t.status),
            to: Some(to),
            payload,
        }
    }

    /// What [`crate::store::EventLog::append_event`] writes: an event that is not a transition.
    /// Refuses an empty event type.
    pub(crate) fn appended(e: NewEvent) -> StoreResult<Ev> {
        if e.event_type.trim().is_empty() {
            return Err(StoreError::Invalid(
                "an event needs a non-empty event_type".into(),
            ));
        }
        Ok(Ev {
            event_type: e.event_type,
            plan_id: e.plan_id,
            task_id: e.task_id,
            worker_id: e.worker_id,
            epoch: e.epoch,
            from: None,
            to: None,
            payload: e.payload,
        })
    }
}

/// A JSON column decoded, with the column named in the error.
pub(crate) fn decode_json<T: DeserializeOwned>(text: &str, what: &str) -> StoreResult<T> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// A value as JSON text for a column.
pub(crate) fn encode_json<T: Serialize>(v: &T, what: &str) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Invalid(format!("{what}: {e}")))
}

/// A `Duration` in whole milliseconds, saturating.
pub(crate) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// The event and reason a reaped task is written with.
pub(crate) fn reaped_as(why: crate::domain::reap::Why) -> (&'static str, &'static str) {
    match why {
        crate::domain::reap::Why::LeaseExpired => {
            (super::event_types::TASK_LEASE_EXPIRED, "lease_expired")
        }
        crate::domain::reap::Why::DeadlinePassed => {
            (super::event_types::TASK_DEADLINE_PASSED, "deadline_passed")
        }
    }
}

/// How a task row changes in one move (`apply_move` of either store's transaction): the new
/// status, the event recorded with it, and the counters it touches.
#[derive(Debug, Clone)]
pub(crate) struct Move {
    pub to: Status,
    pub event_type: String,
    pub payload: Value,
    /// Actual spend added to the task and its plan.
    pub cost: Usd,
    pub reason: Option<String>,
    pub attempts_delta: i64,
    pub reset_attempts: bool,
    /// Zeroes the task's cost (plan reset; the plan's counters are reset by the caller).
    pub reset_cost: bool,
    /// Fences out a worker that still holds the lease (operator moves).
    pub bump_epoch: bool,
}

impl Move {
    pub(crate) fn new(to: Status, event_type: &str, payload: Value) -> Move {
        Move {
            to,
            event_type: event_type.to_string(),
            payload,
            cost: Usd::ZERO,
            reason: None,
            attempts_delta: 0,
            reset_attempts: false,
            reset_cost: false,
            bump_epoch: false,
        }
    }
}

/// A stored task of the plan as a split sees it (`Store::split_task`).
#[derive(Debug, Clone)]
pub(crate) struct SplitRow {
    pub pk: i64,
    pub status: Status,
    pub spec: TaskSpec,
}

/// What a split writes, decided the same way by both stores.
#[derive(Debug, Clone)]
pub(crate) struct SplitPlan {
    /// The subtasks, in order; they take the parent's place (`ord`), the tasks after it move
    /// down by `subtasks.len() - 1`.
    pub subtasks: Vec<TaskSpec>,
    /// What a subtask's `max_attempts` falls back to: the parent's.
    pub default_max_attempts: u32,
    /// The dependents' rows with their specs rewired (only `dependencies` changes).
    pub dependents: Vec<(i64, TaskSpec)>,
    /// `task.split` on the parent, `task.created` per subtask, `task.updated` per dependent.
    pub events: Vec<Ev>,
    pub report: super::types::SplitReport,
}

/// Refuses to split a task that has started: only a PENDING task never claimed can be
/// replaced, since a worker may hold it and its history (attempts, cost) belongs to it.
pub(crate) fn split_refusal(parent: &TaskRecord) -> Option<StoreError> {
    if parent.status == Status::Pending && parent.attempts == 0 {
        return None;
    }
    let why = if parent.status.is_leased() {
        "it is running (a worker holds it)".to_string()
    } else if parent.status == Status::Pending {
        format!(
            "it has been attempted {} time(s) already; its history belongs to it",
            parent.attempts
        )
    } else {
        "it has already ended".to_string()
    };
    Some(StoreError::Refused {
        task_id: parent.id.clone(),
        status: parent.status,
        message: format!("cannot split it: {why}; only a task that has never started can be split"),
    })
}

/// Checks `split` against the stored plan (`rows`: every task of it) and decides the writes.
pub(crate) fn plan_split(
    plan_id: &str,
    parent: &TaskRecord,
    rows: &[SplitRow],
    split: &crate::domain::TaskSplit,
) -> StoreResult<SplitPlan> {
    if let Some(refused) = split_refusal(parent) {
        return Err(refused);
    }
    let ids: std::collections::BTreeSet<String> = rows.iter().map(|r| r.spec.id.clone()).collect();
    let stored_dependents: std::collections::BTreeMap<String, Vec<String>> = rows
        .iter()
        .filter(|r| r.spec.dependencies.contains(&parent.id))
        .map(|r| (r.spec.id.clone(), r.spec.dependencies.clone()))
        .collect();
    split
        .check(&parent.spec.dependencies, &stored_dependents, &ids)
        .map_err(|e| StoreError::Invalid(format!("plan {plan_id}: {e}")))?;
    let default_max_attempts = u32::try_from(parent.max_attempts).unwrap_or(u32::MAX);
    let mut events = vec![Ev {
        event_type: super::event_types::TASK_SPLIT.to_string(),
        plan_id: Some(plan_id.to_string()),
        task_id: Some(parent.id.clone()),
        from: Some(parent.status),
        payload: payload::task_split(&split.subtask_ids(), &split.dependents),
        ..Ev::default()
    }];
    for t in &split.subtasks {
        let mut ev = Ev::plan(
            super::event_types::TASK_CREATED,
            plan_id,
            payload::task_created(t, max_attempts_for(t, default_max_attempts)),
        );
        ev.task_id = Some(t.id.clone());
        ev.to = Some(Status::Pending);
        events.push(ev);
    }
    let mut dependents = Vec::new();
    for r in rows {
        let Some(new) = split.dependents.get(&r.spec.id) else {
            continue;
        };
        let mut spec = r.spec.clone();
        spec.dependencies = new.clone();
        dependents.push((r.pk, spec));
        let mut ev = Ev::plan(
            super::event_types::TASK_UPDATED,
            plan_id,
            payload::fields_changed(&["dependencies".to_string()]),
        );
        ev.task_id = Some(r.spec.id.clone());
        ev.from = Some(r.status);
        ev.to = Some(r.status);
        events.push(ev);
    }
    Ok(SplitPlan {
        subtasks: split.subtasks.clone(),
        default_max_attempts,
        dependents,
        events,
        report: super::types::SplitReport {
            plan_id: plan_id.to_string(),
            parent: parent.id.clone(),
            subtasks: split.subtask_ids(),
            dependents: split.dependents.clone(),
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::Priority;

    fn task(id: &str, deps: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            description: format!("do {id}"),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
            ..Default::default()
        }
    }

    fn existing(spec: TaskSpec, status: Status, attempts: i64) -> ExistingTask {
        ExistingTask {
            pk: 1,
            status,
            attempts,
            spec,
        }
    }

    #[test]
    fn file_status_mapping() {
        assert_eq!(status_from_file(None), Status::Pending);
        assert_eq!(status_from_file(Some(Status::InProgress)), Status::Pending);
        assert_eq!(status_from_file(Some(Status::Claimed)), Status::Pending);
        assert_eq!(status_from_file(Some(Status::Done)), Status::Done);
        assert_eq!(status_from_file(Some(Status::HumanLoop)), Status::HumanLoop);
    }

    #[test]
    fn max_attempts_defaults() {
        let mut t = task("a", &[]);
        assert_eq!(max_attempts_for(&t, 0), 3);
        assert_eq!(max_attempts_for(&t, 5), 5);
        t.max_attempts = Some(1);
        assert_eq!(max_attempts_for(&t, 5), 1);
    }

    #[test]
    fn changes_ignore_declared_status() {
        let a = task("a", &[]);
        let mut b = a.clone();
        b.status = Some(Status::Done);
        assert!(task_changes(&a, &b).is_empty());
        b.priority = Priority::High;
        b.dependencies.push("x".into());
        assert_eq!(task_changes(&a, &b), vec!["priority", "dependencies"]);
    }

    #[test]
    fn import_decisions() {
        let mut plan = PlanSpec {
            id: "p".into(),
            ..Default::default()
        };
        let mut changed = task("b", &["a"]);
        changed.description = "new".into();
        let mut started_changed = task("c", &[]);
        started_changed.description = "new".into();
        plan.tasks = vec![task("a", &[]), changed, started_changed, task("d", &["c"])];
        let mut ex = HashMap::new();
        ex.insert("a".to_string(), existing(task("a", &[]), Status::Done, 1));
        ex.insert(
            "b".to_string(),
            existing(task("b", &["a"]), Status::Pending, 0),
        );
        ex.insert(
            "c".to_string(),
            existing(task("c", &[]), Status::Pending, 1),
        );
        let mut opts = ImportOptions::default();
        opts.skip.insert("d".into(), "gate".into());
        let out = plan_import(&plan, &opts, &ex).unwrap();
        assert_eq!(out[0], TaskPlan::Unchanged);
        assert!(
            matches!(&out[1], TaskPlan::Update { changed, status: Status::Pending, .. } if changed == &vec!["description".to_string()])
        );
        assert!(matches!(&out[2], TaskPlan::KeepStarted { .. }));
        assert_eq!(
            out[3],
            TaskPlan::Create {
                created_as: Status::Pending,
                status: Status::Skipped,
                reason: Some("gate".into())
            }
        );
        assert!(out[3].gate_skipped());
    }

    #[test]
    fn import_refuses_unknown_deps_and_duplicates() {
        let plan = PlanSpec {
            id: "p".into(),
            tasks: vec![task("a", &["zz"])],
            ..Default::default()
        };
        let err = plan_import(&plan, &ImportOptions::default(), &HashMap::new()).unwrap_err();
        assert!(err.to_string().contains("zz"), "{err}");
        let plan = PlanSpec {
            id: "p".into(),
            tasks: vec![task("a", &[]), task("a", &[])],
            ..Default::default()
        };
        assert!(plan_import(&plan, &ImportOptions::default(), &HashMap::new()).is_err());
    }

    #[test]
    fn done_rule() {
        assert_eq!(children_delta(Status::InProgress, Status::Done), -1);
        assert_eq!(children_delta(Status::Done, Status::Pending), 1);
        assert_eq!(children_delta(Status::Pending, Status::Skipped), 0);
    }

    #[test]
    fn payload_merges_outcome() {
        let o = Outcome {
            cost: Usd(1_500_000),
            reason: Some("ok".into()),
            payload: json!({"x": 1, "cost_usd": "spoofed"}),
        };
        let p = outcome_payload(&o, &[]);
        assert_eq!(p["x"], 1);
        assert_eq!(p["cost_usd"], 1.5);
        assert_eq!(p["reason"], "ok");
        let o = Outcome {
            payload: json!([1]),
            ..Default::default()
        };
        assert_eq!(outcome_payload(&o, &[])["data"], json!([1]));
    }
}
