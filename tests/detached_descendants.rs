//! Nothing an agent starts outlives its attempt, however it detaches (issue 26, item 4): an
//! agent that leaves `setsid` sleepers, a double-forked one and a `nohup` one behind, with the
//! real binary headless, as a worker, and with the run killed by SIGKILL. Every process the
//! agent started carries the test's marker in its environment, so none can hide.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, plan, task, wait_for};
use std::time::Duration;

/// Starts three sleepers that leave the agent's process group or its parentage, then finishes
/// (or, with `linger`, keeps working so the run can be killed meanwhile).
fn detaching_agent(linger: bool) -> String {
    let tail = if linger { "sleep 30; " } else { "" };
    format!(
        "sh -c 'setsid sleep 3001 < /dev/null > /dev/null 2>&1 & \
         (sh -c \"sleep 3002 < /dev/null > /dev/null 2>&1 &\" &) ; \
         nohup setsid sh -c \"sleep 3003\" < /dev/null > /dev/null 2>&1 & \
         sleep 0.3; mkdir -p files; echo done > files/$WHILLY_TASK_ID.txt; {tail}\
         echo \"<promise>COMPLETE</promise>\"'"
    )
}

fn sleepers(repo: &Repo, except: &[i32]) -> Vec<String> {
    repo.marked_pids(except)
        .into_iter()
        .filter_map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains("sleep 300").then(|| format!("{p}: {cmd}"))
        })
        .collect()
}

fn repo_with(agent: &str) -> Repo {
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    repo.write("whilly.toml", &engine::config(agent, &repo.wt_dir));
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "agent"]);
    repo
}

#[test]
fn a_headless_run_leaves_no_detached_descendant() {
    let repo = repo_with(&detaching_agent(false));
    let out = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    let left = wait_for(Duration::from_secs(5), "the sleepers to be gone", || {
        let s = sleepers(&repo, &[]);
        s.is_empty().then_some(s)
    });
    assert!(left.is_empty());
}

#[test]
fn a_worker_leaves_no_detached_descendant() {
    let repo = repo_with(&detaching_agent(false));
    let out = repo.run(&["plan", "import", "plan.json"], Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    let out = repo.run(&["worker", "--until-idle"], Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    wait_for(Duration::from_secs(5), "the sleepers to be gone", || {
        sleepers(&repo, &[]).is_empty().then_some(())
    });
}

#[test]
fn a_run_killed_with_sigkill_leaves_no_detached_descendant() {
    killed_with_sigkill_leaves_none(&["run", "plan.json", "--headless"]);
}

#[test]
fn a_worker_killed_with_sigkill_leaves_no_detached_descendant() {
    killed_with_sigkill_leaves_none(&["worker"]);
}

fn killed_with_sigkill_leaves_none(args: &[&str]) {
    let repo = repo_with(&detaching_agent(true));
    if args[0] == "worker" {
        let out = repo.run(&["plan", "import", "plan.json"], Duration::from_secs(30));
        assert_eq!(out.code, Some(0), "{out}");
    }
    let run = repo.spawn(args);
    let pid = run.pid();
    wait_for(Duration::from_secs(30), "the sleepers to start", || {
        (sleepers(&repo, &[pid]).len() >= 3).then_some(())
    });
    run.signal(libc::SIGKILL);
    let _ = run.wait(Duration::from_secs(10));
    // The guards see whilly gone within a tick, then give the group its grace.
    wait_for(Duration::from_secs(10), "the sleepers to be gone", || {
        sleepers(&repo, &[]).is_empty().then_some(())
    });
    repo.kill_marked(&[]);
}

/// An attempt stopped by whilly (its task timeout) while its detached sleeper runs, the agent
/// ignoring SIGTERM so its whole group is killed with SIGKILL (the guard with it): the stop
/// reached the sleeper first.
#[test]
fn an_attempt_stopped_at_its_timeout_leaves_no_detached_descendant() {
    let mut t = task("T-1");
    t["timeout"] = 2.into();
    t["max_attempts"] = 1.into();
    let repo = Repo::new(
        &plan("p", vec![t]),
        "sh -c 'setsid sleep 3001 < /dev/null > /dev/null 2>&1 & trap \"\" TERM; sleep 60'",
    );
    let out = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(60));
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(repo.task("p", "T-1")["reason"], "task_timeout");
    wait_for(Duration::from_secs(5), "the sleeper to be gone", || {
        sleepers(&repo, &[]).is_empty().then_some(())
    });
}

/// The same, the detached sleeper ignoring SIGTERM too: whilly's SIGKILL to the group ends
/// what the guard adopted first, while the guard still holds it.
#[test]
fn a_detached_descendant_ignoring_sigterm_is_ended_with_its_attempt() {
    let mut t = task("T-1");
    t["timeout"] = 2.into();
    t["max_attempts"] = 1.into();
    let repo = Repo::new(
        &plan("p", vec![t]),
        "sh -c 'setsid sh -c \"trap \\\"\\\" TERM; sleep 3001\" < /dev/null > /dev/null 2>&1 & trap \"\" TERM; sleep 60'",
    );
    let out = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(60));
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(repo.task("p", "T-1")["reason"], "task_timeout");
    wait_for(Duration::from_secs(5), "the sleeper to be gone", || {
        sleepers(&repo, &[]).is_empty().then_some(())
    });
}
