//! The engine on its edges, through the real binary: real git repositories, real PTYs, fake
//! agents that hang, flood, query the terminal, ignore SIGTERM, fail, never finish, cost money,
//! or wait for a human. Each test has its own repository, worktree dir and HOME.

#[path = "support/engine.rs"]
mod engine;

use engine::{Repo, agent, count_by_task, plan, rss_kib, task, wait_for};
use serde_json::Value;
use std::time::{Duration, Instant};

fn sh(script: &str, args: &str) -> String {
    format!("bash {} {args}", agent(script).display())
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

fn assert_no_agents_left(repo: &Repo) {
    // The group is killed before the attempt settles, but give the kernel a moment to reap.
    let left = wait_for(
        Duration::from_secs(3),
        "agent processes to disappear",
        || {
            let pids = repo.marked_pids(&[]);
            pids.is_empty().then_some(pids)
        },
    );
    assert!(left.is_empty(), "agent processes left: {left:?}");
}

fn events_of(repo: &Repo, task_id: &str, kind: &str) -> Vec<Value> {
    repo.events(Some(task_id))
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

// 1. An agent that hangs is killed at the task's timeout, retried, then failed.
#[test]
fn hanging_agent_is_killed_at_the_timeout_retried_then_failed() {
    let mut t = task("T-1");
    t["timeout"] = 2.into();
    t["max_attempts"] = 2.into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("hang.sh", ""));
    let started = Instant::now();
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(40));
    let elapsed = started.elapsed();
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "task_timeout", "{rec}");
    assert_eq!(rec["attempts"], 2, "{rec}");
    assert_eq!(events_of(&repo, "T-1", "task.started").len(), 2);
    // Two attempts of ~2 s each: the timeout, not the 1000 s sleep, ended them.
    assert!(
        elapsed >= Duration::from_secs(4) && elapsed < Duration::from_secs(25),
        "{elapsed:?}"
    );
    assert_no_agents_left(&repo);
}

// 5. An agent that exits non-zero is retried, then failed with agent_failed.
#[test]
fn failing_agent_is_retried_then_failed() {
    let mut t = task("T-1");
    t["max_attempts"] = 2.into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("exit_code.sh", "3"));
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(30));
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "agent_failed", "{rec}");
    assert_eq!(rec["attempts"], 2, "{rec}");
    assert_eq!(out.complete()["failed"], 1);
    assert_no_agents_left(&repo);
}

// 6. An agent that never prints the marker fails after max_attempts (no endless retries).
#[test]
fn agent_without_marker_fails_after_max_attempts() {
    let mut t = task("T-1");
    t["max_attempts"] = 3.into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("engine/no_marker.sh", ""));
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(30));
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "marker_missing", "{rec}");
    assert_eq!(rec["attempts"], 3, "{rec}");
    assert_eq!(events_of(&repo, "T-1", "task.started").len(), 3);
    assert_eq!(out.complete()["attempts"], 3);
}

// 2. 100 MB of coloured output: all of it in the attempt log, whilly's memory stays bounded.
#[test]
fn flood_of_output_is_logged_whole_with_bounded_memory() {
    let mb: u64 = std::env::var("WHILLY_FLOOD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let repo = Repo::new(
        &plan("p", vec![task("T-1")]),
        &sh("engine/flood.sh", &mb.to_string()),
    );
    let mut run = repo.run_plan(&[], &[]);
    let pid = run.pid();
    let mut peak_kib = 0u64;
    let deadline = Instant::now() + Duration::from_secs(300);
    while !run.exited() {
        assert!(
            Instant::now() < deadline,
            "flood run did not finish in time"
        );
        if let Some(k) = rss_kib(pid) {
            peak_kib = peak_kib.max(k);
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    let out = run.wait(Duration::from_secs(5));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    let log = repo
        .attempt_files("p", "T-1")
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "1.log"))
        .expect("attempt log 1.log");
    let size = std::fs::metadata(&log).unwrap().len();
    println!(
        "flood: {mb} MiB through the PTY; log {size} bytes; whilly peak RSS {} MiB",
        peak_kib / 1024
    );
    assert!(size >= mb * 1024 * 1024, "log holds {size} bytes");
    assert!(
        peak_kib < 200 * 1024,
        "whilly peak RSS {peak_kib} KiB is not bounded"
    );
}

