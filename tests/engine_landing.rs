//! DONE means checked and landed, through the real binary on scratch repositories: work that
//! cannot land waits as ready to merge (and `whilly merge` lands it), test steps that are
//! commands are checks, an agent that changed nothing is not a silent success, and what the
//! checks leave behind never reaches the commit.

#[path = "support/engine.rs"]
mod engine;

use engine::{COMPLETE, Repo, plan};
use serde_json::{Value, json};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A fake agent: the shell `body` runs in the task's worktree, then the marker is printed.
fn agent_script(repo: &Repo, body: &str) -> String {
    let path = repo.shared_file("agent.sh");
    std::fs::write(&path, format!("set -e\n{body}\necho '{COMPLETE}'\n")).unwrap();
    format!("bash {}", path.display())
}

/// A repository whose agent runs `body`; the plan is one task with these test steps.
fn repo_with(task: Value, body: &str) -> Repo {
    let repo = Repo::new(&plan("p", vec![task]), "true");
    let template = agent_script(&repo, body);
    repo.write(
        "whilly.toml",
        &engine::config(&template, &repo.wt_dir)
            .replace("[verification]\n", "[verification]\nprofile = \"off\"\n"),
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    repo
}

fn calc_task(test_steps: &[&str]) -> Value {
    json!({
        "id": "T-1",
        "status": "pending",
        "priority": "medium",
        "description": "add a subtract function to calc.py next to add",
        "acceptance_criteria": ["calc.py defines subtract"],
        "test_steps": test_steps,
        "key_files": ["calc.py"],
        "dependencies": []
    })
}

fn events_of(repo: &Repo, task_id: &str, kind: &str) -> Vec<Value> {
    repo.events(Some(task_id))
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

fn whilly(repo: &Repo, args: &[&str]) -> engine::Output {
    repo.run(args, LIMIT)
}

// 1. An uncommitted edit to the task's file in the operator's checkout: the work cannot land,
//    the task is not DONE, the run exits 1 naming task, file and branch; the edit stays; once
//    the checkout is clean, `whilly merge` lands it once.
#[test]
fn work_that_cannot_land_waits_as_ready_to_merge() {
    let repo = repo_with(
        calc_task(&["grep -q subtract calc.py"]),
        "printf 'def subtract(a, b):\\n    return a - b\\n' >> calc.py",
    );
    repo.write("calc.py", "def add(a, b):\n    return a + b\n");
    repo.git(&["add", "calc.py"]);
    repo.git(&["commit", "-q", "-m", "calc"]);
    let head_before = repo.git(&["rev-parse", "HEAD"]);
    // The operator's own work in progress, not committed.
    repo.write(
        "calc.py",
        "def add(a, b):\n    return a + b  # operator's edit\n",
    );

    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(1), "{out}");
    let complete = out.complete();
    assert_eq!(complete["done"], 0, "{complete}");
    assert_eq!(complete["unlanded"][0]["task_id"], "T-1", "{complete}");
    assert!(
        out.stderr.contains("T-1 did not land")
            && out.stderr.contains("calc.py")
            && out.stderr.contains("whilly/p/T-1"),
        "{out}"
    );
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "HUMAN_LOOP", "{rec}");
    assert_eq!(rec["reason"], "ready_to_merge", "{rec}");
    // Nothing of the operator's checkout moved or was overwritten.
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), head_before);
    let calc = std::fs::read_to_string(repo.repo.join("calc.py")).unwrap();
    assert!(calc.contains("operator's edit") && !calc.contains("subtract"));
    // The work is on the task branch.
    assert!(
        repo.git(&["show", "whilly/p/T-1:calc.py"])
            .contains("subtract")
    );

    // Still dirty: merging refuses, says why, changes nothing.
    let again = whilly(&repo, &["merge", "T-1"]);
    assert_eq!(again.code, Some(1), "{again}");
    assert!(again.stderr.contains("did not land yet"), "{again}");
    assert_eq!(repo.task("p", "T-1")["status"], "HUMAN_LOOP");

    // The operator puts the edit away; now it lands.
    repo.git(&["stash", "-q"]);
    let merged = whilly(&repo, &["merge", "T-1"]);
    assert_eq!(merged.code, Some(0), "{merged}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    assert!(repo.git(&["show", "HEAD:calc.py"]).contains("subtract"));
    assert!(
        std::fs::read_to_string(repo.repo.join("calc.py"))
            .unwrap()
            .contains("subtract"),
        "the checkout follows the base branch"
    );
    let decisions = events_of(&repo, "T-1", "operator.decision");
    assert!(
        decisions
            .iter()
            .any(|e| e["payload"]["decision"] == "merge"),
        "{decisions:?}"
    );
    // Once: a second merge is refused and the base does not move.
    let tip = repo.git(&["rev-parse", "HEAD"]);
    let twice = whilly(&repo, &["merge", "T-1"]);
    assert_ne!(twice.code, Some(0), "{twice}");
    assert_eq!(repo.git(&["rev-parse", "HEAD"]), tip);
}

