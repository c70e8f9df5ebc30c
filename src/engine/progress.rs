//! Headless progress: JSON lines on stdout, read from the same audit trail everyone else reads.
//!
//! One line per task transition, a `progress` line at most every few seconds, and a final
//! `complete` line with the exit code.

use super::worker::RunSummary;
use crate::store::{Event, EventFilter, Store, StoreResult};
use serde_json::{Value, json};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The JSON line for one event, or `None` for events that are not task transitions.
pub(crate) fn transition_line(e: &Event) -> Option<Value> {
    let to = e.to_status?;
    let mut line = json!({
        "event": "task",
        "type": e.event_type,
        "plan_id": e.plan_id,
        "task_id": e.task_id,
        "to": to.as_str(),
        "ts": e.ts.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    });
    if let Some(from) = e.from_status {
        line["from"] = json!(from.as_str());
    }
    if let Some(reason) = e.payload.get("reason").filter(|r| !r.is_null()) {
        line["reason"] = reason.clone();
    }
    // The attempt's whole cost; `cost_usd` alone is only what settled at the end (spend seen
    // while the agent ran was booked earlier).
    if let Some(cost) = e
        .payload
        .get("attempt_cost_usd")
        .or_else(|| e.payload.get("cost_usd"))
        .filter(|c| !c.is_null())
    {
        line["cost_usd"] = cost.clone();
    }
    if let Some(w) = &e.worker_id {
        line["worker"] = json!(w);
    }
    Some(line)
}

/// One human line: how the run ended, task counts, cost, time, exit code.
pub(crate) fn summary_line(plan_id: &str, s: &RunSummary) -> String {
    // The phrase, not the JSON name: this line is for the person at the prompt.
    let end = s.end.describe();
    let mut line = format!(
        "whilly: plan {plan_id}: {end} · {} done, {} failed, {} skipped of {} · {} attempts · ${:.2} · {:.1}s (exit {})",
        s.done, s.failed, s.skipped, s.total, s.attempts, s.cost_usd, s.elapsed_sec, s.exit_code
    );
    if !s.stuck.is_empty() {
        let stuck: Vec<String> = s.stuck.iter().map(ToString::to_string).collect();
        line.push_str(&format!(" · stuck: {}", stuck.join(", ")));
    }
    line
}

pub(crate) fn complete_line(s: &RunSummary) -> Value {
    json!({
        "event": "complete",
        "end": s.end,
        "exit_code": s.exit_code,
        "done": s.done,
        "failed": s.failed,
        "skipped": s.skipped,
        "total": s.total,
        "attempts": s.attempts,
        "cost_usd": s.cost_usd,
        "elapsed_sec": (s.elapsed_sec * 10.0).round() / 10.0,
        "stuck": s.stuck,
        "unlanded": s.unlanded,
        "unchanged": s.unchanged,
    })
}

/// The `complete` line of a headless run that never got to run, or was ended by an error: how
/// (`environment`, `invalid_input`, `interrupted`), the exit code and the error. A script reads
/// the same last line whatever happened.
pub(crate) fn failed_line(end: super::RunEnd, error: &str) -> Value {
    json!({
        "event": "complete",
        "end": end,
        "exit_code": end.exit_code(),
        "error": error,
    })
}

/// Follows the plan's events until `stop` resolves, printing JSON lines to `out`.
pub(crate) struct HeadlessPrinter {
    store: Arc<dyn Store>,
    plan_id: String,
    after_id: i64,
    started: Instant,
    last_progress: Option<Instant>,
    every: Duration,
    /// Where handoffs wait; each newly waiting one is said on stdout and stderr.
    handoffs: Option<crate::agent::HandoffDir>,
    said_waiting: std::collections::BTreeSet<String>,
}

impl HeadlessPrinter {
    /// Starts after the events that already exist, so a resumed run prints only what it does.
    pub(crate) async fn new(
        store: Arc<dyn Store>,
        plan_id: String,
        every: Duration,
    ) -> StoreResult<Self> {
        let existing = store
            .events(&EventFilter {
                plan_id: Some(plan_id.clone()),
                ..Default::default()
            })
            .await?;
        let after_id = existing.last().map(|e| e.id).unwrap_or(0);
        Ok(HeadlessPrinter {
            store,
            plan_id,
            after_id,
            started: Instant::now(),
            last_progress: None,
            every,
            handoffs: None,
            said_waiting: Default::default(),
        })
    }

    /// Says each handoff of the plan that starts waiting for a human in `dir` (a headless run
    /// otherwise shows nothing while it waits, up to the handoff's timeout).
    pub(crate) fn with_handoffs(mut self, dir: crate::agent::HandoffDir) -> Self {
        self.handoffs = Some(dir);
        self
    }

