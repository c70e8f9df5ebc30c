//! The `Store` contract: every case runs against SQLite and against Postgres, and both must agree.
//!
//! Each case is an `async fn(&Ctx)`; `contract!` turns it into one `#[tokio::test]` per backend.

mod support;

use serde_json::json;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use whilly::domain::{PlanSpec, Priority, Status, TaskSpec, Usd};
use whilly::store::event_types as et;
use whilly::store::sqlite::SqliteStore;
use whilly::store::*;

// ---- harness ------------------------------------------------------------------------------

/// A store under test plus what a case needs around it.
pub struct Ctx {
    pub store: Arc<dyn Store>,
    pub mirror: PathBuf,
    backend: Backend,
    _dir: tempfile::TempDir,
}

enum Backend {
    Sqlite(PathBuf),
    #[allow(dead_code)]
    Postgres {
        url: String,
        _db: Box<dyn std::any::Any + Send + Sync>,
    },
}

impl Ctx {
    async fn sqlite() -> Ctx {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q/whilly.db");
        let mirror = dir.path().join("events.jsonl");
        let store = SqliteStore::open(&path, Some(mirror.clone()))
            .await
            .expect("open sqlite");
        Ctx {
            store: Arc::new(store),
            mirror,
            backend: Backend::Sqlite(path),
            _dir: dir,
        }
    }

    /// A second handle on the same database, as another process would have.
    async fn second_store(&self) -> Arc<dyn Store> {
        match &self.backend {
            Backend::Sqlite(path) => Arc::new(
                SqliteStore::open(path, Some(self.mirror.clone()))
                    .await
                    .expect("reopen"),
            ),
            Backend::Postgres { url, .. } => pg_connect(url, Some(self.mirror.clone())).await,
        }
    }

    /// Runs raw SQL outside the store (to prove the database itself refuses things).
    async fn raw_exec(&self, sql: &'static str) -> Result<u64, String> {
        match &self.backend {
            Backend::Sqlite(path) => {
                let url = format!("sqlite://{}", path.display());
                let pool = sqlx::SqlitePool::connect(&url)
                    .await
                    .map_err(|e| e.to_string())?;
                let r = sqlx::query(sql)
                    .execute(&pool)
                    .await
                    .map_err(|e| e.to_string());
                pool.close().await;
                r.map(|r| r.rows_affected())
            }
            Backend::Postgres { url, .. } => {
                let pool = sqlx::PgPool::connect(url)
                    .await
                    .map_err(|e| e.to_string())?;
                let r = sqlx::query(sql)
                    .execute(&pool)
                    .await
                    .map_err(|e| e.to_string());
                pool.close().await;
                r.map(|r| r.rows_affected())
            }
        }
    }
}

macro_rules! contract {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let ctx = super::Ctx::sqlite().await;
                    super::$case(&ctx).await;
                    ctx.store.close().await;
                }
            )*
        }
        pg_contract!($($case),*);
    };
}

// The Postgres half: a fresh database per case.
macro_rules! pg_contract {
    ($($case:ident),*) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $case() {
                    let ctx = super::Ctx::postgres().await;
                    super::$case(&ctx).await;
                    ctx.store.close().await;
                }
            )*
        }
    };
}

impl Ctx {
    async fn postgres() -> Ctx {
        let db = support::pg::fresh_database().await;
        let url = db.url();
        let dir = tempfile::tempdir().expect("tempdir");
        let mirror = dir.path().join("events.jsonl");
        let store = pg_connect(&url, Some(mirror.clone())).await;
        Ctx {
            store,
            mirror,
            backend: Backend::Postgres {
                url,
                _db: Box::new(db),
            },
            _dir: dir,
        }
    }
}

async fn pg_connect(url: &str, mirror: Option<PathBuf>) -> Arc<dyn Store> {
    Arc::new(
        whilly::store::postgres::PgStore::connect(url, mirror)
            .await
            .expect("connect postgres"),
    )
}

// ---- fixtures -----------------------------------------------------------------------------

fn task(id: &str, deps: &[&str]) -> TaskSpec {
    TaskSpec {
        id: id.into(),
        description: format!("do {id}"),
        dependencies: deps.iter().map(|d| d.to_string()).collect(),
        ..Default::default()
    }
}

fn plan(id: &str, tasks: Vec<TaskSpec>) -> PlanSpec {
    PlanSpec {
        id: id.into(),
        project: "proj".into(),
        tasks,
        ..Default::default()
    }
}

fn req(worker: &str) -> ClaimRequest {
    let mut r = ClaimRequest::new(worker);
    r.lease = Duration::from_secs(30);
    r
}

fn short(worker: &str) -> ClaimRequest {
    let mut r = ClaimRequest::new(worker);
    r.lease = Duration::from_millis(200);
    r
}

async fn import(s: &dyn Store, p: &PlanSpec) -> ImportReport {
    s.import_plan(p, &ImportOptions::default())
        .await
        .expect("import")
}

async fn all_events(s: &dyn Store) -> Vec<Event> {
    s.events(&EventFilter::default()).await.expect("events")
}

async fn last_id(s: &dyn Store) -> i64 {
    all_events(s).await.last().map_or(0, |e| e.id)
}

async fn events_after(s: &dyn Store, after: i64) -> Vec<Event> {
    s.events(&EventFilter {
        after_id: Some(after),
        ..Default::default()
    })
    .await
    .expect("events")
}

async fn status(s: &dyn Store, plan: &str, id: &str) -> Status {
    s.get_task(plan, id).await.expect("get_task").status
}

async fn claim(s: &dyn Store, r: &ClaimRequest) -> Claimed {
    s.claim(r).await.expect("claim").expect("a task to claim")
}

/// Asserts exactly one event was written since `before`, with this type, transition and epoch.
async fn one_event(
    s: &dyn Store,
    before: i64,
    event_type: &str,
    from: Status,
    to: Status,
    epoch: i64,
) -> Event {
    let evs = events_after(s, before).await;
    assert_eq!(
        evs.len(),
        1,
        "expected one {event_type} event, got {evs:#?}"
    );
    let e = evs.into_iter().next().expect("one event");
    assert_eq!(e.event_type, event_type);
    assert_eq!(e.from_status, Some(from), "{e:?}");
    assert_eq!(e.to_status, Some(to), "{e:?}");
    assert_eq!(e.epoch, Some(epoch), "{e:?}");
    e
}

/// Polls `f` until it is true or `limit` passes (for database clocks we cannot await).
async fn eventually<F, Fut>(limit: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = Instant::now() + limit;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// Runs the reaper until it reports something (leases of 200 ms expire on the database clock).
async fn reap_until_something(s: &dyn Store) -> ReapReport {
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        let r = s.reap().await.expect("reap");
        if !(r.requeued.is_empty() && r.failed.is_empty() && r.timed_out.is_empty()) {
            return r;
        }
        assert!(
            Instant::now() < end,
            "the reaper found nothing to reap within 10 s"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// Reaps until the accumulated report satisfies `done` (10 s at most).
async fn reap_until(s: &dyn Store, done: impl Fn(&ReapReport) -> bool) -> ReapReport {
    let end = Instant::now() + Duration::from_secs(10);
    let mut acc = ReapReport::default();
    loop {
        let r = s.reap().await.expect("reap");
        acc.requeued.extend(r.requeued);
        acc.failed.extend(r.failed);
        acc.timed_out.extend(r.timed_out);
        if done(&acc) {
            return acc;
        }
        assert!(
            Instant::now() < end,
            "the reaper did not get there within 10 s: {acc:?}"
        );
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

// ---- cases --------------------------------------------------------------------------------

contract!(
    import_writes_rows_edges_and_events,
    import_maps_file_statuses_and_gate_skips,
    every_leased_transition_writes_exactly_its_event,
    operator_transitions_write_their_events,
    illegal_transitions_are_refused_without_events,
    dependencies_unblock_and_reblock,
    claim_order_is_priority_then_id_and_skips_paused_plans,
    claims_respect_tags_and_exclusions,
    budget_reservation_is_exact_under_concurrent_claims,
    budget_lets_a_cheaper_task_through,
    cost_settles_without_double_counting,
    stale_leases_change_nothing,
    operator_skip_fences_the_worker,
    reaper_requeues_and_fails_on_lease_expiry,
    reaper_handles_deadlines,
    concurrent_reapers_change_each_row_once,
    reimport_is_idempotent,
    reimport_updates_unstarted_and_keeps_started,
    export_import_export_round_trips,
    plan_reset_keep_and_hard,
    events_are_append_only,
    mirror_gets_one_line_per_event,
    wait_for_work_wakes_on_new_work,
    workers_register_heartbeat_and_leave,
    append_event_and_filters,
    ten_thousand_task_import_is_fast,
    claims_are_exclusive_across_handles,
    wait_for_work_sees_other_handles,
    key_files_keep_claims_apart,
    key_files_keep_concurrent_claimers_apart,
    key_files_are_scoped_by_repo_target,
    key_file_spellings_and_directories_are_one_claim,
    silent_workers_are_marked_offline,
    tasks_by_ids_reads_only_those_tasks,
    event_watch_sees_this_and_other_handles,
    keyed_task_leaving_its_lease_wakes_waiters,
    plans_archive_and_unarchive,
    plan_delete_removes_plan_and_tasks_keeps_events,
    remote_panes_watch_publish_read_prune_and_input,
    claims_skip_tasks_of_blocked_agents,
    agent_limits_hold_across_handles,
    agent_limits_hold_under_concurrent_claimers,
    split_rewires_fan_in_and_fan_out,
    split_with_parallel_subtasks_and_all_dependents,
    split_refuses_a_started_task_and_a_stale_split,
    split_dependent_waits_for_the_last_subtask,
    newest_event_id_and_find_task_across_plans,
);

/// The newest event's id (0 with none), and a task found by id in one plan or in every plan.
async fn newest_event_id_and_find_task_across_plans(c: &Ctx) {
    let s = &*c.store;
    assert_eq!(s.newest_event_id().await.unwrap(), 0, "no event yet");
    import(s, &plan("p1", vec![task("A", &[]), task("B", &[])])).await;
    import(s, &plan("p2", vec![task("A", &[])])).await;
    assert_eq!(s.newest_event_id().await.unwrap(), last_id(s).await);
    let both = s.find_task(None, "A").await.unwrap();
    let plans: Vec<_> = both.iter().map(|t| t.plan_id.as_str()).collect();
    assert_eq!(plans, ["p1", "p2"]);
    let one = s.find_task(Some("p2"), "A").await.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].plan_id, "p2");
    assert_eq!(s.find_task(None, "B").await.unwrap().len(), 1);
    assert!(s.find_task(None, "Z").await.unwrap().is_empty());
    assert!(s.find_task(Some("p2"), "B").await.unwrap().is_empty());
}

async fn import_writes_rows_edges_and_events(c: &Ctx) {
    let s = &*c.store;
    let p = plan(
        "p1",
        vec![task("A", &[]), task("B", &["A"]), task("C", &["A", "B"])],
    );
    let r = import(s, &p).await;
    assert!(r.created_plan);
    assert_eq!(r.created, vec!["A", "B", "C"]);
    let tasks = s.list_tasks("p1").await.expect("list");
    let ids: Vec<_> = tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["A", "B", "C"]);
    let deps: Vec<_> = tasks.iter().map(|t| t.pending_deps).collect();
    assert_eq!(deps, [0, 1, 2]);
    assert!(
        tasks
            .iter()
            .all(|t| t.status == Status::Pending && t.epoch == 0 && t.attempts == 0)
    );
    assert!(tasks.iter().all(|t| t.max_attempts == 3));
    let evs = all_events(s).await;
    let types: Vec<_> = evs.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(
        types,
        [
            et::PLAN_CREATED,
            et::TASK_CREATED,
            et::TASK_CREATED,
            et::TASK_CREATED
        ]
    );
    assert_eq!(evs[1].to_status, Some(Status::Pending));
    assert_eq!(evs[1].payload["priority"], "medium");
    assert_eq!(evs[1].task_id.as_deref(), Some("A"));
    let counts = s.counts("p1").await.expect("counts");
    assert_eq!(counts.total, 3);
    assert_eq!(counts.get(Status::Pending), 3);
    // Only A has no dependency left.
    assert_eq!(counts.ready, 1);
    let plans = s.list_plans().await.expect("plans");
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].counts.total, 3);
    assert_eq!(plans[0].counts.ready, 1);
    assert!(matches!(
        s.get_plan("nope").await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.get_task("p1", "nope").await,
        Err(StoreError::NotFound { .. })
    ));
    // Unknown dependency: refused, nothing written.
    let bad = plan("p2", vec![task("X", &["missing"])]);
    let before = last_id(s).await;
    assert!(
        s.import_plan(&bad, &ImportOptions::default())
            .await
            .is_err()
    );
    assert_eq!(last_id(s).await, before);
    assert!(s.get_plan("p2").await.is_err());
    let info = s.info();
    assert!(!info.applied_migrations.is_empty());
    assert!(info.pending_migrations.is_empty());
}

