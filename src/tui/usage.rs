//! Tokens and working time per task, from the audit trail in view: each settled attempt's
//! evidence carries the agent's `usage`; `task.started` to the attempt's end is its time.

use crate::store::{Event, event_types as et};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TaskUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Time its attempts ran (a running one counts until `now`).
    pub busy: Duration,
}

/// Usage per task id over `events` (oldest first).
pub(crate) fn usage_by_task(events: &[Event], now: DateTime<Utc>) -> BTreeMap<String, TaskUsage> {
    let mut out: BTreeMap<String, TaskUsage> = BTreeMap::new();
    let mut started: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    for e in events {
        let Some(task) = e.task_id.as_deref() else {
            continue;
        };
        let u = out.entry(task.to_string()).or_default();
        if let Some((i, o)) = find_usage(&e.payload) {
            u.input_tokens += i;
            u.output_tokens += o;
        }
        match e.event_type.as_str() {
            et::TASK_STARTED => {
                started.insert(task.to_string(), e.ts);
            }
            et::TASK_DONE
            | et::TASK_FAILED
            | et::TASK_RETRY
            | et::TASK_RELEASED
            | et::TASK_HUMAN_LOOP
            | et::TASK_BLOCKED
            | et::TASK_LEASE_EXPIRED
            | et::TASK_DEADLINE_PASSED => {
                if let Some(t0) = started.remove(task) {
                    u.busy += (e.ts - t0).to_std().unwrap_or_default();
                }
            }
            _ => {}
        }
    }
    for (task, t0) in started {
        out.entry(task).or_default().busy += (now - t0).to_std().unwrap_or_default();
    }
    out
}

/// The first `usage` object with token counts anywhere in a payload.
fn find_usage(v: &Value) -> Option<(u64, u64)> {
    let map = v.as_object()?;
    if let Some(u) = map.get("usage").and_then(Value::as_object) {
        let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
        let (i, o) = (n("input_tokens"), n("output_tokens"));
        if i > 0 || o > 0 {
            return Some((i, o));
        }
    }
    map.values().find_map(find_usage)
}

/// `1234567` → `1.2M`, `12345` → `12.3k`.
pub(crate) fn short_count(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, secs: i64, payload: Value) -> Event {
        Event {
            id: secs,
            ts: DateTime::from_timestamp(1_700_000_000 + secs, 0).unwrap_or_default(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: Some("T".into()),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload,
        }
    }

    #[test]
    fn tokens_add_up_and_time_counts_each_attempt() {
        let events = [
            ev(et::TASK_STARTED, 0, json!({})),
            ev(
                et::TASK_RETRY,
                10,
                json!({"evidence": {"usage": {"input_tokens": 1000, "output_tokens": 50}}}),
            ),
            ev(et::TASK_STARTED, 20, json!({})),
            ev(
                et::TASK_DONE,
                50,
                json!({"usage": {"input_tokens": 2000, "output_tokens": 150}}),
            ),
        ];
        let now = DateTime::from_timestamp(1_700_000_100, 0).unwrap_or_default();
        let u = usage_by_task(&events, now)["T"];
        assert_eq!((u.input_tokens, u.output_tokens), (3000, 200));
        assert_eq!(u.busy, Duration::from_secs(40));
        // A running attempt counts until now.
        let u = usage_by_task(&events[..3], now)["T"];
        assert_eq!(u.busy, Duration::from_secs(10 + 80));
    }

    #[test]
    fn counts_are_short() {
        assert_eq!(short_count(999), "999");
        assert_eq!(short_count(12_345), "12.3k");
        assert_eq!(short_count(1_234_567), "1.2M");
    }
}
