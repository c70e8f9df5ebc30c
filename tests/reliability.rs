//! The queue's promises across processes and faults, through the real binary: several `whilly`
//! processes (runs and workers) on one SQLite file or one Postgres database, real git
//! repositories and clones, real PTYs, and a fake agent that keeps a ledger of its runs outside
//! every worktree (`tests/fake_agents/engine/ledger.sh`). Faults: SIGKILL of a worker and of an
//! agent, `pg_terminate_backend` bursts, a Postgres connection cap, SQLite held busy by another
//! process, two processes on one repository, a crash between landing work and recording it.
//!
//! Each scenario checks what counts: every task DONE exactly once, no two runs of a task
//! without a crash between them, no two runs sharing a key file at the same time, dependency
//! order, nothing left CLAIMED or IN_PROGRESS, every landing on a base branch exactly once. It
//! prints one `RELIABILITY` line of figures (collected in docs/reliability.md).

#[path = "support/engine.rs"]
mod engine;
#[path = "support/pg.rs"]
mod pg;

use engine::{Repo, Running, agent, plan, task, wait_for};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---- the ledger ---------------------------------------------------------------------------

#[derive(Debug, Clone)]
struct Run {
    task: String,
    pid: i32,
    start: u128,
    end: Option<u128>,
}

struct Ledger {
    runs: Vec<Run>,
    /// Runs that started while the previous run of their task was still alive.
    overlaps: usize,
}

/// `kill(2)`: 0 when the signal was delivered (with 0: the process exists).
fn kill(pid: i32, sig: i32) -> i32 {
    // SAFETY: kill takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) }
}

fn read_ledger(path: &Path) -> Ledger {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    let mut overlaps = 0;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [kind, task, pid, ns] = f[..] else {
            panic!("bad ledger line {line:?}");
        };
        let pid: i32 = pid.parse().unwrap();
        let ns: u128 = ns.parse().unwrap();
        match kind {
            "start" => runs.push(Run {
                task: task.to_string(),
                pid,
                start: ns,
                end: None,
            }),
            "end" => {
                let run = runs
                    .iter_mut()
                    .rev()
                    .find(|r| r.pid == pid && r.task == task)
                    .unwrap_or_else(|| panic!("end without start: {line}"));
                run.end = Some(ns);
            }
            "overlap" => overlaps += 1,
            _ => panic!("bad ledger line {line:?}"),
        }
    }
    Ledger { runs, overlaps }
}

impl Ledger {
    /// Completed runs per task.
    fn completed(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for r in self.runs.iter().filter(|r| r.end.is_some()) {
            *m.entry(r.task.clone()).or_insert(0) += 1;
        }
        m
    }

    /// Pairs of runs that share a key file and overlap in time. A run that never ended (its
    /// agent was killed) counts until `killed_until`.
    fn key_overlaps(&self, keys: &HashMap<String, Vec<String>>, killed_until: u128) -> usize {
        let mut n = 0;
        for (i, a) in self.runs.iter().enumerate() {
            for b in &self.runs[i + 1..] {
                // Runs of one task are checked apart (`rerun_overlaps`, the agent's own check).
                let shared = a.task != b.task
                    && keys.get(&a.task).is_some_and(|ka| {
                        keys.get(&b.task)
                            .is_some_and(|kb| ka.iter().any(|k| kb.contains(k)))
                    });
                let (a_end, b_end) = (a.end.unwrap_or(killed_until), b.end.unwrap_or(killed_until));
                if shared && a.start < b_end && b.start < a_end {
                    eprintln!("overlap: {a:?} and {b:?}");
                    n += 1;
                }
            }
        }
        n
    }
}

fn now_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

// ---- repositories and processes -----------------------------------------------------------

/// A repository whose agent is the ledger agent working `secs` seconds per task.
fn ledger_repo(p: &Value, secs: &str, mode: &str, extra_toml: &str) -> (Repo, PathBuf) {
    let repo = Repo::new(p, "true");
    let ledger = repo.shared_file("ledger");
    let template = format!(
        "bash {} {} {secs} {mode}",
        agent("engine/ledger.sh").display(),
        ledger.display()
    );
    let mut cfg = engine::config(&template, &repo.wt_dir);
    cfg.push_str(extra_toml);
    repo.write("whilly.toml", &cfg);
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "ledger agent"]);
    (repo, ledger)
}

fn keyed(plan_id: &str, id: &str, keys: &[&str]) -> (Value, (String, Vec<String>)) {
    let mut t = task(id);
    t["key_files"] = json!(keys);
    let full = format!("{plan_id}/{id}");
    (t, (full, keys.iter().map(|k| k.to_string()).collect()))
}