// 3. An agent that asks the terminal where the cursor is gets an answer.
#[test]
fn cursor_position_query_is_answered() {
    let mut t = task("T-1");
    t["max_attempts"] = 1.into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("engine/cursor.sh", ""));
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(30));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    let log = repo
        .attempt_files("p", "T-1")
        .into_iter()
        .find(|p| p.file_name().is_some_and(|n| n == "1.log"))
        .expect("attempt log");
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap()).into_owned();
    assert!(text.contains("cursor reply row="), "{text}");
}

/// Starts a run whose agent ignores SIGTERM and waits until the agent is running.
fn start_stubborn_run() -> (Repo, engine::Running) {
    // T-2 waits behind T-1 (one slot): once stopping, it must never be claimed.
    let repo = Repo::new(
        &plan("p", vec![task("T-1"), task("T-2")]),
        &sh("ignore_term.sh", ""),
    );
    let run = repo.run_plan(&[], &[]);
    let whilly = run.pid();
    wait_for(Duration::from_secs(20), "the agent to start", || {
        let started = repo
            .events(Some("T-1"))
            .iter()
            .any(|e| e["event_type"] == "task.started");
        // bash and its sleep: the agent has set its trap once its child exists.
        (started && repo.marked_pids(&[whilly]).len() >= 2).then_some(())
    });
    (repo, run)
}

fn assert_released_for_shutdown(repo: &Repo, out: &engine::Output) {
    assert_eq!(out.code, Some(130), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "PENDING", "{rec}");
    assert_eq!(rec["reason"], "shutdown", "{rec}");
    let released = repo
        .events(Some("T-1"))
        .into_iter()
        .any(|e| e["to_status"] == "PENDING" && e["payload"]["reason"] == "shutdown");
    assert!(released, "no release event with reason shutdown");
    let t2 = repo.task("p", "T-2");
    assert_eq!(t2["status"], "PENDING", "{t2}");
    assert_eq!(t2["attempts"], 0, "claimed while stopping: {t2}");
    assert_no_agents_left(repo);
}

// 4a. One SIGINT: no new claims; after the grace period the stubborn agent is killed.
#[test]
fn sigint_stops_after_grace_and_kills_a_stubborn_agent() {
    let (repo, run) = start_stubborn_run();
    let whilly = run.pid();
    let sent = Instant::now();
    run.signal(libc::SIGINT);
    let out = run.wait(Duration::from_secs(20));
    let took = sent.elapsed();
    println!("one SIGINT, grace 1 s: whilly exited after {took:?}");
    assert_released_for_shutdown(&repo, &out);
    assert!(repo.marked_pids(&[whilly]).is_empty());
    // Grace is 1 s: the agent is killed then, not after a further SIGTERM wait.
    assert!(
        took < Duration::from_millis(2500),
        "grace 1 s, but whilly took {took:?} to stop a SIGTERM-ignoring agent"
    );
    assert!(
        took >= Duration::from_millis(900),
        "grace not honoured: {took:?}"
    );
}

// 4b. Two SIGINTs: the agent is killed at once.
#[test]
fn second_sigint_kills_at_once() {
    let (repo, run) = start_stubborn_run();
    run.signal(libc::SIGINT);
    // The second Ctrl-C comes while the first one's grace period is running.
    wait_for(
        Duration::from_secs(5),
        "the first SIGINT to be noticed",
        || {
            std::fs::read_dir(repo.home.join("outputs"))
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "err"))
                .any(|e| {
                    std::fs::read_to_string(e.path())
                        .unwrap_or_default()
                        .contains("stopping")
                })
                .then_some(())
        },
    );
    let sent = Instant::now();
    run.signal(libc::SIGINT);
    let out = run.wait(Duration::from_secs(20));
    let took = sent.elapsed();
    println!("second SIGINT: whilly exited after {took:?}");
    assert_released_for_shutdown(&repo, &out);
    assert!(
        took < Duration::from_millis(1500),
        "the second SIGINT should kill at once, took {took:?}"
    );
}

