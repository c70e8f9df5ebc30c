//! What a headless run says to the person (or CI job) reading it: a handoff waiting for a human
//! is a `handoff_waiting` JSON line and a stderr line naming the command that answers it (the
//! end-of-run lines for unfinished tasks are in `cli_task.rs`).

#[path = "support/git.rs"]
mod gitcli;
use gitcli::whilly_in as whilly;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

fn repo_with(plan: serde_json::Value) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    let tree = repo
        .find_tree(repo.index().unwrap().write_tree().unwrap())
        .unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    std::fs::write(dir.path().join("plan.json"), plan.to_string()).unwrap();
    dir
}

#[test]
fn a_waiting_handoff_is_said_with_its_answer_and_answering_it_ends_the_run() {
    let dir = repo_with(
        serde_json::json!({"plan_id": "hv", "project": "hv", "tasks": [
        {"id": "H-1", "description": "Review the release notes by hand and fix the typos",
         "priority": "high", "status": "pending", "agent": "handoff",
         "acceptance_criteria": ["the notes are reviewed"], "test_steps": ["true"]}]}),
    );
    let p = dir.path();
    let mut run = whilly(p)
        .args(["run", "plan.json", "--headless"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = BufReader::new(run.stdout.take().unwrap());
    let stderr = run.stderr.take().unwrap();
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s).unwrap();
        s
    });
    let started = Instant::now();
    let mut lines = stdout.lines();
    let waiting: serde_json::Value = loop {
        let line = lines.next().expect("a line before the end").unwrap();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_ne!(
            v["event"], "complete",
            "the run ended without saying: {line}"
        );
        if v["event"] == "handoff_waiting" {
            break v;
        }
    };
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(waiting["task_id"], "H-1");
    let answer = waiting["answer"].as_str().unwrap().to_string();
    assert_eq!(
        answer,
        "whilly handoff complete H-1 --plan hv --status complete"
    );
    // The command it names answers it.
    let args: Vec<&str> = answer.split(' ').skip(1).collect();
    let done = whilly(p).args(&args).output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    let status = run.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest:?}");
    assert!(
        rest.iter()
            .filter(|l| l.contains("handoff_waiting"))
            .count()
            == 0,
        "said once: {rest:?}"
    );
    let err = err_reader.join().unwrap();
    assert!(
        err.contains("whilly: H-1 waits for a human") && err.contains(&answer),
        "{err}"
    );
    assert!(err.contains("imported plan hv with 1 task "), "{err}");
}

/// A repository with a command agent that takes a moment per task, and a plan of `n` tasks.
fn repo_with_agent(n: usize) -> tempfile::TempDir {
    let tasks: Vec<serde_json::Value> = (1..=n)
        .map(|i| {
            serde_json::json!({"id": format!("W-{i}"), "priority": "high",
                "description": format!("Write file w{i}.txt with the task's number in it"),
                "acceptance_criteria": ["the file exists"], "test_steps": ["true"]})
        })
        .collect();
    let dir = repo_with(serde_json::json!({"plan_id": "wt", "project": "wt", "tasks": tasks}));
    let p = dir.path();
    let agent = p.join(".agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\nsleep 0.3\necho $$ > out-$$.txt\necho '<promise>COMPLETE</promise>'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        p.join("whilly.toml"),
        format!(
            "[run]\nagent = \"command\"\n[agents.command]\ntemplate = \"{}\"\n",
            agent.display()
        ),
    )
    .unwrap();
    let imported = whilly(p)
        .args(["plan", "import", "plan.json"])
        .output()
        .unwrap();
    assert!(imported.status.success(), "{imported:?}");
    dir
}