/// `n` tasks `T-<i>` (zero-padded to `width`), each with a key file of its own, and their keys.
fn own_files(plan_id: &str, n: usize, width: usize) -> (Vec<Value>, HashMap<String, Vec<String>>) {
    let mut tasks = Vec::new();
    let mut keys = HashMap::new();
    for i in 1..=n {
        let (t, k) = keyed(
            plan_id,
            &format!("T-{i:0width$}"),
            &[&format!("src/t{i}.rs")],
        );
        tasks.push(t);
        keys.insert(k.0, k.1);
    }
    (tasks, keys)
}

/// Plan `kf`: six tasks `S-<i>` on `src/shared.rs`, six `F-<i>` on files of their own.
fn six_on_one_file() -> (Vec<Value>, HashMap<String, Vec<String>>) {
    let mut tasks = Vec::new();
    let mut keys = HashMap::new();
    for i in 1..=6 {
        let (t, k) = keyed("kf", &format!("S-{i}"), &["src/shared.rs"]);
        tasks.push(t);
        keys.insert(k.0, k.1);
        let (t, k) = keyed("kf", &format!("F-{i}"), &[&format!("src/f{i}.rs")]);
        tasks.push(t);
        keys.insert(k.0, k.1);
    }
    (tasks, keys)
}

