//! The audit trail in words: one line per event with what matters for it (the reason, the check
//! that failed and its exit code, the agent, the cost, the decision, the pull request), never a
//! whole payload (a `task.failed` carries the checks' output). Pure; `whilly events` and `whilly
//! task show` print it, `--json` keeps the payloads.

use crate::store::{Event, event_types as et};
use serde_json::Value;

/// The events that end an attempt.
pub(crate) const SETTLED: &[&str] = &[
    et::TASK_DONE,
    et::TASK_FAILED,
    et::TASK_RETRY,
    et::TASK_RELEASED,
    et::TASK_HUMAN_LOOP,
    et::TASK_BLOCKED,
];

/// When the task's last attempt ended on a failed check (an approved handoff whose checks then
/// failed, or an agent's work that did not pass): which check, how, and its output's last
/// lines, one per line. `None` when the last attempt ended otherwise. `events`: the task's.
pub(crate) fn bounced(events: &[&Event]) -> Option<String> {
    let e = events
        .iter()
        .rev()
        .find(|e| SETTLED.contains(&e.event_type.as_str()))?;
    if !matches!(e.event_type.as_str(), et::TASK_RETRY | et::TASK_FAILED) {
        return None;
    }
    Some(check_failure(&e.payload, 8)?.text("the last attempt's "))
}

/// The longest summary after the event's type and task: a terminal line, not a payload.
const MAX_SUMMARY: usize = 160;
/// The longest text quoted from a payload (a detail, a message).
const MAX_TEXT: usize = 80;

/// One line for `e`: time, type, plan/task, the status move, what matters.
pub(crate) fn event_line(e: &Event) -> String {
    let mut line = format!("{}  {:<20}", e.ts.format("%Y-%m-%d %H:%M:%S"), e.event_type);
    match (&e.plan_id, &e.task_id) {
        (Some(p), Some(t)) => line.push_str(&format!("  {p}/{t}")),
        (Some(p), None) => line.push_str(&format!("  {p}")),
        (None, Some(t)) => line.push_str(&format!("  {t}")),
        (None, None) => {}
    }
    if let (Some(from), Some(to)) = (e.from_status, e.to_status) {
        line.push_str(&format!("  {from}→{to}"));
    }
    let summary = summary(e);
    if !summary.is_empty() {
        line.push_str("  ");
        line.push_str(&summary);
    }
    line.truncate(line.trim_end().len());
    line
}

/// What matters in `e`'s payload, as `key=value` words, at most [`MAX_SUMMARY`] characters.
pub(crate) fn summary(e: &Event) -> String {
    let p = &e.payload;
    let mut words: Vec<String> = Vec::new();
    if let Some(r) = text(&p["reason"]) {
        say(&mut words, "reason", r);
    }
    if let Some((name, how)) = failed_check(p) {
        words.push(format!("check={name} {how}"));
    }
    if let Some(d) = text(&p["decision"]) {
        say(&mut words, "decision", d);
    }
    if let Some(a) = text(&p["agent"]) {
        say(&mut words, "agent", a);
    }
    if let Some(n) = p["attempt"].as_i64() {
        say(&mut words, "attempt", n.to_string());
    }
    if let Some(x) = text(&p["exit"]).filter(|x| x != "exit code 0") {
        say(&mut words, "exit", x);
    }
    for key in ["attempt_cost_usd", "cost_usd", "task_cost_usd"] {
        if let Some(c) = p[key].as_f64().filter(|c| *c > 0.0) {
            say(&mut words, "cost", format!("${c:.2}"));
            break;
        }
    }
    if let Some(kind) = text(&p["delivery"]["kind"]) {
        say(&mut words, "delivery", kind);
    }
    // Started from a dependency's unmerged work (see `engine::stack`).
    if let Some(stacked) = p["stacked_on"].as_array().filter(|s| !s.is_empty()) {
        let on: Vec<String> = stacked.iter().filter_map(|s| text(&s["task"])).collect();
        say(&mut words, "stacked_on", on.join(","));
    }
    if let Some(url) = text(&p["url"]).or_else(|| text(&p["pull_request"]["url"])) {
        say(&mut words, "url", url);
    }
    for key in ["detail", "message", "error"] {
        if let Some(t) = text(&p[key]) {
            say(&mut words, key, quoted(&t));
            break;
        }
    }
    if words.is_empty() {
        // An event without the usual fields: its first few scalar fields.
        if let Value::Object(m) = p {
            for (k, v) in m.iter().take(4) {
                if let Some(t) = text(v).or_else(|| scalar(v)) {
                    say(&mut words, k, quoted(&t));
                }
            }
        }
    }
    cut(&words.join(" "), MAX_SUMMARY)
}

