//! Every plan file published with the original Whilly parses, checks clean, exports canonically
//! and round-trips byte for byte.

use std::path::{Path, PathBuf};
use whilly::domain::{PlanFormat, PlanSpec, Priority, Status, Usd};
use whilly::plan::{self, Severity, TrizSeverity, Verdict};
use whilly::store::{PlanStore, TaskQueue};

fn compat_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/original-plans")
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plans")
        .join(name)
}

fn compat_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(compat_dir())
        .expect("tests/fixtures/original-plans must exist")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 5,
        "expected the five original plans, found {files:?}"
    );
    files
}

fn load(path: &Path) -> PlanSpec {
    let report = plan::load_plan_file(path, false).expect("readable");
    let errors: Vec<String> = report
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| plan::render_diagnostic(&report.file, d))
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
    report.plan.expect("plan")
}

/// The export always says v4; everything else must survive.
fn same_semantics(a: &PlanSpec, b: &PlanSpec) -> bool {
    PlanSpec {
        format: a.format,
        ..b.clone()
    } == *a
}

#[test]
fn every_compat_plan_checks_exports_and_round_trips() {
    for path in compat_files() {
        let name = path.display().to_string();
        let report = plan::load_plan_file(&path, true).expect("readable");
        assert!(
            !report.has_errors(),
            "{name}:\n{}",
            plan::render_check(&report, false)
        );
        assert_eq!(
            report.warning_count(),
            0,
            "{name}:\n{}",
            plan::render_check(&report, false)
        );
        let original = report.plan.expect("plan");
        assert!(!original.tasks.is_empty(), "{name}");

        let exported = plan::canonical_json(&original);
        let reparsed = plan::parse_plan(exported.as_bytes(), "export");
        assert!(
            reparsed.diagnostics.is_empty(),
            "{name}: {:?}",
            reparsed.diagnostics
        );
        let reparsed = reparsed.plan.expect("plan");
        assert_eq!(reparsed.format, PlanFormat::V4, "{name}");
        assert!(
            same_semantics(&original, &reparsed),
            "{name}\n{original:#?}\n{reparsed:#?}"
        );
        assert_eq!(
            plan::canonical_json(&reparsed),
            exported,
            "{name}: export is not idempotent"
        );

        // The canonical text checks as cleanly as the original.
        let recheck = plan::check_plan(exported.as_bytes(), "export", true);
        assert!(!recheck.has_errors(), "{name}: {:?}", recheck.diagnostics);
    }
}

#[test]
fn v3_fixture_reads_as_v3_with_project_as_id() {
    let p = load(&compat_dir().join("v3_tasks.json"));
    assert_eq!(p.format, PlanFormat::V3);
    assert_eq!(p.id, "v3-fixture-sample");
    assert_eq!(p.project, "v3-fixture-sample");
    assert_eq!(p.tasks.len(), 3);
    assert_eq!(p.tasks[2].status, Some(Status::Done));
    assert_eq!(p.tasks[1].dependencies, ["TASK-001"]);
    // Informational keys survive in extra, Russian text intact.
    let before = p.extra["agent_instructions"]["before"][0]
        .as_str()
        .expect("text");
    assert!(before.starts_with("Прочитай tasks.json"), "{before}");
    assert!(p.extra.contains_key("prd_file") && p.extra.contains_key("created_at"));
}

#[test]
fn v4_fixture_reads_plan_id_and_priorities() {
    let p = load(&compat_dir().join("v4_tasks.json"));
    assert_eq!(p.format, PlanFormat::V4);
    assert_eq!(
        (p.id.as_str(), p.project.as_str()),
        ("v4-fixture", "v4-fixture-sample")
    );
    let prios: Vec<Priority> = p.tasks.iter().map(|t| t.priority).collect();
    assert_eq!(
        prios,
        [
            Priority::Critical,
            Priority::High,
            Priority::Medium,
            Priority::Low
        ]
    );
    assert_eq!(p.tasks[2].category.as_deref(), Some("feat"));
}