// 7a. A failing verification gets one repair round, which passes.
#[test]
fn verification_fails_then_repair_round_passes() {
    let repo = Repo::new(&verified_plan(), &sh("engine/repair.sh", "{prompt_file}"));
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(40));
    assert_eq!(out.code, Some(0), "{out}");
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done.len(), 1);
    let rounds = done[0]["payload"]["verification"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rounds.len(), 2, "{}", done[0]);
    assert_eq!(rounds[0]["passed"], false);
    assert_eq!(rounds[1]["passed"], true);
    // The repaired work reached the base branch.
    assert_eq!(repo.git(&["show", "HEAD:result.txt"]).trim(), "good");
}

// 7b. A verification that never passes fails the task with verification_failed.
#[test]
fn verification_that_never_passes_fails_the_task() {
    let repo = Repo::new(
        &verified_plan(),
        &sh("engine/repair.sh", "{prompt_file} never"),
    );
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(40));
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "verification_failed", "{rec}");
    let failed = events_of(&repo, "T-1", "task.failed");
    let rounds = failed
        .last()
        .and_then(|e| e["payload"]["verification"].as_array().cloned())
        .unwrap_or_default();
    assert_eq!(rounds.len(), 2, "{failed:?}");
    assert!(rounds.iter().all(|r| r["passed"] == false));
}

fn verified_plan() -> Value {
    let mut p = plan("p", vec![task("T-1")]);
    p["verification_commands"] = serde_json::json!([{
        "name": "result is good",
        "command": "grep -qx good result.txt",
        "required": true,
        "repair_max_attempts": 1
    }]);
    p
}

/// (task, start ns, end ns) from the stamp agent's shared log.
fn intervals(log: &std::path::Path) -> Vec<(String, u128, u128)> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut starts = std::collections::HashMap::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, id, ns] = parts[..] else { continue };
        let ns: u128 = ns.parse().unwrap();
        match kind {
            "start" => {
                starts.insert(id.to_string(), ns);
            }
            "end" => out.push((id.to_string(), starts[id], ns)),
            _ => {}
        }
    }
    out.sort_by_key(|(_, s, _)| *s);
    out
}

fn overlaps(v: &[(String, u128, u128)]) -> usize {
    let mut n = 0;
    for (i, a) in v.iter().enumerate() {
        for b in &v[i + 1..] {
            if a.1 < b.2 && b.1 < a.2 {
                n += 1;
            }
        }
    }
    n
}

fn stamp_run(key_files: [&[&str]; 3]) -> Vec<(String, u128, u128)> {
    let tasks = ["A", "B", "C"]
        .iter()
        .zip(key_files)
        .map(|(id, files)| {
            let mut t = task(id);
            t["key_files"] = serde_json::json!(files);
            t
        })
        .collect();
    let probe = engine::probe_dir();
    let log = probe.path().join("stamps.log");
    let repo = Repo::new(
        &plan("p", tasks),
        &sh(
            "engine/stamp.sh",
            &format!("{} 1.5 {{task_id}}", log.display()),
        ),
    );
    let out = repo
        .run_plan(&["run.parallel=3"], &[])
        .wait(Duration::from_secs(40));
    assert_eq!(out.code, Some(0), "{out}");
    let v = intervals(&log);
    assert_eq!(v.len(), 3, "{v:?}");
    v
}

// 8. Tasks sharing a key file never run at the same time; independent ones do.
#[test]
fn tasks_with_overlapping_key_files_never_overlap() {
    let shared = stamp_run([
        &["src/shared.rs", "src/a.rs"],
        &["./src/shared.rs", "src/b.rs"],
        &["src/shared.rs"],
    ]);
    assert_eq!(
        overlaps(&shared),
        0,
        "overlapping key_files ran together: {shared:?}"
    );
    let apart = stamp_run([&["src/a.rs"], &["src/b.rs"], &["src/c.rs"]]);
    assert!(
        overlaps(&apart) >= 1,
        "independent tasks did not overlap: {apart:?}"
    );
}