async fn import_maps_file_statuses_and_gate_skips(c: &Ctx) {
    let s = &*c.store;
    let mut tasks = Vec::new();
    for (id, st) in [
        ("a", None),
        ("b", Some(Status::Claimed)),
        ("c", Some(Status::InProgress)),
        ("d", Some(Status::Done)),
        ("e", Some(Status::Failed)),
        ("f", Some(Status::Skipped)),
        ("g", Some(Status::Blocked)),
        ("h", Some(Status::HumanLoop)),
    ] {
        let mut t = task(id, &[]);
        t.status = st;
        tasks.push(t);
    }
    tasks.push(task("child", &["d", "a"]));
    tasks.push(task("gated", &[]));
    let mut opts = ImportOptions {
        budget: Some(Usd::from_f64(7.0)),
        plan_id: Some("override".into()),
        default_max_attempts: 5,
        ..Default::default()
    };
    opts.skip
        .insert("gated".into(), "decision_gate_failed".into());
    let mut p = plan("file-id", tasks);
    p.budget_usd = Some(Usd::from_f64(1.0));
    let r = s.import_plan(&p, &opts).await.expect("import");
    assert_eq!(r.plan_id, "override");
    assert_eq!(r.skipped, vec!["gated"]);
    let got: Vec<(String, Status)> = s
        .list_tasks("override")
        .await
        .expect("list")
        .into_iter()
        .map(|t| (t.id, t.status))
        .collect();
    use Status::*;
    let want = [
        ("a", Pending),
        ("b", Pending),
        ("c", Pending),
        ("d", Done),
        ("e", Failed),
        ("f", Skipped),
        ("g", Blocked),
        ("h", HumanLoop),
        ("child", Pending),
        ("gated", Skipped),
    ];
    let want: Vec<(String, Status)> = want.iter().map(|(i, s)| (i.to_string(), *s)).collect();
    assert_eq!(got, want);
    let child = s.get_task("override", "child").await.expect("child");
    assert_eq!(child.pending_deps, 1, "only the non-DONE parent counts");
    assert_eq!(child.max_attempts, 5);
    let gated = s.get_task("override", "gated").await.expect("gated");
    assert_eq!(gated.reason.as_deref(), Some("decision_gate_failed"));
    let ev = s
        .events(&EventFilter {
            task_id: Some("gated".into()),
            ..Default::default()
        })
        .await
        .expect("events");
    let types: Vec<_> = ev.iter().map(|e| e.event_type.as_str()).collect();
    assert_eq!(types, [et::TASK_CREATED, et::TASK_SKIPPED]);
    assert_eq!(ev[1].to_status, Some(Skipped));
    let pr = s.get_plan("override").await.expect("plan");
    assert_eq!(pr.budget, Some(Usd::from_f64(7.0)));
    assert!(pr.spec.tasks.is_empty());
    // Re-import: the gate's verdict alone changes nothing; a changed, unstarted gated task is
    // rewritten and leaves SKIPPED when the gate no longer skips it.
    let before = last_id(s).await;
    let mut again = opts.clone();
    again.skip.insert("a".into(), "gate".into());
    assert!(
        !s.import_plan(&p, &again)
            .await
            .expect("reimport")
            .changed_anything()
    );
    assert_eq!(last_id(s).await, before);
    let mut p2 = p.clone();
    if let Some(t) = p2.tasks.iter_mut().find(|t| t.id == "gated") {
        t.description = "fixed".into();
    }
    let mut no_gate = opts.clone();
    no_gate.skip.clear();
    let r = s.import_plan(&p2, &no_gate).await.expect("reimport");
    assert_eq!(r.updated, vec!["gated"]);
    let evs = events_after(s, before).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_type, et::TASK_UPDATED);
    assert_eq!(
        (evs[0].from_status, evs[0].to_status),
        (Some(Skipped), Some(Pending))
    );
    let gated = s.get_task("override", "gated").await.expect("gated");
    assert_eq!((gated.status, gated.reason), (Pending, None));
}

async fn every_leased_transition_writes_exactly_its_event(c: &Ctx) {
    let s = &*c.store;
    let mut tasks = Vec::new();
    for id in ["t1", "t2", "t3", "t4", "t5", "t6"] {
        let mut t = task(id, &[]);
        t.max_attempts = Some(2);
        tasks.push(t);
    }
    import(s, &plan("p", tasks)).await;

    // claim → start → complete
    let b = last_id(s).await;
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t1");
    assert_eq!((cl.lease.epoch, cl.task.attempts), (1, 1));
    assert_eq!(cl.task.status, Status::Claimed);
    assert_eq!(cl.task.worker_id.as_deref(), Some("w1"));
    assert!(cl.task.lease_expires_at.is_some());
    let e = one_event(s, b, et::TASK_CLAIMED, Status::Pending, Status::Claimed, 1).await;
    assert_eq!(e.worker_id.as_deref(), Some("w1"));
    let b = last_id(s).await;
    s.heartbeat(cl.lease, Duration::from_secs(60))
        .await
        .expect("heartbeat");
    assert_eq!(last_id(s).await, b, "heartbeats are not audit events");
    s.start(cl.lease, Some(Duration::from_secs(600)))
        .await
        .expect("start");
    one_event(
        s,
        b,
        et::TASK_STARTED,
        Status::Claimed,
        Status::InProgress,
        1,
    )
    .await;
    let t = s.get_task_by_pk(cl.lease.task_pk).await.expect("by pk");
    assert_eq!(t.status, Status::InProgress);
    assert!(t.deadline_at.is_some());
    let b = last_id(s).await;
    let done = s
        .complete(cl.lease, &Outcome::reason("verified"))
        .await
        .expect("complete");
    assert_eq!(done.status, Status::Done);
    assert_eq!(done.worker_id, None);
    assert_eq!(done.lease_expires_at, None);
    let e = one_event(s, b, et::TASK_DONE, Status::InProgress, Status::Done, 1).await;
    assert_eq!(e.payload["reason"], "verified");

    // fail(Retry) with attempts left → PENDING (task.retry); again → FAILED (task.failed)
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t2");
    let b = last_id(s).await;
    let t = s
        .fail(
            cl.lease,
            FailMode::Retry,
            &Outcome::reason("verification_failed"),
        )
        .await
        .expect("fail");
    assert_eq!((t.status, t.attempts), (Status::Pending, 1));
    assert_eq!(t.reason.as_deref(), Some("verification_failed"));
    one_event(s, b, et::TASK_RETRY, Status::Claimed, Status::Pending, 1).await;
    let cl = claim(s, &req("w1")).await;
    assert_eq!(
        (cl.task.id.as_str(), cl.lease.epoch, cl.task.attempts),
        ("t2", 2, 2)
    );
    let b = last_id(s).await;
    let t = s
        .fail(cl.lease, FailMode::Retry, &Outcome::reason("again"))
        .await
        .expect("fail");
    assert_eq!(t.status, Status::Failed, "max_attempts 2 reached");
    one_event(s, b, et::TASK_FAILED, Status::Claimed, Status::Failed, 2).await;

    // fail(Final) → FAILED at once
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t3");
    let b = last_id(s).await;
    let t = s
        .fail(cl.lease, FailMode::Final, &Outcome::reason("auth"))
        .await
        .expect("fail");
    assert_eq!((t.status, t.attempts), (Status::Failed, 1));
    one_event(s, b, et::TASK_FAILED, Status::Claimed, Status::Failed, 1).await;

    // release gives the attempt back
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t4");
    s.start(cl.lease, None).await.expect("start");
    let b = last_id(s).await;
    let t = s
        .release(cl.lease, &Outcome::reason("shutdown"))
        .await
        .expect("release");
    assert_eq!(
        (t.status, t.attempts, t.worker_id.clone()),
        (Status::Pending, 0, None)
    );
    let e = one_event(
        s,
        b,
        et::TASK_RELEASED,
        Status::InProgress,
        Status::Pending,
        1,
    )
    .await;
    assert_eq!(e.payload["reason"], "shutdown");

    // park: human loop and blocked
    let cl = claim(s, &req("w1")).await;
    assert_eq!(
        (cl.task.id.as_str(), cl.lease.epoch),
        ("t4", 2),
        "epoch grows across claims"
    );
    let b = last_id(s).await;
    let t = s
        .park(cl.lease, Park::HumanLoop, &Outcome::reason("review"))
        .await
        .expect("park");
    assert_eq!(t.status, Status::HumanLoop);
    one_event(
        s,
        b,
        et::TASK_HUMAN_LOOP,
        Status::Claimed,
        Status::HumanLoop,
        2,
    )
    .await;
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t5");
    let b = last_id(s).await;
    let t = s
        .park(cl.lease, Park::Blocked, &Outcome::reason("needs creds"))
        .await
        .expect("park");
    assert_eq!(t.status, Status::Blocked);
    one_event(s, b, et::TASK_BLOCKED, Status::Claimed, Status::Blocked, 1).await;

    // add_cost is an event but not a transition
    let cl = claim(s, &req("w1")).await;
    assert_eq!(cl.task.id, "t6");
    let b = last_id(s).await;
    s.add_cost(cl.lease, Usd(10)).await.expect("add_cost");
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_type, et::TASK_COST);
    assert_eq!(evs[0].epoch, Some(1));
}

async fn operator_transitions_write_their_events(c: &Ctx) {
    let s = &*c.store;
    import(
        s,
        &plan("p", vec![task("a", &[]), task("b", &[]), task("c", &[])]),
    )
    .await;
    // approve: HUMAN_LOOP → DONE
    let cl = claim(s, &req("w")).await;
    s.park(cl.lease, Park::HumanLoop, &Outcome::default())
        .await
        .expect("park");
    let b = last_id(s).await;
    let t = s
        .approve_task("p", "a", json!({"by": "me"}))
        .await
        .expect("approve");
    assert_eq!(t.status, Status::Done);
    let e = one_event(s, b, et::TASK_APPROVED, Status::HumanLoop, Status::Done, 1).await;
    assert_eq!(e.payload["by"], "me");
    // reject: BLOCKED → FAILED
    let cl = claim(s, &req("w")).await;
    s.park(cl.lease, Park::Blocked, &Outcome::default())
        .await
        .expect("park");
    let b = last_id(s).await;
    let t = s.reject_task("p", "b", json!({})).await.expect("reject");
    assert_eq!(t.status, Status::Failed);
    one_event(s, b, et::TASK_REJECTED, Status::Blocked, Status::Failed, 1).await;
    // reset: FAILED → PENDING, attempts 0, reason cleared
    let b = last_id(s).await;
    let t = s.reset_task("p", "b", "try again").await.expect("reset");
    assert_eq!(
        (t.status, t.attempts, t.reason.clone()),
        (Status::Pending, 0, None)
    );
    one_event(s, b, et::TASK_RESET, Status::Failed, Status::Pending, 1).await;
    // skip: PENDING → SKIPPED
    let b = last_id(s).await;
    let t = s.skip_task("p", "c", "not needed").await.expect("skip");
    assert_eq!(
        (t.status, t.reason.as_deref()),
        (Status::Skipped, Some("not needed"))
    );
    one_event(s, b, et::TASK_SKIPPED, Status::Pending, Status::Skipped, 0).await;
    // pause / resume
    let b = last_id(s).await;
    s.set_plan_paused("p", true).await.expect("pause");
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_type, et::PLAN_PAUSED);
    assert!(s.get_plan("p").await.expect("plan").paused);
    let b = last_id(s).await;
    s.set_plan_paused("p", false).await.expect("resume");
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0].event_type, et::PLAN_RESUMED);
    assert!(matches!(
        s.skip_task("p", "zz", "x").await,
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.set_plan_paused("zz", true).await,
        Err(StoreError::NotFound { .. })
    ));
}

async fn illegal_transitions_are_refused_without_events(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[]), task("b", &[])])).await;
    let cl = claim(s, &req("w")).await;
    s.complete(cl.lease, &Outcome::default())
        .await
        .expect("complete");
    let b = last_id(s).await;
    let snapshot = s.list_tasks("p").await.expect("list");
    assert!(
        matches!(
            s.skip_task("p", "a", "x").await,
            Err(StoreError::Illegal { .. })
        ),
        "skip a DONE task"
    );
    assert!(
        matches!(
            s.approve_task("p", "b", json!({})).await,
            Err(StoreError::Illegal { .. })
        ),
        "approve PENDING"
    );
    assert!(
        matches!(
            s.reject_task("p", "a", json!({})).await,
            Err(StoreError::Illegal { .. })
        ),
        "reject DONE"
    );
    // A lease on a PENDING task (never claimed at that epoch) is stale, whatever it asks.
    let bpk = s.get_task("p", "b").await.expect("b").pk;
    let fake = Lease {
        task_pk: bpk,
        epoch: 0,
    };
    assert!(matches!(
        s.complete(fake, &Outcome::default()).await,
        Err(StoreError::Stale { .. })
    ));
    assert!(matches!(
        s.start(fake, None).await,
        Err(StoreError::Stale { .. })
    ));
    // start twice: the second is illegal (IN_PROGRESS → start).
    let cl = claim(s, &req("w")).await;
    s.start(cl.lease, None).await.expect("start");
    let b2 = last_id(s).await;
    assert!(matches!(
        s.start(cl.lease, None).await,
        Err(StoreError::Illegal { .. })
    ));
    assert!(
        matches!(
            s.reset_task("p", "b", "x").await,
            Err(StoreError::Illegal { .. })
        ),
        "reset leased"
    );
    assert_eq!(last_id(s).await, b2, "refusals write no events");
    assert_eq!(
        events_after(s, b).await.len(),
        2,
        "only the claim and start since the snapshot"
    );
    let a_now = s.get_task("p", "a").await.expect("a");
    assert_eq!(a_now, snapshot[0], "refused moves leave the row untouched");
}

