//! Postgres reliability: exclusivity under concurrent claimers, the crash bound for a killed
//! worker process, fencing of a resumed worker, DAG safety, connection chaos, the polling
//! fallback without NOTIFY and wake latency. Each test runs on a fresh database.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::pg::{FreshDb, fresh_database, terminate_backends};
use whilly::domain::{PlanSpec, Status, TaskSpec, Usd};
use whilly::store::event_types as et;
use whilly::store::postgres::{PgOptions, PgStore};
use whilly::store::{
    ClaimRequest, Event, EventFilter, FailMode, ImportOptions, Lease, Outcome, Park, Store,
    StoreError,
};
use whilly::store::{EventLog, PlanStore, TaskQueue};

const WORKER_ENV: &str = "WHILLY_PG_RELIABILITY_WORKER_URL";

/// The fresh database's URL with commits that skip the WAL flush: these tests check locking,
/// fencing and recovery from lost connections, not durability across a server crash, and a
/// flush per commit on a slow disk would make the file take minutes.
fn fast_url(db: &FreshDb) -> String {
    format!("{}?options[synchronous_commit]=off", db.url())
}

/// Serialises the load-heavy tests of this file.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn store(db: &FreshDb) -> PgStore {
    PgStore::connect(&fast_url(db), None)
        .await
        .expect("connect to the fresh database")
}

async fn store_with(db: &FreshDb, opts: PgOptions) -> PgStore {
    PgStore::connect_with(&fast_url(db), None, opts)
        .await
        .expect("connect to the fresh database")
}

fn task(id: &str, deps: &[String]) -> TaskSpec {
    TaskSpec {
        id: id.to_string(),
        description: format!("do {id}"),
        dependencies: deps.to_vec(),
        ..Default::default()
    }
}

fn flat_plan(id: &str, n: usize) -> PlanSpec {
    PlanSpec {
        id: id.to_string(),
        project: "reliability".into(),
        tasks: (0..n).map(|i| task(&format!("T-{i:05}"), &[])).collect(),
        ..Default::default()
    }
}

/// A random DAG: every task depends on up to three earlier ones.
fn random_dag(id: &str, n: usize, seed: u64) -> PlanSpec {
    let mut rng = StdRng::seed_from_u64(seed);
    let ids: Vec<String> = (0..n).map(|i| format!("D-{i:04}")).collect();
    let tasks = (0..n)
        .map(|i| {
            let mut deps = HashSet::new();
            if i > 0 {
                for _ in 0..rng.random_range(0..=3) {
                    deps.insert(ids[rng.random_range(0..i)].clone());
                }
            }
            let mut deps: Vec<String> = deps.into_iter().collect();
            deps.sort();
            task(&ids[i], &deps)
        })
        .collect();
    PlanSpec {
        id: id.to_string(),
        project: "dag".into(),
        tasks,
        ..Default::default()
    }
}

fn claim_req(worker: &str, plan: &str, lease: Duration) -> ClaimRequest {
    ClaimRequest {
        plan_id: Some(plan.to_string()),
        lease,
        ..ClaimRequest::new(worker)
    }
}

async fn all_events(s: &PgStore, plan: &str) -> Vec<Event> {
    s.events(&EventFilter {
        plan_id: Some(plan.into()),
        ..Default::default()
    })
    .await
    .unwrap()
}

async fn plan_finished(s: &PgStore, plan: &str) -> bool {
    let c = s.counts(plan).await.unwrap();
    c.get(Status::Done) == c.total
}

