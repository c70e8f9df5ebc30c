//! `/metrics`: what the queue holds now, in Prometheus' text format, gathered at scrape time
//! from the store (so every process serving it agrees). Names follow Prometheus' conventions
//! (base units, `_total` on counters), and no label carries a task id.

use super::AppCtx;
use crate::domain::Status;
use crate::store::{EventFilter, event_types as et};
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use prometheus_client::registry::Unit;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlanState {
    plan: String,
    state: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PlanLabel {
    plan: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Reason {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Kind {
    kind: String,
}

const STATES: [Status; 8] = [
    Status::Pending,
    Status::Claimed,
    Status::InProgress,
    Status::Blocked,
    Status::HumanLoop,
    Status::Done,
    Status::Failed,
    Status::Skipped,
];

pub(super) async fn metrics(State(ctx): State<AppCtx>) -> Response {
    match gather(&ctx).await {
        Ok(text) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the queue does not answer: {e}\n"),
        )
            .into_response(),
    }
}

async fn gather(ctx: &AppCtx) -> Result<String, String> {
    let plans = ctx.store.list_plans().await.map_err(|e| e.to_string())?;
    let workers = ctx.store.list_workers().await.map_err(|e| e.to_string())?;
    // Counters are counted from the audit trail, so they survive restarts and agree across
    // every process that serves them.
    let events = ctx
        .store
        .events(&EventFilter {
            event_types: vec![
                et::TASK_CLAIMED.into(),
                et::TASK_DONE.into(),
                et::TASK_FAILED.into(),
                et::TASK_CREATED.into(),
                et::TASK_STARTED.into(),
                et::TASK_RETRY.into(),
                et::TASK_RELEASED.into(),
                et::TASK_RESET.into(),
            ],
            ..EventFilter::default()
        })
        .await
        .map_err(|e| e.to_string())?;
    let mut reg = Registry::with_prefix("whilly");
    let tasks = Family::<PlanState, Gauge>::default();
    reg.register("tasks", "Tasks by plan and state", tasks.clone());
    let remaining = Family::<PlanLabel, Gauge<f64, AtomicU64>>::default();
    reg.register(
        "plan_budget_remaining_usd",
        "What is left of each plan's budget (plans with a budget)",
        remaining.clone(),
    );
    let online = Gauge::<i64>::default();
    reg.register(
        "workers_online",
        "Workers with a recent heartbeat",
        online.clone(),
    );
    let pending = Gauge::<i64>::default();
    reg.register(
        "claims_pending",
        "Tasks ready to be claimed (PENDING, no dependency left)",
        pending.clone(),
    );
    let claims = Counter::<u64>::default();
    reg.register("claims", "Claims made", claims.clone());
    let completes = Counter::<u64>::default();
    reg.register("completes", "Attempts that ended DONE", completes.clone());
    let fails = Family::<Reason, Counter>::default();
    reg.register(
        "fails",
        "Attempts that ended FAILED, by reason",
        fails.clone(),
    );
    let tokens = Family::<Kind, Counter>::default();
    reg.register("agent_tokens", "Tokens the agents reported", tokens.clone());
    let cost = Counter::<f64, AtomicU64>::default();
    reg.register(
        "agent_cost_usd",
        "What the agents cost, in USD",
        cost.clone(),
    );
    let duration = Histogram::new(exponential_buckets(1.0, 2.0, 14));
    reg.register_with_unit(
        "task_duration",
        "Attempts from start to DONE or FAILED",
        Unit::Seconds,
        duration.clone(),
    );
    let wait = Histogram::new(exponential_buckets(0.01, 3.0, 14));
    reg.register_with_unit(
        "queue_wait",
        "Tasks from queued (created, retried, released or reset) to claimed",
        Unit::Seconds,
        wait.clone(),
    );
    let t = timings(&events);
    for d in t.durations {
        duration.observe(d);
    }
    for w in t.waits {
        wait.observe(w);
    }

    let now = chrono::Utc::now();
    online.set(
        workers
            .iter()
            .filter(|w| w.online(now, ctx.offline_after))
            .count() as i64,
    );
    let mut spent = 0.0;
    let mut ready = 0u64;
    for p in &plans {
        for s in STATES {
            tasks
                .get_or_create(&PlanState {
                    plan: p.plan.id.clone(),
                    state: s.to_string(),
                })
                .set(p.counts.get(s) as i64);
        }
        if let Some(b) = p.plan.budget {
            remaining
                .get_or_create(&PlanLabel {
                    plan: p.plan.id.clone(),
                })
                .set((b.as_f64() - p.plan.spent.as_f64()).max(0.0));
        }
        spent += p.plan.spent.as_f64();
        if !p.plan.paused {
            ready += p.counts.ready;
        }
    }
    pending.set(ready as i64);
    cost.inc_by(spent);
    for e in &events {
        match e.event_type.as_str() {
            et::TASK_CLAIMED => {
                claims.inc();
            }
            et::TASK_DONE => {
                completes.inc();
            }
            et::TASK_FAILED => {
                let reason = e.payload["reason"]
                    .as_str()
                    .or_else(|| e.payload["error_class"].as_str())
                    .unwrap_or("unknown");
                fails
                    .get_or_create(&Reason {
                        reason: reason.to_string(),
                    })
                    .inc();
            }
            _ => continue,
        }
        let usage = &e.payload["usage"];
        for kind in ["input_tokens", "output_tokens"] {
            if let Some(n) = usage[kind].as_u64() {
                tokens
                    .get_or_create(&Kind {
                        kind: kind.trim_end_matches("_tokens").to_string(),
                    })
                    .inc_by(n);
            }
        }
    }
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &reg).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Durations read off the audit trail, in seconds.
#[derive(Debug, Default, PartialEq)]
struct Timings {
    /// Each attempt, from `task.started` to its DONE or FAILED.
    durations: Vec<f64>,
    /// Each claim, from when the task was queued (created, retried, released, reset).
    waits: Vec<f64>,
}

/// Pure over events in id order.
fn timings(events: &[crate::store::Event]) -> Timings {
    use std::collections::HashMap;
    let mut queued: HashMap<(&str, &str), chrono::DateTime<chrono::Utc>> = HashMap::new();
    let mut started: HashMap<(&str, &str), chrono::DateTime<chrono::Utc>> = HashMap::new();
    let mut t = Timings::default();
    let secs = |a: chrono::DateTime<chrono::Utc>, b: chrono::DateTime<chrono::Utc>| {
        ((b - a).num_milliseconds().max(0) as f64) / 1000.0
    };
    for e in events {
        let (Some(plan), Some(task)) = (e.plan_id.as_deref(), e.task_id.as_deref()) else {
            continue;
        };
        let key = (plan, task);
        match e.event_type.as_str() {
            et::TASK_CREATED | et::TASK_RETRY | et::TASK_RELEASED | et::TASK_RESET => {
                queued.insert(key, e.ts);
            }
            et::TASK_CLAIMED => {
                if let Some(q) = queued.remove(&key) {
                    t.waits.push(secs(q, e.ts));
                }
            }
            et::TASK_STARTED => {
                started.insert(key, e.ts);
            }
            et::TASK_DONE | et::TASK_FAILED => {
                if let Some(s) = started.remove(&key) {
                    t.durations.push(secs(s, e.ts));
                }
            }
            _ => {}
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(id: i64, kind: &str, task: &str, at_ms: i64) -> crate::store::Event {
        crate::store::Event {
            id,
            ts: chrono::DateTime::from_timestamp_millis(1_700_000_000_000 + at_ms).unwrap(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: Some(task.into()),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload: serde_json::Value::Null,
        }
    }

    #[test]
    fn attempts_and_waits_are_read_off_the_trail() {
        let events = [
            ev(1, et::TASK_CREATED, "A", 0),
            ev(2, et::TASK_CREATED, "B", 0),
            ev(3, et::TASK_CLAIMED, "A", 500),
            ev(4, et::TASK_STARTED, "A", 600),
            ev(5, et::TASK_FAILED, "A", 2600),
            ev(6, et::TASK_RETRY, "A", 3000),
            ev(7, et::TASK_CLAIMED, "A", 4000),
            ev(8, et::TASK_STARTED, "A", 4000),
            ev(9, et::TASK_DONE, "A", 5000),
            ev(10, et::TASK_CLAIMED, "B", 250),
        ];
        let t = timings(&events);
        assert_eq!(t.waits, vec![0.5, 1.0, 0.25]);
        assert_eq!(t.durations, vec![2.0, 1.0]);
    }
}