async fn dependencies_unblock_and_reblock(c: &Ctx) {
    let s = &*c.store;
    let mut a = task("A", &[]);
    a.priority = Priority::Low;
    import(
        s,
        &plan(
            "p",
            vec![a, task("B", &[]), task("C", &["A", "B"]), task("D", &["C"])],
        ),
    )
    .await;
    let first = claim(s, &req("w")).await;
    let second = claim(s, &req("w")).await;
    assert_eq!(
        (first.task.id.as_str(), second.task.id.as_str()),
        ("B", "A")
    );
    assert!(
        s.claim(&req("w")).await.expect("claim").is_none(),
        "C waits for A and B"
    );
    s.complete(second.lease, &Outcome::default())
        .await
        .expect("A done");
    assert_eq!(s.get_task("p", "C").await.expect("C").pending_deps, 1);
    assert!(
        s.claim(&req("w")).await.expect("claim").is_none(),
        "C still waits for B"
    );
    s.complete(first.lease, &Outcome::default())
        .await
        .expect("B done");
    assert_eq!(s.get_task("p", "C").await.expect("C").pending_deps, 0);
    // Moving a parent out of DONE re-blocks the child.
    s.reset_task("p", "A", "redo").await.expect("reset A");
    assert_eq!(s.get_task("p", "C").await.expect("C").pending_deps, 1);
    let again = claim(s, &req("w")).await;
    assert_eq!(again.task.id, "A", "C is blocked again, A is ready");
    // Parking is not DONE: children stay blocked; approval unblocks them.
    s.park(again.lease, Park::HumanLoop, &Outcome::default())
        .await
        .expect("park");
    assert!(s.claim(&req("w")).await.expect("claim").is_none());
    s.approve_task("p", "A", json!({})).await.expect("approve");
    let c_claim = claim(s, &req("w")).await;
    assert_eq!(c_claim.task.id, "C");
    assert_eq!(s.get_task("p", "D").await.expect("D").pending_deps, 1);
    s.complete(c_claim.lease, &Outcome::default())
        .await
        .expect("C done");
    assert_eq!(claim(s, &req("w")).await.task.id, "D");
}

async fn claim_order_is_priority_then_id_and_skips_paused_plans(c: &Ctx) {
    let s = &*c.store;
    let mk = |id: &str, p: Priority| TaskSpec {
        priority: p,
        ..task(id, &[])
    };
    import(
        s,
        &plan(
            "p",
            vec![
                mk("b-low", Priority::Low),
                mk("z-crit", Priority::Critical),
                mk("a-med", Priority::Medium),
                mk("a-crit", Priority::Critical),
                mk("m-high", Priority::High),
            ],
        ),
    )
    .await;
    import(s, &plan("q", vec![mk("0-crit-q", Priority::Critical)])).await;
    s.set_plan_paused("q", true).await.expect("pause q");
    let mut order = Vec::new();
    while let Some(cl) = s.claim(&req("w")).await.expect("claim") {
        order.push(cl.task.id.clone());
    }
    assert_eq!(order, ["a-crit", "z-crit", "m-high", "a-med", "b-low"]);
    s.set_plan_paused("q", false).await.expect("resume q");
    let mut only_p = req("w");
    only_p.plan_id = Some("p".into());
    assert!(
        s.claim(&only_p).await.expect("claim").is_none(),
        "plan filter"
    );
    assert_eq!(claim(s, &req("w")).await.task.id, "0-crit-q");
}

async fn claims_respect_tags_and_exclusions(c: &Ctx) {
    let s = &*c.store;
    let gpu = TaskSpec {
        tags: vec!["gpu".into(), "linux".into()],
        ..task("a-gpu", &[])
    };
    import(s, &plan("p", vec![gpu, task("b", &[])])).await;
    let mut plain = req("w");
    let b_pk = s.get_task("p", "b").await.expect("b").pk;
    plain.exclude = vec![b_pk];
    assert!(
        s.claim(&plain).await.expect("claim").is_none(),
        "a-gpu needs tags, b excluded"
    );
    let mut partial = req("w");
    partial.tags = vec!["gpu".into()];
    assert_eq!(
        claim(s, &partial).await.task.id,
        "b",
        "a-gpu needs both tags"
    );
    let mut full = req("w");
    full.tags = vec!["linux".into(), "gpu".into(), "x".into()];
    assert_eq!(claim(s, &full).await.task.id, "a-gpu");
}

/// Rate-limited (or full) agents: their tasks are not handed out, unless the plan names a
/// fallback agent that is free. Both claim paths: the plain one and the one with a budget.
async fn claims_skip_tasks_of_blocked_agents(c: &Ctx) {
    let s = &*c.store;
    let on = |id: &str, agent: Option<&str>| TaskSpec {
        agent: agent.map(str::to_string),
        ..task(id, &[])
    };
    import(
        s,
        &plan(
            "p",
            vec![
                on("a", Some("claude")),
                on("b", None),
                on("c", Some("codex")),
            ],
        ),
    )
    .await;
    let blocked = |plan: &str, default: &str, agents: &[&str]| {
        let mut r = req("w");
        r.plan_id = Some(plan.into());
        r.default_agent = default.into();
        r.blocked_agents = agents.iter().map(|a| a.to_string()).collect();
        r
    };
    // b runs on the worker's default agent, which is blocked too: nothing.
    let none = blocked("p", "claude", &["claude", "codex"]);
    assert!(s.claim(&none).await.expect("claim").is_none());
    assert_eq!(
        claim(s, &blocked("p", "gemini", &["claude", "codex"]))
            .await
            .task
            .id,
        "b"
    );
    assert_eq!(
        claim(s, &blocked("p", "gemini", &["claude"])).await.task.id,
        "c"
    );
    let a = claim(s, &blocked("p", "gemini", &[])).await;
    assert_eq!((a.task.id.as_str(), a.agent.as_str()), ("a", "claude"));

    // The plan's agent counts before the default; a free fallback lets its tasks through.
    let mut q = plan("q", vec![on("d", None)]);
    q.agent = Some("claude".into());
    q.extra
        .insert("fallback_agents".into(), serde_json::json!(["codex"]));
    import(s, &q).await;
    assert!(
        s.claim(&blocked("q", "gemini", &["claude", "codex"]))
            .await
            .expect("claim")
            .is_none()
    );
    let d = claim(s, &blocked("q", "gemini", &["claude"])).await;
    assert_eq!(d.task.id, "d");
    assert_eq!(d.agent, "codex", "the fallback the claim chose");

    // A plan with a budget takes the full claim path on Postgres.
    let mut r = plan("r", vec![on("e", Some("claude"))]);
    r.budget_usd = Some(whilly::domain::Usd::from_f64(10.0));
    import(s, &r).await;
    assert!(
        s.claim(&blocked("r", "gemini", &["claude"]))
            .await
            .expect("claim")
            .is_none()
    );
    assert_eq!(
        claim(s, &blocked("r", "gemini", &["codex"])).await.task.id,
        "e"
    );
}

async fn budget_reservation_is_exact_under_concurrent_claims(c: &Ctx) {
    let s = c.store.clone();
    let tasks: Vec<_> = (0..20).map(|i| task(&format!("t{i:02}"), &[])).collect();
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(5.0)),
        ..Default::default()
    };
    s.import_plan(&plan("p", tasks), &opts)
        .await
        .expect("import");
    let mut handles = Vec::new();
    for w in 0..8 {
        let s = s.clone();
        handles.push(tokio::spawn(async move {
            let mut r = req(&format!("w{w}"));
            r.default_estimate = Usd::from_f64(1.0);
            let mut got = Vec::new();
            while let Some(cl) = s.claim(&r).await.expect("claim") {
                got.push(cl);
            }
            got
        }));
    }
    let mut claimed = Vec::new();
    for h in handles {
        claimed.extend(h.await.expect("join"));
    }
    assert_eq!(claimed.len(), 5, "budget for exactly 5 estimates");
    let ids: HashSet<_> = claimed.iter().map(|c| c.task.id.clone()).collect();
    assert_eq!(ids.len(), 5, "no task handed out twice");
    let p = s.get_plan("p").await.expect("plan");
    assert_eq!((p.reserved, p.spent), (Usd::from_f64(5.0), Usd::ZERO));
    // Settling converts reservations into spend; the budget is never exceeded.
    let mut r = req("w");
    r.default_estimate = Usd::from_f64(1.0);
    for (i, cl) in claimed.iter().enumerate() {
        let cost = Usd::from_f64(0.4 + 0.1 * i as f64);
        s.complete(
            cl.lease,
            &Outcome {
                cost,
                ..Default::default()
            },
        )
        .await
        .expect("complete");
        let p = s.get_plan("p").await.expect("plan");
        assert!(p.spent + p.reserved <= Usd::from_f64(5.0), "{p:?}");
    }
    let p = s.get_plan("p").await.expect("plan");
    assert_eq!(p.reserved, Usd::ZERO);
    assert_eq!(p.spent, Usd::from_f64(0.4 + 0.5 + 0.6 + 0.7 + 0.8));
    // 3.0 spent: two more $1 estimates fit, a third does not.
    let more: Vec<_> = [s.claim(&r).await, s.claim(&r).await, s.claim(&r).await]
        .into_iter()
        .map(|x| x.expect("claim").is_some())
        .collect();
    assert_eq!(more, [true, true, false]);
}

async fn budget_lets_a_cheaper_task_through(c: &Ctx) {
    let s = &*c.store;
    let big = TaskSpec {
        budget_usd: Some(Usd::from_f64(3.0)),
        priority: Priority::Critical,
        ..task("big", &[])
    };
    let small = TaskSpec {
        budget_usd: Some(Usd::from_f64(0.5)),
        priority: Priority::Low,
        ..task("small", &[])
    };
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(1.0)),
        ..Default::default()
    };
    s.import_plan(&plan("p", vec![big, small]), &opts)
        .await
        .expect("import");
    let cl = claim(s, &req("w")).await;
    assert_eq!(cl.task.id, "small");
    assert_eq!(cl.task.reserved, Usd::from_f64(0.5));
    assert!(s.claim(&req("w")).await.expect("claim").is_none());
    // Exhausted plans hand out no "free" (zero-estimate) work either.
    s.complete(
        cl.lease,
        &Outcome {
            cost: Usd::from_f64(1.0),
            ..Default::default()
        },
    )
    .await
    .expect("done");
    s.reset_task("p", "small", "again").await.expect("reset");
    assert!(s.claim(&req("w")).await.expect("claim").is_none());
}

async fn cost_settles_without_double_counting(c: &Ctx) {
    let s = &*c.store;
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(10.0)),
        ..Default::default()
    };
    s.import_plan(&plan("p", vec![task("a", &[]), task("b", &[])]), &opts)
        .await
        .expect("import");
    let mut r = req("w");
    r.default_estimate = Usd::from_f64(2.0);
    let cl = claim(s, &r).await;
    let p = s
        .add_cost(cl.lease, Usd::from_f64(0.3))
        .await
        .expect("add_cost");
    assert_eq!(
        (p.spent, p.reserved),
        (Usd::from_f64(0.3), Usd::from_f64(2.0))
    );
    let t = s
        .complete(
            cl.lease,
            &Outcome {
                cost: Usd::from_f64(0.2),
                ..Default::default()
            },
        )
        .await
        .expect("done");
    assert_eq!((t.cost, t.reserved), (Usd::from_f64(0.5), Usd::ZERO));
    let p = s.get_plan("p").await.expect("plan");
    assert_eq!((p.spent, p.reserved), (Usd::from_f64(0.5), Usd::ZERO));
    // Release and park settle too.
    let cl = claim(s, &r).await;
    let t = s
        .release(
            cl.lease,
            &Outcome {
                cost: Usd::from_f64(0.1),
                ..Default::default()
            },
        )
        .await
        .expect("release");
    assert_eq!((t.cost, t.reserved), (Usd::from_f64(0.1), Usd::ZERO));
    let p = s.get_plan("p").await.expect("plan");
    assert_eq!((p.spent, p.reserved), (Usd::from_f64(0.6), Usd::ZERO));
    let e = all_events(s)
        .await
        .into_iter()
        .rfind(|e| e.event_type == et::TASK_RELEASED)
        .expect("released");
    assert_eq!(e.payload["cost_usd"], 0.1);
}