// 9. The plan budget stops the run: exit 2, what is left stays PENDING.
#[test]
fn plan_budget_stops_the_run() {
    let tasks = (1..=5).map(|i| task(&format!("T-{i}"))).collect();
    let mut p = plan("p", tasks);
    p["budget_usd"] = 1.0.into();
    let repo = Repo::new(&p, &sh("engine/cost.sh", "0.40 {task_id}"));
    let out = repo
        .run_plan(&["run.parallel=1"], &[])
        .wait(Duration::from_secs(40));
    assert_eq!(out.code, Some(2), "{out}");
    let spent = repo.plan_record("p")["spent"].as_f64().unwrap() / 1e6;
    println!("budget $1.00, $0.40 per task: spent ${spent:.2}");
    assert!((0.99..=1.0 + 0.40 + 1e-9).contains(&spent), "spent {spent}");
    let st = statuses(&repo, "p");
    let done = st.iter().filter(|(_, s)| s == "DONE").count();
    let pending = st.iter().filter(|(_, s)| s == "PENDING").count();
    assert_eq!(done + pending, 5, "{st:?}");
    assert!(pending >= 2, "{st:?}");
    assert!(
        !repo.events_of_type("budget.exhausted").is_empty(),
        "no budget.exhausted event"
    );
}

// 10. The run's own timeout: exit 3, running tasks go back to the queue.
#[test]
fn run_timeout_releases_tasks() {
    let tasks = vec![task("T-1"), task("T-2")];
    let probe = engine::probe_dir();
    let log = probe.path().join("stamps.log");
    let repo = Repo::new(
        &plan("p", tasks),
        &sh(
            "engine/stamp.sh",
            &format!("{} 30 {{task_id}}", log.display()),
        ),
    );
    let started = Instant::now();
    let out = repo
        .run_plan(&["run.parallel=2"], &["--timeout", "2s"])
        .wait(Duration::from_secs(30));
    let took = started.elapsed();
    assert_eq!(out.code, Some(3), "{out}");
    assert!(took < Duration::from_secs(15), "{took:?}");
    for (id, status) in statuses(&repo, "p") {
        assert_eq!(status, "PENDING", "{id}");
    }
    assert_eq!(repo.task("p", "T-1")["reason"], "run_timeout");
    assert_no_agents_left(&repo);
}