fn clone_of(repo: &Repo, name: &str) -> PathBuf {
    let dir = repo.shared.parent().unwrap().join(name);
    let out = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(&repo.repo)
        .arg(&dir)
        .env("HOME", &repo.home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for (k, v) in [("user.name", "Clone"), ("user.email", "clone@test.invalid")] {
        std::process::Command::new("git")
            .args(["config", k, v])
            .current_dir(&dir)
            .status()
            .unwrap();
    }
    dir
}

/// Subjects of commits on the checked-out branch of `dir` that deliver `task_id`.
fn landings(dir: &Path, task_id: &str) -> usize {
    let out = std::process::Command::new("git")
        .args(["log", "--format=%s"])
        .current_dir(dir)
        .output()
        .unwrap();
    let prefix = format!("whilly: {task_id} ");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .count()
}

/// `whilly [--database-url URL] ARGS` to its end.
fn whilly_json(repo: &Repo, db: Option<&str>, args: &[&str]) -> Value {
    let mut all: Vec<&str> = Vec::new();
    if let Some(url) = db {
        all.extend(["--database-url", url]);
    }
    all.extend(args);
    let out = repo.whilly(&all).output().unwrap();
    assert!(
        out.status.success(),
        "whilly {all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn statuses(repo: &Repo, db: Option<&str>, plan_id: &str) -> BTreeMap<String, String> {
    whilly_json(repo, db, &["plan", "show", plan_id, "--json"])["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                format!("{plan_id}/{}", t["id"].as_str().unwrap()),
                t["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn import(repo: &Repo, db: Option<&str>) {
    let mut args: Vec<&str> = Vec::new();
    if let Some(url) = db {
        args.extend(["--database-url", url]);
    }
    args.extend(["plan", "import", "plan.json"]);
    let out = repo.whilly(&args).output().unwrap();
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn spawn(repo: &Repo, dir: &Path, db: Option<&str>, args: &[&str]) -> Running {
    spawn_env(repo, dir, db, args, &[])
}

fn spawn_env(
    repo: &Repo,
    dir: &Path,
    db: Option<&str>,
    args: &[&str],
    env: &[(&str, &str)],
) -> Running {
    let mut all: Vec<&str> = Vec::new();
    if let Some(url) = db {
        all.extend(["--database-url", url]);
    }
    all.extend(args);
    repo.spawn_in(dir, &all, env)
}

/// Waits for every process; each must exit with `code`.
fn wait_all(procs: Vec<Running>, limit: Duration, code: i32) {
    for p in procs {
        let out = p.wait(limit);
        assert_eq!(out.code, Some(code), "{out}");
    }
}

struct Figures<'a> {
    scenario: &'a str,
    tasks: usize,
    processes: usize,
    faults: String,
    lost: usize,
    duplicated: usize,
    overlaps: usize,
    recovery: Option<Duration>,
}

impl Figures<'_> {
    fn print(&self) {
        println!(
            "RELIABILITY | {} | {} | {} | {} | {} | {} | {} | {} |",
            self.scenario,
            self.tasks,
            self.processes,
            self.faults,
            self.lost,
            self.duplicated,
            self.overlaps,
            self.recovery
                .map(|d| format!("{:.1} s", d.as_secs_f64()))
                .unwrap_or_else(|| "–".into())
        );
    }
}

/// Events that give a task back to the queue: each one explains one more run of the agent
/// (its lease expired because its worker was presumed dead, a failed attempt was retried, a
/// stopped one released). A run beyond those is a duplicate.
const GIVEN_BACK: [&str; 4] = [
    "task.lease_expired",
    "task.deadline_passed",
    "task.retry",
    "task.released",
];

fn given_back(events: &[Value]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for e in events {
        if GIVEN_BACK.contains(&e["event_type"].as_str().unwrap_or_default()) {
            let key = format!(
                "{}/{}",
                e["plan_id"].as_str().unwrap_or_default(),
                e["task_id"].as_str().unwrap_or_default()
            );
            *m.entry(key).or_insert(0) += 1;
        }
    }
    m
}

fn all_events(repo: &Repo, db: Option<&str>) -> Vec<Value> {
    let mut args: Vec<&str> = Vec::new();
    if let Some(url) = db {
        args.extend(["--database-url", url]);
    }
    args.extend(["events", "--json"]);
    let out = repo.whilly(&args).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The common checks: every task DONE, run to the end once (plus one run per time the queue
/// gave it back, each in the audit trail), no key overlaps, every task landed exactly once
/// across `checkouts`. Returns (lost, duplicated, overlaps).
#[allow(clippy::too_many_arguments)]
fn check_outcome(
    st: &BTreeMap<String, String>,
    ledger: &Ledger,
    events: &[Value],
    keys: &HashMap<String, Vec<String>>,
    checkouts: &[&Path],
    killed_until: u128,
) -> (usize, usize, usize) {
    let not_done: Vec<_> = st.iter().filter(|(_, s)| *s != "DONE").collect();
    let completed = ledger.completed();
    let back = given_back(events);
    let duplicated: Vec<_> = completed
        .iter()
        .filter(|(t, n)| **n > 1 + back.get(*t).copied().unwrap_or(0))
        .collect();
    let reruns: usize = completed.values().map(|n| n.saturating_sub(1)).sum();
    if reruns > 0 {
        println!("re-runs explained by the audit trail: {reruns} ({back:?})");
    }
    let overlaps = ledger.key_overlaps(keys, killed_until) + ledger.overlaps;
    let mut landed_twice = Vec::new();
    let mut never_landed = Vec::new();
    for full in st.keys() {
        let id = full.rsplit('/').next().unwrap();
        let n: usize = checkouts.iter().map(|d| landings(d, id)).sum();
        if n > 1 {
            landed_twice.push((full.clone(), n));
        }
        if n == 0 {
            never_landed.push(full.clone());
        }
    }
    assert!(not_done.is_empty(), "not DONE: {not_done:?}");
    assert!(
        duplicated.is_empty(),
        "ran to the end twice: {duplicated:?}"
    );
    assert_eq!(overlaps, 0, "key files held twice at once");
    for (full, _) in &landed_twice {
        let (plan_id, id) = full.split_once('/').unwrap();
        for e in events
            .iter()
            .filter(|e| e["plan_id"] == plan_id && e["task_id"] == id)
        {
            eprintln!("{e}");
        }
        for d in checkouts {
            let out = std::process::Command::new("git")
                .args(["log", "--format=%h %s%n%b"])
                .current_dir(d)
                .output()
                .unwrap();
            eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        }
    }
    assert!(landed_twice.is_empty(), "landed twice: {landed_twice:?}");
    assert!(
        never_landed.is_empty(),
        "DONE but never landed: {never_landed:?}"
    );
    (not_done.len(), duplicated.len(), overlaps)
}

fn dependencies_respected(ledger: &Ledger, deps: &[(&str, &str)]) {
    for (child, parent) in deps {
        let c = ledger.runs.iter().find(|r| r.task == *child).unwrap();
        let p = ledger
            .runs
            .iter()
            .filter(|r| r.task == *parent && r.end.is_some())
            .map(|r| r.end.unwrap())
            .min()
            .unwrap();
        assert!(c.start > p, "{child} started before {parent} ended");
    }
}

// ---- the scenarios ------------------------------------------------------------------------

/// Six tasks on one file, six on their own files, one plan; two `whilly run` and one plan-less
/// `whilly worker` on one repository and one SQLite file.
#[test]
fn sqlite_runs_and_a_worker_keep_key_files_apart() {
    let (mut tasks, keys) = six_on_one_file();
    // One dependency to show the order holds across processes.
    tasks[3]["dependencies"] = json!(["S-1"]);
    let (repo, ledger_path) = ledger_repo(&plan("kf", tasks), "0.4", "", "");
    import(&repo, None);
    let procs = vec![
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "kf", "--headless", "-j", "2"],
        ),
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "kf", "--headless", "-j", "2"],
        ),
        spawn(
            &repo,
            &repo.repo,
            None,
            &["worker", "--slots", "3", "--until-idle"],
        ),
    ];
    wait_all(procs, Duration::from_secs(120), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, None, "kf");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, None),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    dependencies_respected(&ledger, &[("kf/F-2", "kf/S-1")]);
    Figures {
        scenario: "key files, SQLite: 2 runs + 1 plan-less worker, one repo",
        tasks: st.len(),
        processes: 3,
        faults: "6 tasks on one file".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

/// The same plan on Postgres: two workers in two clones and a plan-less one, each landing in
/// its own clone; every task lands in exactly one of them.
#[test]
fn postgres_workers_in_two_clones_keep_key_files_apart() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let (tasks, keys) = six_on_one_file();
    let (repo, ledger_path) = ledger_repo(&plan("kf", tasks), "0.4", "", "");
    let clone = clone_of(&repo, "clone2");
    import(&repo, Some(&url));
    let db_url = Some(url.as_str());
    let procs = vec![
        spawn(
            &repo,
            &repo.repo,
            db_url,
            &["worker", "--plan", "kf", "--slots", "2", "--until-idle"],
        ),
        spawn(
            &repo,
            &clone,
            db_url,
            &["worker", "--plan", "kf", "--slots", "2", "--until-idle"],
        ),
        spawn(
            &repo,
            &clone,
            db_url,
            &["worker", "--slots", "3", "--until-idle"],
        ),
    ];
    wait_all(procs, Duration::from_secs(120), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, db_url, "kf");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, db_url),
        &keys,
        &[&repo.repo, &clone],
        now_ns(),
    );
    Figures {
        scenario: "key files, Postgres: 3 workers in 2 clones",
        tasks: st.len(),
        processes: 3,
        faults: "6 tasks on one file".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

/// The most runs alive at one time in the ledger.
fn most_at_once(ledger: &Ledger) -> usize {
    let mut edges: Vec<(u128, i32)> = Vec::new();
    for r in &ledger.runs {
        edges.push((r.start, 1));
        edges.push((r.end.unwrap_or(u128::MAX), -1));
    }
    // An end before a start at the same instant: touching runs do not overlap.
    edges.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in edges {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// `[agents.fake] max_parallel = 2` with three workers of three slots each, in two clones:
/// the claim counts every worker's leases, so never more than two agents run at once.
#[test]
fn postgres_max_parallel_holds_across_workers() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let (tasks, keys) = own_files("mp", 9, 1);
    let (repo, ledger_path) = ledger_repo(&plan("mp", tasks), "0.5", "", "");
    let clone = clone_of(&repo, "clone2");
    import(&repo, Some(&url));
    let db_url = Some(url.as_str());
    let worker = [
        "-c",
        "agents.fake.max_parallel=2",
        "worker",
        "--plan",
        "mp",
        "--slots",
        "3",
        "--until-idle",
    ];
    let procs = vec![
        spawn(&repo, &repo.repo, db_url, &worker),
        spawn(&repo, &clone, db_url, &worker),
        spawn(&repo, &clone, db_url, &worker),
    ];
    wait_all(procs, Duration::from_secs(120), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, db_url, "mp");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, db_url),
        &keys,
        &[&repo.repo, &clone],
        now_ns(),
    );
    let most = most_at_once(&ledger);
    assert!(most <= 2, "{most} agents ran at once with max_parallel = 2");
    Figures {
        scenario: "max_parallel 2, Postgres: 3 workers × 3 slots",
        tasks: st.len(),
        processes: 3,
        faults: format!("at most {most} at once"),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

/// Six workers while their connections are terminated 30 times, 0.1 s apart, twice: none
/// exits, nothing is lost or done twice, and the errors are in the log file.
#[test]
fn postgres_workers_survive_terminated_connections() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let n = 30;
    let (tasks, keys) = own_files("ch", n, 2);
    let (repo, ledger_path) = ledger_repo(&plan("ch", tasks), "0.3", "", "");
    import(&repo, Some(&url));
    let procs: Vec<Running> = (0..6)
        .map(|_| {
            spawn(
                &repo,
                &repo.repo,
                Some(&url),
                &["worker", "--plan", "ch", "--slots", "2", "--until-idle"],
            )
        })
        .collect();
    // Wait until the work is under way, then cut every connection, again and again.
    wait_for(Duration::from_secs(60), "first runs", || {
        (read_ledger(&ledger_path).runs.len() >= 4).then_some(())
    });
    let mut terminated = 0;
    for burst in 0..2 {
        for _ in 0..30 {
            terminated += rt.block_on(pg::terminate_backends(&db.admin_url(), db.name()));
            std::thread::sleep(Duration::from_millis(100));
        }
        if burst == 0 {
            std::thread::sleep(Duration::from_secs(2));
        }
    }
    wait_all(procs, Duration::from_secs(180), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, Some(&url), "ch");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, Some(&url)),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    let log = logs_text(&repo.repo);
    assert!(
        log.contains("the queue did not answer"),
        "connection errors are not in the log file"
    );
    Figures {
        scenario: "pg_terminate_backend, Postgres: 6 workers",
        tasks: st.len(),
        processes: 6,
        faults: format!("2 bursts of 30 (terminated {terminated} connections)"),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

fn logs_text(dir: &Path) -> String {
    let mut text = String::new();
    for f in std::fs::read_dir(dir.join(".whilly/logs"))
        .into_iter()
        .flatten()
        .flatten()
    {
        text.push_str(&std::fs::read_to_string(f.path()).unwrap_or_default());
    }
    text
}

/// More workers than the database admits connections: the ones refused wait and retry.
#[test]
fn postgres_workers_survive_the_connection_cap() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let n = 16;
    let (tasks, keys) = own_files("cap", n, 2);
    let (repo, ledger_path) = ledger_repo(&plan("cap", tasks), "0.2", "", "");
    // Superusers are exempt from connection limits: the workers connect as a role of their own
    // that owns the database and may hold 7 connections. Each worker holds a pool connection
    // and a listener, four need eight at least, and more while their slots call the store.
    let role = format!("{}_capped", db.name());
    rt.block_on(async {
        let mut c = pg::admin_connection(&db.admin_url()).await;
        for sql in [
            format!("CREATE ROLE {role} LOGIN CONNECTION LIMIT 7"),
            format!("ALTER DATABASE {} OWNER TO {role}", db.name()),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut c)
                .await
                .unwrap();
        }
    });
    let url = with_user(&url, &role);
    import(&repo, Some(&url));
    let procs: Vec<Running> = (0..4)
        .map(|_| {
            spawn(
                &repo,
                &repo.repo,
                Some(&url),
                &["worker", "--plan", "cap", "--slots", "3", "--until-idle"],
            )
        })
        .collect();
    wait_all(procs, Duration::from_secs(180), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, Some(&url), "cap");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, Some(&url)),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    Figures {
        scenario: "connection cap, Postgres: 4 workers × 3 slots, role limit 7",
        tasks: st.len(),
        processes: 4,
        faults: "CONNECTION LIMIT 7".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
    let admin = db.admin_url();
    drop(db);
    rt.block_on(async {
        let mut c = pg::admin_connection(&admin).await;
        let sql = format!("DROP ROLE IF EXISTS {role}");
        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut c).await;
    });
}