async fn stale_leases_change_nothing(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[])])).await;
    let old = claim(s, &short("sleepy")).await;
    s.start(old.lease, None).await.expect("start");
    let r = reap_until_something(s).await;
    assert_eq!(r.requeued, vec!["a"]);
    let new = claim(s, &req("fresh")).await;
    assert_eq!(new.lease.epoch, old.lease.epoch + 1);
    let before = s.get_task("p", "a").await.expect("task");
    let plan_before = s.get_plan("p").await.expect("plan");
    let b = last_id(s).await;
    let o = Outcome {
        cost: Usd(5),
        ..Default::default()
    };
    let stale = |r: &StoreResult<_>| matches!(r, Err(StoreError::Stale { task_pk, epoch }) if *task_pk == old.lease.task_pk && *epoch == old.lease.epoch);
    assert!(stale(
        &s.heartbeat(old.lease, Duration::from_secs(60)).await
    ));
    assert!(stale(&s.start(old.lease, None).await));
    assert!(stale(&s.complete(old.lease, &o).await.map(|_| ())));
    assert!(stale(
        &s.fail(old.lease, FailMode::Retry, &o).await.map(|_| ())
    ));
    assert!(stale(
        &s.fail(old.lease, FailMode::Final, &o).await.map(|_| ())
    ));
    assert!(stale(&s.release(old.lease, &o).await.map(|_| ())));
    assert!(stale(
        &s.park(old.lease, Park::Blocked, &o).await.map(|_| ())
    ));
    assert!(stale(&s.add_cost(old.lease, Usd(5)).await.map(|_| ())));
    assert_eq!(last_id(s).await, b, "stale writes write no events");
    assert_eq!(s.get_task("p", "a").await.expect("task"), before);
    assert_eq!(s.get_plan("p").await.expect("plan"), plan_before);
    // The new holder is unaffected.
    s.complete(new.lease, &Outcome::default())
        .await
        .expect("the current lease works");
}

async fn operator_skip_fences_the_worker(c: &Ctx) {
    let s = &*c.store;
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(5.0)),
        ..Default::default()
    };
    s.import_plan(&plan("p", vec![task("a", &[])]), &opts)
        .await
        .expect("import");
    let mut r = req("w");
    r.default_estimate = Usd::from_f64(1.0);
    let cl = claim(s, &r).await;
    let b = last_id(s).await;
    let t = s.skip_task("p", "a", "operator").await.expect("skip");
    assert_eq!(t.status, Status::Skipped);
    assert!(
        t.epoch > cl.lease.epoch,
        "the epoch moves so the worker is fenced out"
    );
    let e = one_event(
        s,
        b,
        et::TASK_SKIPPED,
        Status::Claimed,
        Status::Skipped,
        t.epoch,
    )
    .await;
    assert_eq!(e.payload["reason"], "operator");
    assert_eq!(
        s.get_plan("p").await.expect("plan").reserved,
        Usd::ZERO,
        "reservation released"
    );
    assert!(matches!(
        s.complete(cl.lease, &Outcome::default()).await,
        Err(StoreError::Stale { .. })
    ));
    assert_eq!(status(s, "p", "a").await, Status::Skipped);
}

async fn reaper_requeues_and_fails_on_lease_expiry(c: &Ctx) {
    // A lost lease is not the task's failure: the attempt is given back, and losses have their
    // own limit (three times the attempts), so a task whose every worker dies still ends.
    let s = &*c.store;
    let once = TaskSpec {
        max_attempts: Some(1),
        ..task("b-once", &[])
    };
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(5.0)),
        ..Default::default()
    };
    s.import_plan(&plan("p", vec![task("a", &[]), once]), &opts)
        .await
        .expect("import");
    let mut r = short("gone");
    r.default_estimate = Usd::from_f64(1.0);
    let a = claim(s, &r).await;
    let b = claim(s, &r).await;
    assert_eq!((a.task.id.as_str(), b.task.id.as_str()), ("a", "b-once"));
    s.heartbeat(a.lease, Duration::from_millis(200))
        .await
        .expect("heartbeat");
    let before = last_id(s).await;
    let rep = reap_until(s, |r| r.requeued.len() + r.failed.len() == 2).await;
    let mut requeued = rep.requeued.clone();
    requeued.sort();
    assert_eq!(
        (requeued, rep.failed.clone()),
        (vec!["a".to_string(), "b-once".to_string()], vec![])
    );
    let ta = s.get_task("p", "a").await.expect("a");
    assert_eq!(
        (ta.status, ta.attempts, ta.reason.as_deref()),
        (Status::Pending, 0, Some("lease_expired"))
    );
    assert_eq!((ta.worker_id.clone(), ta.lease_expires_at), (None, None));
    let tb = s.get_task("p", "b-once").await.expect("b");
    assert_eq!((tb.status, tb.attempts), (Status::Pending, 0));
    assert_eq!(s.get_plan("p").await.expect("plan").reserved, Usd::ZERO);
    let evs = events_after(s, before).await;
    assert_eq!(evs.len(), 2);
    for e in &evs {
        assert_eq!(e.event_type, et::TASK_LEASE_EXPIRED);
        assert_eq!(e.worker_id.as_deref(), Some("gone"));
        assert_eq!(e.epoch, Some(1));
    }
    // The attempt was given back: the next claim is attempt 1 again.
    let again = claim(s, &req("w")).await;
    assert_eq!((again.task.id.as_str(), again.task.attempts), ("a", 1));
    // b-once (one attempt) loses its worker twice more: the third loss ends it.
    for round in 2..=3 {
        let mut only_b = short("gone");
        only_b.exclude = vec![again.lease.task_pk];
        let cl = claim(s, &only_b).await;
        assert_eq!(cl.task.id, "b-once");
        let rep = reap_until(s, |r| !r.requeued.is_empty() || !r.failed.is_empty()).await;
        let tb = s.get_task("p", "b-once").await.expect("b");
        if round < 3 {
            assert_eq!(
                (tb.status, rep.requeued.clone()),
                (Status::Pending, vec!["b-once".to_string()])
            );
        } else {
            assert_eq!(
                (tb.status, rep.failed.clone()),
                (Status::Failed, vec!["b-once".to_string()])
            );
        }
    }
}

async fn reaper_handles_deadlines(c: &Ctx) {
    let s = &*c.store;
    let once = TaskSpec {
        max_attempts: Some(1),
        ..task("b-once", &[])
    };
    import(s, &plan("p", vec![task("a", &[]), once])).await;
    let a = claim(s, &req("w")).await;
    let b = claim(s, &req("w")).await;
    s.start(a.lease, Some(Duration::from_millis(200)))
        .await
        .expect("start a");
    s.start(b.lease, Some(Duration::from_millis(200)))
        .await
        .expect("start b");
    let before = last_id(s).await;
    let rep = reap_until(s, |r| r.timed_out.len() + r.failed.len() == 2).await;
    assert_eq!(rep.timed_out, vec!["a"]);
    assert_eq!(rep.failed, vec!["b-once"]);
    assert!(rep.requeued.is_empty());
    let ta = s.get_task("p", "a").await.expect("a");
    assert_eq!(
        (ta.status, ta.attempts, ta.reason.as_deref()),
        (Status::Pending, 1, Some("deadline_passed"))
    );
    assert_eq!(ta.deadline_at, None);
    assert_eq!(status(s, "p", "b-once").await, Status::Failed);
    let evs = events_after(s, before).await;
    assert_eq!(evs.len(), 2);
    assert!(
        evs.iter().all(|e| e.event_type == et::TASK_DEADLINE_PASSED
            && e.from_status == Some(Status::InProgress))
    );
    assert!(matches!(
        s.complete(a.lease, &Outcome::default()).await,
        Err(StoreError::Stale { .. })
    ));
}

async fn concurrent_reapers_change_each_row_once(c: &Ctx) {
    let s = c.store.clone();
    let other = c.second_store().await;
    let n = 24;
    let tasks: Vec<_> = (0..n).map(|i| task(&format!("t{i:02}"), &[])).collect();
    import(&*s, &plan("p", tasks)).await;
    for _ in 0..n {
        claim(&*s, &short("gone")).await;
    }
    let before = last_id(&*s).await;
    // Four reapers on two handles race over the same expiring rows until all are back.
    let total = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut handles = Vec::new();
    for st in [s.clone(), other.clone(), s.clone(), other.clone()] {
        let total = total.clone();
        handles.push(tokio::spawn(async move {
            let end = Instant::now() + Duration::from_secs(10);
            let mut mine = Vec::new();
            while total.load(std::sync::atomic::Ordering::SeqCst) < n && Instant::now() < end {
                let r = st.reap().await.expect("reap");
                total.fetch_add(r.requeued.len(), std::sync::atomic::Ordering::SeqCst);
                mine.extend(r.requeued);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            mine
        }));
    }
    let mut requeued = Vec::new();
    for h in handles {
        requeued.extend(h.await.expect("join"));
    }
    requeued.sort();
    let distinct: HashSet<_> = requeued.iter().cloned().collect();
    assert_eq!(distinct.len(), n);
    assert_eq!(requeued.len(), n, "every row requeued exactly once");
    let evs = events_after(&*s, before).await;
    let mut per_task: BTreeMap<String, usize> = BTreeMap::new();
    for e in &evs {
        assert_eq!(e.event_type, et::TASK_LEASE_EXPIRED);
        *per_task
            .entry(e.task_id.clone().unwrap_or_default())
            .or_default() += 1;
    }
    assert!(per_task.values().all(|&k| k == 1), "{per_task:?}");
    assert_eq!(per_task.len(), n);
    other.close().await;
}

async fn reimport_is_idempotent(c: &Ctx) {
    let s = &*c.store;
    let p = plan("p", vec![task("a", &[]), task("b", &["a"])]);
    import(s, &p).await;
    let b = last_id(s).await;
    let rows_before = s.list_tasks("p").await.expect("list");
    let r = import(s, &p).await;
    assert!(!r.changed_anything(), "{r:?}");
    assert_eq!(r.unchanged, vec!["a", "b"]);
    assert_eq!(last_id(s).await, b, "an unchanged plan writes no events");
    assert_eq!(
        s.list_tasks("p").await.expect("list"),
        rows_before,
        "nor touches rows"
    );
}

async fn reimport_updates_unstarted_and_keeps_started(c: &Ctx) {
    let s = &*c.store;
    let p = plan(
        "p",
        vec![
            task("a", &[]),
            task("b", &[]),
            task("c", &[]),
            task("gone", &[]),
        ],
    );
    import(s, &p).await;
    let cl = claim(s, &req("w")).await;
    assert_eq!(cl.task.id, "a");
    let mut p2 = plan(
        "p",
        vec![
            task("a", &[]),
            task("b", &["c"]),
            task("c", &[]),
            task("new", &["b"]),
        ],
    );
    p2.tasks[0].description = "changed while running".into();
    p2.tasks[1].description = "changed before start".into();
    p2.tasks[1].priority = Priority::High;
    p2.budget_usd = Some(Usd::from_f64(3.0));
    let b = last_id(s).await;
    let r = import(s, &p2).await;
    assert!(r.plan_changed);
    assert_eq!(r.updated, vec!["b"]);
    assert_eq!(r.kept_started, vec!["a"]);
    assert_eq!(r.unchanged, vec!["c"]);
    assert_eq!(r.created, vec!["new"]);
    assert_eq!(r.missing_from_file, vec!["gone"]);
    let evs = events_after(s, b).await;
    let types: Vec<_> = evs
        .iter()
        .map(|e| (e.event_type.as_str(), e.task_id.as_deref()))
        .collect();
    assert_eq!(
        types,
        [
            (et::PLAN_UPDATED, None),
            (et::TASK_UPDATED, Some("b")),
            (et::TASK_CREATED, Some("new"))
        ]
    );
    let changed = evs[1].payload["fields"]
        .as_array()
        .expect("changed list")
        .clone();
    for f in ["description", "priority", "dependencies"] {
        assert!(changed.contains(&json!(f)), "{f} in {changed:?}");
    }
    let tb = s.get_task("p", "b").await.expect("b");
    assert_eq!(
        (tb.priority, tb.pending_deps, tb.spec.description.as_str()),
        (Priority::High, 1, "changed before start")
    );
    assert_eq!(s.get_task("p", "new").await.expect("new").pending_deps, 1);
    let ta = s.get_task("p", "a").await.expect("a");
    assert_eq!(ta.spec.description, "do a", "a started: its spec stays");
    assert_eq!(ta.status, Status::Claimed);
    assert_eq!(
        s.get_plan("p").await.expect("plan").budget,
        Some(Usd::from_f64(3.0))
    );
    assert_eq!(status(s, "p", "gone").await, Status::Pending, "left alone");
}

async fn export_import_export_round_trips(c: &Ctx) {
    let s = &*c.store;
    let mut p = plan(
        "p",
        vec![
            TaskSpec {
                priority: Priority::High,
                key_files: vec!["src/a.rs".into()],
                acceptance_criteria: vec!["works".into()],
                tags: vec!["gpu".into()],
                budget_usd: Some(Usd::from_f64(0.25)),
                timeout_secs: Some(60),
                max_attempts: Some(4),
                ..task("z-first", &[])
            },
            task("a-second", &["z-first"]),
            task("m-third", &[]),
        ],
    );
    p.tasks[0]
        .extra
        .insert("custom".into(), json!({"k": [1, 2]}));
    p.extra.insert("prd_file".into(), json!("PRD.md"));
    p.agent = Some("claude".into());
    p.budget_usd = Some(Usd::from_f64(9.0));
    import(s, &p).await;
    let mut gpu = req("w");
    gpu.tags = vec!["gpu".into()];
    let cl = claim(s, &gpu).await;
    assert_eq!(cl.task.id, "z-first");
    s.complete(cl.lease, &Outcome::default())
        .await
        .expect("done");
    s.skip_task("p", "m-third", "no").await.expect("skip");
    let e1 = s.export_plan("p").await.expect("export");
    let ids: Vec<_> = e1.tasks.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, ["z-first", "a-second", "m-third"], "file order");
    let st: Vec<_> = e1.tasks.iter().map(|t| t.status).collect();
    assert_eq!(
        st,
        [
            Some(Status::Done),
            Some(Status::Pending),
            Some(Status::Skipped)
        ]
    );
    let mut expected = p.clone();
    for (t, s) in expected.tasks.iter_mut().zip(&st) {
        t.status = *s;
    }
    assert_eq!(
        e1, expected,
        "export gives back what was imported, with live statuses"
    );
    let mut e1b = e1.clone();
    e1b.id = "copy".into();
    import(s, &e1b).await;
    let mut e2 = s.export_plan("copy").await.expect("export copy");
    e2.id = "p".into();
    assert_eq!(e2, e1);
    // Re-importing the export into the same plan changes nothing.
    let b = last_id(s).await;
    assert!(!import(s, &e1).await.changed_anything());
    assert_eq!(last_id(s).await, b);
}

