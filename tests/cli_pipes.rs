//! Output into pipes whose reader went away: `whilly … | head -1`, and Ctrl-C on
//! `whilly run … 2>&1 | tee log` (the terminal's Ctrl-C kills `tee` too). Writes must not panic
//! or fail the command, and the stop must still reach the engine and its agents.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, agent, plan, task, wait_for};
use std::process::Stdio;
use std::time::Duration;

/// Runs `whilly ARGS | true` in a shell (the reader is gone before most of the output is
/// written) and returns (whilly's exit code, its stderr).
fn into_head(repo: &Repo, args: &str) -> (i32, String) {
    let whilly = env!("CARGO_BIN_EXE_whilly");
    let script =
        format!("'{whilly}' {args} 2>stderr.txt | true; echo ${{PIPESTATUS[0]}} > code.txt");
    let out = std::process::Command::new("bash")
        .args(["-c", &script])
        .current_dir(&repo.repo)
        .env("HOME", &repo.home)
        .status()
        .unwrap();
    assert!(out.success());
    let code = std::fs::read_to_string(repo.repo.join("code.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let stderr = std::fs::read_to_string(repo.repo.join("stderr.txt")).unwrap_or_default();
    (code, stderr)
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let big: Vec<_> = (0..3000).map(|i| task(&format!("T-{i:04}"))).collect();
    repo.write(
        "big.json",
        &serde_json::to_string(&plan("big", big)).unwrap(),
    );
    let out = repo
        .whilly(&["plan", "import", "big.json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    for args in [
        "config show",
        "completions zsh",
        "completions bash",
        "plan show big",
        "events --json",
    ] {
        let (code, stderr) = into_head(&repo, args);
        assert_eq!(
            code, 0,
            "whilly {args} | head: exit {code}, stderr: {stderr}"
        );
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "whilly {args} | head: {stderr}"
        );
    }
}

/// The run's stdout and stderr go into a pipe nobody reads any more; two SIGINTs stop the agent
/// within the grace period and the task goes back to PENDING.
#[test]
fn ctrl_c_with_output_in_a_closed_pipe_stops_the_agents() {
    let ledger_script = agent("engine/ledger.sh");
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let ledger = repo.shared_file("ledger");
    let template = format!("bash {} {} 120", ledger_script.display(), ledger.display());
    repo.write("whilly.toml", &engine::config(&template, &repo.wt_dir));
    let (reader, writer) = std::io::pipe().unwrap();
    let writer2 = writer.try_clone().unwrap();
    let mut child = repo
        .whilly(&["run", "plan.json", "--headless"])
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .spawn()
        .unwrap();
    let pid = wait_for(Duration::from_secs(30), "the agent", || {
        let text = std::fs::read_to_string(&ledger).ok()?;
        text.split_whitespace().nth(2)?.parse::<i32>().ok()
    });
    // The reader goes away, as `tee` does on the terminal's Ctrl-C.
    drop(reader);
    for _ in 0..2 {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(300));
    }
    let status = wait_for(Duration::from_secs(20), "whilly to exit", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(130), "{status:?}");
    wait_for(Duration::from_secs(5), "the agent to be stopped", || {
        // SAFETY: signal 0 only checks for existence.
        (unsafe { libc::kill(pid, 0) } != 0).then_some(())
    });
    assert_eq!(repo.task("p", "T-1")["status"], "PENDING");
}
