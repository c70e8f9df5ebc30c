//! Workers in separate clones of one repository, sharing one Postgres queue and one bare remote,
//! as workers on separate machines do: a landing must happen once, whoever dies or freezes
//! in the middle of it (issue 25, items 4 and 5). Real processes, real git, real Postgres.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/pg.rs"]
mod pg;

use engine::{Repo, Running, agent, plan, task, wait_for};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The repository's whilly.toml: the ledger agent and `extra`, pushed to a bare remote that
/// two clones (`a`, `b`) were made from.
struct Clones {
    repo: Repo,
    remote: PathBuf,
    a: PathBuf,
    b: PathBuf,
    ledger: PathBuf,
    _db: pg::FreshDb,
    url: String,
}

fn git(dir: &Path, home: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn clones(extra_toml: &str) -> Clones {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let mut t = task("T-1");
    t["key_files"] = serde_json::json!(["files/T-1.txt"]);
    let repo = Repo::new(&plan("once", vec![t]), "true");
    let ledger = repo.shared_file("ledger");
    let template = format!(
        "bash {} {} 0.3",
        agent("engine/ledger.sh").display(),
        ledger.display()
    );
    let mut cfg = engine::config(&template, &repo.wt_dir);
    cfg.push_str(extra_toml);
    repo.write("whilly.toml", &cfg);
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "ledger agent"]);
    let root = repo.shared.parent().unwrap().to_path_buf();
    let remote = root.join("remote.git");
    git(
        &root,
        &repo.home,
        &[
            "clone",
            "-q",
            "--bare",
            repo.repo.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    let clone = |name: &str| {
        let dir = root.join(name);
        git(
            &root,
            &repo.home,
            &[
                "clone",
                "-q",
                remote.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        );
        git(&dir, &repo.home, &["config", "user.name", name]);
        git(
            &dir,
            &repo.home,
            &["config", "user.email", "clone@test.invalid"],
        );
        dir
    };
    let (a, b) = (clone("clone-a"), clone("clone-b"));
    let c = Clones {
        repo,
        remote,
        a,
        b,
        ledger,
        _db: db,
        url,
    };
    let out = c.whilly_in(&c.a, &["plan", "import", "plan.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c
}

impl Clones {
    fn whilly_in(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        let mut all = vec!["--database-url", self.url.as_str()];
        all.extend(args);
        self.repo.whilly(&all).current_dir(dir).output().unwrap()
    }

    fn worker(&self, dir: &Path, env: &[(&str, &str)]) -> Running {
        self.repo.spawn_in(
            dir,
            &[
                "--database-url",
                &self.url,
                "worker",
                "--plan",
                "once",
                "--until-idle",
            ],
            env,
        )
    }

    /// Commits on `branch` of the bare remote whose message marks them as `T-1`'s.
    fn marked_on_remote(&self, branch: &str) -> usize {
        let log = git(
            &self.remote,
            &self.repo.home,
            &["log", branch, "--format=%B%x00"],
        );
        log.split('\0')
            .filter(|m| m.lines().any(|l| l.trim() == "Whilly-Task: T-1"))
            .count()
    }

    fn task(&self) -> Value {
        let out = self.whilly_in(&self.a, &["plan", "show", "once", "--json"]);
        assert!(out.status.success());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["tasks"][0].clone()
    }

    fn done_event(&self) -> Value {
        let out = self.whilly_in(&self.a, &["events", "--json", "--task", "T-1"]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .chain(
                serde_json::from_str::<Value>(&text)
                    .ok()
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default(),
            )
            .rfind(|e| e["event_type"] == "task.done")
            .unwrap_or_else(|| panic!("no task.done among the events: {text}"))
    }

    fn agent_runs(&self) -> usize {
        std::fs::read_to_string(&self.ledger)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("start "))
            .count()
    }
}

/// Whether process `pid` is stopped (SIGSTOP).
/// What whilly logged in the clone `dir` (for a failure's message).
fn whilly_logs(dir: &Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir.join(".whilly/logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        out.push_str(&std::fs::read_to_string(e.path()).unwrap_or_default());
    }
    out
}

fn stopped(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('T'))
        })
        .unwrap_or(false)
}

const PUSH: &str = "\n[delivery]\npush = true\n";

/// Worker A lands T-1 on the shared remote and is killed before the queue hears of it; worker
/// B, in another clone, takes the task over and finds A's landing on the remote: it records it
/// and lands nothing, and does not run the agent again.
#[test]
fn a_landing_seen_on_the_shared_remote_is_recorded_not_repeated() {
    let c = clones(PUSH);
    let a = c
        .worker(&c.a, &[("WHILLY_FAILPOINT", "after_delivery")])
        .wait(Duration::from_secs(60));
    assert_eq!(a.code, None, "killed by its failpoint: {a}");
    assert_eq!(c.marked_on_remote("HEAD"), 1, "A landed on the remote");
    let b = c.worker(&c.b, &[]).wait(Duration::from_secs(90));
    assert_eq!(b.code, Some(0), "{b}");
    assert!(!b.stderr.contains("land only in this clone"), "{b}");
    assert_eq!(c.task()["status"], "DONE");
    assert_eq!(c.marked_on_remote("HEAD"), 1, "nothing landed twice");
    let done = c.done_event();
    assert_eq!(
        done["payload"]["delivery"]["kind"], "already_landed",
        "{done}"
    );
    assert_eq!(c.agent_runs(), 1, "B did not run the agent again");
    // B's clone was brought up to the shared base: its main holds the work once.
    let b_log = git(&c.b, &c.repo.home, &["log", "HEAD", "--format=%B%x00"]);
    assert_eq!(b_log.matches("Whilly-Task: T-1").count(), 1, "{b_log}");
}

/// Worker A freezes (SIGSTOP) just before pushing its landing; its lease expires, B lands the
/// task; A wakes, its push is refused (the remote moved), and it finds the newer attempt's
/// landing: it abandons, and the remote holds the work once.
#[test]
fn a_frozen_worker_waking_after_a_takeover_lands_nothing() {
    let c = clones(PUSH);
    let a = c.worker(&c.a, &[("WHILLY_FAILPOINT", "stop:before_push")]);
    let pid = a.pid();
    wait_for(
        Duration::from_secs(60),
        "A to freeze before its push",
        || stopped(pid).then_some(()),
    );
    let b = c.worker(&c.b, &[]).wait(Duration::from_secs(90));
    assert_eq!(b.code, Some(0), "{b}");
    assert_eq!(c.task()["status"], "DONE");
    assert_eq!(c.marked_on_remote("HEAD"), 1);
    a.signal(libc::SIGCONT);
    let a = a.wait(Duration::from_secs(60));
    assert_eq!(a.code, Some(0), "{a}");
    assert_eq!(
        c.marked_on_remote("HEAD"),
        1,
        "A's landing never reached the remote"
    );
    assert_eq!(c.task()["status"], "DONE");
}

/// Branch delivery: A freezes between proving its lease and pushing the task branch; B takes
/// over and pushes; A wakes and finds a newer attempt's branch there: it pushes nothing.
#[test]
fn a_stale_worker_never_pushes_over_the_newer_attempts_branch() {
    let c = clones("\n[delivery]\nmode = \"branch\"\n");
    let a = c.worker(&c.a, &[("WHILLY_FAILPOINT", "stop:before_push")]);
    let pid = a.pid();
    wait_for(
        Duration::from_secs(60),
        "A to freeze before its push",
        || stopped(pid).then_some(()),
    );
    let b = c.worker(&c.b, &[]).wait(Duration::from_secs(90));
    assert_eq!(b.code, Some(0), "{b}");
    let branch = "whilly/once/T-1";
    let refs = git(&c.remote, &c.repo.home, &["for-each-ref"]);
    assert!(
        refs.contains(branch),
        "B's branch is on the remote: {refs}\nB: {b}\nB's events: {}",
        String::from_utf8_lossy(&c.whilly_in(&c.b, &["events", "--task", "T-1"]).stdout)
    );
    let pushed_by_b = git(&c.remote, &c.repo.home, &["rev-parse", branch]);
    a.signal(libc::SIGCONT);
    let a = a.wait(Duration::from_secs(60));
    assert_eq!(a.code, Some(0), "{a}");
    let events = c.whilly_in(&c.a, &["events", "--task", "T-1"]);
    assert_eq!(
        git(&c.remote, &c.repo.home, &["rev-parse", branch]),
        pushed_by_b,
        "the remote branch still holds B's commit; remote:\n{}\nevents:\n{}\nA:\n{a}\nA's log:\n{}\nB's log:\n{}",
        git(
            &c.remote,
            &c.repo.home,
            &["log", "--all", "--format=%H %P%n%B"]
        ),
        String::from_utf8_lossy(&events.stdout),
        whilly_logs(&c.a),
        whilly_logs(&c.b),
    );
    let done = c.done_event();
    assert_eq!(
        done["payload"]["pushed"]["commit"].as_str().map(str::trim),
        Some(pushed_by_b.trim()),
        "the queue records what the remote holds: {done}"
    );
}

/// On a shared queue, merge delivery that reaches no shared remote is said at start.
#[test]
fn a_shared_queue_without_a_shared_landing_says_so() {
    let c = clones("");
    let out = c.worker(&c.a, &[]).wait(Duration::from_secs(90));
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stderr.contains("push = true"), "{}", out.stderr);
}