async fn plan_reset_keep_and_hard(c: &Ctx) {
    let s = &*c.store;
    let opts = ImportOptions {
        budget: Some(Usd::from_f64(5.0)),
        ..Default::default()
    };
    let p = plan("p", vec![task("a", &[]), task("b", &["a"]), task("c", &[])]);
    s.import_plan(&p, &opts).await.expect("import");
    let cl = claim(s, &req("w")).await;
    let b = last_id(s).await;
    let refused = s.reset_plan("p", ResetMode::KeepTasks).await;
    assert!(
        matches!(&refused, Err(StoreError::Refused { task_id, .. }) if task_id == "a"),
        "{refused:?}"
    );
    assert_eq!(last_id(s).await, b, "a refused reset writes nothing");
    let o = Outcome {
        cost: Usd::from_f64(1.0),
        ..Default::default()
    };
    s.complete(cl.lease, &o).await.expect("done");
    let b = last_id(s).await;
    s.reset_plan("p", ResetMode::KeepTasks)
        .await
        .expect("reset keep");
    let evs = events_after(s, b).await;
    let kinds: Vec<_> = evs
        .iter()
        .map(|e| (e.event_type.as_str(), e.task_id.as_deref()))
        .collect();
    assert_eq!(
        kinds,
        [(et::TASK_RESET, Some("a")), (et::PLAN_RESET, None)],
        "only moved tasks get task.reset"
    );
    assert_eq!(
        (evs[0].from_status, evs[0].to_status),
        (Some(Status::Done), Some(Status::Pending))
    );
    assert_eq!(evs[1].payload["hard"], false);
    let tasks = s.list_tasks("p").await.expect("list");
    assert!(
        tasks
            .iter()
            .all(|t| t.status == Status::Pending && t.attempts == 0 && t.cost == Usd::ZERO)
    );
    assert_eq!(tasks[1].pending_deps, 1, "b waits for a again");
    let pr = s.get_plan("p").await.expect("plan");
    assert_eq!((pr.spent, pr.reserved), (Usd::ZERO, Usd::ZERO));
    // A hard reset deletes tasks even under a lease; the old holder is then stale.
    let mut r = req("w");
    r.default_estimate = Usd::from_f64(1.0);
    let held = claim(s, &r).await;
    let b = last_id(s).await;
    s.reset_plan("p", ResetMode::Hard)
        .await
        .expect("reset hard");
    assert!(s.list_tasks("p").await.expect("list").is_empty());
    let pr = s.get_plan("p").await.expect("the plan row stays");
    assert_eq!((pr.spent, pr.reserved), (Usd::ZERO, Usd::ZERO));
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].event_type.as_str(), evs[0].payload["hard"].clone()),
        (et::PLAN_RESET, json!(true))
    );
    assert!(matches!(
        s.complete(held.lease, &Outcome::default()).await,
        Err(StoreError::Stale { .. })
    ));
    assert!(all_events(s).await.len() > 6, "history stays");
    // The plan can be filled again from its file.
    assert_eq!(import(s, &p).await.created.len(), 3);
}

async fn events_are_append_only(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[])])).await;
    let n = all_events(s).await.len();
    let upd = c.raw_exec("UPDATE events SET event_type = 'forged'").await;
    assert!(upd.is_err(), "UPDATE on events must fail: {upd:?}");
    let del = c.raw_exec("DELETE FROM events").await;
    assert!(del.is_err(), "DELETE on events must fail: {del:?}");
    let evs = all_events(s).await;
    assert_eq!(evs.len(), n);
    assert!(evs.iter().all(|e| e.event_type != "forged"));
}

async fn mirror_gets_one_line_per_event(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[]), task("b", &[])])).await;
    let cl = claim(s, &req("w")).await;
    s.start(cl.lease, None).await.expect("start");
    s.complete(cl.lease, &Outcome::default())
        .await
        .expect("done");
    // Refused and stale writes mirror nothing.
    let _ = s.complete(cl.lease, &Outcome::default()).await;
    let evs = all_events(s).await;
    let text = std::fs::read_to_string(&c.mirror).expect("mirror file");
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(lines.len(), evs.len());
    for (l, e) in lines.iter().zip(&evs) {
        assert_eq!(l["id"], e.id);
        assert_eq!(l["event_type"], e.event_type);
        assert_eq!(l["task_id"], json!(e.task_id));
        assert_eq!(l["to"], json!(e.to_status.map(|s| s.as_str())));
        for k in ["ts", "plan_id", "worker_id", "epoch", "from", "payload"] {
            assert!(l.get(k).is_some(), "{k} missing in {l}");
        }
    }
}

async fn wait_for_work_wakes_on_new_work(c: &Ctx) {
    let s = c.store.clone();
    import(&*s, &plan("p", vec![task("a", &[]), task("b", &["a"])])).await;
    let cl = claim(&*s, &req("w")).await;
    assert!(s.claim(&req("w")).await.expect("claim").is_none());
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            s.wait_for_work(Duration::from_secs(20)).await;
            t0.elapsed()
        })
    };
    tokio::task::yield_now().await;
    s.complete(cl.lease, &Outcome::default())
        .await
        .expect("done");
    let waited = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken well before max_wait")
        .expect("join");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!(claim(&*s, &req("w")).await.task.id, "b");
    // With nothing happening, it returns after max_wait.
    let t0 = Instant::now();
    s.wait_for_work(Duration::from_millis(300)).await;
    assert!(t0.elapsed() < Duration::from_secs(5));
}

async fn workers_register_heartbeat_and_leave(c: &Ctx) {
    let s = &*c.store;
    let now = chrono::Utc::now();
    let w = WorkerRecord {
        id: "w1".into(),
        host: "box".into(),
        slots: 3,
        tags: vec!["gpu".into()],
        started_at: now,
        heartbeat_at: now,
        offline: false,
    };
    s.register_worker(&w).await.expect("register");
    s.register_worker(&WorkerRecord {
        slots: 4,
        ..w.clone()
    })
    .await
    .expect("re-register (upsert)");
    let all = s.list_workers().await.expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(
        (all[0].slots, all[0].tags.clone(), all[0].host.as_str()),
        (4, vec!["gpu".to_string()], "box")
    );
    let first_beat = all[0].heartbeat_at;
    let moved = eventually(Duration::from_secs(5), || async move {
        s.worker_heartbeat("w1").await.expect("heartbeat");
        s.list_workers().await.expect("list")[0].heartbeat_at > first_beat
    })
    .await;
    assert!(moved, "heartbeat_at follows the database clock");
    assert!(s.worker_heartbeat("nobody").await.is_err());
    s.remove_worker("w1").await.expect("remove");
    assert!(s.list_workers().await.expect("list").is_empty());
}

async fn append_event_and_filters(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[])])).await;
    import(s, &plan("q", vec![task("a", &[])])).await;
    let e = s
        .append_event(NewEvent {
            event_type: et::BUDGET_WARNING.into(),
            plan_id: Some("p".into()),
            payload: json!({"pct": 80}),
            ..Default::default()
        })
        .await
        .expect("append");
    assert_eq!(e.event_type, et::BUDGET_WARNING);
    assert_eq!(e.from_status, None);
    let all = all_events(s).await;
    assert_eq!(all.last(), Some(&e));
    assert!(all.windows(2).all(|w| w[0].id < w[1].id), "ordered by id");
    let only_p = s
        .events(&EventFilter {
            plan_id: Some("p".into()),
            ..Default::default()
        })
        .await
        .expect("p");
    assert_eq!(only_p.len(), 3);
    assert!(only_p.iter().all(|e| e.plan_id.as_deref() == Some("p")));
    let limited = s
        .events(&EventFilter {
            limit: Some(2),
            ..Default::default()
        })
        .await
        .expect("limit");
    assert_eq!(limited, all[..2].to_vec());
    let newest = s
        .events(&EventFilter {
            limit: Some(2),
            newest: true,
            ..Default::default()
        })
        .await
        .expect("newest");
    assert_eq!(
        newest,
        all[all.len() - 2..].to_vec(),
        "the newest two, oldest first"
    );
    let after = s
        .events(&EventFilter {
            after_id: Some(all[1].id),
            ..Default::default()
        })
        .await
        .expect("after");
    assert_eq!(after, all[2..].to_vec());
    let typed = s
        .events(&EventFilter {
            event_types: vec![et::BUDGET_WARNING.into(), "no.such_type".into()],
            ..Default::default()
        })
        .await
        .expect("by type");
    assert_eq!(typed, vec![e.clone()], "only the events of the named types");
    let now = chrono::Utc::now();
    let skew = (e.ts - now).num_seconds().abs();
    assert!(skew < 60, "ts is a plausible database time: {}", e.ts);
}

async fn ten_thousand_task_import_is_fast(c: &Ctx) {
    let s = &*c.store;
    let tasks: Vec<_> = (0..10_000)
        .map(|i| {
            let id = format!("T-{i:05}");
            let deps: Vec<String> = if i % 10 == 0 {
                vec![]
            } else {
                vec![format!("T-{:05}", i - 1)]
            };
            TaskSpec {
                dependencies: deps,
                ..task(&id, &[])
            }
        })
        .collect();
    let p = plan("big", tasks);
    let t0 = Instant::now();
    let r = import(s, &p).await;
    let took = t0.elapsed();
    println!(
        "[{}] imported 10,000 tasks (9,000 edges) in {took:?}",
        s.info().backend
    );
    assert_eq!(r.created.len(), 10_000);
    let t0 = Instant::now();
    let cl = claim(s, &req("w")).await;
    println!(
        "[{}] first claim on 10,000 tasks took {:?}",
        s.info().backend,
        t0.elapsed()
    );
    assert_eq!(cl.task.id, "T-00000");
    let t0 = Instant::now();
    assert!(!import(s, &p).await.changed_anything());
    println!(
        "[{}] unchanged re-import of 10,000 tasks took {:?}",
        s.info().backend,
        t0.elapsed()
    );
    let counts = s.counts("big").await.expect("counts");
    assert_eq!(counts.total, 10_000);
    let ready: usize = s
        .list_tasks("big")
        .await
        .expect("list")
        .iter()
        .filter(|t| t.pending_deps == 0)
        .count();
    assert_eq!(ready, 1_000);
}

async fn claims_are_exclusive_across_handles(c: &Ctx) {
    let n = 120;
    let tasks: Vec<_> = (0..n).map(|i| task(&format!("t{i:03}"), &[])).collect();
    import(&*c.store, &plan("p", tasks)).await;
    let other = c.second_store().await;
    let mut handles = Vec::new();
    for (i, st) in [c.store.clone(), other.clone()]
        .into_iter()
        .cycle()
        .take(6)
        .enumerate()
    {
        handles.push(tokio::spawn(async move {
            let r = req(&format!("w{i}"));
            let mut done = 0;
            while let Some(cl) = st.claim(&r).await.expect("claim") {
                st.complete(cl.lease, &Outcome::default())
                    .await
                    .expect("complete");
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("join");
    }
    assert_eq!(total, n);
    // Replay the log: every task claimed once at epoch 1 and DONE once.
    let evs = all_events(&*c.store).await;
    let mut claims = HashSet::new();
    let mut done = HashSet::new();
    for e in &evs {
        let key = (e.task_id.clone().unwrap_or_default(), e.epoch.unwrap_or(-1));
        if e.event_type == et::TASK_CLAIMED {
            assert!(claims.insert(key), "claimed twice: {e:?}");
        } else if e.event_type == et::TASK_DONE {
            assert!(done.insert(key.0), "done twice: {e:?}");
        }
    }
    assert_eq!((claims.len(), done.len()), (n, n));
    assert!(claims.iter().all(|(_, epoch)| *epoch == 1));
    assert_eq!(
        c.store.counts("p").await.expect("counts").get(Status::Done),
        n as u64
    );
    // Both handles appended to the same mirror: whole lines only, one per event.
    let text = std::fs::read_to_string(&c.mirror).expect("mirror");
    let ids: Vec<i64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("a whole JSON line")["id"]
                .as_i64()
                .expect("id")
        })
        .collect();
    assert_eq!(ids.len(), evs.len());
    let distinct: HashSet<_> = ids.iter().collect();
    assert_eq!(distinct.len(), evs.len());
    other.close().await;
}

async fn wait_for_work_sees_other_handles(c: &Ctx) {
    let other = c.second_store().await;
    // The worker's loop: a fruitless claim, then a wait. Work committed elsewhere after the
    // claim must end the wait, whether it lands before or after the waiter starts listening.
    assert!(other.claim(&req("w")).await.expect("claim").is_none());
    let waiter = {
        let other = other.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            other.wait_for_work(Duration::from_secs(30)).await;
            t0.elapsed()
        })
    };
    // Give the waiter a moment to start listening; a wakeup before that would also be fine.
    tokio::task::yield_now().await;
    import(&*c.store, &plan("p", vec![task("a", &[])])).await;
    let waited = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("another handle's commit wakes the waiter well before max_wait")
        .expect("join");
    assert!(waited < Duration::from_secs(15), "{waited:?}");
    assert_eq!(claim(&*other, &req("w")).await.task.id, "a");
    other.close().await;
}