/// claim → start → complete until the plan is finished, tolerating transient errors (the chaos
/// test kills connections under it). Returns how many tasks this worker completed.
async fn worker_loop(
    s: PgStore,
    worker: String,
    plan: String,
    lease: Duration,
    max_wait: Duration,
    start: bool,
) -> usize {
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(150);
    while Instant::now() < deadline {
        let claimed = match s.claim(&claim_req(&worker, &plan, lease)).await {
            Ok(c) => c,
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let Some(c) = claimed else {
            match s.counts(&plan).await {
                Ok(c) if c.get(Status::Done) == c.total => return done,
                _ => {}
            }
            s.wait_for_work(max_wait).await;
            continue;
        };
        if start {
            // Best effort: complete is legal from CLAIMED too.
            let _ = s.start(c.lease, None).await;
        }
        for _ in 0..5 {
            match s.complete(c.lease, &Outcome::default()).await {
                Ok(_) => {
                    done += 1;
                    break;
                }
                // Reclaimed meanwhile, or our earlier attempt committed but its answer was lost.
                Err(StoreError::Stale { .. }) => break,
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }
    done
}

/// Every task DONE exactly once, no (task, epoch) claimed twice, every completion made under a
/// lease that was actually claimed.
fn assert_exclusive(events: &[Event], n_tasks: usize) {
    let mut claims = HashSet::new();
    let mut done: HashMap<&str, usize> = HashMap::new();
    for e in events {
        let task = e.task_id.as_deref().unwrap_or("");
        if e.event_type == et::TASK_CLAIMED {
            assert!(
                claims.insert((task, e.epoch)),
                "task {task} epoch {:?} claimed twice",
                e.epoch
            );
        }
        if e.event_type == et::TASK_DONE {
            *done.entry(task).or_default() += 1;
            assert!(
                claims.contains(&(task, e.epoch)),
                "task {task} done under unclaimed epoch {:?}",
                e.epoch
            );
        }
    }
    assert_eq!(done.len(), n_tasks, "every task completed");
    for (task, n) in done {
        assert_eq!(n, 1, "task {task} completed {n} times");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_complete_every_task_exactly_once() {
    // Load tests run one at a time: on 2 cores, several at once measure the scheduler.
    let _heavy = HEAVY.lock().await;
    let db = fresh_database().await;
    let s = store(&db).await;
    let n = 2_000;
    s.import_plan(&flat_plan("flat", n), &ImportOptions::default())
        .await
        .unwrap();
    let started = Instant::now();
    let workers: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(worker_loop(
                s.clone(),
                format!("w{i}"),
                "flat".into(),
                Duration::from_secs(30),
                Duration::from_millis(200),
                false,
            ))
        })
        .collect();
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    println!("8 claimers, {n} tasks: {:?}", started.elapsed());
    assert_eq!(total, n);
    assert!(plan_finished(&s, "flat").await);
    assert_exclusive(&all_events(&s, "flat").await, n);
    s.close().await;
}

/// Not a test on its own: the body of the worker process the crash test kills. It claims one
/// task, prints its lease and sleeps until it is killed. Ignored, so a normal run lists it as
/// such instead of passing it vacuously; the crash test runs it with `--ignored`.
#[tokio::test]
#[ignore = "the crash test's worker process; it runs it itself"]
async fn worker_mode_child() {
    let url = std::env::var(WORKER_ENV)
        .unwrap_or_else(|_| panic!("{WORKER_ENV} is set by the crash test that runs this"));
    let s = PgStore::connect(&url, None).await.unwrap();
    let c = s
        .claim(&claim_req("doomed", "crash", Duration::from_secs(1)))
        .await
        .unwrap()
        .unwrap();
    s.start(c.lease, None).await.unwrap();
    println!("CLAIMED {} {}", c.lease.task_pk, c.lease.epoch);
    tokio::time::sleep(Duration::from_secs(120)).await;
}

/// Runs the worker process until it holds a lease, then SIGKILLs it.
fn claim_in_child_and_kill(url: &str) -> Lease {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "worker_mode_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WORKER_ENV, url)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // libtest may print "test worker_mode_child ... " on the same line, so search within lines;
    // read on a thread so a child that never claims fails the test instead of hanging it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(at) = line.find("CLAIMED ") {
                let mut it = line[at + 8..]
                    .split_whitespace()
                    .filter_map(|v| v.parse::<i64>().ok());
                if let (Some(task_pk), Some(epoch)) = (it.next(), it.next()) {
                    let _ = tx.send(Lease { task_pk, epoch });
                    return;
                }
            }
        }
    });
    let lease = rx.recv_timeout(Duration::from_secs(30));
    // std's kill is SIGKILL on Unix: no destructor, no release, exactly a crash.
    child.kill().unwrap();
    child.wait().unwrap();
    lease.expect("the worker process printed its lease within 30 s")
}

