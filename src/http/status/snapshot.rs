//! What the status page shows: read from the store in one pass ([`gather`]), then shaped
//! without IO ([`build`]) into a [`StatusSnapshot`], which is also `/status.json`.

use crate::domain::dispatch::agent_of;
use crate::domain::{Status, Usd};
use crate::engine::awaiting_human::{self, InboxKind};
use crate::store::{
    Event, EventFilter, PlanSummary, Store, StoreResult, TaskRecord, WorkerRecord,
    event_types as et,
};
use chrono::{DateTime, Utc};
use serde::{Serialize, Serializer};
use std::collections::BTreeMap;
use std::time::Duration;

/// The agent a task that names none (nor its plan) runs with, when the server does not know
/// the configured default.
const UNKNOWN_AGENT: &str = "(default)";
/// The agent name of a human doing the task (`engine::configure`: built in).
const HANDOFF_AGENT: &str = "handoff";
/// The longest task title shown; descriptions are paragraphs.
const TITLE_CHARS: usize = 100;

/// The store reads the page is made of.
#[derive(Debug, Clone, Default)]
pub(crate) struct StatusInputs {
    pub backend: String,
    pub plans: Vec<PlanSummary>,
    /// The tasks of listed plans that are leased or parked (the others are only counted).
    pub tasks: Vec<TaskRecord>,
    pub workers: Vec<WorkerRecord>,
    /// The newest events, oldest first.
    pub recent: Vec<Event>,
    /// Per leased task, the event that began its attempt (`task.started`, else `task.claimed`),
    /// and per plan with parked tasks, the events that parked them.
    pub task_events: Vec<Event>,
}

/// Reads what [`build`] needs: a few queries, plus one per running task; only plans with
/// running or parked tasks have their tasks read.
pub(crate) async fn gather(store: &dyn Store, recent: i64) -> StoreResult<StatusInputs> {
    // The events first: whatever happens after the newest of them reaches the page through
    // its stream (which goes on from that id), so the rest may be newer but never older.
    let recent = store
        .events(&EventFilter {
            limit: Some(recent),
            newest: true,
            ..EventFilter::default()
        })
        .await?;
    let plans: Vec<PlanSummary> = store
        .list_plans()
        .await?
        .into_iter()
        .filter(|p| p.plan.archived_at.is_none())
        .collect();
    let mut tasks = Vec::new();
    let mut task_events = Vec::new();
    for p in &plans {
        let leased = p.counts.get(Status::Claimed) + p.counts.get(Status::InProgress);
        let parked = p.counts.get(Status::HumanLoop) + p.counts.get(Status::Blocked);
        if leased + parked == 0 {
            continue;
        }
        let held: Vec<TaskRecord> = store
            .list_tasks(&p.plan.id)
            .await?
            .into_iter()
            .filter(|t| t.status.is_leased() || is_parked(t.status))
            .collect();
        for t in held.iter().filter(|t| t.status.is_leased()) {
            task_events.extend(
                store
                    .events(&EventFilter {
                        plan_id: Some(t.plan_id.clone()),
                        task_id: Some(t.id.clone()),
                        event_types: vec![et::TASK_CLAIMED.into(), et::TASK_STARTED.into()],
                        limit: Some(1),
                        newest: true,
                        ..EventFilter::default()
                    })
                    .await?,
            );
        }
        if parked > 0 {
            task_events.extend(
                store
                    .events(&EventFilter {
                        plan_id: Some(p.plan.id.clone()),
                        event_types: awaiting_human::NOTE_EVENTS
                            .iter()
                            .map(|s| s.to_string())
                            .collect(),
                        limit: Some(500),
                        newest: true,
                        ..EventFilter::default()
                    })
                    .await?,
            );
        }
        tasks.extend(held);
    }
    Ok(StatusInputs {
        backend: store.info().backend.to_string(),
        plans,
        tasks,
        workers: store.list_workers().await?,
        recent,
        task_events,
    })
}

fn is_parked(s: Status) -> bool {
    matches!(s, Status::HumanLoop | Status::Blocked)
}