/// The end of a run for the person at the prompt: one line per task that did not finish DONE
/// or SKIPPED, saying why and what to do. `why(task)` is what the trail says of its last
/// failure or parking ([`summary`] of that event).
pub(crate) fn unfinished_lines(
    tasks: &[crate::store::TaskRecord],
    why: impl Fn(&crate::store::TaskRecord) -> Option<String>,
) -> Vec<String> {
    use crate::domain::Status;
    let status_of = |id: &str| tasks.iter().find(|t| t.id == id).map(|t| t.status);
    let mut out = Vec::new();
    for t in tasks {
        let because = why(t)
            .or_else(|| t.reason.clone())
            .unwrap_or_else(|| "no reason recorded".into());
        let line = match t.status {
            Status::Failed => format!(
                "{} FAILED ({because}): `whilly task show {}` has its story; `whilly task retry {}` runs it again",
                t.id, t.id, t.id
            ),
            Status::HumanLoop | Status::Blocked => format!(
                "{} waits for a human ({because}): `whilly handoff list`, or `H` in the console",
                t.id
            ),
            Status::Pending | Status::Claimed | Status::InProgress => {
                let failed: Vec<&str> = t
                    .spec
                    .dependencies
                    .iter()
                    .filter(|d| status_of(d) == Some(Status::Failed))
                    .map(String::as_str)
                    .collect();
                if failed.is_empty() {
                    format!("{} is {} (not finished when the run ended)", t.id, t.status)
                } else {
                    format!(
                        "{} did not run: it depends on {}, which FAILED (retry or skip {})",
                        t.id,
                        failed.join(", "),
                        if failed.len() == 1 { "it" } else { "them" }
                    )
                }
            }
            Status::Done | Status::Skipped => continue,
        };
        out.push(line);
    }
    out
}

/// Adds `key=value` unless the value is empty.
fn say(words: &mut Vec<String>, key: &str, value: String) {
    if !value.is_empty() {
        words.push(format!("{key}={value}"));
    }
}

/// The first failed check of the last verification round: its name, and how it failed.
fn failed_check(p: &Value) -> Option<(String, String)> {
    check_failure(p, 0).map(|f| (f.name, f.how))
}

/// The first failed check of an event's last verification round: its name, how it failed and
/// the last `tail` lines of its output (secrets redacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckFailure {
    pub name: String,
    pub how: String,
    pub tail: Vec<String>,
}

pub(crate) fn check_failure(p: &Value, tail: usize) -> Option<CheckFailure> {
    let rounds = p["verification"]
        .as_array()
        .or_else(|| p["evidence"]["verification"].as_array())?;
    let last = rounds.last()?;
    let failed = last["checks"]
        .as_array()?
        .iter()
        .find(|c| c["passed"] == Value::Bool(false))?;
    Some(CheckFailure::of(
        &text(&failed["name"]).unwrap_or_else(|| "check".into()),
        failed["exit_code"].as_i64(),
        failed["timed_out"] == Value::Bool(true),
        failed["output"].as_str().unwrap_or(""),
        tail,
    ))
}

impl CheckFailure {
    /// A failed check as said to a person: `how` from its exit code or timeout, the last
    /// `tail` non-empty lines of its output with secrets redacted.
    pub(crate) fn of(
        name: &str,
        exit_code: Option<i64>,
        timed_out: bool,
        output: &str,
        tail: usize,
    ) -> CheckFailure {
        let how = if timed_out {
            "timed out".to_string()
        } else {
            match exit_code {
                Some(code) => format!("exit code {code}"),
                None => "did not run".to_string(),
            }
        };
        let output = crate::domain::secrets::redact_secrets(output);
        let lines: Vec<String> = output
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect();
        CheckFailure {
            name: name.to_string(),
            how,
            tail: lines[lines.len().saturating_sub(tail)..].to_vec(),
        }
    }

    /// One line saying what failed, then the output's tail, one line each.
    pub(crate) fn text(&self, lead: &str) -> String {
        let mut out = format!("{lead}check {} failed ({})", self.name, self.how);
        for l in &self.tail {
            out.push('\n');
            out.push_str(l);
        }
        out
    }
}

