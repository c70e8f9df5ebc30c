//! Dispatch that respects the providers' limits, through the real binary: an agent answering
//! HTTP 429 with `retry-after: 5` pauses its backend (no attempt used up, nothing started on it
//! for 5 s, the plan's fallback agent takes over when there is one), and `[agents.<name>]
//! max_parallel` caps how many tasks run on one agent across the slots.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, agent, plan, task};
use serde_json::Value;
use std::time::Duration;

fn sh(script: &str, args: &str) -> String {
    format!("bash {} {args}", agent(script).display())
}

/// (kind, agent, task, ns) lines of the rate_limited.sh log.
fn ledger(log: &std::path::Path) -> Vec<(String, String, String, u128)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            let [kind, agent, task, ns] = p[..] else {
                return None;
            };
            Some((kind.into(), agent.into(), task.into(), ns.parse().ok()?))
        })
        .collect()
}

fn three_tasks() -> Value {
    plan("p", vec![task("A"), task("B"), task("C")])
}

fn attempts(repo: &Repo, id: &str) -> i64 {
    repo.task("p", id)["attempts"].as_i64().unwrap()
}

#[test]
fn rate_limit_pauses_the_backend_without_burning_an_attempt() {
    let probe = engine::probe_dir();
    let log = probe.path().join("runs.log");
    let repo = Repo::new(
        &three_tasks(),
        &sh(
            "engine/rate_limited.sh",
            &format!("{} fake {{task_id}}", log.display()),
        ),
    );
    // One attempt per task: a rate limit that used one up would fail the task.
    let out = repo
        .run_plan(&["run.parallel=2", "queue.default_max_attempts=1"], &[])
        .wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");

    let runs = ledger(&log);
    let limited: Vec<_> = runs.iter().filter(|r| r.0 == "limited").collect();
    assert_eq!(limited.len(), 1, "{runs:?}");
    let (limited_task, limited_at) = (limited[0].2.clone(), limited[0].3);
    let starts: Vec<_> = runs.iter().filter(|r| r.0 == "start").collect();
    assert_eq!(starts.len(), 3, "{runs:?}");
    assert!(
        starts
            .iter()
            .any(|s| s.2 == limited_task && s.3 >= limited_at + 5_000_000_000),
        "the limited task ran again, after the 5 s the provider asked for: {runs:?}"
    );
    // Nothing was claimed for the paused backend until the reset (a task claimed before the
    // limit came may run; none may begin).
    let paused = repo.events_of_type("agent.paused");
    assert_eq!(paused.len(), 1, "{paused:?}");
    let ts = |e: &Value| {
        chrono::DateTime::parse_from_rfc3339(e["ts"].as_str().unwrap())
            .unwrap()
            .timestamp_millis()
    };
    let paused_at = ts(&paused[0]);
    let until =
        chrono::DateTime::parse_from_rfc3339(paused[0]["payload"]["until"].as_str().unwrap())
            .unwrap()
            .timestamp_millis();
    assert!(until - paused_at >= 4_000, "{paused:?}");
    let claims = repo.events_of_type("task.claimed");
    let after: Vec<i64> = claims.iter().map(ts).filter(|t| *t >= paused_at).collect();
    assert!(!after.is_empty(), "{claims:?}");
    for t in &after {
        assert!(
            *t >= until,
            "a task was claimed {} ms into a 5 s pause: {claims:?}",
            t - paused_at
        );
    }

    for id in ["A", "B", "C"] {
        assert_eq!(repo.task("p", id)["status"], "DONE", "{id}");
        assert_eq!(attempts(&repo, id), 1, "{id} used up an attempt");
    }
    let line = out
        .lines()
        .into_iter()
        .find(|l| l["event"] == "agent_paused")
        .unwrap_or_else(|| panic!("no agent_paused line: {out}"));
    assert!(
        line["message"]
            .as_str()
            .unwrap()
            .starts_with("fake paused until "),
        "{line}"
    );
    let p = &paused[0]["payload"];
    assert_eq!(p["agent"], "fake");
    assert_eq!(p["reason"], "rate limit");
    assert_eq!(p["parsed"], true);
    let released = repo.events_of_type("task.released");
    assert!(
        released
            .iter()
            .any(|e| e["task_id"] == limited_task.as_str()
                && e["payload"]["reason"] == "rate_limited"),
        "{released:?}"
    );
}

#[test]
fn a_plan_with_a_fallback_agent_goes_on_there() {
    let probe = engine::probe_dir();
    let log = probe.path().join("runs.log");
    let mut p = three_tasks();
    p["fallback_agents"] = serde_json::json!(["spare"]);
    let repo = Repo::new(
        &p,
        &sh(
            "engine/rate_limited.sh",
            &format!("{} fake {{task_id}}", log.display()),
        ),
    );
    let toml = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
    repo.write(
        "whilly.toml",
        &format!(
            "{toml}\n[agents.spare]\nbackend = \"command\"\ntemplate = {}\n",
            engine::toml_str(&sh(
                "engine/rate_limited.sh",
                &format!("{} spare {{task_id}}", log.display()),
            ))
        ),
    );
    repo.git(&["commit", "-qam", "spare agent"]);
    let out = repo
        .run_plan(&["run.parallel=1", "queue.default_max_attempts=1"], &[])
        .wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    let runs = ledger(&log);
    let limited_at = runs.iter().find(|r| r.0 == "limited").unwrap().3;
    let starts: Vec<_> = runs.iter().filter(|r| r.0 == "start").collect();
    assert_eq!(starts.len(), 3, "{runs:?}");
    for s in &starts {
        assert_eq!(s.1, "spare", "{runs:?}");
        assert!(
            s.3 < limited_at + 5_000_000_000,
            "the fallback waited for the pause: {runs:?}"
        );
    }
    for id in ["A", "B", "C"] {
        assert_eq!(repo.task("p", id)["status"], "DONE", "{id}");
    }
}

/// (task, start ns, end ns) from the stamp agent's log.
fn intervals(log: &std::path::Path) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut starts = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, id, ns] = parts[..] else { continue };
        let ns: u128 = ns.parse().unwrap();
        match kind {
            "start" => {
                starts.insert(id.to_string(), ns);
            }
            "end" => out.push((id.to_string(), starts[id], ns)),
            _ => {}
        }
    }
    out
}

#[test]
fn max_parallel_caps_one_agent_across_the_slots() {
    let probe = engine::probe_dir();
    let log = probe.path().join("stamps.log");
    let repo = Repo::new(
        &three_tasks(),
        &sh(
            "engine/stamp.sh",
            &format!("{} 1 {{task_id}}", log.display()),
        ),
    );
    let out = repo
        .run_plan(&["run.parallel=3", "agents.fake.max_parallel=1"], &[])
        .wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    let v = intervals(&log);
    assert_eq!(v.len(), 3, "{v:?}");
    for (i, a) in v.iter().enumerate() {
        for b in &v[i + 1..] {
            assert!(
                !(a.1 < b.2 && b.1 < a.2),
                "{} and {} ran at once with max_parallel = 1: {v:?}",
                a.0,
                b.0
            );
        }
    }
}
