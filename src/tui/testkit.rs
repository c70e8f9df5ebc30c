//! Hand-built console states for tests and snapshots: fake tasks, a plan, events, sessions and
//! emulators fed with fixed bytes, all with fixed clocks so renders are deterministic.

use super::model::PaneMeta;
use super::state::AppState;
use crate::domain::{PlanSpec, Priority, Status, TaskSpec, Usd};
use crate::engine::sessions::SessionState;
use crate::pty::{Emulator, TermSize};
use crate::store::{Event, PlanRecord, TaskRecord, WorkerRecord};
use chrono::{TimeZone, Utc};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn t0() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 2, 10, 0, 0)
        .single()
        .unwrap_or_default()
}

pub fn task(pk: i64, id: &str, status: Status) -> TaskRecord {
    TaskRecord {
        pk,
        plan_id: "demo".into(),
        id: id.into(),
        status,
        priority: Priority::High,
        pending_deps: 0,
        epoch: 1,
        attempts: i64::from(status != Status::Pending),
        max_attempts: 3,
        worker_id: None,
        lease_expires_at: None,
        deadline_at: None,
        cost: Usd::ZERO,
        reserved: Usd::ZERO,
        reason: None,
        spec: TaskSpec {
            id: id.into(),
            priority: Priority::High,
            description: format!("Implement the {id} part of the demo plan"),
            acceptance_criteria: vec!["it works".into(), "tests pass".into()],
            test_steps: vec!["cargo test".into()],
            key_files: vec![format!("src/{}.rs", id.to_lowercase())],
            ..TaskSpec::default()
        },
        updated_at: t0(),
    }
}

pub fn plan(budget: Option<f64>, spent: f64) -> PlanRecord {
    PlanRecord {
        id: "demo".into(),
        project: "demo".into(),
        paused: false,
        budget: budget.map(Usd::from_f64),
        spent: Usd::from_f64(spent),
        reserved: Usd::ZERO,
        spec: PlanSpec {
            id: "demo".into(),
            project: "demo".into(),
            ..PlanSpec::default()
        },
        created_at: t0(),
        updated_at: t0(),
        archived_at: None,
    }
}

pub fn event(id: i64, kind: &str, task: &str, from: Option<Status>, to: Option<Status>) -> Event {
    Event {
        id,
        ts: t0() + chrono::Duration::seconds(id * 7),
        event_type: kind.into(),
        plan_id: Some("demo".into()),
        task_id: Some(task.into()),
        worker_id: Some("host/1/abc".into()),
        epoch: Some(1),
        from_status: from,
        to_status: to,
        payload: serde_json::json!({}),
    }
}

/// The demo state plus a handoff task waiting for its human (REVIEW-7, with a pane) and DOCS-5
/// parked in HUMAN_LOOP, two workers registered, the wall clock fixed.
pub fn inbox_state(now: Instant) -> AppState {
    let mut s = demo_state(now);
    s.wall = t0() + chrono::Duration::seconds(120);
    let mut tasks = s.tasks.clone();
    tasks[4].status = Status::HumanLoop;
    tasks[4].reason = Some("human_loop".into());
    let mut review = task(7, "REVIEW-7", Status::InProgress);
    review.spec.description = "Review the release notes by hand".into();
    review.spec.agent = Some("handoff".into());
    tasks.push(review);
    let mut parked = event(
        9,
        "task.human_loop",
        "DOCS-5",
        Some(Status::InProgress),
        Some(Status::HumanLoop),
    );
    parked.payload = serde_json::json!({"message": "which doc tool: mdbook or docusaurus?"});
    let plan = s.plan.clone().unwrap_or_else(|| plan(None, 0.0));
    s.set_data(plan, tasks, vec![parked]);
    let mut panes = s.panes.clone();
    let mut human = pane(
        7,
        "REVIEW-7",
        SessionState::WaitingForHuman,
        now,
        Duration::from_secs(30),
    );
    human.agent = "handoff".into();
    human.has_screen = false;
    panes.push(human);
    s.set_panes(panes);
    s.set_workers(vec![
        WorkerRecord {
            id: "build-1/4242/a1b2".into(),
            host: "build-1".into(),
            slots: 3,
            tags: vec!["linux".into()],
            started_at: t0(),
            heartbeat_at: t0() + chrono::Duration::seconds(115),
            offline: false,
        },
        WorkerRecord {
            id: "build-2/77/c3d4".into(),
            host: "build-2".into(),
            slots: 2,
            tags: Vec::new(),
            started_at: t0(),
            heartbeat_at: t0(),
            offline: false,
        },
    ]);
    s
}

/// An instant far enough from the clock's origin that subtracting minutes is safe.
pub fn fixed_now() -> Instant {
    let now = Instant::now();
    now.checked_add(Duration::from_secs(3600)).unwrap_or(now)
}

pub fn pane(pk: i64, id: &str, state: SessionState, now: Instant, age: Duration) -> PaneMeta {
    PaneMeta {
        task_pk: pk,
        task_id: id.into(),
        agent: "command".into(),
        attempt: 1,
        started: now.checked_sub(age).unwrap_or(now),
        state,
        has_screen: true,
        waiting_input: false,
        remote: None,
        note: None,
    }
}