/// Three workers in three clones land 24 quick tasks on one shared remote at once: their
/// landings race for the remote's branch, and every task is on it exactly once (a lost update
/// would leave a DONE task whose work is not there).
#[test]
fn racing_landings_on_the_shared_remote_lose_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let tasks: Vec<Value> = (1..=24)
        .map(|i| {
            let mut t = task(&format!("T-{i}"));
            t["key_files"] = serde_json::json!([format!("files/T-{i}.txt")]);
            t
        })
        .collect();
    let repo = Repo::new(&plan("race", tasks), "true");
    let template = "sh -c 'mkdir -p files && echo done > files/$WHILLY_TASK_ID.txt; echo \"<promise>COMPLETE</promise>\"'";
    let mut cfg = engine::config(template, &repo.wt_dir);
    cfg.push_str(PUSH);
    repo.write("whilly.toml", &cfg);
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "quick agent"]);
    let root = repo.shared.parent().unwrap().to_path_buf();
    let remote = root.join("remote.git");
    let home = repo.home.clone();
    git(
        &root,
        &home,
        &[
            "clone",
            "-q",
            "--bare",
            repo.repo.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    let clones: Vec<PathBuf> = ["x", "y", "z"]
        .iter()
        .map(|name| {
            let dir = root.join(name);
            git(
                &root,
                &home,
                &[
                    "clone",
                    "-q",
                    remote.to_str().unwrap(),
                    dir.to_str().unwrap(),
                ],
            );
            git(&dir, &home, &["config", "user.name", name]);
            git(&dir, &home, &["config", "user.email", "clone@test.invalid"]);
            dir
        })
        .collect();
    let import = repo
        .whilly(&["--database-url", &url, "plan", "import", "plan.json"])
        .current_dir(&clones[0])
        .output()
        .unwrap();
    assert!(import.status.success());
    let workers: Vec<Running> = clones
        .iter()
        .map(|dir| {
            repo.spawn_in(
                dir,
                &[
                    "--database-url",
                    &url,
                    "worker",
                    "--plan",
                    "race",
                    "--slots",
                    "4",
                    "--until-idle",
                ],
                &[],
            )
        })
        .collect();
    for w in workers {
        let out = w.wait(Duration::from_secs(180));
        assert_eq!(out.code, Some(0), "{out}");
    }
    let shown = repo
        .whilly(&["--database-url", &url, "plan", "show", "race", "--json"])
        .current_dir(&clones[0])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&shown.stdout).unwrap();
    let events = repo
        .whilly(&["--database-url", &url, "events", "--json"])
        .current_dir(&clones[0])
        .output()
        .unwrap();
    let events = String::from_utf8_lossy(&events.stdout).into_owned();
    let log = git(&remote, &home, &["log", "HEAD", "--format=%B%x00"]);
    for i in 1..=24 {
        let settled: Vec<&str> = events
            .lines()
            .filter(|l| {
                l.contains(&format!("\"task_id\":\"T-{i}\""))
                    && (l.contains("task.done")
                        || l.contains("task.human_loop")
                        || l.contains("task.failed"))
            })
            .collect();
        let n = log.matches(&format!("Whilly-Task: T-{i}\n")).count();
        assert_eq!(
            n, 1,
            "T-{i} is on the remote {n} times; its settlement: {settled:#?}"
        );
    }
    for i in 1..=24 {
        let n = log.matches(&format!("Whilly-Task: T-{i}\n")).count();
        assert_eq!(n, 1, "T-{i} is on the remote {n} times");
        let file = git(&remote, &home, &["show", &format!("HEAD:files/T-{i}.txt")]);
        assert_eq!(file, "done\n");
    }
    for t in shown["tasks"].as_array().unwrap() {
        assert_eq!(t["status"], "DONE", "none parked for a busy remote: {t}");
    }
}
