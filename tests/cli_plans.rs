//! The `whilly` binary as a user meets it: plan check / import / export / show, exit codes,
//! bad input refused with nothing written, the embedded SQLite queue created on first use.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

const COMPAT: &str = "tests/fixtures/original-plans";

fn whilly(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_whilly"))
        .args(args)
        .current_dir(dir)
        .env_remove("WHILLY_DATABASE_URL")
        .env("XDG_CONFIG_HOME", dir.join(".xdg"))
        .env("HOME", dir)
        .output()
        .expect("run whilly")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    git2::Repository::init(dir.path()).unwrap();
    dir
}

fn compat(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(COMPAT)
        .join(name)
}

#[test]
fn every_original_plan_checks_imports_and_round_trips() {
    let dir = repo();
    for name in [
        "v3_tasks.json",
        "v4_tasks.json",
        "demo_tasks.json",
        "demo_parallel.json",
        "workshop_tasks.json",
    ] {
        let file = compat(name);
        let f = file.to_str().unwrap();
        let o = whilly(dir.path(), &["plan", "check", f]);
        assert!(o.status.success(), "{name}: {:?}", text(&o));
        let o = whilly(dir.path(), &["plan", "import", f, "--json"]);
        assert!(o.status.success(), "{name}: {:?}", text(&o));
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let id = report["plan_id"].as_str().unwrap().to_string();

        let first = whilly(dir.path(), &["plan", "export", &id]);
        assert!(first.status.success());
        let exported = dir.path().join(format!("{id}.export.json"));
        std::fs::write(&exported, &first.stdout).unwrap();
        let o = whilly(dir.path(), &["plan", "import", exported.to_str().unwrap()]);
        assert!(o.status.success(), "{:?}", text(&o));
        assert!(
            text(&o).0.contains("unchanged"),
            "re-import of the export changed something: {:?}",
            text(&o)
        );
        let second = whilly(dir.path(), &["plan", "export", &id]);
        assert_eq!(
            first.stdout, second.stdout,
            "{name}: export → import → export differs"
        );
    }
    assert!(dir.path().join(".whilly/whilly.db").exists());
    let exclude = std::fs::read_to_string(dir.path().join(".git/info/exclude")).unwrap();
    assert_eq!(
        exclude.lines().filter(|l| l.trim() == ".whilly/").count(),
        1
    );
}