/// `url` with its user replaced by `user` (no password: the test server trusts local users).
fn with_user(url: &str, user: &str) -> String {
    let start = url.find("://").map(|i| i + 3).unwrap_or(0);
    let rest = &url[start..];
    let host = match rest.find('@') {
        Some(at) if rest[..at].find('/').is_none() => &rest[at + 1..],
        _ => rest,
    };
    format!("{}{user}@{host}", &url[..start])
}

/// Another process holds SQLite's write lock for longer than the busy timeout, twice, while
/// two runs work: they wait it out.
#[test]
fn sqlite_runs_survive_a_database_held_busy() {
    let n = 16;
    let (tasks, keys) = own_files("busy", n, 2);
    let (repo, ledger_path) = ledger_repo(&plan("busy", tasks), "0.3", "", "");
    import(&repo, None);
    let procs = vec![
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "busy", "--headless", "-j", "2"],
        ),
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "busy", "--headless", "-j", "2"],
        ),
    ];
    wait_for(Duration::from_secs(60), "first runs", || {
        (read_ledger(&ledger_path).runs.len() >= 2).then_some(())
    });
    let db = repo.repo.join(".whilly/whilly.db");
    let hold = "import sqlite3, sys, time\n\
                c = sqlite3.connect(sys.argv[1], timeout=30, isolation_level=None)\n\
                c.execute('BEGIN EXCLUSIVE')\n\
                time.sleep(float(sys.argv[2]))\n\
                c.execute('ROLLBACK')\n";
    for _ in 0..2 {
        let status = std::process::Command::new("python3")
            .args(["-c", hold])
            .arg(&db)
            .arg("7")
            .status()
            .unwrap();
        assert!(status.success(), "python could not hold the lock");
        std::thread::sleep(Duration::from_millis(500));
    }
    wait_all(procs, Duration::from_secs(180), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, None, "busy");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, None),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    Figures {
        scenario: "SQLite busy: 2 runs, another process holds the write lock",
        tasks: st.len(),
        processes: 2,
        faults: "2 × 7 s exclusive lock".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

/// Two workers on Postgres; one is killed with SIGKILL while its agents work, and one agent of
/// the other is killed too. The killed worker's agents die with it, its tasks come back after
/// the lease and are done by the survivor, the dead worker is marked offline.
#[test]
fn sigkill_of_a_worker_and_of_an_agent_loses_nothing() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let url = db.url();
    let n = 8;
    let (tasks, keys) = own_files("kill", n, 0);
    let (repo, ledger_path) = ledger_repo(&plan("kill", tasks), "3", "", "");
    import(&repo, Some(&url));
    let worker = |slots: &str| {
        spawn(
            &repo,
            &repo.repo,
            Some(&url),
            &[
                "-c",
                "queue.worker_offline_secs=4",
                "worker",
                "--plan",
                "kill",
                "--slots",
                slots,
                "--until-idle",
            ],
        )
    };
    let victim = worker("2");
    // The victim's two agents are running: then the survivor starts, and the victim dies.
    let first = wait_for(Duration::from_secs(60), "the victim's agents", || {
        let l = read_ledger(&ledger_path);
        (l.runs.len() >= 2).then_some(l.runs)
    });
    let survivor = worker("2");
    victim.signal(libc::SIGKILL);
    let killed_at = Instant::now();
    let killed_ns = now_ns();
    let victim_agents: Vec<i32> = first.iter().map(|r| r.pid).collect();
    // Its agents do not outlive it by more than a few seconds.
    wait_for(Duration::from_secs(6), "the victim's agents to die", || {
        victim_agents.iter().all(|p| kill(*p, 0) != 0).then_some(())
    });
    let agents_gone = killed_at.elapsed();
    // One agent of the survivor dies too (SIGKILL): the attempt fails and is retried.
    let survivor_agent = wait_for(Duration::from_secs(30), "a survivor agent", || {
        read_ledger(&ledger_path)
            .runs
            .into_iter()
            .find(|r| r.end.is_none() && !victim_agents.contains(&r.pid))
    });
    kill(survivor_agent.pid, libc::SIGKILL);
    // The victim's tasks run again once their leases expire.
    let rerun = wait_for(
        Duration::from_secs(60),
        "the victim's tasks to run again",
        || {
            let l = read_ledger(&ledger_path);
            l.runs
                .iter()
                .find(|r| r.task == first[0].task && r.start > killed_ns)
                .map(|_| killed_at.elapsed())
        },
    );
    // The dead worker is marked offline by the survivor's reaper.
    let offline = wait_for(
        Duration::from_secs(30),
        "the dead worker to be marked offline",
        || {
            let store = rt
                .block_on(whilly::store::postgres::PgStore::connect(&url, None))
                .ok()?;
            let workers = rt
                .block_on(whilly::store::WorkerRegistry::list_workers(&store))
                .ok()?;
            rt.block_on(whilly::store::Store::close(&store));
            workers
                .iter()
                .any(|w| w.offline && w.id.contains(&format!("/{}/", victim.pid())))
                .then_some(workers)
        },
    );
    let now = chrono::Utc::now();
    let online: Vec<_> = offline
        .iter()
        .filter(|w| w.online(now, Duration::from_secs(4)))
        .collect();
    assert_eq!(online.len(), 1, "only the survivor is online: {offline:?}");
    let out = survivor.wait(Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}");
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, Some(&url), "kill");
    // A killed run counts until its agents were seen gone.
    let killed_until = killed_ns + agents_gone.as_nanos();
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, Some(&url)),
        &keys,
        &[&repo.repo],
        killed_until,
    );
    // No two runs of one task overlap: a rerun starts after the killed run's agent is gone.
    for (i, a) in ledger.runs.iter().enumerate() {
        for b in &ledger.runs[i + 1..] {
            if a.task == b.task {
                let a_end = a.end.unwrap_or(killed_until);
                assert!(
                    b.start >= a_end,
                    "two runs of {} at once: {a:?} {b:?}",
                    a.task
                );
            }
        }
    }
    Figures {
        scenario: "SIGKILL of a worker (2 agents) and of an agent, Postgres: 2 workers",
        tasks: st.len(),
        processes: 2,
        faults: format!(
            "1 worker + 1 agent killed; its agents gone after {:.1} s",
            agents_gone.as_secs_f64()
        ),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: Some(rerun),
    }
    .print();
}