// 11. whilly is SIGKILLed mid-run; `--resume` finishes the plan without doing a task twice and
// without leaving worktrees behind.
#[test]
fn crash_mid_run_then_resume_completes_the_plan() {
    let tasks = (1..=4).map(|i| task(&format!("T-{i}"))).collect();
    let probe = engine::probe_dir();
    let log = probe.path().join("stamps.log");
    let repo = Repo::new(
        &plan("p", tasks),
        &sh(
            "engine/stamp.sh",
            &format!("{} 3 {{task_id}}", log.display()),
        ),
    );
    let run = repo.run_plan(&["run.parallel=2"], &[]);
    let whilly = run.pid();
    // Mid-run: some task is done and others are running.
    wait_for(
        Duration::from_secs(30),
        "one task done and two running",
        || {
            let ev = repo.events(None);
            let done = ev.iter().filter(|e| e["event_type"] == "task.done").count();
            let started = ev
                .iter()
                .filter(|e| e["event_type"] == "task.started")
                .count();
            (done >= 1 && started >= done + 2).then_some(())
        },
    );
    run.signal(libc::SIGKILL);
    let out = run.wait(Duration::from_secs(10));
    assert_eq!(out.code, None, "killed by a signal: {out}");
    // A SIGKILLed whilly cannot stop its agents; whatever survived is killed here, as an
    // operator (or the machine's reboot) would.
    let orphans = repo.kill_marked(&[whilly]);
    println!("orphaned agent processes after kill -9: {orphans}");
    wait_for(Duration::from_secs(5), "orphans to die", || {
        repo.marked_pids(&[]).is_empty().then_some(())
    });
    let before = statuses(&repo, "p");
    assert!(
        before
            .iter()
            .any(|(_, s)| s == "CLAIMED" || s == "IN_PROGRESS"),
        "the crash left no task leased: {before:?}"
    );

    let out = repo
        .run_plan(&["run.parallel=2"], &["--plan", "p", "--resume"])
        .wait(Duration::from_secs(60));
    // `run plan.json --plan p --resume` re-imports the unchanged file: a no-op.
    let failures: Vec<Value> = repo
        .events(None)
        .into_iter()
        .filter(|e| e["event_type"] == "task.retry" || e["event_type"] == "task.failed")
        .collect();
    assert_eq!(
        out.code,
        Some(0),
        "{out}
failed attempts: {failures:#?}"
    );
    for (id, status) in statuses(&repo, "p") {
        assert_eq!(status, "DONE", "{id}");
    }
    let done = count_by_task(&repo.events(None), "task.done");
    assert_eq!(done.len(), 4, "{done:?}");
    assert!(
        done.values().all(|n| *n == 1),
        "a task was done twice: {done:?}"
    );
    let wts = repo
        .whilly(&["worktrees", "list", "--json"])
        .output()
        .unwrap();
    let wts: Vec<Value> = serde_json::from_slice(&wts.stdout).unwrap();
    // What is left is the idle pool (the crashed attempts' worktrees were reset and reused or
    // pooled), no task's own worktree.
    assert!(
        wts.len() <= 4 && wts.iter().all(|w| w["pooled"] == true),
        "worktrees left behind: {wts:#?}"
    );
    let git_wts = repo.git(&["worktree", "list"]);
    assert_eq!(git_wts.lines().count(), 1 + wts.len(), "{git_wts}");
    for i in 1..=4 {
        let f = repo.git(&["show", &format!("HEAD:files/T-{i}.txt")]);
        assert_eq!(f.trim(), format!("done by T-{i}"));
    }
    assert_no_agents_left(&repo);
}

fn handoff_repo() -> Repo {
    let mut t = task("T-1");
    t["agent"] = "handoff".into();
    let mut p = plan("p", vec![t]);
    p["verification_commands"] = serde_json::json!([{
        "name": "plan is there",
        "command": "test -f plan.json",
        "required": true
    }]);
    Repo::new(&p, &sh("engine/no_marker.sh", ""))
}

/// Waits until `whilly handoff list --json` shows T-1; returns its handoff directory.
fn await_handoff(repo: &Repo) -> std::path::PathBuf {
    wait_for(Duration::from_secs(20), "the handoff to be listed", || {
        let out = repo.whilly(&["handoff", "list", "--json"]).output().ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let entry = v
            .as_array()?
            .iter()
            .find(|e| e["meta"]["task_id"] == "T-1")?
            .clone();
        assert_eq!(entry["state"], "waiting for result.json", "{entry}");
        entry["dir"].as_str().map(std::path::PathBuf::from)
    })
}

fn handoff_complete(repo: &Repo, status: &str) {
    let out = repo
        .whilly(&[
            "handoff",
            "complete",
            "T-1",
            "--status",
            status,
            "--message",
            "ok",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "handoff complete: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// 12a. A human completes a handed-off task; it is verified and done.
#[test]
fn handoff_complete_finishes_the_task() {
    let repo = handoff_repo();
    let run = repo.run_plan(&[], &[]);
    await_handoff(&repo);
    let human = repo.whilly(&["handoff", "list"]).output().unwrap();
    assert!(String::from_utf8_lossy(&human.stdout).contains("T-1"));
    handoff_complete(&repo, "complete");
    let out = run.wait(Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{out}");
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done.len(), 1);
    let p = &done[0]["payload"];
    assert_eq!(p["handoff_status"], "complete", "{p}");
    assert_eq!(p["verification"][0]["passed"], true, "{p}");
}

// 12b. A human answers "blocked": the task is parked, the run ends stuck (exit 1).
#[test]
fn handoff_blocked_parks_the_task() {
    let repo = handoff_repo();
    let run = repo.run_plan(&[], &[]);
    await_handoff(&repo);
    handoff_complete(&repo, "blocked");
    let out = run.wait(Duration::from_secs(20));
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "BLOCKED");
    let stuck = &out.complete()["stuck"];
    assert_eq!(stuck[0]["task_id"], "T-1", "{stuck}");
    assert_eq!(stuck[0]["status"], "BLOCKED", "{stuck}");
    assert!(
        stuck[0]["why"]
            .as_str()
            .is_some_and(|w| w.starts_with("BLOCKED")),
        "the reason travels with the id: {stuck}"
    );
}

// 12c. A malformed result.json is reported and the task keeps waiting for a valid one.
#[test]
fn malformed_handoff_result_is_reported_and_waited_out() {
    let repo = handoff_repo();
    let mut run = repo.run_plan(&[], &[]);
    let dir = await_handoff(&repo);
    std::fs::write(dir.join("result.json"), "{ this is not json").unwrap();
    let malformed = wait_for(Duration::from_secs(10), "a handoff.malformed event", || {
        let ev = events_of(&repo, "T-1", "handoff.malformed");
        (!ev.is_empty()).then_some(ev)
    });
    assert!(malformed[0]["payload"]["problem"].is_string());
    assert!(!run.exited(), "the run gave up on a malformed answer");
    assert_eq!(repo.task("p", "T-1")["status"], "IN_PROGRESS");
    handoff_complete(&repo, "complete");
    let out = run.wait(Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
}

// 12d. Whatever sits in place of result.json — a FIFO nobody writes, a link to /dev/zero, a
// file of megabytes — is a handoff.malformed event saying why, read without blocking or
// filling memory; the task keeps waiting and a real answer still finishes it.
#[test]
fn hostile_handoff_results_never_block_or_bloat_the_engine() {
    let repo = handoff_repo();
    let mut run = repo.run_plan(&[], &[]);
    let dir = await_handoff(&repo);
    let result = dir.join("result.json");
    let problems = |n: usize| {
        wait_for(Duration::from_secs(10), "handoff.malformed events", || {
            let ev = events_of(&repo, "T-1", "handoff.malformed");
            (ev.len() >= n).then_some(ev)
        })
    };
    let c = std::ffi::CString::new(result.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let ev = problems(1);
    assert!(
        ev[0]["payload"]["problem"]
            .as_str()
            .unwrap()
            .contains("FIFO"),
        "{}",
        ev[0]
    );
    std::fs::remove_file(&result).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &result).unwrap();
    let ev = problems(2);
    assert!(
        ev[1]["payload"]["problem"]
            .as_str()
            .unwrap()
            .contains("device")
    );
    std::fs::remove_file(&result).unwrap();
    std::fs::write(&result, vec![b' '; 5 * 1024 * 1024]).unwrap();
    let ev = problems(3);
    assert!(
        ev[2]["payload"]["problem"]
            .as_str()
            .unwrap()
            .contains("limit")
    );
    assert!(!run.exited(), "the run gave up");
    assert_eq!(repo.task("p", "T-1")["status"], "IN_PROGRESS");
    std::fs::remove_file(&result).unwrap();
    handoff_complete(&repo, "complete");
    let out = run.wait(Duration::from_secs(20));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
}

// 1b. The task timeout with an agent that ignores SIGTERM: still this engine's task_timeout
// (the reaper in the same process must not pre-empt its owner while the agent is being killed).
#[test]
fn stubborn_agent_past_its_timeout_fails_with_task_timeout() {
    let mut t = task("T-1");
    t["timeout"] = 2.into();
    t["max_attempts"] = 1.into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("ignore_term.sh", ""));
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(40));
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "task_timeout", "{rec}");
    assert_no_agents_left(&repo);
}

/// `-c` overrides that make `spender` (a Claude backend whose binary is claude_spender.sh) the agent.
fn spender_agent() -> Vec<String> {
    vec![
        "agents.spender.backend=claude".to_string(),
        format!(
            "agents.spender.bin={}",
            agent("engine/claude_spender.sh").display()
        ),
        "run.agent=spender".to_string(),
    ]
}

// Running cost: Claude's stream-json usage is priced while it works, so a task budget stops the
// agent mid-run (it would otherwise work for 70 s and never report a cost).
#[test]
fn task_budget_stops_a_streaming_claude_mid_run() {
    let mut t = task("T-1");
    t["budget_usd"] = 1.0.into();
    let repo = Repo::new(&plan("p", vec![t]), "unused {task_id}");
    let overrides = spender_agent();
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = repo.run_plan(&overrides, &[]).wait(Duration::from_secs(40));
    let elapsed = started.elapsed();
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "task_budget_exceeded", "{rec}");
    let failed = events_of(&repo, "T-1", "task.failed");
    let detail = failed[0]["payload"]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("budget_usd ($1.00) is spent"), "{detail}");
    // $0.45 a second: over $1.00 after the third message, checked at least every second.
    let spent = repo.plan_record("p")["spent"].as_f64().unwrap() / 1e6;
    println!("task budget $1.00, $0.45/s streamed: stopped after {elapsed:?}, spent ${spent:.2}");
    assert!(
        (1.0..=1.0 + 2.0 * 0.45 + 1e-9).contains(&spent),
        "spent {spent}"
    );
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    assert_no_agents_left(&repo);
}

