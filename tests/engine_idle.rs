//! The engine waits without spinning: with every slot busy and more tasks ready, the loop must
//! sleep until an attempt ends or a timer is due. (A regression: the store's wait-for-work
//! answered at once while events were newer than the last fruitless claim, and with full slots
//! no claim was ever made, so the loop burned a whole core for the length of every run.)
//!
//! Alone in its own test binary, so the process's CPU time is the engine's.

use async_trait::async_trait;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use whilly::domain::Usd;
use whilly::engine::control::AttemptControl;
use whilly::engine::executor::{AttemptOutcome, Executor};
use whilly::engine::{Engine, EngineConfig, StopLevel};
use whilly::store::{Claimed, ImportOptions, PlanRecord};

/// An agent that takes `hold` and succeeds.
struct Slow {
    hold: Duration,
}

#[async_trait]
impl Executor for Slow {
    async fn execute(&self, _c: Claimed, _p: PlanRecord, _ctl: AttemptControl) -> AttemptOutcome {
        tokio::time::sleep(self.hold).await;
        AttemptOutcome::Done {
            cost: Usd::ZERO,
            evidence: json!({}),
        }
    }
}

/// User plus system CPU time of this process.
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage into the pointer it is given.
    let usage = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr());
        usage.assume_init()
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

fn plan_json(n: usize) -> String {
    let tasks: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            json!({
                "id": format!("T-{i}"), "status": "pending", "priority": "medium",
                "description": format!("task {i}: hold a slot for a while so the engine waits"),
                "acceptance_criteria": ["it ends"], "test_steps": ["none"],
                "key_files": [format!("f{i}.txt")]
            })
        })
        .collect();
    json!({"project": "idle", "plan_id": "idle", "tasks": tasks}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_engine_sleeps_while_its_agents_work() {
    let dir = tempfile::tempdir().unwrap();
    let target = whilly::store::open::target_from(None, dir.path()).unwrap();
    let store = whilly::store::open::open(&target, Path::new(dir.path()))
        .await
        .unwrap();
    let report = whilly::plan::check::check_plan(plan_json(4).as_bytes(), "plan.json", false);
    let spec = report.valid_plan().expect("valid plan").clone();
    store
        .import_plan(
            &spec,
            &ImportOptions {
                default_max_attempts: 3,
                ..ImportOptions::default()
            },
        )
        .await
        .unwrap();

    let mut cfg = EngineConfig::new("idle-test");
    cfg.plan_id = Some("idle".into());
    cfg.slots = 2;
    cfg.poll = Duration::from_millis(200);
    let (_tx, rx) = tokio::sync::watch::channel(StopLevel::Run);
    let hold = Duration::from_secs(2);
    let engine = Engine::new(store.clone(), Arc::new(Slow { hold }), cfg, rx);

    let cpu0 = cpu_time();
    let wall0 = Instant::now();
    let summary = engine.run().await.unwrap();
    let wall = wall0.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);

    assert_eq!(summary.done, 4, "{summary:?}");
    // Two rounds of two 2-second attempts, with slots full the whole time.
    assert!(wall >= hold * 2, "{wall:?}");
    // A spinning loop takes ~100 % of a core; a waiting one a few percent at most.
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    assert!(
        share < 0.25,
        "the engine used {:.0} % of a core while its agents slept ({cpu:?} CPU in {wall:?})",
        share * 100.0
    );
}
