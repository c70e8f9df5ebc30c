//! The status page's data and HTML, without a server: what a snapshot holds for a known queue,
//! and that nothing untrusted reaches the page unescaped.

use super::render::{duration_text, esc, page};
use super::snapshot::{StatusInputs, build};
use crate::domain::{Status, Usd};
use crate::engine::awaiting_human::InboxKind;
use crate::store::{PlanSummary, StatusCounts, WorkerRecord, event_types as et};
use crate::tui::testkit::{event, plan, task};
use chrono::Duration as Age;
use std::time::Duration;

const HOSTILE: &str = r#"<script>alert("x")</script> & 'q'"#;

fn inputs() -> StatusInputs {
    let mut counts = StatusCounts::default();
    for (s, n) in [
        (Status::Done, 3),
        (Status::InProgress, 1),
        (Status::Pending, 2),
    ] {
        counts.by_status.insert(s, n);
    }
    counts.by_status.insert(Status::HumanLoop, 1);
    counts.by_status.insert(Status::Failed, 0);
    counts.total = 7;
    let mut p = plan(Some(10.0), 2.5);
    p.reserved = Usd::from_f64(1.0);
    let mut running = task(1, "AUTH-1", Status::InProgress);
    running.attempts = 2;
    running.cost = Usd::from_f64(0.42);
    running.worker_id = Some("box-1/7".into());
    running.spec.description = format!("{HOSTILE}\nsecond line");
    let mut parked = task(2, "DOCS-5", Status::HumanLoop);
    parked.reason = Some("needs_review".into());
    let mut handoff = task(3, "REVIEW-7", Status::InProgress);
    handoff.spec.agent = Some("handoff".into());
    let started = event(10, et::TASK_STARTED, "AUTH-1", None, None);
    let mut parked_ev = event(11, et::TASK_HUMAN_LOOP, "DOCS-5", None, None);
    parked_ev.payload = serde_json::json!({"message": "check the wording"});
    let mut hostile_ev = event(12, "task.cost", "AUTH-1", None, None);
    hostile_ev.payload = serde_json::json!({"note": HOSTILE});
    let now = started.ts + Age::seconds(65);
    StatusInputs {
        backend: "sqlite".into(),
        plans: vec![PlanSummary { plan: p, counts }],
        tasks: vec![running, parked, handoff],
        workers: vec![
            WorkerRecord {
                id: "box-1/7".into(),
                host: "box-1".into(),
                slots: 2,
                tags: vec![],
                started_at: now - Age::seconds(600),
                heartbeat_at: now - Age::seconds(3),
                offline: false,
            },
            WorkerRecord {
                id: "box-2/9".into(),
                host: "box-2".into(),
                slots: 1,
                tags: vec![],
                started_at: now - Age::seconds(600),
                heartbeat_at: now - Age::seconds(300),
                offline: false,
            },
        ],
        recent: vec![started.clone(), parked_ev.clone(), hostile_ev],
        task_events: vec![started, parked_ev],
    }
}

fn now() -> chrono::DateTime<chrono::Utc> {
    event(10, et::TASK_STARTED, "AUTH-1", None, None).ts + Age::seconds(65)
}

#[test]
fn a_snapshot_holds_progress_budget_running_workers_inbox_and_events() {
    let s = build(&inputs(), now(), Duration::from_secs(30), Some("claude"));
    let p = &s.plans[0];
    assert_eq!((p.done, p.total), (3, 7));
    assert_eq!(p.states.get(&Status::InProgress), Some(&1));
    assert!(
        !p.states.contains_key(&Status::Failed),
        "zero counts left out"
    );
    assert_eq!(p.remaining_usd, Some(Usd::from_f64(6.5)), "10 - 2.5 - 1");

    assert_eq!(s.running.len(), 2);
    let r = &s.running[0];
    assert_eq!(r.task_id, "AUTH-1");
    assert_eq!(r.agent, "claude", "the configured default");
    assert_eq!(r.attempt, "2/3");
    assert_eq!(r.elapsed_secs, Some(65));
    assert_eq!(r.cost_usd, Usd::from_f64(0.42));
    assert_eq!(r.title, HOSTILE, "the first line of the description");
    assert_eq!(s.running[1].agent, "handoff");

    let online: Vec<bool> = s.workers.iter().map(|w| w.online).collect();
    assert_eq!(online, [true, false]);
    assert_eq!(s.workers[1].heartbeat_age_secs, 300);

    let inbox: Vec<(&str, InboxKind)> = s
        .inbox
        .iter()
        .map(|i| (i.task_id.as_str(), i.kind))
        .collect();
    assert_eq!(
        inbox,
        [
            ("DOCS-5", InboxKind::HumanLoop),
            ("REVIEW-7", InboxKind::Handoff)
        ]
    );
    assert_eq!(s.inbox[0].note, "needs_review: check the wording");

    let ids: Vec<i64> = s.events.iter().map(|e| e.id).collect();
    assert_eq!(ids, [12, 11, 10], "newest first");
    assert_eq!(s.last_event_id, 12);

    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["plans"][0]["remaining_usd"], 6.5);
    assert_eq!(json["plans"][0]["states"]["IN_PROGRESS"], 1);
    assert_eq!(json["running"][0]["cost_usd"], 0.42);
    assert_eq!(json["inbox"][0]["kind"], "human_loop");
}

#[test]
fn without_a_known_default_the_agent_says_so() {
    let s = build(&inputs(), now(), Duration::from_secs(30), None);
    assert_eq!(s.running[0].agent, "(default)");
}

#[test]
fn the_page_shows_everything_and_escapes_every_untrusted_string() {
    let s = build(&inputs(), now(), Duration::from_secs(30), Some("claude"));
    let html = page(&s, et::ALL);
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains(r#"name="viewport""#));
    for want in [
        "AUTH-1",
        "claude",
        "2/3",
        "1m 05s",
        "$0.42",
        "3/7 done",
        "$6.50 left",
        "box-2/9",
        "offline",
        "human loop",
        "needs_review: check the wording",
        "task.human_loop",
        r#"data-last-event="12""#,
    ] {
        assert!(html.contains(want), "{want:?} missing");
    }
    // The script is the only <script>: the hostile title and payload arrive as text.
    assert_eq!(html.matches("<script>").count(), 1, "{html}");
    assert!(!html.contains("alert(\"x\")"));
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;"));
    // The payload is JSON first, then escaped.
    assert!(html.contains("&lt;script&gt;alert(\\&quot;x\\&quot;)"));
}

#[test]
fn an_empty_queue_renders_a_page_that_says_so() {
    let s = build(
        &StatusInputs::default(),
        now(),
        Duration::from_secs(30),
        None,
    );
    let html = page(&s, et::ALL);
    for want in [
        "No plans yet",
        "Nothing is running.",
        "Nothing waits for a human.",
        "No workers registered.",
        "No events yet.",
    ] {
        assert!(html.contains(want), "{want:?}");
    }
}

#[test]
fn escaping_and_durations() {
    assert_eq!(
        esc(r#"<a href="x">&'"#),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
    );
    assert_eq!(esc("plain ü"), "plain ü");
    let cases = [
        (0, "0s"),
        (59, "59s"),
        (65, "1m 05s"),
        (3720, "1h 02m"),
        (97200, "1d 03h"),
    ];
    for (secs, want) in cases {
        assert_eq!(duration_text(secs), want);
    }
    assert_eq!(duration_text(-5), "0s");
}