async fn tasks_by_ids_reads_only_those_tasks(c: &Ctx) {
    let s = &*c.store;
    import(
        s,
        &plan("p", vec![task("c", &[]), task("a", &[]), task("b", &["a"])]),
    )
    .await;
    import(s, &plan("q", vec![task("a", &[])])).await;
    let ids = |v: &[TaskRecord]| v.iter().map(|t| t.id.clone()).collect::<Vec<_>>();
    // Import order, not the order asked; unknown ids and other plans' tasks are left out.
    let got = s
        .tasks_by_ids("p", &["b".into(), "c".into(), "zz".into()])
        .await
        .expect("tasks_by_ids");
    assert_eq!(ids(&got), ["c", "b"]);
    assert!(got.iter().all(|t| t.plan_id == "p"));
    assert_eq!(got[1].pending_deps, 1);
    assert!(s.tasks_by_ids("p", &[]).await.expect("no ids").is_empty());
    // The same records as the full list.
    let all = s.list_tasks("p").await.expect("list");
    let every: Vec<String> = ids(&all);
    assert_eq!(
        s.tasks_by_ids("p", &every).await.expect("all ids"),
        all,
        "tasks_by_ids and list_tasks disagree"
    );
    // More ids than one statement binds.
    let many: Vec<TaskSpec> = (0..1200).map(|i| task(&format!("t{i:04}"), &[])).collect();
    import(s, &plan("big", many)).await;
    let want: Vec<String> = (0..1200)
        .rev()
        .step_by(2)
        .map(|i| format!("t{i:04}"))
        .collect();
    let got = s.tasks_by_ids("big", &want).await.expect("many ids");
    assert_eq!(got.len(), 600);
    assert_eq!(got[0].id, "t0001");
    assert_eq!(got[599].id, "t1199");
}

