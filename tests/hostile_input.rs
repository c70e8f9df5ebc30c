//! Hostile input never puts a secret on disk nor slips past the configuration (issue 26,
//! items 2 and 6), with the real binary: an agent printing a key in two writes half a second
//! apart (the output goes quiet between them) leaves an attempt log without the key; a setting
//! far out of range is refused at load, naming the file, the line and the bound.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, plan, task};
use std::time::Duration;

#[test]
fn a_key_printed_in_two_writes_never_reaches_the_log() {
    let key_tail = "api03-Zq8xW2vB7nM4kL9pR3tY6uI1oE5aS0dF";
    let agent = format!(
        "sh -c 'printf \"using sk-ant-\"; sleep 0.6; printf \"{key_tail} now\\n\"; \
         printf \"password = \"; sleep 0.6; printf \"hunter2hunter2x9\\n\"; \
         mkdir -p files; echo done > files/$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'"
    );
    let repo = Repo::new(&plan("p", vec![task("T-1")]), &agent);
    let out = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    let logs = repo.attempt_files("p", "T-1");
    assert!(!logs.is_empty());
    for f in logs {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(!text.contains(key_tail), "{}: {text}", f.display());
        assert!(
            !text.contains("hunter2hunter2x9"),
            "{}: {text}",
            f.display()
        );
        if f.extension().is_some_and(|e| e == "log") {
            assert!(text.contains("[REDACTED:anthropic_api_key]"), "{text}");
        }
    }
}

#[test]
fn a_setting_out_of_range_is_refused_with_its_place() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let cfg = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
    let cfg = cfg.replace("lease_secs = 6", "lease_secs = 9223372036854775807");
    repo.write("whilly.toml", &cfg);
    let out = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(30));
    assert_ne!(out.code, Some(0), "{out}");
    let line = cfg
        .lines()
        .position(|l| l.starts_with("lease_secs"))
        .unwrap()
        + 1;
    assert!(out.stderr.contains("queue.lease_secs"), "{out}");
    assert!(out.stderr.contains("at most 604800"), "{out}");
    assert!(
        out.stderr.contains(&format!("whilly.toml:{line}")),
        "the file and line: {out}"
    );
}

/// A plan given as a FIFO that nobody writes is refused at once, not waited for; one fed by a
/// writer (as `<(generate-plan)` is) is read to its end.
#[test]
fn a_plan_given_as_a_fifo_is_never_waited_for() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let fifo = repo.repo.join("plan-fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let out = repo.run(&["plan", "check", "plan-fifo"], Duration::from_secs(20));
    assert_eq!(out.code, Some(1), "refused, not waited for: {out}");
    assert!(
        out.stderr
            .contains("plan-fifo is a named pipe nobody is writing to"),
        "{out}"
    );
    // A pipe with its writer there, as `<(generate-plan)` gives: read to its end.
    let text = std::fs::read_to_string(repo.repo.join("plan.json")).unwrap();
    let mut child = repo
        .whilly(&["plan", "check", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(text.as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "a fed pipe is read: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