// The plan budget sees the running estimate too: exit 2 before the attempt would end.
#[test]
fn plan_budget_sees_streaming_spend_before_the_attempt_ends() {
    let mut p = plan("p", vec![task("T-1")]);
    p["budget_usd"] = 1.0.into();
    let repo = Repo::new(&p, "unused {task_id}");
    let overrides = spender_agent();
    let overrides: Vec<&str> = overrides.iter().map(String::as_str).collect();
    let started = Instant::now();
    let out = repo.run_plan(&overrides, &[]).wait(Duration::from_secs(40));
    let elapsed = started.elapsed();
    assert_eq!(out.code, Some(2), "{out}");
    assert!(elapsed < Duration::from_secs(15), "{elapsed:?}");
    assert!(
        !repo.events_of_type("budget.exhausted").is_empty(),
        "no budget.exhausted event"
    );
    let spent = repo.plan_record("p")["spent"].as_f64().unwrap() / 1e6;
    assert!(
        (1.0..=1.0 + 2.0 * 0.45 + 1e-9).contains(&spent),
        "spent {spent}"
    );
    assert_no_agents_left(&repo);
}

// 12d. Two plans hand over a task with the same id at once: two directories, the operator is
// told to pick a plan, and each answer reaches its own run.
#[test]
fn same_task_id_waiting_in_two_plans() {
    let repo = handoff_repo();
    let mut t = task("T-1");
    t["agent"] = "handoff".into();
    // Its own file: tasks of two plans in one repository that share a key file never run at once.
    t["key_files"] = serde_json::json!(["files/T-1-q.txt"]);
    repo.write(
        "plan2.json",
        &serde_json::to_string_pretty(&plan("q", vec![t])).unwrap(),
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "second plan"]);
    let run_p = repo.run_plan(&[], &[]);
    await_handoff(&repo);
    let run_q = repo.spawn(&["run", "plan2.json", "--headless"]);
    let dirs = wait_for(Duration::from_secs(20), "both handoffs listed", || {
        let out = repo.whilly(&["handoff", "list", "--json"]).output().ok()?;
        let v: Value = serde_json::from_slice(&out.stdout).ok()?;
        let dirs: Vec<String> = v
            .as_array()?
            .iter()
            .filter(|e| e["meta"]["task_id"] == "T-1")
            .filter_map(|e| e["dir"].as_str().map(str::to_string))
            .collect();
        (dirs.len() == 2).then_some(dirs)
    });
    assert!(dirs.iter().any(|d| d.ends_with("/T-1")), "{dirs:?}");
    assert!(dirs.iter().any(|d| d.ends_with("/T-1@q")), "{dirs:?}");
    let only_q = repo
        .whilly(&["handoff", "list", "--json", "--plan", "q"])
        .output()
        .unwrap();
    let only_q: Value = serde_json::from_slice(&only_q.stdout).unwrap();
    assert_eq!(only_q.as_array().map(Vec::len), Some(1), "{only_q}");
    assert_eq!(only_q[0]["meta"]["plan_id"], "q", "{only_q}");

    let answer = |plan: Option<&str>, status: &str| {
        let mut args = vec!["handoff", "complete", "T-1", "--status", status];
        if let Some(p) = plan {
            args.extend(["--plan", p]);
        }
        repo.whilly(&args).output().unwrap()
    };
    let ambiguous = answer(None, "complete");
    assert!(!ambiguous.status.success());
    let err = String::from_utf8_lossy(&ambiguous.stderr);
    assert!(err.contains("2 plans (") && err.contains("--plan"), "{err}");
    let show = repo
        .whilly(&["handoff", "show", "T-1", "--plan", "q"])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&show.stdout).into_owned();
    assert!(shown.contains("plan q"), "{shown}");
    // For a person: the task and the commands that answer it, not the agent's envelope.
    assert!(
        shown.contains("Acceptance criteria:")
            && shown.contains("whilly handoff complete T-1 --plan q --status complete"),
        "{shown}"
    );
    assert!(!shown.to_lowercase().contains("<promise>"), "{shown}");
    let envelope = repo
        .whilly(&["handoff", "show", "T-1", "--plan", "q", "--prompt"])
        .output()
        .unwrap();
    let envelope = String::from_utf8_lossy(&envelope.stdout).into_owned();
    assert!(
        envelope.contains("<promise>"),
        "--prompt keeps the envelope: {envelope}"
    );

    assert!(answer(Some("q"), "blocked").status.success());
    // The command line records the decision as the console does.
    let decisions: Vec<Value> = repo
        .events_of_type("operator.decision")
        .into_iter()
        .filter(|e| e["plan_id"] == "q" && e["task_id"] == "T-1")
        .collect();
    assert_eq!(decisions.len(), 1, "{decisions:?}");
    assert_eq!(decisions[0]["payload"]["decision"], "block");
    assert_eq!(decisions[0]["payload"]["source"], "cli");
    let out_q = run_q.wait(Duration::from_secs(20));
    assert_eq!(out_q.code, Some(1), "{out_q}");
    assert_eq!(repo.task("q", "T-1")["status"], "BLOCKED");
    assert_eq!(repo.task("p", "T-1")["status"], "IN_PROGRESS");
    // Only p's handoff is left, so the plain form works again.
    assert!(answer(None, "complete").status.success());
    let out_p = run_p.wait(Duration::from_secs(20));
    assert_eq!(out_p.code, Some(0), "{out_p}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
}