/// Everything the page shows, at one moment.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StatusSnapshot {
    pub generated_at: DateTime<Utc>,
    pub version: &'static str,
    pub backend: String,
    pub plans: Vec<PlanRow>,
    pub running: Vec<RunningRow>,
    pub workers: Vec<WorkerRow>,
    pub inbox: Vec<InboxRow>,
    /// The newest events, newest first.
    pub events: Vec<Event>,
    /// The id of the newest event: the page's event stream goes on from here.
    pub last_event_id: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PlanRow {
    pub id: String,
    pub project: String,
    pub paused: bool,
    pub total: u64,
    pub done: u64,
    /// Tasks per state, the states with none left out.
    pub states: BTreeMap<Status, u64>,
    #[serde(serialize_with = "dollars_opt")]
    pub budget_usd: Option<Usd>,
    #[serde(serialize_with = "dollars")]
    pub spent_usd: Usd,
    #[serde(serialize_with = "dollars")]
    pub reserved_usd: Usd,
    /// What the budget has left after spend and reservations (never below zero); `None`
    /// without a budget.
    #[serde(serialize_with = "dollars_opt")]
    pub remaining_usd: Option<Usd>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct RunningRow {
    pub plan_id: String,
    pub task_id: String,
    pub title: String,
    pub status: Status,
    pub agent: String,
    /// `1/3`: this attempt against the most there may be.
    pub attempt: String,
    pub worker_id: Option<String>,
    /// When this attempt started (or was claimed, before it starts).
    pub since: Option<DateTime<Utc>>,
    pub elapsed_secs: Option<i64>,
    #[serde(serialize_with = "dollars")]
    pub cost_usd: Usd,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WorkerRow {
    pub id: String,
    pub host: String,
    pub slots: i64,
    pub heartbeat_at: DateTime<Utc>,
    pub heartbeat_age_secs: i64,
    pub online: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct InboxRow {
    pub plan_id: String,
    pub task_id: String,
    pub title: String,
    pub kind: InboxKind,
    pub label: &'static str,
    pub note: String,
}

fn dollars<S: Serializer>(u: &Usd, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(u.as_f64())
}

fn dollars_opt<S: Serializer>(u: &Option<Usd>, s: S) -> Result<S::Ok, S::Error> {
    match u {
        Some(u) => s.serialize_f64(u.as_f64()),
        None => s.serialize_none(),
    }
}

/// The page's data at `now`. `default_agent` is the configured `[run] agent`, if known.
pub(crate) fn build(
    inputs: &StatusInputs,
    now: DateTime<Utc>,
    offline_after: Duration,
    default_agent: Option<&str>,
) -> StatusSnapshot {
    let plan_of = |id: &str| inputs.plans.iter().find(|p| p.plan.id == id);
    let agent_of = |t: &TaskRecord| match plan_of(&t.plan_id) {
        Some(p) => agent_of(
            &t.spec,
            &p.plan.spec,
            default_agent.unwrap_or(UNKNOWN_AGENT),
        ),
        None => t
            .spec
            .agent
            .clone()
            .unwrap_or_else(|| default_agent.unwrap_or(UNKNOWN_AGENT).to_string()),
    };
    let plans = inputs
        .plans
        .iter()
        .map(|p| PlanRow {
            id: p.plan.id.clone(),
            project: p.plan.project.clone(),
            paused: p.plan.paused,
            total: p.counts.total,
            done: p.counts.get(Status::Done),
            states: p
                .counts
                .by_status
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(s, n)| (*s, *n))
                .collect(),
            budget_usd: p.plan.budget,
            spent_usd: p.plan.spent,
            reserved_usd: p.plan.reserved,
            remaining_usd: p
                .plan
                .budget
                .map(|b| (b - p.plan.spent - p.plan.reserved).max(Usd::ZERO)),
        })
        .collect();
    let running = inputs
        .tasks
        .iter()
        .filter(|t| t.status.is_leased())
        .map(|t| {
            // The newest start of this task's attempt (the events come newest last per query,
            // and an attempt's `task.started` follows its `task.claimed`).
            let since = inputs
                .task_events
                .iter()
                .filter(|e| {
                    e.plan_id.as_deref() == Some(t.plan_id.as_str())
                        && e.task_id.as_deref() == Some(t.id.as_str())
                        && (e.event_type == et::TASK_STARTED || e.event_type == et::TASK_CLAIMED)
                })
                .map(|e| e.ts)
                .max();
            RunningRow {
                plan_id: t.plan_id.clone(),
                task_id: t.id.clone(),
                title: title_of(&t.spec.description),
                status: t.status,
                agent: agent_of(t),
                attempt: t.tries_text(),
                worker_id: t.worker_id.clone(),
                since,
                elapsed_secs: since.map(|s| (now - s).num_seconds().max(0)),
                cost_usd: t.cost,
            }
        })
        .collect();
    let workers = inputs
        .workers
        .iter()
        .map(|w| WorkerRow {
            id: w.id.clone(),
            host: w.host.clone(),
            slots: w.slots,
            heartbeat_at: w.heartbeat_at,
            heartbeat_age_secs: (now - w.heartbeat_at).num_seconds().max(0),
            online: w.online(now, offline_after),
        })
        .collect();
    let mut inbox = Vec::new();
    for p in &inputs.plans {
        let tasks: Vec<TaskRecord> = inputs
            .tasks
            .iter()
            .filter(|t| t.plan_id == p.plan.id)
            .cloned()
            .collect();
        let events: Vec<Event> = inputs
            .task_events
            .iter()
            .filter(|e| e.plan_id.as_deref() == Some(p.plan.id.as_str()))
            .cloned()
            .collect();
        for item in awaiting_human::inbox_items(&tasks, &events, |t| agent_of(t) == HANDOFF_AGENT) {
            let title = tasks
                .iter()
                .find(|t| t.pk == item.task_pk)
                .map(|t| title_of(&t.spec.description))
                .unwrap_or_default();
            inbox.push(InboxRow {
                plan_id: p.plan.id.clone(),
                task_id: item.task_id,
                title,
                kind: item.kind,
                label: item.kind.label(),
                note: item.note,
            });
        }
    }
    let events: Vec<Event> = inputs.recent.iter().rev().cloned().collect();
    StatusSnapshot {
        generated_at: now,
        version: env!("CARGO_PKG_VERSION"),
        backend: inputs.backend.clone(),
        plans,
        running,
        workers,
        inbox,
        last_event_id: events.first().map(|e| e.id).unwrap_or(0),
        events,
    }
}

/// A task's description cut to its first line, at most [`TITLE_CHARS`] characters.
fn title_of(description: &str) -> String {
    let line = description
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    let line = line.trim();
    if line.chars().count() <= TITLE_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(TITLE_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}