    /// The handoffs that began waiting since the last look: a `handoff_waiting` JSON line on
    /// `out` and a line on stderr naming the command that answers each.
    fn say_waiting(&mut self, out: &mut impl Write) {
        let Some(dir) = &self.handoffs else {
            return;
        };
        let waiting = dir.waiting(&self.plan_id);
        // Keyed by when each began: a handoff that starts again (its answer bounced on a
        // check, or another attempt) is said again, however quickly it came back.
        let key = |m: &crate::agent::handoff::HandoffMeta| {
            format!("{}@{}", m.task_id, m.started_at.to_rfc3339())
        };
        let now: std::collections::BTreeSet<String> = waiting.iter().map(key).collect();
        for m in &waiting {
            if self.said_waiting.contains(&key(m)) {
                continue;
            }
            let answer = format!(
                "whilly handoff complete {} --plan {} --status complete",
                m.task_id, m.plan_id
            );
            let line = json!({
                "event": "handoff_waiting",
                "plan_id": m.plan_id,
                "task_id": m.task_id,
                "worktree": m.cwd,
                "dir": dir.dir_for(&m.plan_id, &m.task_id),
                "timeout_s": m.timeout_s,
                "answer": answer,
                "bounced": m.bounced,
            });
            let _ = writeln!(out, "{line}");
            if let Some(b) = &m.bounced {
                eprintln!(
                    "whilly: {}: {}",
                    m.task_id,
                    b.lines().next().unwrap_or_default()
                );
            }
            eprintln!(
                "whilly: {} waits for a human: do the work in {}, then `{answer}` (or --status failed, with --message why)",
                m.task_id,
                m.cwd.display()
            );
        }
        // A handoff answered and started again (another attempt) is said again.
        self.said_waiting = now;
    }

    /// Prints what happened since the last call; a progress line when it is due (or `force`).
    pub(crate) async fn pump(&mut self, out: &mut impl Write, force: bool) -> StoreResult<()> {
        let events = self
            .store
            .events(&EventFilter {
                plan_id: Some(self.plan_id.clone()),
                after_id: Some(self.after_id),
                ..Default::default()
            })
            .await?;
        for e in &events {
            self.after_id = e.id;
            if let Some(line) = transition_line(e) {
                // Progress lines are best-effort (a closed stdout must not stop the run).
                let _ = writeln!(out, "{line}");
            }
            if e.event_type == crate::store::event_types::AGENT_PAUSED
                && let Some(p) = crate::domain::rate_limit::PauseNote::from_payload(&e.payload)
            {
                let line = json!({
                    "event": "agent_paused",
                    "agent": p.agent,
                    "until": e.payload["until"],
                    "reason": p.reason,
                    "message": p.label(&chrono::Local),
                });
                let _ = writeln!(out, "{line}");
            }
        }
        self.say_waiting(out);
        let due = self.last_progress.is_none_or(|t| t.elapsed() >= self.every);
        if force || due {
            self.last_progress = Some(Instant::now());
            let counts = self.store.counts(&self.plan_id).await?;
            let plan = self.store.get_plan(&self.plan_id).await?;
            use crate::domain::Status;
            let line = json!({
                "event": "progress",
                "done": counts.get(Status::Done),
                "total": counts.total,
                "failed": counts.get(Status::Failed),
                "skipped": counts.get(Status::Skipped),
                "running": counts.get(Status::Claimed) + counts.get(Status::InProgress),
                "cost_usd": plan.spent.as_f64(),
                "elapsed_sec": (self.started.elapsed().as_secs_f64() * 10.0).round() / 10.0,
            });
            let _ = writeln!(out, "{line}");
        }
        let _ = out.flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Status;

    #[test]
    fn transitions_become_lines_and_other_events_do_not() {
        let mut e = Event {
            id: 1,
            ts: chrono::Utc::now(),
            event_type: "task.failed".into(),
            plan_id: Some("p".into()),
            task_id: Some("T-1".into()),
            worker_id: Some("w".into()),
            epoch: Some(1),
            from_status: Some(Status::InProgress),
            to_status: Some(Status::Failed),
            payload: json!({"reason": "verification_failed", "cost_usd": 0.5}),
        };
        let line = transition_line(&e).unwrap();
        assert_eq!(line["to"], "FAILED");
        assert_eq!(line["from"], "IN_PROGRESS");
        assert_eq!(line["reason"], "verification_failed");
        e.to_status = None;
        assert!(transition_line(&e).is_none());
    }
}