/// A string field, trimmed, or `None` when absent or empty.
fn text(v: &Value) -> Option<String> {
    v.as_str()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Its first line, at most [`MAX_TEXT`] characters, quoted when it has spaces.
fn quoted(s: &str) -> String {
    let first = cut(s.lines().next().unwrap_or_default(), MAX_TEXT);
    if first.contains(' ') {
        format!("{first:?}")
    } else {
        first
    }
}

fn cut(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Status;
    use serde_json::json;

    fn ev(kind: &str, payload: Value) -> Event {
        Event {
            id: 1,
            ts: chrono::DateTime::from_timestamp(1_800_000_000, 0).unwrap_or_default(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: Some("T-1".into()),
            worker_id: None,
            epoch: None,
            from_status: Some(Status::InProgress),
            to_status: Some(Status::Failed),
            payload,
        }
    }

    #[test]
    fn a_failed_task_says_its_reason_check_and_exit_code_not_the_output() {
        let output = "E   assert 1 == 2\n".repeat(500);
        let e = ev(
            "task.failed",
            json!({"reason": "verification_failed", "agent": "claude", "attempt": 2,
                   "attempt_cost_usd": 0.4321, "detail": format!("pytest failed\n{output}"),
                   "verification": [{"round": 0, "passed": false, "checks": [
                       {"name": "lint", "passed": true, "exit_code": 0},
                       {"name": "pytest", "passed": false, "exit_code": 1, "output": output}]}]}),
        );
        let line = event_line(&e);
        for want in [
            "task.failed",
            "p/T-1",
            "IN_PROGRESS→FAILED",
            "reason=verification_failed",
            "check=pytest",
            "exit code 1",
            "agent=claude",
            "attempt=2",
            "cost=$0.43",
        ] {
            assert!(line.contains(want), "{want:?} in {line}");
        }
        assert!(!line.contains("assert 1 == 2"), "{line}");
        assert!(line.chars().count() < 260, "{} chars: {line}", line.len());
    }

    #[test]
    fn a_stacked_task_says_what_it_started_from() {
        let e = ev(
            "task.done",
            json!({"delivery": {"kind": "left_for_review"},
                   "stacked_on": [{"task": "T-1", "branch": "whilly/p/T-1"},
                                  {"task": "T-2", "branch": "whilly/p/T-2"}]}),
        );
        let line = event_line(&e);
        assert!(line.contains("stacked_on=T-1,T-2"), "{line}");
    }

    #[test]
    fn a_bounced_approval_names_the_check_and_its_output_tail() {
        let output = (1..=30)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n")
            + "\nGITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789\n";
        let retry = ev(
            "task.retry",
            json!({"reason": "verification_failed", "verification": [{"checks": [
                {"name": "tests", "passed": false, "exit_code": 3, "output": output}]}]}),
        );
        let started = ev("task.started", json!({}));
        let b = bounced(&[&retry, &started]).expect("the retry's check is said");
        let lines: Vec<&str> = b.lines().collect();
        assert_eq!(
            lines[0],
            "the last attempt's check tests failed (exit code 3)"
        );
        assert_eq!(lines.len(), 9, "{b}");
        assert_eq!(lines[1], "line 24");
        assert!(!b.contains("ghp_abcdef"), "redacted: {b}");
        let done = ev("task.done", json!({}));
        assert_eq!(bounced(&[&retry, &done]), None, "a later attempt passed");
    }

    #[test]
    fn a_timed_out_check_and_an_unknown_event_read_well() {
        let e = ev(
            "task.failed",
            json!({"verification": [{"checks": [{"name": "build", "passed": false, "timed_out": true}]}]}),
        );
        assert!(
            summary(&e).contains("check=build timed out"),
            "{}",
            summary(&e)
        );
        let other = ev(
            "board.card_moved",
            json!({"column": "In review", "card": "C1", "n": 3}),
        );
        let s = summary(&other);
        assert!(
            s.contains("column=\"In review\"") && s.contains("n=3"),
            "{s}"
        );
        let empty = ev("worker.stopped", Value::Null);
        assert_eq!(summary(&empty), "");
    }

    #[test]
    fn long_texts_are_cut_to_one_short_line() {
        let e = ev("github.call_failed", json!({"error": "x".repeat(5000)}));
        let s = summary(&e);
        assert!(s.chars().count() <= MAX_SUMMARY && s.ends_with('…'), "{s}");
        let d = ev(
            "operator.decision",
            json!({"decision": "send_back", "message": "fix the\ntests please"}),
        );
        assert_eq!(summary(&d), "decision=send_back message=\"fix the\"");
    }
}