/// Two `whilly run -j 4` on one repository and 60 quick tasks: worktrees are created and
/// removed by both at once, and no task fails for it.
#[test]
fn two_runs_on_one_repository_share_its_worktrees_safely() {
    let n = 60;
    let (tasks, keys) = own_files("wt", n, 3);
    let (repo, ledger_path) = ledger_repo(&plan("wt", tasks), "0", "", "");
    import(&repo, None);
    let procs = vec![
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "wt", "--headless", "-j", "4"],
        ),
        spawn(
            &repo,
            &repo.repo,
            None,
            &["run", "--plan", "wt", "--headless", "-j", "4"],
        ),
    ];
    wait_all(procs, Duration::from_secs(300), 0);
    let ledger = read_ledger(&ledger_path);
    let st = statuses(&repo, None, "wt");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, None),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    let failed_events = repo
        .events(None)
        .into_iter()
        .filter(|e| e["event_type"] == "task.failed" || e["event_type"] == "task.retry")
        .count();
    assert_eq!(failed_events, 0, "no attempt failed");
    Figures {
        scenario: "worktrees: 2 runs × 4 slots on one repo, SQLite",
        tasks: st.len(),
        processes: 2,
        faults: "concurrent worktree add/remove".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: None,
    }
    .print();
}

/// The run dies right after landing a task's work, before the queue hears of it; the resumed
/// run finishes the task from the landing, without running the agent or landing again.
#[test]
fn work_that_landed_before_a_crash_is_not_landed_again() {
    let (t, k) = keyed("land", "T-1", &["src/t1.rs"]);
    let keys: HashMap<_, _> = [k].into_iter().collect();
    let (repo, ledger_path) = ledger_repo(&plan("land", vec![t]), "0.2", "", "");
    import(&repo, None);
    let crashed = spawn_env(
        &repo,
        &repo.repo,
        None,
        &["run", "--plan", "land", "--headless"],
        &[("WHILLY_FAILPOINT", "after_delivery")],
    )
    .wait(Duration::from_secs(60));
    assert_eq!(crashed.code, None, "killed by its failpoint: {crashed}");
    assert_eq!(
        landings(&repo.repo, "T-1"),
        1,
        "the work landed before the crash"
    );
    let started = Instant::now();
    let out = repo.run(
        &["run", "--plan", "land", "--headless", "--resume"],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{out}");
    let ledger = read_ledger(&ledger_path);
    assert_eq!(
        ledger.runs.len(),
        1,
        "the agent ran once: {:?}",
        ledger.runs
    );
    let st = statuses(&repo, None, "land");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, None),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    let done = repo
        .events(Some("T-1"))
        .into_iter()
        .find(|e| e["event_type"] == "task.done")
        .unwrap();
    assert_eq!(
        done["payload"]["delivery"]["kind"], "already_landed",
        "{done}"
    );
    // A queue started afresh (the database removed) runs the task again: the note belongs to
    // the old queue's plan, not to this one.
    std::fs::remove_dir_all(repo.repo.join(".whilly")).unwrap();
    let again = repo.run(&["run", "plan.json", "--headless"], Duration::from_secs(60));
    assert_eq!(again.code, Some(0), "{again}");
    assert_eq!(
        read_ledger(&ledger_path).runs.len(),
        2,
        "the agent ran again"
    );
    Figures {
        scenario: "crash between landing and recording, SQLite, --resume",
        tasks: 1,
        processes: 2,
        faults: "SIGKILL after delivery".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: Some(started.elapsed()),
    }
    .print();
}