/// Reaps every `interval` until the task leaves its lease, returning how long that took.
async fn reap_until_released(
    s: &PgStore,
    pk: i64,
    interval: Duration,
    bound: Duration,
) -> Duration {
    let t0 = Instant::now();
    loop {
        s.reap().await.unwrap();
        let t = s.get_task_by_pk(pk).await.unwrap();
        if !t.status.is_leased() {
            return t0.elapsed();
        }
        assert!(
            t0.elapsed() < bound,
            "task {} still {} after {:?}",
            t.id,
            t.status,
            t0.elapsed()
        );
        tokio::time::sleep(interval).await;
    }
}

#[tokio::test]
async fn killed_worker_process_task_returns_within_lease_plus_reaper_interval() {
    let db = fresh_database().await;
    let s = store(&db).await;
    let mut plan = flat_plan("crash", 1);
    plan.tasks[0].max_attempts = Some(2);
    s.import_plan(&plan, &ImportOptions::default())
        .await
        .unwrap();
    let interval = Duration::from_millis(200);
    // lease 1 s + one reaper interval, plus slack for a loaded 2-core machine.
    let bound = Duration::from_secs(1) + interval + Duration::from_secs(3);

    let lease = claim_in_child_and_kill(&db.url());
    let took = reap_until_released(&s, lease.task_pk, interval, bound).await;
    println!("killed worker's task back after {took:?}");
    let t = s.get_task_by_pk(lease.task_pk).await.unwrap();
    assert_eq!(t.status, Status::Pending);
    assert_eq!(t.attempts, 0, "a worker's death is not the task's attempt");
    assert_eq!(t.reason.as_deref(), Some("lease_expired"));
    assert!(t.worker_id.is_none() && t.lease_expires_at.is_none());

    // Losses have their own limit, three times the attempts (6 here): a task that kills every
    // worker it runs on still ends, FAILED, after the sixth.
    let mut last_epoch = lease.epoch;
    for crash in 2..=6 {
        let next = claim_in_child_and_kill(&db.url());
        assert_eq!(next.task_pk, lease.task_pk);
        assert!(next.epoch > last_epoch);
        last_epoch = next.epoch;
        reap_until_released(&s, next.task_pk, interval, bound).await;
        let t = s.get_task_by_pk(lease.task_pk).await.unwrap();
        let want = if crash < 6 {
            Status::Pending
        } else {
            Status::Failed
        };
        assert_eq!((crash, t.status), (crash, want));
    }
    let expired = all_events(&s, "crash")
        .await
        .iter()
        .filter(|e| e.event_type == et::TASK_LEASE_EXPIRED)
        .count();
    assert_eq!(expired, 6);
    s.close().await;
}