async fn event_watch_sees_this_and_other_handles(c: &Ctx) {
    let s = c.store.clone();
    let mut watch = s.watch_events().await;
    // Nothing written: the watch waits out its time.
    let t0 = Instant::now();
    assert!(!watch.changed(Duration::from_millis(400)).await);
    assert!(
        t0.elapsed() >= Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    // A write by this handle, made while nobody waits, is still reported.
    import(&*s, &plan("p", vec![task("a", &[])])).await;
    assert!(watch.changed(Duration::from_secs(10)).await);
    // Reported once: the next wait times out again.
    assert!(!watch.changed(Duration::from_millis(300)).await);
    // A write by another handle (another process) wakes a waiting watch.
    let other = c.second_store().await;
    let waiter = tokio::spawn(async move {
        let t0 = Instant::now();
        (watch.changed(Duration::from_secs(20)).await, t0.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    other.set_plan_paused("p", true).await.expect("pause");
    let (seen, waited) = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("woken well before max_wait")
        .expect("join");
    assert!(
        seen && waited < Duration::from_secs(10),
        "{seen} {waited:?}"
    );
    other.close().await;
}

async fn keyed_task_leaving_its_lease_wakes_waiters(c: &Ctx) {
    let s = c.store.clone();
    import(
        &*s,
        &plan(
            "p",
            vec![keyed("a", &["src/x.rs"]), keyed("b", &["src/x.rs"])],
        ),
    )
    .await;
    let cl = claim(&*s, &req("w1")).await;
    // b shares a's key: nothing to claim while a holds it.
    assert!(s.claim(&req("w2")).await.expect("claim").is_none());
    let waiter = {
        let s = s.clone();
        tokio::spawn(async move {
            let t0 = Instant::now();
            s.wait_for_work(Duration::from_secs(30)).await;
            t0.elapsed()
        })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    // a ends other than DONE or PENDING: only its key being free makes b claimable.
    s.park(cl.lease, Park::HumanLoop, &Outcome::default())
        .await
        .expect("park");
    let waited = tokio::time::timeout(Duration::from_secs(15), waiter)
        .await
        .expect("woken well before max_wait")
        .expect("join");
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!(claim(&*s, &req("w2")).await.task.id, "b");
}

// ---- SQLite only --------------------------------------------------------------------------

mod sqlite_only {
    use super::*;

    fn commit_empty(repo: &git2::Repository) {
        let sig = git2::Signature::now("t", "t@example.com").expect("sig");
        let tree_id = repo.index().expect("index").write_tree().expect("tree");
        let tree = repo.find_tree(tree_id).expect("find tree");
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .expect("commit");
    }

    fn exclude_lines(repo: &Path) -> Vec<String> {
        std::fs::read_to_string(repo.join(".git/info/exclude"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.trim_end_matches('/').trim_start_matches('/') == ".whilly")
            .map(str::to_string)
            .collect()
    }

    #[tokio::test]
    async fn open_in_repo_keeps_state_out_of_git_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("repo");
        let repo = git2::Repository::init(&root).expect("init");
        commit_empty(&repo);
        let s = SqliteStore::open_in_repo(&root).await.expect("open");
        assert!(root.join(".whilly/whilly.db").is_file());
        let info = s.info();
        assert_eq!(info.backend, "sqlite");
        assert!(info.location.ends_with("whilly.db"), "{}", info.location);
        import(&s, &plan("p", vec![task("a", &[])])).await;
        assert!(
            root.join(".whilly/events.jsonl").is_file(),
            "mirror next to the db"
        );
        s.close().await;
        let s = SqliteStore::open_in_repo(&root).await.expect("reopen");
        assert_eq!(s.list_tasks("p").await.expect("kept").len(), 1);
        s.close().await;
        assert_eq!(exclude_lines(&root), vec![".whilly/"]);
        // A linked worktree (.git is a file): the exclude goes to the common dir, once.
        let wt_path = dir.path().join("wt");
        repo.worktree("wt", &wt_path, None).expect("worktree");
        assert!(wt_path.join(".git").is_file());
        let s = SqliteStore::open_in_repo(&wt_path)
            .await
            .expect("open in worktree");
        s.close().await;
        assert_eq!(exclude_lines(&root), vec![".whilly/"]);
        // Not a repository: works, quietly.
        let plain = dir.path().join("plain");
        let s = SqliteStore::open_in_repo(&plain)
            .await
            .expect("open outside git");
        s.close().await;
        assert!(plain.join(".whilly/whilly.db").is_file());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_first_opens_both_succeed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("fresh.db");
        let opens: Vec<_> = (0..3)
            .map(|_| {
                let path = path.clone();
                tokio::spawn(async move { SqliteStore::open(&path, None).await })
            })
            .collect();
        for o in opens {
            let s = o.await.expect("join").expect("open");
            assert!(s.info().pending_migrations.is_empty());
            s.close().await;
        }
    }

    #[tokio::test]
    async fn unusable_location_is_an_environment_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, "x").expect("write");
        let err = match SqliteStore::open(&file.join("whilly.db"), None).await {
            Err(e) => e,
            Ok(_) => panic!("a db under a regular file cannot open"),
        };
        assert!(err.is_environment(), "{err}");
        let garbage = dir.path().join("garbage.db");
        std::fs::write(&garbage, vec![7u8; 4096]).expect("write");
        assert!(
            SqliteStore::open(&garbage, None).await.is_err(),
            "not a SQLite file"
        );
    }
}

fn keyed(id: &str, keys: &[&str]) -> TaskSpec {
    TaskSpec {
        key_files: keys.iter().map(|k| k.to_string()).collect(),
        ..task(id, &[])
    }
}

async fn key_files_keep_claims_apart(c: &Ctx) {
    let s = &*c.store;
    // Two plans in one queue: key files are shared across plans of one repository target.
    import(
        s,
        &plan(
            "p",
            vec![
                keyed("a", &["src/shared.rs", "x"]),
                keyed("b", &["./src/shared.rs"]),
            ],
        ),
    )
    .await;
    import(
        s,
        &plan("q", vec![keyed("c", &["src/shared.rs/"]), task("d", &[])]),
    )
    .await;
    let a = claim(s, &req("w1")).await;
    assert_eq!(a.task.id, "a");
    // b and c hold src/shared.rs (written differently): only d is claimable.
    let other = c.second_store().await;
    assert_eq!(claim(&*other, &req("w2")).await.task.id, "d");
    assert!(other.claim(&req("w2")).await.expect("claim").is_none());
    // Started and still running: still held.
    s.start(a.lease, None).await.expect("start");
    assert!(other.claim(&req("w2")).await.expect("claim").is_none());
    // Released: free again, and only one of b and c at a time.
    s.complete(a.lease, &Outcome::default())
        .await
        .expect("done");
    let next = claim(&*other, &req("w2")).await;
    assert!(
        ["b", "c"].contains(&next.task.id.as_str()),
        "{}",
        next.task.id
    );
    assert!(s.claim(&req("w1")).await.expect("claim").is_none());
    // A lease that expired no longer holds its keys (the reaper is about to return it).
    let expired = {
        s.fail(next.lease, FailMode::Retry, &Outcome::reason("x"))
            .await
            .expect("retry");
        claim(s, &short("w3")).await
    };
    tokio::time::sleep(Duration::from_millis(350)).await;
    let after = claim(&*other, &req("w2")).await;
    assert_ne!(after.task.id, expired.task.id);
    other.close().await;
}

async fn key_files_keep_concurrent_claimers_apart(c: &Ctx) {
    // Forty tasks on four files, claimed by eight claimers on two handles at once: at no time
    // may two live claims share a file.
    let tasks: Vec<_> = (0..40)
        .map(|i| keyed(&format!("t{i:02}"), &[&format!("f{}", i % 4)]))
        .collect();
    import(&*c.store, &plan("p", tasks)).await;
    let other = c.second_store().await;
    let held: Arc<std::sync::Mutex<HashSet<String>>> = Arc::default();
    let mut handles = Vec::new();
    for (i, st) in [c.store.clone(), other.clone()]
        .into_iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        let held = held.clone();
        handles.push(tokio::spawn(async move {
            let r = req(&format!("w{i}"));
            let mut done = 0;
            loop {
                let Some(cl) = st.claim(&r).await.expect("claim") else {
                    // Everything left may be held by others right now.
                    if st.counts("p").await.expect("counts").get(Status::Pending) == 0 {
                        return done;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let key = cl.task.spec.key_files[0].clone();
                assert!(
                    held.lock().expect("lock").insert(key.clone()),
                    "{key} claimed twice at once"
                );
                tokio::time::sleep(Duration::from_millis(3)).await;
                held.lock().expect("lock").remove(&key);
                st.complete(cl.lease, &Outcome::default())
                    .await
                    .expect("complete");
                done += 1;
            }
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("join");
    }
    assert_eq!(total, 40);
    other.close().await;
}

async fn key_file_spellings_and_directories_are_one_claim(c: &Ctx) {
    // Five spellings of one file and the directory holding it: one at a time, even with eight
    // claimers on two handles at once; a file beside it in another directory runs alongside.
    let spellings = [
        "src/a.rs",
        "src//a.rs",
        "src/./a.rs",
        "lib/../src/a.rs",
        "src",
    ];
    let mut tasks: Vec<_> = spellings
        .iter()
        .enumerate()
        .map(|(i, k)| keyed(&format!("s{i}"), &[k]))
        .collect();
    tasks.push(keyed("other", &["srcx/a.rs"]));
    import(&*c.store, &plan("p", tasks)).await;
    let other = c.second_store().await;
    let running: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let mut handles = Vec::new();
    for (i, st) in [c.store.clone(), other.clone()]
        .into_iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        let running = running.clone();
        handles.push(tokio::spawn(async move {
            let r = req(&format!("w{i}"));
            loop {
                let Some(cl) = st.claim(&r).await.expect("claim") else {
                    if st.counts("p").await.expect("counts").get(Status::Pending) == 0 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                };
                let id = cl.task.id.clone();
                {
                    let mut now = running.lock().expect("lock");
                    let of_src = now.iter().filter(|t| t.starts_with('s')).count();
                    assert!(
                        !id.starts_with('s') || of_src == 0,
                        "{id} claimed while {now:?} run: one file, two claims"
                    );
                    now.push(id.clone());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                running.lock().expect("lock").retain(|t| t != &id);
                st.complete(cl.lease, &Outcome::default())
                    .await
                    .expect("complete");
            }
        }));
    }
    for h in handles {
        h.await.expect("join");
    }
    assert_eq!(
        c.store.counts("p").await.expect("counts").get(Status::Done),
        6
    );
    // Sequentially: a held file keeps its directory out, and a held directory its files.
    import(
        &*c.store,
        &plan(
            "q",
            vec![
                keyed("dir", &["docs/"]),
                keyed("file", &["docs/guide/x.md"]),
            ],
        ),
    )
    .await;
    let mut q = req("w9");
    q.plan_id = Some("q".into());
    let first = claim(&*c.store, &q).await;
    assert!(
        other.claim(&q).await.expect("claim").is_none(),
        "{} held",
        first.task.id
    );
    c.store
        .complete(first.lease, &Outcome::default())
        .await
        .expect("complete");
    let second = claim(&*other, &q).await;
    assert_ne!(second.task.id, first.task.id);
    other.close().await;
}

async fn key_files_are_scoped_by_repo_target(c: &Ctx) {
    let s = &*c.store;
    let web = TaskSpec {
        repo_target_id: Some("web".into()),
        ..keyed("w", &["README.md"])
    };
    let api = TaskSpec {
        repo_target_id: Some("api".into()),
        ..keyed("a", &["README.md"])
    };
    import(
        s,
        &plan("p", vec![web, api, keyed("plain", &["README.md"])]),
    )
    .await;
    let first = claim(s, &req("w1")).await;
    let second = claim(s, &req("w2")).await;
    let third = claim(s, &req("w3")).await;
    let mut ids = [first.task.id, second.task.id, third.task.id];
    ids.sort();
    assert_eq!(
        ids,
        ["a", "plain", "w"],
        "different repositories never conflict"
    );
}

async fn silent_workers_are_marked_offline(c: &Ctx) {
    let s = &*c.store;
    let now = chrono::Utc::now();
    for id in ["alive", "dead"] {
        s.register_worker(&WorkerRecord {
            id: id.into(),
            host: "box".into(),
            slots: 1,
            tags: vec![],
            started_at: now,
            heartbeat_at: now,
            offline: false,
        })
        .await
        .expect("register");
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    s.worker_heartbeat("alive").await.expect("beat");
    let gone = s
        .mark_offline_workers(Duration::from_millis(300))
        .await
        .expect("mark");
    assert_eq!(gone, vec!["dead".to_string()]);
    assert!(
        s.mark_offline_workers(Duration::from_millis(300))
            .await
            .expect("mark again")
            .is_empty(),
        "marked once"
    );
    let all = s.list_workers().await.expect("list");
    let offline: Vec<_> = all.iter().map(|w| (w.id.as_str(), w.offline)).collect();
    assert_eq!(offline, [("alive", false), ("dead", true)]);
    let now = chrono::Utc::now();
    let online: Vec<_> = all
        .iter()
        .filter(|w| w.online(now, Duration::from_secs(120)))
        .map(|w| w.id.as_str())
        .collect();
    assert_eq!(online, ["alive"]);
    let evs = all_events(s).await;
    assert_eq!(
        evs.iter()
            .filter(|e| e.event_type == et::WORKER_OFFLINE)
            .count(),
        1
    );
    // A heartbeat brings it back.
    s.worker_heartbeat("dead").await.expect("beat");
    assert!(
        s.list_workers()
            .await
            .expect("list")
            .iter()
            .all(|w| !w.offline)
    );
}

async fn plans_archive_and_unarchive(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p", vec![task("a", &[])])).await;
    import(s, &plan("q", vec![task("b", &[])])).await;
    let listed = |plans: Vec<PlanSummary>| -> Vec<(String, bool)> {
        plans
            .into_iter()
            .map(|p| (p.plan.id, p.plan.archived_at.is_some()))
            .collect()
    };
    assert_eq!(
        listed(s.list_plans().await.expect("list")),
        [("p".to_string(), false), ("q".to_string(), false)]
    );
    let b = last_id(s).await;
    s.set_plan_archived("p", true).await.expect("archive");
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].event_type, et::PLAN_ARCHIVED);
    assert_eq!(evs[0].plan_id.as_deref(), Some("p"));
    let rec = s
        .get_plan("p")
        .await
        .expect("an archived plan is still there");
    assert!(rec.archived_at.is_some());
    assert_eq!(
        listed(s.list_plans().await.expect("list")),
        [("p".to_string(), true), ("q".to_string(), false)],
        "list_plans returns archived plans too, marked"
    );
    // Nothing else changes: its tasks are kept.
    assert_eq!(s.list_tasks("p").await.expect("tasks").len(), 1);
    // Archiving twice writes nothing.
    let b = last_id(s).await;
    s.set_plan_archived("p", true).await.expect("again");
    assert_eq!(last_id(s).await, b);
    s.set_plan_archived("p", false).await.expect("unarchive");
    let evs = events_after(s, b).await;
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].event_type, et::PLAN_UNARCHIVED);
    assert!(s.get_plan("p").await.expect("plan").archived_at.is_none());
    assert!(matches!(
        s.set_plan_archived("nope", true).await,
        Err(StoreError::NotFound { kind: "plan", .. })
    ));
}

async fn plan_delete_removes_plan_and_tasks_keeps_events(c: &Ctx) {
    let s = &*c.store;
    let p = plan("p", vec![task("a", &[]), task("b", &["a"])]);
    import(s, &p).await;
    import(s, &plan("q", vec![task("c", &[])])).await;
    let mut r = req("w");
    r.plan_id = Some("p".into());
    let held = claim(s, &r).await;
    // Running work is not yanked from its worker.
    let b = last_id(s).await;
    let refused = s.delete_plan("p").await;
    assert!(
        matches!(&refused, Err(StoreError::Refused { task_id, status: Status::Claimed, .. }) if task_id == "a"),
        "{refused:?}"
    );
    assert_eq!(last_id(s).await, b, "a refused delete writes nothing");
    assert_eq!(s.list_tasks("p").await.expect("tasks").len(), 2);
    s.complete(held.lease, &Outcome::default())
        .await
        .expect("done");
    let before = all_events(s).await;
    s.delete_plan("p").await.expect("delete");
    assert!(matches!(
        s.get_plan("p").await,
        Err(StoreError::NotFound { kind: "plan", .. })
    ));
    assert!(matches!(
        s.get_task("p", "a").await,
        Err(StoreError::NotFound { .. })
    ));
    let ids: Vec<_> = s
        .list_plans()
        .await
        .expect("list")
        .into_iter()
        .map(|p| p.plan.id)
        .collect();
    assert_eq!(ids, ["q"], "the other plan is untouched");
    assert_eq!(s.list_tasks("q").await.expect("tasks").len(), 1);
    // The audit trail is append-only: every event stays, and the deletion is one more.
    let after = all_events(s).await;
    assert_eq!(after.len(), before.len() + 1);
    assert_eq!(&after[..before.len()], &before[..]);
    let last = after.last().expect("an event");
    assert_eq!(last.event_type, et::PLAN_DELETED);
    assert_eq!(last.plan_id.as_deref(), Some("p"));
    assert_eq!(last.payload["tasks"], 2);
    // The id is free again: the plan can be imported anew.
    assert_eq!(import(s, &p).await.created.len(), 2);
    assert!(matches!(
        s.delete_plan("nope").await,
        Err(StoreError::NotFound { kind: "plan", .. })
    ));
}

/// Remote panes: watches live only while refreshed, chunks read per task after a cursor in
/// order, pruning keeps what is newer, typed keys are taken once, and a deleted plan takes its
/// panes' rows with it.
async fn remote_panes_watch_publish_read_prune_and_input(c: &Ctx) {
    let s = &*c.store;
    import(s, &plan("p1", vec![task("A", &[]), task("B", &[])])).await;
    let tasks = s.list_tasks("p1").await.expect("list");
    let (a, b) = (tasks[0].pk, tasks[1].pk);

    assert!(
        s.pane_watches(&[a, b], Duration::from_secs(5))
            .await
            .expect("watches")
            .is_empty()
    );
    s.watch_pane(a, "laptop").await.expect("watch");
    s.watch_pane(a, "laptop").await.expect("refresh");
    s.watch_pane(b, "phone").await.expect("watch b");
    let w = s
        .pane_watches(&[a], Duration::from_secs(5))
        .await
        .expect("watches");
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].task_pk, w[0].viewer.as_str()), (a, "laptop"));
    // A watch not refreshed within the TTL has ended.
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert!(
        s.pane_watches(&[a, b], Duration::from_millis(10))
            .await
            .expect("stale")
            .is_empty()
    );
    s.watch_pane(a, "laptop").await.expect("again");
    s.unwatch_pane(a, "laptop").await.expect("unwatch");
    assert!(
        s.pane_watches(&[a], Duration::from_secs(5))
            .await
            .expect("gone")
            .is_empty()
    );

    let chunk = |pk: i64, snapshot: bool, data: &[u8]| PaneChunk {
        id: 0,
        task_pk: pk,
        attempt: 1,
        snapshot,
        rows: 24,
        cols: 80,
        compressed: false,
        data: data.to_vec(),
    };
    assert_eq!(s.latest_pane_snapshot(a).await.expect("none"), None);
    let s1 = s
        .publish_pane(&chunk(a, true, b"screen"))
        .await
        .expect("snap");
    let a1 = s.publish_pane(&chunk(a, false, b"one")).await.expect("a1");
    let b1 = s.publish_pane(&chunk(b, true, b"other")).await.expect("b1");
    let a2 = s
        .publish_pane(&chunk(a, false, &[0, 255, 27, b'[', b'm']))
        .await
        .expect("a2");
    assert!(s1 < a1 && a1 < a2);
    assert_eq!(s.latest_pane_snapshot(a).await.expect("snap"), Some(s1));
    let got = s.pane_chunks(&[(a, 0), (b, b1)], 100).await.expect("read");
    let ids: Vec<i64> = got.iter().map(|c| c.id).collect();
    assert_eq!(ids, [s1, a1, a2], "b's cursor is past its only chunk");
    assert_eq!(
        got[2].data,
        [0, 255, 27, b'[', b'm'],
        "bytes come back as written"
    );
    assert!(got[0].snapshot && !got[1].snapshot);
    assert_eq!((got[0].rows, got[0].cols, got[0].attempt), (24, 80, 1));
    let got = s
        .pane_chunks(&[(a, a1), (b, 0)], 100)
        .await
        .expect("read 2");
    assert_eq!(got.iter().map(|c| c.id).collect::<Vec<_>>(), [b1, a2]);
    assert_eq!(s.pane_chunks(&[(a, 0)], 2).await.expect("limit").len(), 2);
    assert!(s.pane_chunks(&[], 10).await.expect("none").is_empty());

    assert_eq!(s.prune_pane(a, Some(a2)).await.expect("prune"), 2);
    let left = s.pane_chunks(&[(a, 0)], 100).await.expect("left");
    assert_eq!(left.iter().map(|c| c.id).collect::<Vec<_>>(), [a2]);

    assert!(
        s.take_pane_input(&[a, b])
            .await
            .expect("nothing")
            .is_empty()
    );
    s.send_pane_input(a, "laptop", b"ls\r").await.expect("keys");
    s.send_pane_input(b, "laptop", b"q").await.expect("keys b");
    s.send_pane_input(a, "laptop", b"\x03")
        .await
        .expect("keys 2");
    let keys = s.take_pane_input(&[a]).await.expect("take");
    let data: Vec<&[u8]> = keys.iter().map(|k| k.data.as_slice()).collect();
    assert_eq!(data, [b"ls\r".as_slice(), b"\x03".as_slice()]);
    assert!(s.take_pane_input(&[a]).await.expect("once").is_empty());
    assert_eq!(s.prune_pane(b, None).await.expect("all of b"), 1);
    assert!(
        s.take_pane_input(&[b])
            .await
            .expect("b's keys went too")
            .is_empty()
    );

    // The rows belong to their task: deleting the plan removes them.
    s.watch_pane(a, "laptop").await.expect("watch");
    s.delete_plan("p1").await.expect("delete");
    assert!(
        s.pane_chunks(&[(a, 0)], 100)
            .await
            .expect("after delete")
            .is_empty()
    );
    assert!(
        s.pane_watches(&[a], Duration::from_secs(5))
            .await
            .expect("after delete")
            .is_empty()
    );
}

fn on_agent(id: &str, agent: &str) -> TaskSpec {
    TaskSpec {
        agent: Some(agent.to_string()),
        ..task(id, &[])
    }
}

fn limited(worker: &str, limits: &[(&str, i64)]) -> ClaimRequest {
    let mut r = req(worker);
    r.default_agent = "claude".into();
    r.agent_limits = limits.iter().map(|(a, n)| (a.to_string(), *n)).collect();
    r
}

/// `max_parallel` counts every worker's live leases on the agent, whichever handle (process)
/// took them and whether or not that worker has a limit of its own; a lease that ended frees
/// its place.
async fn agent_limits_hold_across_handles(c: &Ctx) {
    let s = &*c.store;
    let other = c.second_store().await;
    import(
        s,
        &plan(
            "p",
            vec![
                on_agent("c1", "codex"),
                on_agent("c2", "codex"),
                on_agent("c3", "codex"),
                on_agent("g1", "gemini"),
            ],
        ),
    )
    .await;
    // A worker without limits takes c1 (the one-statement claim on Postgres) ...
    let first = claim(s, &req("free")).await;
    assert_eq!(
        (first.task.id.as_str(), first.agent.as_str()),
        ("c1", "codex")
    );
    // ... and counts for a worker with codex limited to 2, in another process.
    let lim = limited("w2", &[("codex", 2)]);
    let second = claim(&*other, &lim).await;
    assert_eq!(second.task.id, "c2");
    let third = claim(&*other, &lim).await;
    assert_eq!(third.task.id, "g1", "codex is full: the gemini task goes");
    assert!(other.claim(&lim).await.expect("claim").is_none());
    let claimed = all_events(s)
        .await
        .into_iter()
        .filter(|e| e.event_type == et::TASK_CLAIMED)
        .map(|e| e.payload["agent"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>();
    assert_eq!(
        claimed,
        ["codex", "codex", "gemini"],
        "the agent is in the audit trail"
    );
    // A lease that ends frees its place.
    s.complete(first.lease, &Outcome::default())
        .await
        .expect("complete");
    assert_eq!(claim(&*other, &lim).await.task.id, "c3");
}

/// Six claimers on three handles race for codex tasks limited to two at a time: never more
/// than two run at once, and every task is done once.
async fn agent_limits_hold_under_concurrent_claimers(c: &Ctx) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let n: usize = 24;
    let tasks: Vec<_> = (0..n)
        .map(|i| on_agent(&format!("t{i:02}"), "codex"))
        .collect();
    import(&*c.store, &plan("p", tasks)).await;
    let stores = [
        c.store.clone(),
        c.second_store().await,
        c.second_store().await,
    ];
    let running = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    for (i, st) in stores.into_iter().cycle().take(6).enumerate() {
        let (running, most) = (running.clone(), most.clone());
        handles.push(tokio::spawn(async move {
            let r = limited(&format!("w{i}"), &[("codex", 2)]);
            let mut done = 0;
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                let Some(cl) = st.claim(&r).await.expect("claim") else {
                    if st.counts("p").await.expect("counts").get(Status::Done) == n as u64 {
                        break;
                    }
                    tokio::task::yield_now().await;
                    continue;
                };
                // Counted while the lease is the worker's (from the claim to the complete).
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                // Long enough that another claimer, on a loaded machine too, claims meanwhile.
                tokio::time::sleep(Duration::from_millis(40)).await;
                running.fetch_sub(1, Ordering::SeqCst);
                st.complete(cl.lease, &Outcome::default())
                    .await
                    .expect("complete");
                done += 1;
            }
            done
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.expect("join");
    }
    assert_eq!(total, n, "every task done once");
    let most = most.load(Ordering::SeqCst);
    assert!(
        most <= 2,
        "{most} codex tasks ran at once with max_parallel 2"
    );
    assert_eq!(most, 2, "the limit is used, not serialised to one");
}

// ---- splitting a task (`Store::split_task`) --------------------------------------------------

fn ids(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Fan-in to and fan-out from `M`: A and B before it; C and D after it; E after D and A.
fn fan_plan() -> PlanSpec {
    let mut m = task("M", &["A", "B"]);
    m.key_files = ids(&["src/x.rs", "src/y.rs"]);
    m.max_attempts = Some(5);
    plan(
        "sp",
        vec![
            task("A", &[]),
            task("B", &[]),
            m,
            task("C", &["M"]),
            task("D", &["M", "B"]),
            task("E", &["D", "A"]),
        ],
    )
}

fn sub(id: &str, deps: &[&str], key: &str) -> TaskSpec {
    let mut t = task(id, deps);
    t.key_files = ids(&[key]);
    t
}

/// M split in two, one after the other; its dependents wait for the last.
fn sequential_split() -> whilly::domain::TaskSplit {
    whilly::domain::TaskSplit {
        parent: "M".into(),
        subtasks: vec![
            sub("Ma", &["A", "B"], "src/x.rs"),
            sub("Mb", &["Ma"], "src/y.rs"),
        ],
        dependents: [
            ("C".to_string(), ids(&["Mb"])),
            ("D".to_string(), ids(&["Mb", "B"])),
        ]
        .into(),
    }
}

async fn deps_of(s: &dyn Store, plan: &str) -> BTreeMap<String, Vec<String>> {
    s.export_plan(plan)
        .await
        .expect("export")
        .tasks
        .into_iter()
        .map(|t| (t.id, t.dependencies))
        .collect()
}

async fn pending(s: &dyn Store, plan: &str, id: &str) -> i64 {
    s.get_task(plan, id).await.expect("get_task").pending_deps
}

async fn split_rewires_fan_in_and_fan_out(c: &Ctx) {
    let s = &*c.store;
    import(s, &fan_plan()).await;
    let before = last_id(s).await;
    let report = s
        .split_task("sp", &sequential_split())
        .await
        .expect("split");
    assert_eq!(report.subtasks, ids(&["Ma", "Mb"]));
    assert_eq!(report.dependents.len(), 2);

    // The subtasks take the parent's place, in order; the parent is gone.
    let order: Vec<String> = s
        .list_tasks("sp")
        .await
        .expect("list")
        .into_iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(order, ids(&["A", "B", "Ma", "Mb", "C", "D", "E"]));
    assert!(matches!(
        s.get_task("sp", "M").await,
        Err(StoreError::NotFound { .. })
    ));
    let deps = deps_of(s, "sp").await;
    assert_eq!(deps["Ma"], ids(&["A", "B"]), "fan-in inherited");
    assert_eq!(deps["Mb"], ids(&["Ma"]));
    assert_eq!(deps["C"], ids(&["Mb"]), "fan-out rewired");
    assert_eq!(deps["D"], ids(&["Mb", "B"]));
    assert_eq!(deps["E"], ids(&["D", "A"]), "untouched");
    // Readiness follows the new edges.
    assert_eq!(pending(s, "sp", "Ma").await, 2);
    assert_eq!(pending(s, "sp", "Mb").await, 1);
    assert_eq!(pending(s, "sp", "C").await, 1);
    assert_eq!(pending(s, "sp", "D").await, 2);
    let ma = s.get_task("sp", "Ma").await.expect("Ma");
    assert_eq!(
        (ma.status, ma.attempts, ma.max_attempts),
        (Status::Pending, 0, 5)
    );
    let counts = s.counts("sp").await.expect("counts");
    assert_eq!((counts.total, counts.get(Status::Pending)), (7, 7));

    // task.split on the parent, one task.created per subtask, one task.updated per dependent.
    let evs = events_after(s, before).await;
    let kinds: Vec<(&str, &str)> = evs
        .iter()
        .map(|e| (e.event_type.as_str(), e.task_id.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        kinds,
        [
            (et::TASK_SPLIT, "M"),
            (et::TASK_CREATED, "Ma"),
            (et::TASK_CREATED, "Mb"),
            (et::TASK_UPDATED, "C"),
            (et::TASK_UPDATED, "D"),
        ]
    );
    assert_eq!(evs[0].from_status, Some(Status::Pending));
    assert_eq!(evs[0].payload["subtasks"], json!(["Ma", "Mb"]));
    assert_eq!(evs[0].payload["dependents"]["D"], json!(["Mb", "B"]));
    assert_eq!(evs[1].to_status, Some(Status::Pending));
    assert_eq!(evs[3].payload["fields"], json!(["dependencies"]));

    // The work runs in the new order: A and B, then Ma, then Mb, then C and D.
    let mut done = Vec::new();
    while let Some(cl) = s.claim(&req("w")).await.expect("claim") {
        done.push(cl.task.id.clone());
        s.complete(cl.lease, &Outcome::default())
            .await
            .expect("done");
    }
    assert_eq!(done, ids(&["A", "B", "Ma", "Mb", "C", "D", "E"]));
}

async fn split_with_parallel_subtasks_and_all_dependents(c: &Ctx) {
    let s = &*c.store;
    import(s, &fan_plan()).await;
    let split = whilly::domain::TaskSplit {
        parent: "M".into(),
        subtasks: vec![
            sub("Ma", &["A", "B"], "src/x.rs"),
            sub("Mb", &["A", "B"], "src/y.rs"),
            task("Mc", &["Ma", "Mb"]),
        ],
        dependents: [
            ("C".to_string(), ids(&["Ma", "Mb", "Mc"])),
            ("D".to_string(), ids(&["Ma", "Mb", "Mc", "B"])),
        ]
        .into(),
    };
    s.split_task("sp", &split).await.expect("split");
    let deps = deps_of(s, "sp").await;
    assert_eq!(deps["Mb"], ids(&["A", "B"]));
    assert_eq!(deps["Mc"], ids(&["Ma", "Mb"]));
    assert_eq!(deps["D"], ids(&["Ma", "Mb", "Mc", "B"]));
    assert_eq!(pending(s, "sp", "C").await, 3);
    assert_eq!(pending(s, "sp", "D").await, 4);
    // The parallel subtasks (different key files) run side by side; Mc waits for both.
    for id in ["A", "B"] {
        let cl = claim(s, &req("w")).await;
        assert_eq!(cl.task.id, id);
        s.complete(cl.lease, &Outcome::default())
            .await
            .expect("done");
    }
    let ma = claim(s, &req("w1")).await;
    let mb = claim(s, &req("w2")).await;
    assert_eq!((ma.task.id.as_str(), mb.task.id.as_str()), ("Ma", "Mb"));
    assert!(s.claim(&req("w3")).await.expect("claim").is_none());
}

async fn split_refuses_a_started_task_and_a_stale_split(c: &Ctx) {
    let s = &*c.store;
    let mut p = fan_plan();
    // A root task to claim: M without its fan-in.
    p.tasks[2].dependencies.clear();
    p.tasks[0].priority = Priority::Low;
    p.tasks[1].priority = Priority::Low;
    import(s, &p).await;
    let mut split = sequential_split();
    split.subtasks[0].dependencies.clear();
    let cl = claim(s, &req("w")).await;
    assert_eq!(cl.task.id, "M");
    let before = last_id(s).await;
    let refused = s.split_task("sp", &split).await;
    assert!(
        matches!(&refused, Err(StoreError::Refused { task_id, status: Status::Claimed, message })
            if task_id == "M" && message.contains("running")),
        "{refused:?}"
    );
    // Nothing was written.
    assert_eq!(last_id(s).await, before);
    assert_eq!(s.list_tasks("sp").await.expect("list").len(), 6);
    // Once it has ended, it is refused for that.
    s.complete(cl.lease, &Outcome::default())
        .await
        .expect("done");
    let refused = s.split_task("sp", &split).await;
    assert!(
        matches!(&refused, Err(StoreError::Refused { status: Status::Done, message, .. })
            if message.contains("ended")),
        "{refused:?}"
    );
    // A split made before the plan changed no longer fits: refused, not half-applied.
    s.reset_task("sp", "M", "again").await.expect("reset");
    let mut stale = split.clone();
    stale.dependents.remove("D");
    let refused = s.split_task("sp", &stale).await;
    assert!(
        matches!(&refused, Err(StoreError::Invalid(m)) if m.contains("changed since")),
        "{refused:?}"
    );
    let refused = s.split_task("nope", &split).await;
    assert!(
        matches!(refused, Err(StoreError::NotFound { .. })),
        "{refused:?}"
    );
    // PENDING again after a failed attempt: its history belongs to it, so it is refused too.
    let cl = claim(s, &req("w")).await;
    assert_eq!(cl.task.id, "M");
    s.fail(cl.lease, FailMode::Retry, &Outcome::reason("again"))
        .await
        .expect("retry");
    assert_eq!(status(s, "sp", "M").await, Status::Pending);
    let refused = s.split_task("sp", &split).await;
    assert!(
        matches!(&refused, Err(StoreError::Refused { status: Status::Pending, message, .. })
            if message.contains("attempted 1 time(s)")),
        "{refused:?}"
    );
    assert_eq!(s.list_tasks("sp").await.expect("list").len(), 6);
}

async fn split_dependent_waits_for_the_last_subtask(c: &Ctx) {
    let s = &*c.store;
    let mut p = fan_plan();
    p.tasks[2].key_files.clear();
    import(s, &p).await;
    // A and B DONE before the split: the first subtask is claimable at once.
    for _ in 0..2 {
        let cl = claim(s, &req("w")).await;
        s.complete(cl.lease, &Outcome::default())
            .await
            .expect("done");
    }
    assert_eq!(pending(s, "sp", "D").await, 1, "D waits only for M");
    let split = whilly::domain::TaskSplit {
        parent: "M".into(),
        subtasks: vec![task("Ma", &["A", "B"]), task("Mb", &["A", "B"])],
        dependents: [
            ("C".to_string(), ids(&["Mb"])),
            ("D".to_string(), ids(&["Ma", "Mb", "B"])),
        ]
        .into(),
    };
    s.split_task("sp", &split).await.expect("split");
    assert_eq!(pending(s, "sp", "Ma").await, 0);
    assert_eq!(
        pending(s, "sp", "D").await,
        2,
        "B is DONE, Ma and Mb are not"
    );
    let ma = claim(s, &req("w")).await;
    assert_eq!(ma.task.id, "Ma");
    s.complete(ma.lease, &Outcome::default())
        .await
        .expect("Ma done");
    let mb = claim(s, &req("w")).await;
    assert_eq!(mb.task.id, "Mb", "D is not claimable before Mb is DONE");
    assert!(s.claim(&req("w")).await.expect("claim").is_none());
    s.complete(mb.lease, &Outcome::default())
        .await
        .expect("Mb done");
    let next: Vec<String> = [
        claim(s, &req("w")).await.task.id,
        claim(s, &req("w")).await.task.id,
    ]
    .into();
    assert_eq!(next, ids(&["C", "D"]));
}