// 2a. A test step that is a command is a check: an agent that did not do the work fails it.
#[test]
fn test_steps_that_are_commands_are_checks() {
    let repo = repo_with(
        calc_task(&["test -s HELLO.md", "read the attempt log"]),
        "echo 'not the file asked for' > OTHER.md",
    );
    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "verification_failed", "{rec}");
    let failed = events_of(&repo, "T-1", "task.failed");
    let checks = &failed.last().unwrap()["payload"]["verification"][0]["checks"];
    assert_eq!(checks[0]["name"], "test_steps[0]", "{checks}");
    assert_eq!(checks[0]["command"], "test -s HELLO.md", "{checks}");
    // The prose step is not run.
    assert_eq!(checks.as_array().map(Vec::len), Some(1), "{checks}");
}

// 2b. The same step passes when the agent did the work.
#[test]
fn test_steps_pass_when_the_work_is_there() {
    let repo = repo_with(calc_task(&["test -s HELLO.md"]), "echo hello > HELLO.md");
    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.git(&["show", "HEAD:HELLO.md"]).trim(), "hello");
    // Its key file is calc.py: writing HELLO.md instead lands, and is said.
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(
        done[0]["payload"]["outside_key_files"],
        json!(["HELLO.md"]),
        "{done:?}"
    );
}

// 2c. An agent that printed the marker and changed nothing, with nothing to check: FAILED.
#[test]
fn an_agent_that_changed_nothing_without_checks_fails() {
    let repo = repo_with(calc_task(&["read the attempt log"]), "true");
    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "no_changes", "{rec}");
}

// 2d. Changed nothing but its checks pass (the work was already there): DONE, and flagged.
#[test]
fn an_unchanged_task_whose_checks_pass_is_flagged() {
    let repo = repo_with(calc_task(&["test -s plan.json"]), "true");
    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(out.complete()["unchanged"][0], "T-1", "{out}");
    assert!(out.stderr.contains("changed nothing for T-1"), "{out}");
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done[0]["payload"]["no_changes"], true, "{done:?}");
}

// 3. What the checks write (reports, caches, edits) never reaches the commit: the snapshot of
//    the agent's work is taken before they run.
#[test]
fn check_outputs_never_reach_the_commit() {
    let mut p = plan("p", vec![calc_task(&["read the attempt log"])]);
    p["verification_commands"] = json!([{
        "name": "report",
        "command": "test -s HELLO.md && echo report > check-report.txt && echo '# reformatted' >> HELLO.md && mkdir -p __pycache__ && echo x > __pycache__/m.pyc"
    }]);
    let repo = Repo::new(&p, "true");
    let template = agent_script(&repo, "echo hello > HELLO.md");
    repo.write("whilly.toml", &engine::config(&template, &repo.wt_dir));
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    let out = repo.run_plan(&[], &[]).wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out}");
    let files = repo.git(&["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "HELLO.md", "{files}");
    assert_eq!(repo.git(&["show", "HEAD:HELLO.md"]), "hello\n");
}