// An unavailable default agent matters only to tasks that fall back to it: every task here
// names its own agent, so a missing `claude` (the default) does not stop the run.
#[test]
fn a_missing_default_agent_is_not_needed_when_every_task_names_its_own() {
    let mut t = task("T-1");
    t["agent"] = "fake".into();
    let repo = Repo::new(&plan("p", vec![t]), &sh("engine/cost.sh", "0 T-1"));
    let out = repo
        .run_plan(
            &["run.agent=claude", "agents.claude.bin=/nonexistent/claude"],
            &[],
        )
        .wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    // A task that does fall back to it is refused up front, naming the agent.
    let repo = Repo::new(
        &plan("p", vec![task("T-1")]),
        &sh("engine/cost.sh", "0 T-1"),
    );
    let out = repo
        .run_plan(
            &["run.agent=claude", "agents.claude.bin=/nonexistent/claude"],
            &[],
        )
        .wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(4), "{out}");
    assert!(out.stderr.contains("claude"), "{out}");
}

// A token an agent prints reaches neither the attempt log, nor events.jsonl, nor the database;
// and what whilly keeps under .whilly/ is the user's alone.
#[test]
fn secrets_an_agent_prints_are_redacted_on_disk_and_state_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let token = "ghp_Zq8shortTok3n";
    let repo = Repo::new(
        &plan("p", vec![task("T-1")]),
        &format!(
            "bash -c 'echo leaking {token}; mkdir -p files; echo x > files/T-1.txt; echo \"<promise>COMPLETE</promise>\"'"
        ),
    );
    let out = repo.run_plan(&[], &[]).wait(Duration::from_secs(60));
    assert_eq!(out.code, Some(0), "{out}");
    let state = repo.repo.join(".whilly");
    let mut seen = 0;
    for entry in walk(&state) {
        let bytes = std::fs::read(&entry).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(token),
            "{} holds the token",
            entry.display()
        );
        seen += 1;
    }
    assert!(
        seen >= 3,
        "the log, the mirror and the database were looked at"
    );
    let log = repo.attempt_files("p", "T-1");
    let text: String = log
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .collect();
    assert!(text.contains("leaking [REDACTED:github_token]"), "{text}");
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700, ".whilly/");
    assert_eq!(mode(&state.join("whilly.db")), 0o600, "whilly.db");
    assert_eq!(mode(&state.join("events.jsonl")), 0o600, "events.jsonl");
    for p in log {
        assert_eq!(mode(&p) & 0o077, 0, "{}", p.display());
    }
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
