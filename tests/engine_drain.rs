//! `StopLevel::Drain` (the console's "finish first" and "finish in the background"): nothing new
//! is claimed, and a running attempt is never asked to stop, however long it outlives the grace
//! period a graceful stop would give it. `Graceful` on the same setup stops it within the grace.

use async_trait::async_trait;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use whilly::domain::Usd;
use whilly::engine::control::AttemptControl;
use whilly::engine::executor::{AttemptOutcome, Executor};
use whilly::engine::{Engine, EngineConfig, RunEnd, StopLevel};
use whilly::store::{Claimed, ImportOptions, PlanRecord, Store};

/// Reports each attempt's control when it starts, then works until released or stopped.
struct Held {
    started: mpsc::UnboundedSender<AttemptControl>,
    release: Arc<Notify>,
}

#[async_trait]
impl Executor for Held {
    async fn execute(&self, _c: Claimed, _p: PlanRecord, ctl: AttemptControl) -> AttemptOutcome {
        let _ = self.started.send(ctl.clone());
        let mut stop = ctl.clone();
        tokio::select! {
            _ = self.release.notified() => AttemptOutcome::Done {
                cost: Usd::ZERO,
                evidence: json!({}),
            },
            _ = stop.reached(StopLevel::Graceful) => AttemptOutcome::Released {
                cost: Usd::ZERO,
                reason: "shutdown".into(),
            },
        }
    }
}

async fn store_with_two_tasks(dir: &Path) -> Arc<dyn Store> {
    let target = whilly::store::open::target_from(None, dir).unwrap();
    let store = whilly::store::open::open(&target, dir).await.unwrap();
    let tasks: Vec<_> = (0..2)
        .map(|i| {
            json!({
                "id": format!("T-{i}"), "status": "pending", "priority": "medium",
                "description": format!("task {i}: hold the only slot until the test says so"),
                "acceptance_criteria": ["it ends"], "test_steps": ["none"],
                "key_files": [format!("f{i}.txt")]
            })
        })
        .collect();
    let plan = json!({"project": "drain", "plan_id": "drain", "tasks": tasks}).to_string();
    let report = whilly::plan::check::check_plan(plan.as_bytes(), "plan.json", false);
    let spec = report.valid_plan().expect("valid plan").clone();
    store
        .import_plan(&spec, &ImportOptions::default())
        .await
        .unwrap();
    store
}

struct Setup {
    _dir: tempfile::TempDir,
    store: Arc<dyn Store>,
    stop: watch::Sender<StopLevel>,
    started: mpsc::UnboundedReceiver<AttemptControl>,
    release: Arc<Notify>,
    engine: tokio::task::JoinHandle<whilly::store::StoreResult<whilly::engine::RunSummary>>,
}

async fn start(grace: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_two_tasks(dir.path()).await;
    let mut cfg = EngineConfig::new("drain-test");
    cfg.plan_id = Some("drain".into());
    cfg.slots = 1;
    cfg.grace = grace;
    cfg.poll = Duration::from_millis(20);
    let (stop, rx) = watch::channel(StopLevel::Run);
    let (tx, started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let exec = Held {
        started: tx,
        release: release.clone(),
    };
    let engine = tokio::spawn(Engine::new(store.clone(), Arc::new(exec), cfg, rx).run());
    Setup {
        _dir: dir,
        store,
        stop,
        started,
        release,
        engine,
    }
}

async fn status(store: &Arc<dyn Store>, id: &str) -> String {
    let tasks = store.list_tasks("drain").await.unwrap();
    let t = tasks.iter().find(|t| t.id == id).expect("task");
    t.status.to_string()
}

#[tokio::test]
async fn drain_lets_the_running_attempt_finish_past_the_grace_and_claims_nothing() {
    let grace = Duration::from_millis(20);
    let mut s = start(grace).await;
    let ctl = s.started.recv().await.expect("first attempt");
    s.stop.send(StopLevel::Drain).unwrap();
    // Fifty grace periods: a graceful stop would have asked the attempt to stop long ago.
    tokio::time::sleep(grace * 50).await;
    assert_eq!(ctl.level(), StopLevel::Run, "the attempt was asked to stop");
    s.release.notify_one();
    let summary = s.engine.await.unwrap().unwrap();
    assert_eq!(summary.end, RunEnd::Interrupted, "{summary:?}");
    assert_eq!(summary.done, 1, "{summary:?}");
    assert_eq!(summary.attempts, 1, "nothing new was claimed: {summary:?}");
    assert_eq!(status(&s.store, "T-1").await, "PENDING");
    assert!(s.started.try_recv().is_err(), "a second attempt started");
}

#[tokio::test]
async fn graceful_stops_the_running_attempt_within_the_grace() {
    let mut s = start(Duration::from_secs(30)).await;
    let ctl = s.started.recv().await.expect("first attempt");
    s.stop.send(StopLevel::Graceful).unwrap();
    let mut watch = ctl.clone();
    tokio::time::timeout(Duration::from_secs(10), watch.reached(StopLevel::Graceful))
        .await
        .expect("the attempt is asked to finish up");
    let summary = s.engine.await.unwrap().unwrap();
    assert_eq!(summary.end, RunEnd::Interrupted, "{summary:?}");
    assert_eq!(summary.done, 0, "{summary:?}");
    assert_eq!(status(&s.store, "T-0").await, "PENDING", "released");
    assert_eq!(status(&s.store, "T-1").await, "PENDING");
}