/// A plan of six tasks: two running with panes, one done, one failed, two pending (one waiting
/// on dependencies), $3.20 of $4.00 spent (the 80 % warning), 65 s into the run.
pub fn demo_state(now: Instant) -> AppState {
    let mut s = AppState::new(
        "sqlite",
        now.checked_sub(Duration::from_secs(65)).unwrap_or(now),
    );
    s.now = now;
    let mut tasks = vec![
        task(1, "AUTH-1", Status::Done),
        task(2, "API-2", Status::InProgress),
        task(3, "UI-3", Status::InProgress),
        task(4, "DB-4", Status::Failed),
        task(5, "DOCS-5", Status::Pending),
        task(6, "E2E-6", Status::Pending),
    ];
    tasks[0].cost = Usd::from_f64(1.25);
    tasks[1].cost = Usd::from_f64(0.75);
    tasks[3].cost = Usd::from_f64(1.2);
    tasks[3].reason = Some("verification_failed".into());
    tasks[3].attempts = 3;
    tasks[5].spec.dependencies = vec!["API-2".into(), "UI-3".into()];
    tasks[5].pending_deps = 2;
    tasks[4].priority = Priority::Low;
    let events = vec![
        event(
            1,
            "task.claimed",
            "AUTH-1",
            Some(Status::Pending),
            Some(Status::Claimed),
        ),
        event(
            2,
            "task.started",
            "AUTH-1",
            Some(Status::Claimed),
            Some(Status::InProgress),
        ),
        event(
            3,
            "task.done",
            "AUTH-1",
            Some(Status::InProgress),
            Some(Status::Done),
        ),
        event(
            4,
            "task.claimed",
            "API-2",
            Some(Status::Pending),
            Some(Status::Claimed),
        ),
        event(
            5,
            "task.started",
            "API-2",
            Some(Status::Claimed),
            Some(Status::InProgress),
        ),
        event(
            6,
            "task.claimed",
            "UI-3",
            Some(Status::Pending),
            Some(Status::Claimed),
        ),
        event(
            7,
            "task.started",
            "UI-3",
            Some(Status::Claimed),
            Some(Status::InProgress),
        ),
        event(
            8,
            "task.failed",
            "DB-4",
            Some(Status::InProgress),
            Some(Status::Failed),
        ),
    ];
    let mut events = events;
    events[2].payload =
        serde_json::json!({"usage": {"input_tokens": 12_400, "output_tokens": 1_850}});
    events[7].payload = serde_json::json!({"reason": "verification_failed", "evidence": {
        "agent": "command", "exit": "exit 0", "attempt_cost_usd": 0.4,
        "verification": [{"round": 3, "passed": false, "checks": [
            {"name": "tests", "passed": false, "exit_code": 101,
             "output": "running 12 tests\ntest db::migrate ... FAILED\nerror: 1 test failed"}]}]}});
    s.wall = t0() + chrono::Duration::seconds(65);
    s.set_data(plan(Some(4.0), 3.2), tasks, events);
    s.set_panes(vec![
        pane(
            2,
            "API-2",
            SessionState::Running,
            now,
            Duration::from_secs(42),
        ),
        pane(
            3,
            "UI-3",
            SessionState::Verifying,
            now,
            Duration::from_secs(5),
        ),
    ]);
    s
}

/// An emulator that was fed `bytes`.
pub fn emulator(rows: u16, cols: u16, bytes: &[u8]) -> Emulator {
    let mut e = Emulator::new(TermSize::new(rows, cols), 100);
    e.process(bytes);
    e
}

/// Screens for the panes of [`demo_state`].
pub fn demo_screens() -> BTreeMap<i64, Emulator> {
    let mut m = BTreeMap::new();
    m.insert(
        2,
        emulator(
            40,
            160,
            b"$ agent --task API-2\r\n\x1b[32mworking 1\x1b[0m\r\nworking 2\r\nediting src/api.rs\r\n",
        ),
    );
    m.insert(
        3,
        emulator(
            40,
            160,
            b"\x1b[1mUI-3\x1b[0m build\r\nrunning checks: cargo test\r\ntest result: ok. 12 passed\r\n",
        ),
    );
    m
}

/// The agent's split of the demo's DOCS-5 into DOCS-5a and DOCS-5b, as it comes back to the
/// console's split dialog.
pub fn demo_split() -> crate::prd::decompose::Decomposition {
    use crate::plan::decompose::{DependentsOn, Split, SplitRules, Subtask, apply, task_split};
    let parent = TaskSpec {
        id: "DOCS-5".into(),
        description: "Write the docs of the whole demo.".into(),
        acceptance_criteria: vec!["one".into(), "two".into()],
        test_steps: vec!["cargo test".into()],
        ..TaskSpec::default()
    };
    let before = PlanSpec {
        id: "demo".into(),
        project: "demo".into(),
        tasks: vec![parent],
        ..PlanSpec::default()
    };
    let sub = |suffix: &str, ac: &str| Subtask {
        suffix: suffix.into(),
        description: format!("Write part {suffix} of the demo docs."),
        acceptance_criteria: vec![ac.into()],
        key_files: vec![],
        test_steps: vec!["cargo test".into()],
        depends_on: None,
    };
    let split = Split {
        subtasks: vec![sub("a", "one"), sub("b", "two")],
        dependents_on: DependentsOn::Last,
    };
    let after = apply(&before, "DOCS-5", &split, SplitRules::default())
        .unwrap_or_else(|e| panic!("the demo split applies: {e}"));
    crate::prd::decompose::Decomposition {
        splits: vec![crate::prd::decompose::DoneSplit {
            task: "DOCS-5".into(),
            reason: "named".into(),
            change: task_split(&before, &after, "DOCS-5"),
            split,
            calls: 1,
        }],
        before,
        after,
        cost: Usd::ZERO,
    }
}
