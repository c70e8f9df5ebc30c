//! A machine short of file descriptors for a while (issue 25, item 10): a real worker's soft
//! RLIMIT_NOFILE is cut (prlimit) so creating the task's worktree or spawning its agent is
//! refused with EMFILE. That is not the task's doing: the task goes back without using an attempt, and
//! once the limit is raised again (prlimit) it runs and lands with its first
//! attempt. A machine that never recovers fails the task after the refusals' own limit.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, Running, plan, task, wait_for};
use serde_json::Value;
use std::time::Duration;

/// Sets the soft limit on open files of process `pid` to `n`, keeping its hard limit (an
/// unprivileged process may move its soft limit anywhere below that).
fn set_nofile(pid: i32, n: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: prlimit on a child of this test, with valid structs.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, std::ptr::null(), &mut old) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
    let lim = libc::rlimit {
        rlim_cur: n.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: as above.
    let r = unsafe { libc::prlimit(pid, libc::RLIMIT_NOFILE, &lim, std::ptr::null_mut()) };
    assert_eq!(r, 0, "prlimit: {}", std::io::Error::last_os_error());
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

/// A worker serving the queue, its descriptors cut to the lowest of a few limits at which it
/// claims the task but is refused its worktree or its agent (whilly raises its own soft limit
/// at start, so the cut comes after): the worker, once refused.
fn refused_worker(repo: &Repo, max_attempts: u32) -> Running {
    for n in (18..=48).step_by(2) {
        let _ = std::fs::remove_dir_all(repo.repo.join(".whilly"));
        let worker = repo.spawn(&[
            "-c",
            &format!("queue.default_max_attempts={max_attempts}"),
            "worker",
        ]);
        wait_for(Duration::from_secs(20), "the worker to start", || {
            worker
                .stderr_now()
                .contains("slots on the sqlite queue")
                .then_some(())
        });
        set_nofile(worker.pid(), n);
        let import = repo.run(
            &[
                "-c",
                &format!("queue.default_max_attempts={max_attempts}"),
                "plan",
                "import",
                "plan.json",
            ],
            Duration::from_secs(30),
        );
        assert_eq!(import.code, Some(0), "{import}");
        let mut worker = worker;
        let seen = wait_for(
            Duration::from_secs(30),
            "a refusal or a settled task",
            || {
                if !refusals(repo).is_empty() {
                    return Some(true);
                }
                if worker.exited() {
                    return Some(false);
                }
                let status = repo.task("p", "T-1")["status"].clone();
                (status == "DONE" || status == "FAILED").then_some(false)
            },
        );
        if seen {
            return worker;
        }
        if !worker.exited() {
            worker.signal(libc::SIGKILL);
        }
        let _ = worker.wait(Duration::from_secs(10));
    }
    panic!("no descriptor limit between 18 and 48 made the worktree or the spawn refuse");
}

#[test]
fn a_spawn_refused_for_lack_of_descriptors_uses_no_attempt() {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let template =
        "sh -c 'mkdir -p files && echo done > files/T-1.txt; echo \"<promise>COMPLETE</promise>\"'";
    repo.write("whilly.toml", &engine::config(template, &repo.wt_dir));
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    let worker = refused_worker(&repo, 1);
    // The machine recovers: the same worker now lands the task, with one attempt of one.
    set_nofile(worker.pid(), 1024);
    wait_for(Duration::from_secs(60), "the task to settle", || {
        let s = repo.task("p", "T-1")["status"].clone();
        (s == "DONE" || s == "FAILED").then_some(())
    });
    worker.signal(libc::SIGTERM);
    let _ = worker.wait(Duration::from_secs(30));
    let t = repo.task("p", "T-1");
    assert_eq!(t["status"], "DONE", "{t}");
    assert_eq!(t["attempts"], 1, "the refusals used no attempt: {t}");
    assert_eq!(repo.git(&["show", "HEAD:files/T-1.txt"]), "done\n");
}

#[test]
fn a_machine_that_never_recovers_fails_the_task_after_its_own_limit() {
    // The agent `true` never gets to run: every spawn is refused.
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    let worker = refused_worker(&repo, 1);
    wait_for(Duration::from_secs(60), "the task to settle", || {
        let s = repo.task("p", "T-1")["status"].clone();
        (s == "DONE" || s == "FAILED").then_some(())
    });
    worker.signal(libc::SIGTERM);
    let _ = worker.wait(Duration::from_secs(30));
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
