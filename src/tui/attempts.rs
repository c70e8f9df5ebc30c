//! A task's attempts as the detail view lists them, from the evidence its settle events carry:
//! how each ended, the agent's exit, its cost, and the verification checks with the end of a
//! failing check's output.

use crate::store::{Event, event_types as et};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct AttemptLine {
    /// `done`, `failed`, `retry`, …
    pub ended: String,
    pub reason: Option<String>,
    pub agent: Option<String>,
    pub exit: Option<String>,
    pub cost_usd: Option<f64>,
    /// Every verification round, oldest first: a failing round was followed by a repair.
    pub rounds: Vec<Vec<CheckLine>>,
    /// Whether this ending used up an attempt: a release at shutdown gives its attempt back.
    pub counted: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CheckLine {
    pub name: String,
    pub passed: bool,
    pub exit_code: Option<i64>,
    /// The last lines of a failing check's output.
    pub tail: Vec<String>,
}

use crate::engine::trail::SETTLED;

/// The attempts of one task's events (oldest first), one per settle event.
pub(crate) fn attempts(events: &[&Event]) -> Vec<AttemptLine> {
    events
        .iter()
        .filter(|e| SETTLED.contains(&e.event_type.as_str()))
        .map(|e| {
            let ev = evidence(&e.payload);
            let s = |m: Option<&Map<String, Value>>, k: &str| {
                m.and_then(|m| m.get(k))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            };
            AttemptLine {
                ended: e
                    .event_type
                    .strip_prefix("task.")
                    .unwrap_or(&e.event_type)
                    .to_string(),
                reason: s(e.payload.as_object(), "reason"),
                agent: s(ev, "agent"),
                exit: s(ev, "exit"),
                cost_usd: ev
                    .and_then(|m| m.get("attempt_cost_usd"))
                    .and_then(Value::as_f64),
                rounds: ev.map(rounds).unwrap_or_default(),
                counted: e.event_type != et::TASK_RELEASED,
            }
        })
        .collect()
}

/// The object holding the attempt's evidence: the payload itself or a nested `evidence`.
fn evidence(payload: &Value) -> Option<&Map<String, Value>> {
    let m = payload.as_object()?;
    match m.get("evidence").and_then(Value::as_object) {
        Some(inner) => Some(inner),
        None => Some(m),
    }
}

/// Every verification round's checks.
fn rounds(ev: &Map<String, Value>) -> Vec<Vec<CheckLine>> {
    ev.get("verification")
        .and_then(Value::as_array)
        .map(|rounds| rounds.iter().map(checks).collect())
        .unwrap_or_default()
}

/// One round's checks, with the end of each failing check's output.
fn checks(round: &Value) -> Vec<CheckLine> {
    round
        .get("checks")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let passed = c.get("passed").and_then(Value::as_bool).unwrap_or(false);
                    let tail = if passed {
                        Vec::new()
                    } else {
                        let out = c.get("output").and_then(Value::as_str).unwrap_or("");
                        let lines: Vec<&str> =
                            out.lines().filter(|l| !l.trim().is_empty()).collect();
                        lines[lines.len().saturating_sub(3)..]
                            .iter()
                            .map(|l| l.to_string())
                            .collect()
                    };
                    CheckLine {
                        name: c
                            .get("name")
                            .and_then(Value::as_str)
                            .filter(|n| !n.is_empty())
                            .or_else(|| c.get("command").and_then(Value::as_str))
                            .unwrap_or("check")
                            .to_string(),
                        passed,
                        exit_code: c.get("exit_code").and_then(Value::as_i64),
                        tail,
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// What the newest ending of an attempt says that a DONE alone would hide: work that did not
/// land and why, an agent that changed nothing, files written beyond the key files.
pub(crate) fn outcome_notes(events: &[&Event]) -> Vec<String> {
    let Some(e) = events.iter().rev().find(|e| {
        [et::TASK_DONE, et::TASK_HUMAN_LOOP, et::TASK_FAILED].contains(&e.event_type.as_str())
    }) else {
        return Vec::new();
    };
    let p = &e.payload;
    let mut out = Vec::new();
    if p.get("reason").and_then(|r| r.as_str()) == Some(crate::engine::landing::READY_TO_MERGE)
        && let Some(d) = p.get("detail").and_then(|d| d.as_str())
    {
        out.push(format!("not landed: {d}"));
    }
    if p.get("no_changes").and_then(|v| v.as_bool()) == Some(true) {
        out.push("the agent changed nothing; only its checks say the work is there".to_string());
    }
    let outside: Vec<&str> = p
        .get("outside_key_files")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|f| f.as_str()).collect())
        .unwrap_or_default();
    if !outside.is_empty() {
        out.push(format!(
            "changed files outside its key_files (key files are advisory; these landed too): {}",
            outside.join(", ")
        ));
    }
    out
}

/// The commit that landed the task's newest DONE, from its delivery evidence.
pub(crate) fn landed_commit(events: &[&Event]) -> Option<String> {
    let e = events
        .iter()
        .rev()
        .find(|e| e.event_type == et::TASK_DONE)?;
    let ev = evidence(&e.payload)?;
    ev.get("delivery")
        .and_then(|d| d.get("commit"))
        .or_else(|| ev.get("commit"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// What the agent (or the human of a handoff) said at the end of the newest attempt: its final
/// answer (its last lines), else the attempt's message or detail.
pub(crate) fn last_words(events: &[&Event]) -> Option<String> {
    let e = events
        .iter()
        .rev()
        .find(|e| SETTLED.contains(&e.event_type.as_str()))?;
    let ev = evidence(&e.payload);
    let text = |m: Option<&Map<String, Value>>, k: &str| {
        m.and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
    };
    if let Some(result) = text(ev, "result") {
        let lines: Vec<&str> = result.lines().collect();
        return Some(lines[lines.len().saturating_sub(12)..].join("\n"));
    }
    let top = e.payload.as_object();
    text(ev, "message")
        .or_else(|| text(top, "message"))
        .or_else(|| text(ev, "detail"))
        .or_else(|| text(top, "detail"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(kind: &str, payload: Value) -> Event {
        Event {
            id: 1,
            ts: chrono::Utc::now(),
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
    fn attempts_with_exit_cost_and_checks() {
        let retry = ev(
            et::TASK_RETRY,
            json!({"reason": "verification_failed", "evidence": {
            "agent": "claude", "exit": "exit 0", "attempt_cost_usd": 0.12,
            "verification": [{"round": 1, "passed": false, "checks": [
                {"name": "tests", "passed": false, "exit_code": 101, "output": "a\nb\n\nFAILED: 2 tests\nerror: x"},
                {"name": "fmt", "passed": true, "exit_code": 0, "output": "ok"}
            ]}]}}),
        );
        let started = ev(et::TASK_STARTED, json!({}));
        let done = ev(
            et::TASK_DONE,
            json!({"agent": "claude", "exit": "exit 0", "attempt_cost_usd": 0.05}),
        );
        let got = attempts(&[&started, &retry, &done]);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].ended, "retry");
        assert_eq!(got[0].reason.as_deref(), Some("verification_failed"));
        assert_eq!(got[0].cost_usd, Some(0.12));
        let checks = &got[0].rounds[0];
        assert_eq!(checks.len(), 2);
        assert!(!checks[0].passed);
        assert_eq!(checks[0].exit_code, Some(101));
        assert_eq!(checks[0].tail, ["b", "FAILED: 2 tests", "error: x"]);
        assert!(checks[1].tail.is_empty());
        assert_eq!(got[1].ended, "done");
        assert_eq!(got[1].exit.as_deref(), Some("exit 0"));
        assert!(got[1].rounds.is_empty());
    }

    #[test]
    fn notes_say_what_a_done_would_hide() {
        let parked = ev(
            "task.human_loop",
            json!({"reason": "ready_to_merge", "detail": "main is dirty", "outside_key_files": ["x.md"]}),
        );
        let notes = outcome_notes(&[&parked]);
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].contains("not landed: main is dirty"));
        assert!(notes[1].contains("x.md"));
        let unchanged = ev(
            "task.done",
            json!({"no_changes": true, "outside_key_files": []}),
        );
        assert_eq!(outcome_notes(&[&parked, &unchanged]).len(), 1);
        assert!(outcome_notes(&[&ev("task.done", json!({}))]).is_empty());
    }

    #[test]
    fn every_repair_round_is_kept_and_a_release_counts_no_attempt() {
        let failed = ev(
            et::TASK_FAILED,
            json!({"reason": "verification_failed", "evidence": {
            "verification": [
                {"round": 1, "passed": false, "checks": [
                    {"name": "tests", "passed": false, "exit_code": 1, "output": "first failure"}]},
                {"round": 2, "passed": false, "checks": [
                    {"name": "tests", "passed": false, "exit_code": 1, "output": "still failing"}]}
            ]}}),
        );
        let released = ev(et::TASK_RELEASED, json!({"reason": "shutdown"}));
        let got = attempts(&[&released, &failed]);
        assert!(!got[0].counted);
        assert!(got[1].counted);
        assert_eq!(got[1].rounds.len(), 2);
        assert_eq!(got[1].rounds[0][0].tail, ["first failure"]);
        assert_eq!(got[1].rounds[1][0].tail, ["still failing"]);
    }

    #[test]
    fn last_words_are_the_agents_final_answer_or_the_message() {
        let answer: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let parked = ev(
            et::TASK_HUMAN_LOOP,
            json!({"reason": "ready_to_merge", "detail": "the base moved", "evidence": {"result": answer}}),
        );
        let said = last_words(&[&parked]).expect("said");
        assert!(said.starts_with("line 9\n"), "{said}");
        assert!(said.ends_with("line 20"), "{said}");
        let handoff = ev(
            et::TASK_HUMAN_LOOP,
            json!({"evidence": {"message": "needs a product decision"}}),
        );
        assert_eq!(
            last_words(&[&parked, &handoff]).as_deref(),
            Some("needs a product decision")
        );
        assert_eq!(last_words(&[]), None);
    }
}
