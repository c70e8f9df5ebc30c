//! What a headless run says to the person (or CI job) reading it: a handoff waiting for a human
//! is a `handoff_waiting` JSON line and a stderr line naming the command that answers it (the
//! end-of-run lines for unfinished tasks are in `cli_task.rs`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn whilly(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_whilly"));
    c.current_dir(dir)
        .env_remove("WHILLY_DATABASE_URL")
        .env("XDG_CONFIG_HOME", dir.join(".xdg"))
        .env("HOME", dir);
    c
}

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
