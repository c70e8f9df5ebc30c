//! Bad plan files get precise, complete diagnostics and never a panic.

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use whilly::domain::{PlanSpec, TaskSpec};
use whilly::plan::{self, CheckReport, Location, PlanFileError, Severity};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/plans")
        .join(name)
}

fn check_fixture(name: &str) -> CheckReport {
    plan::load_plan_file(&fixture(name), false).expect("readable")
}

fn found(r: &CheckReport) -> Vec<(&'static str, String)> {
    r.diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| {
            let at = match &d.location {
                Location::Pointer(p) => p.clone(),
                Location::LineCol { line, col } => format!("{line}:{col}"),
                Location::File => String::new(),
            };
            (d.code, at)
        })
        .collect()
}

#[test]
fn malformed_json_names_line_and_column() {
    let r = check_fixture("bad_syntax.json");
    assert!(r.plan.is_none());
    assert_eq!(found(&r), [("json_syntax", "4:64".to_string())]);
    let text = plan::render_check(&r, false);
    assert!(
        text.contains("bad_syntax.json:4:64: error[json_syntax]: trailing comma"),
        "{text}"
    );
}

#[test]
fn wrong_types_are_all_reported_with_pointers() {
    let r = check_fixture("wrong_types.json");
    let got = found(&r);
    for (code, ptr) in [
        ("wrong_type", "/tasks/3/status"),
        ("wrong_type", "/tasks/3/priority"),
        ("wrong_type", "/tasks/3/description"),
        ("wrong_type", "/tasks/3/dependencies"),
        ("wrong_type", "/tasks/3/key_files/0"),
        ("wrong_type", "/tasks/3/budget_usd"),
        ("bad_timeout", "/tasks/3/timeout"),
        ("wrong_type", "/tasks/3/max_attempts"),
    ] {
        assert!(
            got.contains(&(code, ptr.to_string())),
            "{code} {ptr} missing from {got:?}"
        );
    }
    let text = plan::render_check(&r, false);
    assert!(
        text.contains(
            "wrong_types.json:8:30: error[wrong_type]: /tasks/3/priority: expected one of \"critical\", \"high\", \"medium\", \"low\" (or p0–p3), got 5"
        ),
        "{text}"
    );
    assert!(text.contains("wrap it in a list: [\"A\"]"), "{text}");
    // The plan is still produced, so `plan triz` can explain it.
    assert_eq!(r.plan.as_ref().expect("plan").tasks.len(), 4);
}

#[test]
fn unknown_fields_are_kept_and_exported() {
    let r = check_fixture("unknown_fields.json");
    assert!(!r.has_errors(), "{:?}", r.diagnostics);
    let p = r.plan.expect("plan");
    let keys: Vec<&String> = p.extra.keys().collect();
    assert_eq!(keys, ["prd_file", "source", "custom_top"]);
    let t = &p.tasks[0];
    assert_eq!(t.extra["my_note"], json!({"b": 2, "a": 1}));
    assert_eq!(t.extra["weird key/with~chars"], json!(1.25));
    let text = plan::canonical_json(&p);
    // Sorted at the top level of each object, nested order kept.
    let custom = text.find("\"custom_top\"").expect("custom_top");
    let prd = text.find("\"prd_file\"").expect("prd_file");
    let source = text.find("\"source\"").expect("source");
    assert!(custom < prd && prd < source, "{text}");
    assert!(
        text.contains("\"my_note\": {\n        \"b\": 2,\n        \"a\": 1\n      }"),
        "{text}"
    );
    let again = plan::parse_plan(text.as_bytes(), "x").plan.expect("plan");
    assert_eq!(again.extra, p.extra);
    assert_eq!(again.tasks[0].extra, t.extra);
}

#[test]
fn cycles_are_reported_with_their_path() {
    let r = check_fixture("cycle.json");
    assert_eq!(
        found(&r),
        [
            ("self_dependency", "/tasks/3/dependencies/0".to_string()),
            ("cycle", "/tasks/0/dependencies".to_string())
        ]
    );
    let cycle = r
        .diagnostics
        .iter()
        .find(|d| d.code == "cycle")
        .expect("cycle");
    assert_eq!(cycle.message, "dependency cycle: A → B → C → A");
    let started = Instant::now();
    let triz = plan::triz_report(r.plan.as_ref().expect("plan"));
    eprintln!("triz of 10,000 tasks: {:?}", started.elapsed());
    assert_eq!(triz.verdict, plan::Verdict::Reject);
    assert_eq!(
        triz.findings
            .iter()
            .filter(|f| f.kind == "dependency_contradiction")
            .count(),
        2
    );
}

#[test]
fn traversal_ids_are_refused() {
    let r = check_fixture("traversal.json");
    let got = found(&r);
    assert_eq!(got[0], ("bad_id", "/tasks/0/id".to_string()));
    assert_eq!(got[1], ("bad_id", "/tasks/1/id".to_string()));
    assert!(
        r.diagnostics[0].message.contains("\"../../etc\""),
        "{}",
        r.diagnostics[0].message
    );
    assert!(r.valid_plan().is_none());
}

