//! `whilly run` end to end with the real Claude Code CLI as the agent, against the scripted model
//! server: real tool calls in real worktrees, real cost reports, real API errors.
//!
//! The CLI comes from `WHILLY_CLAUDE_BIN`, `/work/claude-cli/node_modules/.bin/claude`, or
//! `claude` on PATH; without one these tests fail (`WHILLY_SKIP_REAL_AGENT=1` skips them).

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/model_server.rs"]
mod model_server;

use claude_env::{WRITE_OWN_FILE, claude_bin, claude_repo, run_plan};
use engine::{Repo, count_by_task, plan, task};
use model_server::{INPUT_TOKENS, ModelServer, OUTPUT_TOKENS, Scenario};
use serde_json::{Value, json};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

fn events_of(repo: &Repo, task_id: &str, kind: &str) -> Vec<Value> {
    repo.events(Some(task_id))
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

fn statuses(repo: &Repo, plan_id: &str) -> Vec<(String, String)> {
    repo.tasks(plan_id)
        .into_iter()
        .map(|t| {
            (
                t["id"].as_str().unwrap_or_default().to_string(),
                t["status"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn bash_server(command: &str) -> ModelServer {
    ModelServer::start(Scenario::Bash {
        command: command.into(),
    })
}

/// What the server's scripted usage costs at claude-sonnet-4-5 prices ($3/M in, $15/M out), per
/// main request, in micro-dollars.
const MICROS_PER_REQUEST: i64 = (INPUT_TOKENS * 3 + OUTPUT_TOKENS * 15) as i64;

/// What the CLI was charged for every agent-loop request the server answered with 200.
fn server_cost_micros(server: &ModelServer) -> i64 {
    let answered = server
        .requests()
        .iter()
        .filter(|r| r.main && r.status == 200)
        .count() as i64;
    answered * MICROS_PER_REQUEST
}

// 1. Five tasks, dependencies, overlapping key files, three at a time: every task's file is
// written by the CLI in its own worktree, committed, merged back; the spend adds up.
#[test]
fn five_tasks_in_parallel_write_commit_merge_and_cost_add_up() {
    let Some(bin) = claude_bin() else { return };
    let mut tasks: Vec<Value> = (1..=5).map(|i| task(&format!("T-{i}"))).collect();
    tasks[2]["dependencies"] = json!(["T-1"]);
    tasks[4]["dependencies"] = json!(["T-2", "T-3"]);
    // T-1 and T-2 share a key file, as do T-3 and T-4.
    tasks[1]["key_files"] = json!(["files/T-1.txt"]);
    tasks[3]["key_files"] = json!(["files/T-3.txt"]);
    let repo = claude_repo(&plan("p", tasks), &bin, 3);
    let server = bash_server(WRITE_OWN_FILE);
    // Three levels of dependencies, each a real CLI run: give a loaded machine time.
    let out = run_plan(&repo, &server, &["--parallel", "3"], 2 * LIMIT);
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());

    let st = statuses(&repo, "p");
    assert!(st.iter().all(|(_, s)| s == "DONE"), "{st:?}");
    let tree = repo.git(&["ls-tree", "-r", "--name-only", "HEAD"]);
    for i in 1..=5 {
        let id = format!("T-{i}");
        let file = tree
            .lines()
            .find(|l| l.starts_with("out-") && l.contains(&id) && !l.contains(&format!("{id}0")))
            .unwrap_or_else(|| panic!("no file of {id} in HEAD:\n{tree}"));
        assert_eq!(
            repo.git(&["show", &format!("HEAD:{file}")]).trim(),
            "written-by-claude"
        );
    }

    // Each task ran in a worktree (from the pool: a finished task's is handed to a later one;
    // tests/worktree_pool*.rs hold that nothing of the one before is seen there) on a branch of
    // its own, and its branch got a commit.
    let done = repo.events_of_type("task.done");
    let branches: std::collections::BTreeSet<&str> = done
        .iter()
        .filter_map(|e| e["payload"]["branch"].as_str())
        .collect();
    assert_eq!(branches.len(), 5, "{done:?}");
    assert!(
        done.iter().all(|e| e["payload"]["worktree"]
            .as_str()
            .is_some_and(|w| w.contains("/.pool/"))),
        "{done:?}"
    );
    assert!(
        done.iter().all(|e| e["payload"]["commit"].is_string()),
        "a task without a commit: {done:?}"
    );

    let events = repo.events(None);
    for kind in ["task.claimed", "task.started", "task.done"] {
        let by_task = count_by_task(&events, kind);
        for i in 1..=5 {
            assert_eq!(
                by_task.get(&format!("T-{i}")).copied().unwrap_or(0),
                1,
                "{kind} of T-{i}: {by_task:?}"
            );
        }
    }
    let spent = repo.plan_record("p")["spent"].as_i64().unwrap();
    let charged = server_cost_micros(&server);
    println!("spent {spent} µ$, charged by the server's usage {charged} µ$");
    // Two agent-loop requests per task: the Bash tool call, then the answer with the marker.
    assert_eq!(charged, 5 * 2 * MICROS_PER_REQUEST, "{}", server.log());
    assert_eq!(spent, charged);
}

// 2. The model never prints the marker: FAILED marker_missing after max_attempts, exit 1.
#[test]
fn no_marker_fails_after_max_attempts() {
    let Some(bin) = claude_bin() else { return };
    let mut t = task("T-1");
    t["max_attempts"] = 2.into();
    let repo = claude_repo(&plan("p", vec![t]), &bin, 1);
    let server = ModelServer::start(Scenario::NoMarker);
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "marker_missing", "{rec}");
    assert_eq!(events_of(&repo, "T-1", "task.claimed").len(), 2);
    // One agent-loop request per attempt: no retry loop behind whilly's back.
    assert_eq!(server.main_request_count(), 2, "{}", server.log());
}

// 3. The API is overloaded once: the CLI retries by itself and the task is DONE.
#[test]
fn overloaded_then_success_is_done() {
    let Some(bin) = claude_bin() else { return };
    let repo = claude_repo(&plan("p", vec![task("T-1")]), &bin, 1);
    let server = ModelServer::start(Scenario::Overloaded { failures: 1 });
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    assert!(
        server.main_request_count() > 1,
        "expected a retry:\n{}",
        server.log()
    );
    assert!(server.requests().iter().any(|r| r.status == 529));
}

// 4. A 401: FAILED auth_error at once, one claim, a clear detail.
#[test]
fn auth_error_fails_without_retry() {
    let Some(bin) = claude_bin() else { return };
    let mut t = task("T-1");
    t["max_attempts"] = 3.into();
    let repo = claude_repo(&plan("p", vec![t]), &bin, 1);
    let server = ModelServer::start(Scenario::AuthError);
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "auth_error", "{rec}");
    assert_eq!(events_of(&repo, "T-1", "task.claimed").len(), 1);
    let failed = events_of(&repo, "T-1", "task.failed");
    let detail = failed
        .last()
        .and_then(|e| e["payload"]["detail"].as_str())
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        detail.contains("auth") || detail.contains("api key") || detail.contains("401"),
        "unclear detail: {failed:?}"
    );
}

// 5. The plan budget runs out after about two tasks: exit 2, the rest not DONE.
#[test]
fn budget_exhausted_mid_run() {
    let Some(bin) = claude_bin() else { return };
    // One main request: $3/M in × 1000 + $15/M out × 50 = $0.00375 per task, plus side requests.
    let per_task: f64 = 0.00375;
    let tasks = (1..=5).map(|i| task(&format!("T-{i}"))).collect();
    let mut p = plan("p", tasks);
    p["budget_usd"] = (per_task * 1.5).into();
    let repo = claude_repo(&p, &bin, 1);
    let server = ModelServer::start(Scenario::Complete);
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(2), "{out}");
    let spent = repo.plan_record("p")["spent"].as_i64().unwrap();
    let budget = (per_task * 1.5 * 1e6).round() as i64;
    let charged = server_cost_micros(&server);
    println!("budget {budget} µ$, spent {spent} µ$, charged by the server {charged} µ$");
    // Spend is watched while the CLI streams, so the attempt running when the budget runs out is
    // stopped before its result line: it counts at its running estimate (the usage its
    // assistant message carried, whose output tokens are still partial), every finished one at
    // its exact reported cost. Without a stopped attempt the two are equal.
    let stopped = repo
        .events_of_type("task.released")
        .iter()
        .any(|e| e["payload"]["reason"] == "budget_exhausted");
    if stopped {
        assert!(
            spent <= charged && spent > charged - MICROS_PER_REQUEST,
            "spent {spent} µ$, charged {charged} µ$\n{}",
            server.log()
        );
    } else {
        assert_eq!(spent, charged, "{}", server.log());
    }
    assert!(
        spent >= budget,
        "stopped before the budget was spent: {spent} µ$"
    );
    assert!(spent <= budget + MICROS_PER_REQUEST, "spent {spent} µ$");
    let st = statuses(&repo, "p");
    let done = st.iter().filter(|(_, s)| s == "DONE").count();
    assert!((1..5).contains(&done), "{st:?}");
    assert!(
        !repo.events_of_type("budget.exhausted").is_empty(),
        "no budget.exhausted event"
    );
}

// 6. The verification fails, the repair run fixes it: DONE with two rounds.
#[test]
fn verification_fails_then_repair_run_fixes_it() {
    let Some(bin) = claude_bin() else { return };
    let mut p = plan("p", vec![task("T-1")]);
    p["verification_commands"] = json!([{
        "name": "check",
        "command": "grep -q fixed out.txt",
        "required": true,
        "repair_max_attempts": 1
    }]);
    let repo = claude_repo(&p, &bin, 1);
    let server = bash_server(
        "if [ -f .tried ]; then echo fixed > out.txt; else touch .tried; echo broken > out.txt; fi",
    );
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done.len(), 1);
    let rounds = done[0]["payload"]["verification"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rounds.len(), 2, "{}", done[0]);
    assert_eq!(rounds[0]["passed"], false);
    assert_eq!(rounds[1]["passed"], true);
    assert_eq!(repo.git(&["show", "HEAD:out.txt"]).trim(), "fixed");
}

// 7. The task.done event carries the attempt's whole cost (`attempt_cost_usd`, read by the
// headless progress line). With the real CLI the spend is booked while it runs, so the settled
// `cost_usd` alone is 0 and only `attempt_cost_usd` can tell what the attempt cost.
#[test]
fn task_done_event_carries_the_attempts_whole_cost() {
    let Some(bin) = claude_bin() else { return };
    let repo = claude_repo(&plan("p", vec![task("T-1")]), &bin, 1);
    let server = ModelServer::start(Scenario::Complete);
    let out = run_plan(&repo, &server, &[], LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done.len(), 1);
    let whole = done[0]["payload"]["attempt_cost_usd"]
        .as_f64()
        .map(|usd| (usd * 1e6).round() as i64);
    assert_eq!(
        whole,
        Some(server_cost_micros(&server)),
        "task.done payload: {}",
        done[0]["payload"]
    );
}
