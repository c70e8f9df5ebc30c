//! A machine short of file descriptors for a while (issue 25, item 10): the real binary runs
//! under a low RLIMIT_NOFILE, so creating the task's worktree or spawning its agent is refused
//! with EMFILE. That is not the task's doing: the task goes back without using an attempt, and
//! once the limit is raised (prlimit on the running process) it runs and lands with its first
//! attempt. A machine that never recovers fails the task after the refusals' own limit.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, plan, task, wait_for};
use serde_json::Value;
use std::os::unix::process::CommandExt;
use std::process::{Child, Stdio};
use std::time::Duration;

fn set_nofile(pid: i32, n: u64) {
    let lim = libc::rlimit {
        rlim_cur: n,
        rlim_max: 4096,
    };
    // SAFETY: prlimit on a child of this test, with a valid rlimit.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// `whilly run plan.json --headless` with at most `n` open files.
fn run_limited(repo: &Repo, n: u64, max_attempts: u32) -> Child {
    let mut cmd = repo.whilly(&[
        "-c",
        &format!("queue.default_max_attempts={max_attempts}"),
        "run",
        "plan.json",
        "--headless",
    ]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: 4096,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn().unwrap()
}

fn refusals(repo: &Repo) -> Vec<Value> {
    if !repo.repo.join(".whilly/whilly.db").exists() {
        return Vec::new();
    }
    repo.events(Some("T-1"))
        .into_iter()
        .filter(|e| e["event_type"] == "task.released" && e["payload"]["reason"] == "spawn_refused")
        .collect()
}

/// Starts a run under the lowest descriptor limit (of a few) at which it gets as far as
/// claiming the task but is refused its worktree or agent: the child, once refused.
fn refused_run(repo: &Repo, max_attempts: u32) -> Child {
    for n in (18..=40).step_by(2) {
        let _ = std::fs::remove_dir_all(repo.repo.join(".whilly"));
        let mut child = run_limited(repo, n, max_attempts);
        let seen = wait_for(Duration::from_secs(30), "a refusal or the end", || {
            if !refusals(repo).is_empty() {
                return Some(true);
            }
            child.try_wait().unwrap().map(|_| false)
        });
        if seen {
            return child;
        }
    }
    panic!("no descriptor limit between 18 and 40 made the worktree or the spawn refuse");
}

#[test]
fn a_spawn_refused_for_lack_of_descriptors_uses_no_attempt() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let template =
        "sh -c 'mkdir -p files && echo done > files/T-1.txt; echo \"<promise>COMPLETE</promise>\"'";
    repo.write("whilly.toml", &engine::config(template, &repo.wt_dir));
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    let mut child = refused_run(&repo, 1);
    // The machine recovers: the same run now lands the task, with one attempt of one.
    set_nofile(child.id() as i32, 1024);
    let status = wait_for(Duration::from_secs(60), "the run to end", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(0));
    let t = repo.task("p", "T-1");
    assert_eq!(t["status"], "DONE", "{t}");
    assert_eq!(t["attempts"], 1, "the refusals used no attempt: {t}");
    assert_eq!(repo.git(&["show", "HEAD:files/T-1.txt"]), "done\n");
}

#[test]
fn a_machine_that_never_recovers_fails_the_task_after_its_own_limit() {
    // The agent `true` never gets to run: every spawn is refused.
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let mut child = refused_run(&repo, 1);
    let status = wait_for(Duration::from_secs(60), "the run to end", || {
        child.try_wait().unwrap()
    });
    assert_eq!(status.code(), Some(1));
    let t = repo.task("p", "T-1");
    assert_eq!(t["status"], "FAILED", "{t}");
    // One attempt, three refusals (the limit is three times the attempts).
    assert_eq!(
        refusals(&repo).len(),
        2,
        "two given back, the third ends it"
    );
    let failed = repo
        .events(Some("T-1"))
        .into_iter()
        .find(|e| e["event_type"] == "task.failed")
        .unwrap();
    assert!(
        failed["payload"]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("refused to start the agent 3 times"),
        "{failed}"
    );
}