#[test]
fn duplicate_ids_point_at_the_second_occurrence() {
    let r = check_fixture("duplicate_ids.json");
    assert_eq!(found(&r), [("duplicate_id", "/tasks/2/id".to_string())]);
    assert!(
        r.diagnostics[0]
            .message
            .contains("first defined at /tasks/0"),
        "{}",
        r.diagnostics[0].message
    );
}

#[test]
fn invalid_utf8_names_line_and_column() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("latin1.json");
    // "Gr\xFC\xDFe" is Latin-1, as an editor with the wrong encoding would save it.
    std::fs::write(&path, b"{\n  \"project\": \"p\",\n  \"tasks\": [{\"id\": \"A\", \"description\": \"Gr\xFC\xDFe\"}]\n}\n")
        .expect("write");
    let r = plan::load_plan_file(&path, false).expect("readable");
    let got = found(&r);
    assert_eq!(got[0], ("invalid_utf8", "3:43".to_string()));
    assert!(
        r.diagnostics[0].message.contains("0xFC"),
        "{}",
        r.diagnostics[0].message
    );
    assert!(r.plan.is_none());
}

#[test]
fn a_100_mb_file_is_refused_before_reading() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("huge.json");
    let f = std::fs::File::create(&path).expect("create");
    // Sparse: no 100 MB are written, only the size is set.
    f.set_len(100 * 1024 * 1024).expect("set_len");
    drop(f);
    let started = Instant::now();
    let e = plan::load_plan_file(&path, false).expect_err("refused");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    match &e {
        PlanFileError::TooLarge { size, limit, .. } => {
            assert_eq!(*size, 100 * 1024 * 1024);
            assert_eq!(*limit, 32 * 1024 * 1024);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let msg = e.to_string();
    assert!(
        msg.contains("104857600") && msg.contains("33554432"),
        "{msg}"
    );
}

#[test]
fn ten_thousand_tasks_check_quickly() {
    let tasks: Vec<Value> = (0..10_000)
        .map(|i| {
            let deps: Vec<String> = if i == 0 {
                vec![]
            } else {
                vec![format!("T-{}", i - 1), format!("T-{}", i / 2)]
            };
            let priority = if i % 2 == 0 { "high" } else { "low" };
            json!({
                "id": format!("T-{i}"), "status": "pending", "priority": priority,
                "description": format!("Task number {i} with a long enough description"),
                "dependencies": deps, "key_files": [format!("src/f{}.rs", i % 500)],
                "acceptance_criteria": ["done"], "test_steps": ["true"]
            })
        })
        .collect();
    let text = json!({"project": "big", "plan_id": "big", "tasks": tasks}).to_string();
    let started = Instant::now();
    let r = plan::check_plan(text.as_bytes(), "big.json", true);
    let elapsed = started.elapsed();
    eprintln!("check of 10,000 tasks: {elapsed:?}");
    assert!(
        !r.has_errors(),
        "{:?}",
        &r.diagnostics[..r.diagnostics.len().min(3)]
    );
    assert_eq!(r.plan.as_ref().expect("plan").tasks.len(), 10_000);
    // Debug builds are ~10× slower than release (where this is a few ms); the bound only
    // catches quadratic behaviour.
    assert!(elapsed < Duration::from_secs(3), "check took {elapsed:?}");
    let started = Instant::now();
    let triz = plan::triz_report(r.plan.as_ref().expect("plan"));
    eprintln!("triz of 10,000 tasks: {:?}", started.elapsed());
    // Every task waits for the one before it: sharing a file is no conflict for any of them.
    assert_eq!(triz.findings.len(), 0);
}

/// A plan built in code with odd but legal values exports and re-reads to the same plan.
#[test]
fn odd_values_survive_export() {
    let plan = PlanSpec {
        id: "p".into(),
        project: "проект \"quoted\" \\ back".into(),
        tasks: vec![TaskSpec {
            id: "T".into(),
            description: "line\nbreak\ttab \u{1F600}".into(),
            ..TaskSpec::default()
        }],
        ..PlanSpec::default()
    };
    let text = plan::canonical_json(&plan);
    let back = plan::parse_plan(text.as_bytes(), "x").plan.expect("plan");
    assert_eq!(back.project, plan.project);
    assert_eq!(back.tasks[0].description, plan.tasks[0].description);
    assert_eq!(plan::canonical_json(&back), text);
}

#[test]
fn nul_characters_are_refused_where_they_are() {
    let text = r#"{
  "project": "p",
  "tasks": [
    {"id": "T-1", "status": "pending", "priority": "high",
     "description": "before \u0000 after, long enough to pass the gate of vague tasks",
     "acceptance_criteria": ["ok"], "test_steps": ["true"], "key_files": ["a\u0000b"],
     "dependencies": []}
  ]
}"#;
    let r = plan::check_plan(text.as_bytes(), "nul.json", false);
    assert_eq!(
        found(&r),
        [
            ("nul_byte", "/tasks/0/description".to_string()),
            ("nul_byte", "/tasks/0/key_files/0".to_string())
        ]
    );
    assert!(r.has_errors(), "nothing is imported");
    let shown = plan::render_check(&r, false);
    assert!(shown.contains("nul.json:5:"), "{shown}");
    assert!(shown.contains("NUL"), "{shown}");
}