#[test]
fn reimport_is_idempotent_and_reports_changes() {
    let dir = repo();
    let plan = dir.path().join("plan.json");
    let write = |desc: &str| {
        std::fs::write(
            &plan,
            serde_json::json!({
                "project": "p", "plan_id": "p",
                "tasks": [
                    {"id": "A", "status": "pending", "priority": "high", "description": desc,
                     "acceptance_criteria": ["x"], "test_steps": ["true"]},
                    {"id": "B", "status": "pending", "priority": "low", "description": "Second task with a long enough text",
                     "dependencies": ["A"], "acceptance_criteria": ["y"], "test_steps": ["true"]}
                ]
            })
            .to_string(),
        )
        .unwrap();
    };
    write("First task with a long enough description");
    let p = plan.to_str().unwrap();
    assert!(
        whilly(dir.path(), &["plan", "import", p, "--budget", "5"])
            .status
            .success()
    );
    let events_before = whilly(dir.path(), &["events", "--json"]).stdout.len();
    let o = whilly(dir.path(), &["plan", "import", p]);
    assert!(text(&o).0.contains("unchanged"), "{:?}", text(&o));
    assert_eq!(
        whilly(dir.path(), &["events", "--json"]).stdout.len(),
        events_before,
        "unchanged re-import wrote events"
    );
    // The budget given with --budget survives a re-import without it.
    let show = whilly(dir.path(), &["plan", "show", "p", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    assert_eq!(v["plan"]["budget"], 5_000_000);

    write("First task, reworded: a changed description here");
    let o = whilly(dir.path(), &["plan", "import", p, "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["updated"], serde_json::json!(["A"]));
    assert_eq!(r["unchanged"], serde_json::json!(["B"]));
}

#[test]
fn bad_plans_are_refused_with_locations_and_nothing_written() {
    let dir = repo();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("syntax.json", b"{\n  \"project\": \"x\",\n  \"tasks\": [\n    {\"id\": \"A\",}\n  ]\n}".to_vec(), "syntax.json:4:"),
        ("types.json", br#"{"project":"x","tasks":[{"id":"A","status":"pending","priority":5,"description":"long enough description here"}]}"#.to_vec(), "/tasks/0/priority"),
        ("traversal.json", br#"{"project":"x","tasks":[{"id":"../../etc","status":"pending","priority":"high","description":"long enough description here"}]}"#.to_vec(), "/tasks/0/id"),
        ("cycle.json", br#"{"project":"x","tasks":[
            {"id":"A","status":"pending","priority":"high","description":"long enough description here","dependencies":["B"]},
            {"id":"B","status":"pending","priority":"high","description":"long enough description here","dependencies":["A"]}]}"#.to_vec(), "→"),
        ("utf8.json", b"{\"project\":\"x\",\n\"tasks\":[\xff]}".to_vec(), "utf8.json:2:"),
    ];
    for (name, bytes, expect) in cases {
        let file = dir.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let f = file.to_str().unwrap();
        let o = whilly(dir.path(), &["plan", "check", f]);
        assert_eq!(o.status.code(), Some(1), "{name}: {:?}", text(&o));
        let (out, err) = text(&o);
        assert!(
            out.contains(expect) || err.contains(expect),
            "{name}: expected {expect:?} in {out}{err}"
        );
        let o = whilly(dir.path(), &["plan", "import", f]);
        assert_eq!(o.status.code(), Some(1), "{name}");
        assert!(
            text(&o).1.contains("nothing was imported"),
            "{name}: {:?}",
            text(&o)
        );
    }
    let o = whilly(dir.path(), &["plan", "list", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "[]",
        "a refused plan was written"
    );

    // A huge file is refused before it is read.
    let huge = dir.path().join("huge.json");
    let f = std::fs::File::create(&huge).unwrap();
    f.set_len(100 * 1024 * 1024).unwrap();
    let started = Instant::now();
    let o = whilly(dir.path(), &["plan", "check", huge.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("limit"), "{:?}", text(&o));
    assert!(started.elapsed().as_secs() < 10);
}

#[test]
fn check_refuses_an_agent_the_config_does_not_know() {
    let dir = repo();
    std::fs::write(
        dir.path().join("whilly.toml"),
        "[agents.bot]\nbackend = \"command\"\ntemplate = \"true {prompt_file}\"\n",
    )
    .unwrap();
    let plan = dir.path().join("agents.json");
    let task = |id: &str, agent: &str| {
        serde_json::json!({
            "id": id, "status": "pending", "priority": "high", "agent": agent,
            "description": "A concrete task with a long description",
            "acceptance_criteria": ["a"], "test_steps": ["true"],
        })
    };
    let write = |tasks: Vec<serde_json::Value>| {
        let v = serde_json::json!({"project": "a", "tasks": tasks});
        std::fs::write(&plan, v.to_string()).unwrap();
    };
    let p = plan.to_str().unwrap();

    // Configured, built-in and handoff agents pass.
    write(vec![
        task("A", "bot"),
        task("B", "claude"),
        task("C", "handoff"),
    ]);
    let o = whilly(dir.path(), &["plan", "check", p]);
    assert!(o.status.success(), "{:?}", text(&o));

    write(vec![task("A", "bot"), task("B", "nope")]);
    let o = whilly(dir.path(), &["plan", "check", p]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    let (out, _) = text(&o);
    assert!(
        out.contains(
            "error[unknown_agent]: /tasks/1/agent: task \"B\": agent \"nope\" is not configured"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "configured: bot, claude, codex, command, gemini, opencode; built in: handoff"
        ),
        "{out}"
    );
    assert!(out.contains("[agents.nope]"), "{out}");

    let o = whilly(dir.path(), &["plan", "check", p, "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    let d = &v["diagnostics"][0];
    assert_eq!(
        (d["code"].as_str(), d["pointer"].as_str()),
        (Some("unknown_agent"), Some("/tasks/1/agent"))
    );
}

#[test]
fn strict_import_skips_vague_tasks_with_the_gate_reason() {
    let dir = repo();
    let plan = dir.path().join("vague.json");
    std::fs::write(
        &plan,
        br#"{"project":"v","tasks":[
          {"id":"GOOD","status":"pending","priority":"high","description":"A concrete task with a long description","acceptance_criteria":["a"],"test_steps":["true"]},
          {"id":"VAGUE","status":"pending","priority":"high","description":"fix it"}]}"#,
    )
    .unwrap();
    let p = plan.to_str().unwrap();
    let o = whilly(dir.path(), &["plan", "check", p, "--strict"]);
    assert_eq!(o.status.code(), Some(1));
    let o = whilly(dir.path(), &["plan", "import", p, "--strict"]);
    assert!(o.status.success(), "{:?}", text(&o));
    let o = whilly(dir.path(), &["plan", "show", "v", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let vague = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "VAGUE")
        .unwrap();
    assert_eq!(vague["status"], "SKIPPED");
    assert_eq!(vague["reason"], "decision_gate_failed");
}

#[test]
fn triz_strict_exits_one_on_revise() {
    let dir = repo();
    let o = whilly(
        dir.path(),
        &[
            "plan",
            "triz",
            compat("v4_tasks.json").to_str().unwrap(),
            "--json",
            "--strict",
        ],
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdict = v["verdict"].as_str().unwrap().to_string();
    assert_eq!(
        o.status.code(),
        Some(if verdict == "approve" { 0 } else { 1 }),
        "{verdict}"
    );
    assert!(v["ideality"].as_f64().is_some());
}

#[test]
fn environment_errors_exit_two_and_usage_errors_exit_one() {
    let dir = repo();
    let o = whilly(
        dir.path(),
        &[
            "--database-url",
            "postgres://nobody@127.0.0.1:1/none",
            "db",
            "status",
        ],
    );
    assert_eq!(o.status.code(), Some(4), "{:?}", text(&o));
    assert!(text(&o).1.contains("127.0.0.1"), "{:?}", text(&o));
    let o = whilly(dir.path(), &["plan", "nonsense"]);
    assert_eq!(o.status.code(), Some(1));
    let o = whilly(dir.path(), &["--version"]);
    assert!(o.status.success());
    for shell in ["bash", "zsh", "fish"] {
        let o = whilly(dir.path(), &["completions", shell]);
        assert!(o.status.success() && o.stdout.len() > 1000, "{shell}");
    }
}

#[test]
fn ten_thousand_tasks_import_quickly() {
    let dir = repo();
    let tasks: Vec<_> = (0..10_000)
        .map(|i| {
            serde_json::json!({
                "id": format!("T-{i:05}"), "status": "pending", "priority": "medium",
                "description": format!("Generated task number {i} with enough words"),
                "dependencies": if i > 0 { vec![format!("T-{:05}", i - 1)] } else { vec![] },
                "acceptance_criteria": ["done"], "test_steps": ["true"], "key_files": [format!("f{i}.rs")]
            })
        })
        .collect();
    let plan = dir.path().join("big.json");
    std::fs::write(
        &plan,
        serde_json::json!({"project": "big", "plan_id": "big", "tasks": tasks}).to_string(),
    )
    .unwrap();
    let started = Instant::now();
    let o = whilly(dir.path(), &["plan", "import", plan.to_str().unwrap()]);
    let elapsed = started.elapsed();
    assert!(o.status.success(), "{:?}", text(&o));
    // Timing is reported, not asserted (benchmarks measure speed); the whole command includes
    // process start, parsing and validation.
    eprintln!("10,000-task import (whole command, debug build): {elapsed:?}");
    let o = whilly(dir.path(), &["plan", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v[0]["counts"]["total"], 10_000);
}

#[test]
fn plan_reset_without_a_flag_explains_the_two_resets() {
    let dir = repo();
    let out = whilly(dir.path(), &["plan", "reset", "demo"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("--keep-tasks") && err.contains("--hard"),
        "{err}"
    );
}