fn claimers(p: &Path) -> Vec<String> {
    let o = whilly(p)
        .args(["events", "--plan", "wt", "--json"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event_type"] == "task.claimed")
        .map(|e| e["worker_id"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_watcher_claims_nothing_while_a_worker_says_each_task_it_starts_and_ends() {
    for flags in [&["--watch"][..], &["-j", "0"][..]] {
        let dir = repo_with_agent(3);
        let p = dir.path();
        // The watcher first: with zero slots it must leave every task to the worker.
        let mut args = vec!["run", "--plan", "wt", "--headless"];
        args.extend_from_slice(flags);
        let watcher = whilly(p)
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Long enough for a watcher that would claim to have claimed.
        std::thread::sleep(Duration::from_millis(1500));
        assert!(claimers(p).is_empty(), "{flags:?}: the watcher claimed");
        let worker = whilly(p)
            .args(["worker", "--until-idle", "--plan", "wt"])
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&worker.stdout).into_owned();
        assert!(
            worker.status.success(),
            "{said}{}",
            String::from_utf8_lossy(&worker.stderr)
        );
        let out = watcher.wait_with_output().unwrap();
        let last = String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or_default()
            .to_string();
        let complete: serde_json::Value = serde_json::from_str(&last).unwrap();
        assert_eq!(
            complete["exit_code"], 0,
            "{flags:?}: the watcher saw the end: {last}"
        );
        let who = claimers(p);
        assert_eq!(who.len(), 3, "{who:?}");
        // The worker names itself first thing on stderr: `whilly worker ID: …`.
        let stderr = String::from_utf8_lossy(&worker.stderr);
        let id = stderr
            .split_whitespace()
            .nth(2)
            .map(|w| w.trim_end_matches(':'))
            .expect("the worker's id");
        assert!(
            who.iter().all(|w| w == id),
            "{flags:?}: only the worker ({id}) claimed: {who:?}"
        );
        // One line per task started and per task ended, nothing else.
        for i in 1..=3 {
            let lines: Vec<&str> = said
                .lines()
                .filter(|l| l.contains(&format!("wt/W-{i}")))
                .collect();
            assert!(
                lines.iter().any(|l| l.contains("task.started"))
                    && lines.iter().any(|l| l.contains("task.done")),
                "W-{i}: {said}"
            );
        }
        assert_eq!(said.lines().count(), 6, "{said}");
    }
    // --json: the same lines as the trail's events.
    let dir = repo_with_agent(2);
    let json = whilly(dir.path())
        .args(["worker", "--until-idle", "--plan", "wt", "--json"])
        .output()
        .unwrap();
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON event per line"))
        .collect();
    assert_eq!(events.len(), 4, "{events:?}");
    assert!(events.iter().all(|e| e["plan_id"] == "wt"), "{events:?}");
}

#[test]
fn an_approval_that_bounces_on_a_check_is_said_with_the_checks_output() {
    let dir = repo_with(
        serde_json::json!({"plan_id": "hb", "project": "hb", "tasks": [
        {"id": "H-1", "description": "Review the release notes by hand and fix the typos",
         "priority": "high", "agent": "handoff",
         "acceptance_criteria": ["the notes are reviewed"],
         "test_steps": ["sh -c 'echo collected 3 items; echo README.md is missing; exit 3'"]}]}),
    );
    let p = dir.path();
    let mut run = whilly(p)
        .args(["run", "plan.json", "--headless"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(run.stdout.take().unwrap()).lines();
    let mut waiting = |n: usize| -> serde_json::Value {
        let mut seen = 0;
        loop {
            let line = lines.next().expect("a line before the end").unwrap();
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            assert_ne!(v["event"], "complete", "ended early: {line}");
            if v["event"] == "handoff_waiting" {
                seen += 1;
                if seen == n {
                    return v;
                }
            }
        }
    };
    let first = waiting(1);
    assert!(first["bounced"].is_null(), "{first}");
    let approve = whilly(p)
        .args(["handoff", "complete", "H-1", "--status", "complete"])
        .output()
        .unwrap();
    assert!(approve.status.success());
    // The check fails on the unchanged worktree: a new handoff, saying why.
    let again = waiting(1);
    let bounced = again["bounced"]
        .as_str()
        .expect("the bounce is said")
        .to_string();
    assert!(
        bounced.contains("check test_steps[0] failed (exit code 3)")
            && bounced.contains("README.md is missing"),
        "{bounced}"
    );
    let show = whilly(p).args(["handoff", "show", "H-1"]).output().unwrap();
    let shown = String::from_utf8_lossy(&show.stdout).into_owned();
    assert!(
        shown.contains("bounced: your answer was approved, but the check test_steps[0] failed")
            && shown.contains("README.md is missing"),
        "{shown}"
    );
    let list = whilly(p).args(["handoff", "list"]).output().unwrap();
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("failed (exit code 3)"),
        "{}",
        String::from_utf8_lossy(&list.stdout)
    );
    let stop = whilly(p)
        .args([
            "handoff",
            "complete",
            "H-1",
            "--status",
            "failed",
            "--message",
            "giving up",
        ])
        .output()
        .unwrap();
    assert!(stop.status.success());
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(run.wait().unwrap().code(), Some(1), "{rest:?}");
}