#[test]
fn lone_surrogates_are_refused_with_their_position() {
    let text =
        "{\"project\": \"p\", \"tasks\": [{\"id\": \"T-1\", \"description\": \"x\\ud800y\"}]}";
    let r = plan::check_plan(text.as_bytes(), "s.json", false);
    let got = found(&r);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, "json_syntax");
    assert!(got[0].1.starts_with("1:"), "{got:?}");
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-1e12f64..1e12).prop_map(|f| json!(f)),
        "[a-zA-Z0-9 ./:_-]{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "pending",
            "DONE",
            "in_progress",
            "high",
            "p0",
            "../x",
            "30m",
            "1h30m",
            "",
            "A",
            "B",
            "C",
            // NULs, control characters and escapes: refused or kept, never a panic.
            "\u{0}",
            "before \u{0} after",
            "\u{1b}[31mred\u{1b}[0m",
            "\u{7f}\u{1}\u{1f}",
            "\t\r\n",
        ])
        .prop_map(|s| Value::String(s.to_string())),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_tree(4, 48)
}

fn json_tree(depth: u32, size: u32) -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(depth, size, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

/// Mostly the keys a plan has, so the walker's branches are reached, plus some noise.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "id", "status", "priority", "description", "dependencies", "key_files", "acceptance_criteria",
            "test_steps", "phase", "category", "prd_requirement", "repo_target_id", "budget_usd", "timeout",
            "agent", "max_attempts", "tags", "name", "command", "required", "repair_max_attempts",
            "repo_full_name", "repo", "provider",
        ])
        .prop_map(String::from),
        1 => "[a-z_]{1,8}",
    ]
}

fn task_like() -> impl Strategy<Value = Value> {
    // Shallow values: the fields are what matter here, and deep trees only slow the suite.
    prop::collection::vec((key(), json_tree(2, 8)), 0..10)
        .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<String, Value>>()))
}

fn plan_like() -> impl Strategy<Value = Value> {
    (
        prop::option::of(json_leaf()),
        prop::option::of(json_leaf()),
        prop::collection::vec(task_like(), 0..8),
        prop::option::of(json_tree(3, 16)),
        prop::option::of(json_tree(3, 16)),
        prop::option::of(json_leaf()),
    )
        .prop_map(|(project, plan_id, tasks, vcs, targets, budget)| {
            let mut m = Map::new();
            if let Some(p) = project {
                m.insert("project".into(), p);
            }
            if let Some(p) = plan_id {
                m.insert("plan_id".into(), p);
            }
            if let Some(v) = vcs {
                m.insert("verification_commands".into(), v);
            }
            if let Some(v) = targets {
                m.insert("repo_targets".into(), v);
            }
            if let Some(b) = budget {
                m.insert("budget_usd".into(), b);
            }
            m.insert("tasks".into(), Value::Array(tasks));
            Value::Object(m)
        })
}

/// Whatever plan was read, the export is canonical: re-reading it gives the same plan, and
/// exporting that gives the same bytes.
fn assert_round_trip(p: &PlanSpec) -> Result<(), TestCaseError> {
    let text = plan::canonical_json(p);
    let back = plan::parse_plan(text.as_bytes(), "export").plan;
    prop_assert!(back.is_some(), "export unreadable:\n{}", text);
    let back = back.unwrap_or_default();
    prop_assert_eq!(
        &PlanSpec {
            format: p.format,
            ..back.clone()
        },
        p
    );
    prop_assert_eq!(plan::canonical_json(&back), text);
    Ok(())
}

proptest! {
    // XorShift: the default ChaCha generator, unoptimised in test builds, cost more than the checks.
    #![proptest_config(ProptestConfig {
        cases: 256,
        rng_algorithm: proptest::test_runner::RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let r = plan::check_plan(&bytes, "fuzz.json", false);
        let _ = plan::render_check(&r, false);
        let _ = plan::render_check(&r, true);
        if let Some(p) = &r.plan {
            let _ = plan::render_triz(&plan::triz_report(p), false);
        }
    }

    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        let r = plan::check_plan(v.to_string().as_bytes(), "fuzz.json", true);
        let _ = plan::render_check(&r, true);
        if let Some(p) = &r.plan {
            let _ = plan::triz_report(p);
            assert_round_trip(p)?;
        }
    }

    #[test]
    fn plan_shaped_json_never_panics_and_round_trips(v in plan_like()) {
        let r = plan::check_plan(v.to_string().as_bytes(), "fuzz.json", false);
        let _ = plan::render_check(&r, false);
        let p = r.plan.as_ref();
        prop_assert!(p.is_some(), "an object always gives a plan: {:?}", r.diagnostics);
        if let Some(p) = p {
            let _ = plan::render_triz(&plan::triz_report(p), true);
            assert_round_trip(p)?;
        }
    }
}