#[tokio::test]
async fn resumed_worker_with_reclaimed_lease_changes_nothing() {
    let db = fresh_database().await;
    let s = store(&db).await;
    s.import_plan(&flat_plan("fence", 1), &ImportOptions::default())
        .await
        .unwrap();
    // The "paused" worker: its lease runs out while it is stopped.
    let old = s
        .claim(&claim_req("sleeper", "fence", Duration::from_millis(1)))
        .await
        .unwrap()
        .unwrap();
    s.start(old.lease, None).await.unwrap();
    let t0 = Instant::now();
    while s.reap().await.unwrap().requeued.is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "reaper never reclaimed the lease"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let new = s
        .claim(&claim_req("fresh", "fence", Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap();
    assert!(new.lease.epoch > old.lease.epoch);
    let before_events = all_events(&s, "fence").await.len();
    let before_task = s.get_task_by_pk(new.lease.task_pk).await.unwrap();
    let before_plan = s.get_plan("fence").await.unwrap();

    // The sleeper wakes up and carries on as if nothing happened.
    let stale = |r: Result<(), StoreError>, what: &str| {
        assert!(matches!(r, Err(StoreError::Stale { .. })), "{what}: {r:?}");
    };
    let o = Outcome {
        cost: Usd::from_f64(1.0),
        ..Default::default()
    };
    stale(
        s.heartbeat(old.lease, Duration::from_secs(60)).await,
        "heartbeat",
    );
    stale(s.start(old.lease, None).await, "start");
    stale(s.complete(old.lease, &o).await.map(|_| ()), "complete");
    stale(
        s.fail(old.lease, FailMode::Retry, &o).await.map(|_| ()),
        "fail retry",
    );
    stale(
        s.fail(old.lease, FailMode::Final, &o).await.map(|_| ()),
        "fail final",
    );
    stale(s.release(old.lease, &o).await.map(|_| ()), "release");
    stale(
        s.park(old.lease, Park::HumanLoop, &o).await.map(|_| ()),
        "park",
    );
    stale(
        s.add_cost(old.lease, Usd::from_f64(1.0)).await.map(|_| ()),
        "add_cost",
    );

    assert_eq!(
        all_events(&s, "fence").await.len(),
        before_events,
        "stale writes wrote no event"
    );
    assert_eq!(
        s.get_task_by_pk(new.lease.task_pk).await.unwrap(),
        before_task
    );
    assert_eq!(s.get_plan("fence").await.unwrap(), before_plan);
    // The live lease still works.
    s.complete(new.lease, &Outcome::default()).await.unwrap();
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_dags_never_run_a_child_before_its_parents() {
    // Load tests run one at a time: on 2 cores, several at once measure the scheduler.
    let _heavy = HEAVY.lock().await;
    let db = fresh_database().await;
    let s = store(&db).await;
    for seed in [7_u64, 1234] {
        let plan_id = format!("dag-{seed}");
        let plan = random_dag(&plan_id, 200, seed);
        s.import_plan(&plan, &ImportOptions::default())
            .await
            .unwrap();
        let workers: Vec<_> = (0..4)
            .map(|i| {
                tokio::spawn(worker_loop(
                    s.clone(),
                    format!("w{i}"),
                    plan_id.clone(),
                    Duration::from_secs(30),
                    Duration::from_millis(200),
                    true,
                ))
            })
            .collect();
        for w in workers {
            w.await.unwrap();
        }
        assert!(plan_finished(&s, &plan_id).await, "{plan_id} finished");
        let events = all_events(&s, &plan_id).await;
        assert_exclusive(&events, plan.tasks.len());
        let deps: HashMap<&str, &[String]> = plan
            .tasks
            .iter()
            .map(|t| (t.id.as_str(), t.dependencies.as_slice()))
            .collect();
        let mut done_at: HashMap<&str, i64> = HashMap::new();
        for e in &events {
            let Some(task) = e.task_id.as_deref() else {
                continue;
            };
            if e.event_type == et::TASK_DONE {
                done_at.insert(task, e.id);
            }
            if e.event_type == et::TASK_CLAIMED {
                for parent in deps[task] {
                    assert!(
                        done_at.get(parent.as_str()).is_some_and(|d| *d < e.id),
                        "{plan_id}: {task} claimed (event {}) before its parent {parent} was done",
                        e.id
                    );
                }
            }
        }
    }
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connection_chaos_still_finishes_and_leaves_nothing_leased() {
    // Load tests run one at a time: on 2 cores, several at once measure the scheduler.
    let _heavy = HEAVY.lock().await;
    let db = fresh_database().await;
    let s = store(&db).await;
    let n = 300;
    // Orphaned claims (answer lost with the connection) come back through the reaper, each
    // costing an attempt: allow plenty so chaos never turns into FAILED tasks.
    let opts = ImportOptions {
        default_max_attempts: 100,
        ..Default::default()
    };
    s.import_plan(&random_dag("chaos", n, 99), &opts)
        .await
        .unwrap();
    let lease = Duration::from_secs(1);
    let workers: Vec<_> = (0..4)
        .map(|i| {
            tokio::spawn(worker_loop(
                s.clone(),
                format!("w{i}"),
                "chaos".into(),
                lease,
                Duration::from_millis(200),
                true,
            ))
        })
        .collect();
    let reaper = {
        let s = s.clone();
        tokio::spawn(async move {
            loop {
                let _ = s.reap().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    // Kill every connection of the test database, the LISTEN one included, over and over.
    let mut killed = 0;
    for _ in 0..12 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        killed += terminate_backends(&db.admin_url(), db.name()).await;
    }
    println!("terminated {killed} backends during the run");
    assert!(killed > 0, "chaos actually hit the store's connections");
    for w in workers {
        w.await.unwrap();
    }
    reaper.abort();
    let c = s.counts("chaos").await.unwrap();
    assert_eq!(c.get(Status::Done), n as u64, "{c:?}");
    assert_eq!(c.get(Status::Claimed) + c.get(Status::InProgress), 0);
    let events = all_events(&s, "chaos").await;
    let done: HashSet<&str> = events
        .iter()
        .filter(|e| e.event_type == et::TASK_DONE)
        .filter_map(|e| e.task_id.as_deref())
        .collect();
    assert_eq!(done.len(), n);
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_notify_everything_still_finishes_by_polling() {
    // Load tests run one at a time: on 2 cores, several at once measure the scheduler.
    let _heavy = HEAVY.lock().await;
    let db = fresh_database().await;
    let s = store_with(
        &db,
        PgOptions {
            notify: false,
            ..PgOptions::default()
        },
    )
    .await;
    // Chains make workers wait for each other's completions: only polling can wake them.
    let n = 120;
    let tasks: Vec<TaskSpec> = (0..n)
        .map(|i| {
            let deps = if i >= 4 {
                vec![format!("C-{:03}", i - 4)]
            } else {
                vec![]
            };
            task(&format!("C-{i:03}"), &deps)
        })
        .collect();
    let plan = PlanSpec {
        id: "poll".into(),
        tasks,
        ..Default::default()
    };
    s.import_plan(&plan, &ImportOptions::default())
        .await
        .unwrap();
    let workers: Vec<_> = (0..6)
        .map(|i| {
            tokio::spawn(worker_loop(
                s.clone(),
                format!("w{i}"),
                "poll".into(),
                Duration::from_secs(30),
                Duration::from_millis(30),
                true,
            ))
        })
        .collect();
    let mut total = 0;
    for w in workers {
        total += w.await.unwrap();
    }
    assert_eq!(total, n);
    assert!(plan_finished(&s, "poll").await);
    s.close().await;
}

#[tokio::test]
async fn notify_wakes_a_waiting_worker_promptly() {
    let db = fresh_database().await;
    let waiter_store = store(&db).await;
    let importer = store(&db).await;
    importer
        .import_plan(&flat_plan("empty", 0), &ImportOptions::default())
        .await
        .unwrap();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let waiter = {
        let s = waiter_store.clone();
        tokio::spawn(async move {
            assert!(
                s.claim(&claim_req("waiter", "wake", Duration::from_secs(30)))
                    .await
                    .unwrap()
                    .is_none()
            );
            let _ = ready_tx.send(());
            s.wait_for_work(Duration::from_secs(20)).await;
            Instant::now()
        })
    };
    ready_rx.await.unwrap();
    let t0 = Instant::now();
    importer
        .import_plan(&flat_plan("wake", 1), &ImportOptions::default())
        .await
        .unwrap();
    let imported = Instant::now();
    let woke = waiter.await.unwrap();
    let latency = woke.saturating_duration_since(imported);
    println!(
        "wake latency after import commit: {latency:?} (import took {:?})",
        imported - t0
    );
    assert!(
        woke.duration_since(t0) < Duration::from_secs(5),
        "woke by NOTIFY, not by the 20 s fallback"
    );
    assert!(
        waiter_store
            .claim(&claim_req("waiter", "wake", Duration::from_secs(30)))
            .await
            .unwrap()
            .is_some()
    );
    waiter_store.close().await;
    importer.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claims_never_overshoot_the_budget() {
    // Load tests run one at a time: on 2 cores, several at once measure the scheduler.
    let _heavy = HEAVY.lock().await;
    let db = fresh_database().await;
    let s = store(&db).await;
    let mut plan = flat_plan("budget", 50);
    for t in &mut plan.tasks {
        t.budget_usd = Some(Usd::from_f64(1.0));
    }
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(10.0)),
        ..Default::default()
    };
    s.import_plan(&plan, &opts).await.unwrap();
    let claimers: Vec<_> = (0..8)
        .map(|i| {
            let s = s.clone();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while let Some(c) = s
                    .claim(&claim_req(
                        &format!("b{i}"),
                        "budget",
                        Duration::from_secs(30),
                    ))
                    .await
                    .unwrap()
                {
                    got.push(c.lease);
                }
                got
            })
        })
        .collect();
    let mut leases = Vec::new();
    for c in claimers {
        leases.extend(c.await.unwrap());
    }
    assert_eq!(
        leases.len(),
        10,
        "exactly the budget's worth of $1 tasks is claimed"
    );
    let p = s.get_plan("budget").await.unwrap();
    assert_eq!(p.reserved, Usd::from_f64(10.0));
    // Completing under estimate frees room for more.
    s.complete(
        leases[0],
        &Outcome {
            cost: Usd::from_f64(0.5),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let p = s.get_plan("budget").await.unwrap();
    assert_eq!(
        (p.spent, p.reserved),
        (Usd::from_f64(0.5), Usd::from_f64(9.0))
    );
    assert!(
        s.claim(&claim_req("late", "budget", Duration::from_secs(30)))
            .await
            .unwrap()
            .is_none()
    );
    s.close().await;
}

#[tokio::test]
async fn unreachable_server_fails_fast_with_a_hint() {
    let t0 = Instant::now();
    let err = PgStore::connect("postgres://whilly:secret@127.0.0.1:1/nowhere", None)
        .await
        .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(8));
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            StoreError::Unreachable {
                backend: "postgres",
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.contains("127.0.0.1:1/nowhere") && !msg.contains("secret"),
        "{msg}"
    );
    assert!(err.is_environment());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_first_connects_migrate_once() {
    let db = fresh_database().await;
    let url = db.url();
    let connects: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { PgStore::connect(&url, None).await })
        })
        .collect();
    let mut stores = Vec::new();
    for c in connects {
        stores.push(
            c.await
                .unwrap()
                .expect("every concurrent connect migrates or sees it done"),
        );
    }
    for s in &stores {
        s.migration_status().await.unwrap();
        let info = s.info();
        assert!(info.pending_migrations.is_empty(), "{info:?}");
    }
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(stores[0].pool())
        .await
        .unwrap();
    assert_eq!(applied as usize, stores[0].info().applied_migrations.len());
    for s in stores {
        s.close().await;
    }
}

#[tokio::test]
async fn events_are_append_only_and_info_reports_migrations() {
    let db = fresh_database().await;
    let s = store(&db).await;
    s.import_plan(&flat_plan("audit", 2), &ImportOptions::default())
        .await
        .unwrap();
    for sql in [
        "UPDATE events SET event_type = 'x'",
        "DELETE FROM events",
        "TRUNCATE events",
    ] {
        let r = sqlx::query(sql).execute(s.pool()).await;
        assert!(r.is_err(), "{sql} must be refused");
    }
    assert_eq!(all_events(&s, "audit").await.len(), 3);
    let info = s.info();
    assert_eq!(info.backend, "postgres");
    assert!(
        !info.applied_migrations.is_empty() && info.pending_migrations.is_empty(),
        "{info:?}"
    );
    assert!(info.location.ends_with(db.name()));
    s.close().await;
}