/// A worker serving every plan: one plan's budget runs out, the other plan is done anyway,
/// and the worker says which plan stopped and exits 2.
#[test]
fn one_plans_budget_stops_only_that_plan() {
    let repo = Repo::new(&plan("bA", vec![]), "true");
    let cost = format!("bash {} 0.6 task", agent("engine/cost.sh").display());
    repo.write("whilly.toml", &engine::config(&cost, &repo.wt_dir));
    let a: Vec<Value> = (1..=4).map(|i| task(&format!("A-{i}"))).collect();
    let mut pa = plan("bA", a);
    pa["budget_usd"] = json!(1.0);
    repo.write("plan.json", &serde_json::to_string_pretty(&pa).unwrap());
    let b: Vec<Value> = (1..=8).map(|i| task(&format!("B-{i}"))).collect();
    repo.write(
        "plan-b.json",
        &serde_json::to_string_pretty(&plan("bB", b)).unwrap(),
    );
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "plans"]);
    import(&repo, None);
    let out = repo
        .whilly(&["plan", "import", "plan-b.json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = repo
        .spawn(&["worker", "--slots", "1", "--until-idle"])
        .wait(Duration::from_secs(120));
    assert_eq!(out.code, Some(2), "only budget-blocked work is left: {out}");
    assert!(out.stderr.contains("budget"), "{out}");
    let b = statuses(&repo, None, "bB");
    assert!(b.values().all(|s| s == "DONE"), "bB: {b:?}");
    let a = statuses(&repo, None, "bA");
    let a_done = a.values().filter(|s| *s == "DONE").count();
    assert!(a_done < 4, "bA stopped: {a:?}");
    let log = logs_text(&repo.repo);
    assert!(
        log.contains("plan bA: budget exhausted"),
        "the log names the plan"
    );
    let exhausted: Vec<_> = repo
        .events_of_type("budget.exhausted")
        .into_iter()
        .map(|e| e["plan_id"].clone())
        .collect();
    assert_eq!(exhausted, vec![json!("bA")]);
    Figures {
        scenario: "budgets: 1 plan-less worker, plan bA $1, plan bB unlimited",
        tasks: 12,
        processes: 1,
        faults: "bA exhausted".into(),
        lost: 0,
        duplicated: 0,
        overlaps: 0,
        recovery: None,
    }
    .print();
}

/// `whilly run --headless` killed with SIGKILL while its agent ignores SIGTERM and SIGHUP: the
/// agent is gone within seconds, and `--resume` at once does not start a second agent in the
/// worktree while the first still runs.
#[test]
fn resume_after_sigkill_never_runs_two_agents_in_one_worktree() {
    let (t, k) = keyed("res", "T-1", &["src/t1.rs"]);
    let keys: HashMap<_, _> = [k].into_iter().collect();
    let (repo, ledger_path) = ledger_repo(&plan("res", vec![t]), "4", "ignore-signals", "");
    import(&repo, None);
    let run = repo.spawn(&["run", "--plan", "res", "--headless"]);
    let first = wait_for(Duration::from_secs(30), "the agent", || {
        read_ledger(&ledger_path).runs.first().cloned()
    });
    run.signal(libc::SIGKILL);
    let killed = Instant::now();
    let out = repo.run(
        &["run", "--plan", "res", "--headless", "--resume"],
        Duration::from_secs(60),
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(kill(first.pid, 0) != 0, "the first agent is gone");
    let ledger = read_ledger(&ledger_path);
    assert_eq!(
        ledger.overlaps, 0,
        "a second agent started beside the first"
    );
    let st = statuses(&repo, None, "res");
    let (lost, dup, ov) = check_outcome(
        &st,
        &ledger,
        &all_events(&repo, None),
        &keys,
        &[&repo.repo],
        now_ns(),
    );
    Figures {
        scenario: "SIGKILL of a headless run, agent ignores TERM/HUP, --resume at once",
        tasks: 1,
        processes: 2,
        faults: "SIGKILL".into(),
        lost,
        duplicated: dup,
        overlaps: ov,
        recovery: Some(killed.elapsed()),
    }
    .print();
}

/// A queue that stops answering for good: the worker keeps its agent running while it retries,
/// then, after `[queue] outage_secs`, stops the agent and exits 2 naming the database.
#[test]
fn a_lasting_outage_stops_the_agents_and_exits_2_naming_the_database() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let db = rt.block_on(pg::fresh_database());
    let (t, _) = keyed("out", "T-1", &["src/t1.rs"]);
    let (repo, ledger_path) = ledger_repo(&plan("out", vec![t]), "60", "", "");
    let role = format!("{}_out", db.name());
    let admin = |sql: String| {
        rt.block_on(async {
            let mut c = pg::admin_connection(&db.admin_url()).await;
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&mut c)
                .await
                .unwrap();
        })
    };
    admin(format!("CREATE ROLE {role} LOGIN"));
    admin(format!("ALTER DATABASE {} OWNER TO {role}", db.name()));
    let url = with_user(&db.url(), &role);
    import(&repo, Some(&url));
    let worker = spawn(
        &repo,
        &repo.repo,
        Some(&url),
        &[
            "-c",
            "queue.outage_secs=4",
            "worker",
            "--plan",
            "out",
            "--slots",
            "1",
        ],
    );
    let run = wait_for(Duration::from_secs(30), "the agent", || {
        read_ledger(&ledger_path).runs.first().cloned()
    });
    // The database refuses the role from now on, and its open connections are cut.
    admin(format!("ALTER ROLE {role} CONNECTION LIMIT 0"));
    let cut = Instant::now();
    rt.block_on(pg::terminate_backends(&db.admin_url(), db.name()));
    // The agent keeps running through the first seconds of the outage.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(kill(run.pid, 0), 0, "the agent runs on meanwhile");
    let out = worker.wait(Duration::from_secs(60));
    let gave_up = cut.elapsed();
    assert_eq!(out.code, Some(4), "{out}");
    assert!(
        out.stderr.contains("did not answer for") && out.stderr.contains(db.name()),
        "the message names the database: {out}"
    );
    wait_for(Duration::from_secs(5), "the agent to be stopped", || {
        (kill(run.pid, 0) != 0).then_some(())
    });
    let log = logs_text(&repo.repo);
    assert!(
        log.contains("the queue did not answer"),
        "the log has the errors"
    );
    Figures {
        scenario: "lasting outage, Postgres: the worker's role refused (outage_secs = 4)",
        tasks: 1,
        processes: 1,
        faults: format!(
            "connections cut and refused; exit 2 after {:.1} s",
            gave_up.as_secs_f64()
        ),
        lost: 0,
        duplicated: 0,
        overlaps: 0,
        recovery: None,
    }
    .print();
    admin(format!("ALTER ROLE {role} CONNECTION LIMIT -1"));
    let admin_url = db.admin_url();
    drop(db);
    rt.block_on(async {
        let mut c = pg::admin_connection(&admin_url).await;
        let sql = format!("DROP ROLE IF EXISTS {role}");
        let _ = sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut c).await;
    });
}
