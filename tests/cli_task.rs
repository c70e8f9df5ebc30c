//! The audit trail read in a terminal and one task steered from the shell, with the real binary:
//! `whilly events` one short line per event (the reason, the failed check and its exit code, not
//! the check's output), `whilly task show|retry|skip`, and a mistyped command named.

use std::path::Path;
use std::process::{Command, Output};

fn whilly(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_whilly"))
        .args(args)
        .current_dir(dir)
        .env_remove("WHILLY_DATABASE_URL")
        .env("XDG_CONFIG_HOME", dir.join(".xdg"))
        .env("HOME", dir)
        .output()
        .expect("run whilly")
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A repository whose agent does a little work and whose task A fails its check with a long
/// output, B depending on A; the plan run once.
fn failed_run() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let repo = git2::Repository::init(p).unwrap();
    let agent = p.join("agent.sh");
    std::fs::write(
        &agent,
        "#!/bin/sh\necho work >> out-$$.txt\necho '<promise>COMPLETE</promise>'\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut index = repo.index().unwrap();
    index.add_path(Path::new("agent.sh")).unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    std::fs::write(
        p.join("whilly.toml"),
        format!(
            "[run]\nagent = \"command\"\n[agents.command]\ntemplate = \"{}\"\n",
            agent.display()
        ),
    )
    .unwrap();
    let noisy =
        "for i in $(seq 400); do echo \"E   assert $i == 0 in test_report.py\"; done; exit 3";
    let plan = serde_json::json!({"plan_id": "tk", "project": "tk", "tasks": [
        {"id": "A", "description": "Write the output file for the report generator",
         "priority": "high", "status": "pending", "max_attempts": 1,
         "acceptance_criteria": ["the out file exists"],
         "test_steps": [format!("sh -c '{noisy}'")]},
        {"id": "B", "description": "Use the output of A to build the summary page",
         "priority": "medium", "status": "pending", "dependencies": ["A"],
         "acceptance_criteria": ["the summary exists"], "test_steps": ["true"]}]});
    std::fs::write(p.join("plan.json"), plan.to_string()).unwrap();
    let run = whilly(p, &["run", "plan.json", "--headless"]);
    assert_eq!(run.status.code(), Some(1), "{}", err(&run));
    let complete: serde_json::Value =
        serde_json::from_str(out(&run).lines().last().expect("a complete line")).unwrap();
    assert_eq!(
        complete["stuck"],
        serde_json::json!([{"task_id": "B", "status": "PENDING", "why": "blocked: A FAILED"}]),
        "each stuck task with its reason"
    );
    // The run ends saying, per unfinished task, why and what to do.
    let said = err(&run);
    assert!(
        said.contains("whilly: A FAILED (reason=verification_failed")
            && said.contains("exit code 3")
            && said.contains("`whilly task retry A`"),
        "{said}"
    );
    assert!(
        said.contains("whilly: B did not run: it depends on A, which FAILED"),
        "{said}"
    );
    dir
}

#[test]
fn the_trail_is_one_short_line_per_event_and_a_task_is_steered_from_the_shell() {
    let dir = failed_run();
    let p = dir.path();

    let events = whilly(p, &["events", "--plan", "tk"]);
    assert!(events.status.success(), "{}", err(&events));
    let text = out(&events);
    let failed = text
        .lines()
        .find(|l| l.contains("task.failed"))
        .unwrap_or_else(|| panic!("a task.failed line:\n{text}"));
    for want in [
        "tk/A",
        "IN_PROGRESS→FAILED",
        "reason=verification_failed",
        "exit code 3",
        "agent=command",
    ] {
        assert!(failed.contains(want), "{want:?} in {failed}");
    }
    assert!(
        !failed.contains("assert 399 == 0"),
        "no check output: {failed}"
    );
    let longest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 300, "lines stay short ({longest} chars):\n{text}");
    // --json keeps the whole payload, output included.
    let json = out(&whilly(p, &["events", "--plan", "tk", "--json"]));
    assert!(json.contains("assert 399 == 0"), "the JSON has the payload");

    // The plan's table says what blocks B, and the run's last line carried it too.
    let table = out(&whilly(p, &["plan", "show", "tk"]));
    assert!(
        table.contains("PENDING (blocked: A FAILED)"),
        "plan show: {table}"
    );

    let show = whilly(p, &["task", "show", "B"]);
    assert!(show.status.success(), "{}", err(&show));
    let b = out(&show);
    assert!(
        b.contains("PENDING") && b.contains("depends on: A (FAILED)"),
        "{b}"
    );
    assert!(
        b.contains("blocked: A FAILED") && b.contains("whilly task retry A"),
        "{b}"
    );
    let a = out(&whilly(p, &["task", "show", "A"]));
    assert!(
        a.contains("FAILED") && a.contains("why: verification_failed") && a.contains("events ("),
        "{a}"
    );

    let retry = whilly(
        p,
        &["task", "retry", "A", "--reason", "the fixture is fixed"],
    );
    assert!(retry.status.success(), "{}", err(&retry));
    assert!(
        out(&retry).contains("A (plan tk) is PENDING again"),
        "{}",
        out(&retry)
    );
    let trail = out(&whilly(p, &["events", "--task", "A"]));
    assert!(
        trail.contains("task.reset") && trail.contains("FAILED→PENDING"),
        "the retry is in the trail:\n{trail}"
    );

    let skip = whilly(p, &["task", "skip", "A"]);
    assert!(skip.status.success(), "{}", err(&skip));
    let said = out(&skip);
    // A dependency is met only when DONE: skipping A leaves B waiting, and says so.
    assert!(
        said.contains("is SKIPPED") && said.contains("B depends on it and waits"),
        "{said}"
    );
    let b = out(&whilly(p, &["task", "show", "B"]));
    assert!(
        b.contains("blocked: A SKIPPED") && b.contains("whilly task skip B"),
        "B waits on a skipped task: {b}"
    );

    // A missing task, and one id in two plans, are refused with what to do.
    let none = whilly(p, &["task", "show", "Z"]);
    assert_eq!(none.status.code(), Some(1));
    assert!(
        err(&none).contains("no plan has a task Z"),
        "{}",
        err(&none)
    );
    let plan2 = std::fs::read_to_string(p.join("plan.json"))
        .unwrap()
        .replace("\"tk\"", "\"tk2\"");
    std::fs::write(p.join("plan2.json"), plan2).unwrap();
    assert!(
        whilly(p, &["plan", "import", "plan2.json"])
            .status
            .success()
    );
    let two = whilly(p, &["task", "retry", "A"]);
    assert_eq!(two.status.code(), Some(1));
    assert!(
        err(&two).contains("in plans tk, tk2: say which with --plan"),
        "{}",
        err(&two)
    );
    assert!(
        out(&whilly(p, &["task", "show", "A", "--plan", "tk2"])).contains("(plan tk2)  PENDING")
    );
}

#[test]
fn a_mistyped_command_is_named_and_no_run_line_is_printed() {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::init(dir.path()).unwrap();
    let plain = whilly(dir.path(), &["evnets"]);
    assert_eq!(plain.status.code(), Some(1), "{}", err(&plain));
    assert!(
        err(&plain).contains("did you mean `whilly events`?"),
        "{}",
        err(&plain)
    );
    let o = whilly(dir.path(), &["run", "evnets", "--headless"]);
    assert_eq!(o.status.code(), Some(1), "{}", err(&o));
    assert!(
        err(&o).contains("did you mean `whilly events`?"),
        "{}",
        err(&o)
    );
    assert!(out(&o).trim().is_empty(), "no JSON line: {}", out(&o));
}