/// The original's batching rule, held by the queue's real claim on a real SQLite file:
/// TASK-002 and TASK-003 share a key file and never run together; TASK-004 (after TASK-002)
/// runs beside TASK-003; the claim hands them out by priority.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn v4_fixture_batches_as_the_original_documents() {
    use std::time::Duration;
    use whilly::store::{ClaimRequest, ImportOptions, Outcome, Store};
    let p = load(&compat_dir().join("v4_tasks.json"));
    let dir = tempfile::tempdir().unwrap();
    let store = whilly::store::sqlite::SqliteStore::open(&dir.path().join("whilly.db"), None)
        .await
        .unwrap();
    store
        .import_plan(&p, &ImportOptions::default())
        .await
        .unwrap();
    let store = &store;
    let claim = || async move {
        let mut r = ClaimRequest::new("w");
        r.lease = Duration::from_secs(60);
        store.claim(&r).await.unwrap()
    };
    let done = |lease| async move {
        store.start(lease, None).await.unwrap();
        store.complete(lease, &Outcome::default()).await.unwrap();
    };
    let first = claim().await.expect("TASK-001 is ready");
    assert_eq!(first.task.id, "TASK-001");
    assert!(claim().await.is_none(), "the rest wait for TASK-001");
    done(first.lease).await;
    let second = claim().await.expect("TASK-002 and TASK-003 are ready");
    assert_eq!(second.task.id, "TASK-002", "high before medium");
    assert!(
        claim().await.is_none(),
        "TASK-003 shares TASK-002's key file; TASK-004 waits for TASK-002"
    );
    done(second.lease).await;
    let third = claim().await.expect("TASK-003");
    let fourth = claim().await.expect("TASK-004 runs beside TASK-003");
    assert_eq!(
        [third.task.id.as_str(), fourth.task.id.as_str()],
        ["TASK-003", "TASK-004"]
    );
    store.close().await;
}

#[test]
fn triz_on_compat_plans_is_deterministic() {
    let v4 = load(&compat_dir().join("v4_tasks.json"));
    let r = plan::triz_report(&v4);
    let kinds: Vec<&str> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, ["resource_conflict"]);
    assert_eq!(r.findings[0].task_ids, ["TASK-002", "TASK-003"]);
    assert_eq!(r.findings[0].severity, TrizSeverity::Medium);
    assert_eq!(r.verdict, Verdict::Revise);
    // 1 - 1 / 12
    assert_eq!(r.ideality, 0.917);
    assert_eq!(
        plan::render_triz(&r, true),
        plan::render_triz(&plan::triz_report(&v4), true)
    );

    for name in [
        "demo_parallel.json",
        "demo_tasks.json",
        "v3_tasks.json",
        "workshop_tasks.json",
    ] {
        let r = plan::triz_report(&load(&compat_dir().join(name)));
        assert_eq!(r.verdict, Verdict::Approve, "{name}: {:?}", r.findings);
    }
}

#[test]
fn our_additions_round_trip() {
    let path = fixture("full_v4.json");
    let p = load(&path);
    assert_eq!(p.budget_usd, Some(Usd(25_500_000)));
    assert_eq!(p.agent.as_deref(), Some("claude"));
    assert_eq!(p.verification_commands.len(), 2);
    assert_eq!(p.verification_commands[0].timeout_secs, Some(900));
    assert!(!p.verification_commands[1].required);
    assert_eq!(p.repo_targets[0].repo.as_deref(), Some("acme/app"));
    let t = &p.tasks[0];
    assert_eq!(t.status, Some(Status::Pending));
    assert_eq!(t.timeout_secs, Some(5400));
    assert_eq!(t.budget_usd, Some(Usd(3_000_000)));
    assert_eq!(
        (t.agent.as_deref(), t.max_attempts),
        (Some("codex"), Some(2))
    );
    assert_eq!(t.tags, ["linux"]);
    assert_eq!(t.extra.len(), 3);
    assert_eq!(p.tasks[1].status, Some(Status::InProgress));

    let text = plan::canonical_json(&p);
    assert!(text.contains("\"status\": \"in_progress\""), "{text}");
    assert!(text.contains("\"timeout\": 5400"), "{text}");
    let again = plan::parse_plan(text.as_bytes(), "x").plan.expect("plan");
    assert!(same_semantics(&p, &again));
    assert_eq!(plan::canonical_json(&again), text);
}
