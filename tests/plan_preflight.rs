//! `whilly plan decompose` and `whilly plan triz --agent` end to end: the real binary, the
//! command backend and a scripted agent (tests/fake_agents/preflight_agent.sh), on a plan with
//! fan-in to and fan-out from the task that is split.

#[path = "support/engine.rs"]
mod engine;

use engine::{Output, Repo, agent, plan, task};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(60);

/// A, B → M → C; M, B → D; M has two key files and two criteria.
fn fan_plan() -> Value {
    let mut m = task("M");
    m["dependencies"] = serde_json::json!(["A", "B"]);
    m["key_files"] = serde_json::json!(["files/M1.txt", "files/M2.txt"]);
    m["acceptance_criteria"] = serde_json::json!(["c1", "c2"]);
    let mut c = task("C");
    c["dependencies"] = serde_json::json!(["M"]);
    let mut d = task("D");
    d["dependencies"] = serde_json::json!(["M", "B"]);
    plan("fan", vec![task("A"), task("B"), m, c, d])
}

fn scripted(mode: &str) -> (Repo, PathBuf) {
    let repo = Repo::new(&fan_plan(), "true");
    let log = repo.shared.join("prompts");
    let template = format!(
        "sh {} {mode} {} {{prompt_file}}",
        agent("preflight_agent.sh").display(),
        log.display()
    );
    repo.write("whilly.toml", &engine::config(&template, &repo.wt_dir));
    (repo, log)
}

fn prompts(log: &Path) -> usize {
    std::fs::read_dir(log).map(|d| d.count()).unwrap_or(0)
}

fn plan_file(repo: &Repo) -> Value {
    serde_json::from_str(&std::fs::read_to_string(repo.repo.join("plan.json")).unwrap()).unwrap()
}

fn deps(plan: &Value, id: &str) -> Vec<String> {
    let t = plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == id)
        .unwrap_or_else(|| panic!("no task {id}"));
    t["dependencies"]
        .as_array()
        .map(|a| a.iter().map(|d| d.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn run(repo: &Repo, args: &[&str]) -> Output {
    repo.run(args, LIMIT)
}

#[test]
fn decompose_shows_a_diff_writes_with_write_and_the_plan_validates() {
    let (repo, log) = scripted("good");
    let before = std::fs::read_to_string(repo.repo.join("plan.json")).unwrap();
    // Without --write and without a terminal: the diff only.
    let out = run(&repo, &["plan", "decompose", "plan.json", "--task", "M"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("--- a/plan.json"), "{out}");
    assert!(out.stdout.contains("+      \"id\": \"Ma\""), "{out}");
    assert!(out.stdout.contains("-      \"id\": \"M\""), "{out}");
    assert!(out.stderr.contains("not written; add --write"), "{out}");
    assert_eq!(
        std::fs::read_to_string(repo.repo.join("plan.json")).unwrap(),
        before
    );
    assert_eq!(prompts(&log), 1);

    let out = run(
        &repo,
        &["plan", "decompose", "plan.json", "--task", "M", "--write"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(
        out.stderr.contains("wrote the split plan to plan.json"),
        "{out}"
    );
    let p = plan_file(&repo);
    let ids: Vec<&str> = p["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["A", "B", "Ma", "Mb", "C", "D"]);
    assert_eq!(deps(&p, "Ma"), ["A", "B"]);
    assert_eq!(deps(&p, "Mb"), ["Ma"]);
    // The agent said "all": every dependent waits for both subtasks.
    assert_eq!(deps(&p, "C"), ["Ma", "Mb"]);
    assert_eq!(deps(&p, "D"), ["Ma", "Mb", "B"]);
    let check = run(&repo, &["plan", "check", "plan.json"]);
    assert_eq!(check.code, Some(0), "{check}");
    // Nothing left that looks too big.
    let again = run(&repo, &["plan", "decompose", "plan.json"]);
    assert_eq!(again.code, Some(0), "{again}");
    assert!(again.stderr.contains("looks too big"), "{again}");
}

#[test]
fn decompose_repairs_once_then_fails_clearly() {
    let (repo, log) = scripted("repair");
    let out = run(
        &repo,
        &["plan", "decompose", "plan.json", "--task", "M", "--json"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["splits"][0]["calls"], 2);
    assert_eq!(v["written"], false);
    assert_eq!(prompts(&log), 2);
    let repair = std::fs::read_to_string(log.join("prompt-001.md")).unwrap();
    assert!(repair.contains("\"c2\" of M is in no subtask"), "{repair}");

    let (repo, _) = repo_never();
    let out = run(
        &repo,
        &["plan", "decompose", "plan.json", "--task", "M", "--write"],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr
            .contains("the agent gave no usable split after 2 call(s)"),
        "{out}"
    );
    assert!(out.stderr.contains("1 given; a split has 2 to 5"), "{out}");
    assert_eq!(plan_file(&repo), fan_plan());
}

fn repo_never() -> (Repo, PathBuf) {
    scripted("never")
}

#[test]
fn triz_agent_section_repair_and_failure() {
    let (repo, log) = scripted("good");
    let out = run(&repo, &["plan", "triz", "plan.json", "--agent"]);
    assert_eq!(out.code, Some(0), "{out}");
    let (det, agent) = out
        .stdout
        .split_once("Agent's analysis (fake)")
        .unwrap_or_else(|| panic!("no agent section in\n{out}"));
    assert!(det.contains("TRIZ report for plan fan"), "{out}");
    assert!(
        agent.contains("[medium] M: improving delivery speed worsens reviewability"),
        "{out}"
    );
    assert_eq!(prompts(&log), 1);

    let (repo, log) = scripted("repair");
    let out = run(&repo, &["plan", "triz", "plan.json", "--agent", "--json"]);
    assert_eq!(out.code, Some(0), "{out}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(v["agent_analysis"]["calls"], 2);
    assert_eq!(v["agent_analysis"]["analysis"]["verdict"], "revise");
    assert_eq!(prompts(&log), 2);

    let (repo, _) = repo_never();
    let out = run(&repo, &["plan", "triz", "plan.json", "--agent"]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr
            .contains("the agent gave no valid TRIZ analysis after 2 call(s)"),
        "{out}"
    );
    assert!(out.stderr.contains("kept in"), "{out}");
}

/// `[gate] llm = true` on top of the scripted agent's configuration.
fn with_gate_llm(repo: &Repo) {
    let cfg = std::fs::read_to_string(repo.repo.join("whilly.toml")).unwrap();
    repo.write("whilly.toml", &format!("{cfg}\n[gate]\nllm = true\n"));
}

fn events(repo: &Repo, kind: &str) -> Vec<Value> {
    let out = run(repo, &["events", "--plan", "fan", "--json"]);
    assert_eq!(out.code, Some(0), "{out}");
    out.stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["event_type"] == kind)
        .collect()
}

#[test]
fn gate_llm_pass_skips_vague_tasks_and_records_verdicts() {
    let (repo, log) = scripted("good");
    with_gate_llm(&repo);
    let out = run(&repo, &["plan", "import", "plan.json", "--strict"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert_eq!(prompts(&log), 1);
    assert_eq!(repo.task("fan", "C")["status"], "SKIPPED", "{out}");
    assert_eq!(repo.task("fan", "A")["status"], "PENDING", "{out}");
    let ev = events(&repo, "gate.llm_verdict");
    assert_eq!(ev.len(), 2, "{ev:?}");
    let c = ev.iter().find(|e| e["task_id"] == "C").unwrap();
    assert_eq!(c["payload"]["vague"], true);
    assert_eq!(c["payload"]["agent"], "fake");
}

#[test]
fn gate_llm_pass_fails_open() {
    let (repo, log) = scripted("never");
    with_gate_llm(&repo);
    let out = run(&repo, &["plan", "import", "plan.json", "--strict"]);
    assert_eq!(out.code, Some(0), "{out}");
    // Asked, repaired once, then let through.
    assert_eq!(prompts(&log), 2);
    assert!(
        out.stderr
            .contains("decision gate: the agent pass failed, every task goes through"),
        "{out}"
    );
    assert_eq!(repo.task("fan", "C")["status"], "PENDING");
    let ev = events(&repo, "gate.llm_verdict");
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["payload"]["fail_open"], true);
}

#[test]
fn decompose_an_imported_plan_splits_it_in_the_queue() {
    let (repo, log) = scripted("good");
    let out = run(&repo, &["plan", "import", "plan.json"]);
    assert_eq!(out.code, Some(0), "{out}");

    // --out FILE writes the split plan to a file and leaves the queue alone.
    let out = run(
        &repo,
        &[
            "plan",
            "decompose",
            "fan",
            "--task",
            "M",
            "--out",
            "split.json",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("+      \"id\": \"Mb\""), "{out}");
    let split: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.repo.join("split.json")).unwrap())
            .unwrap();
    assert_eq!(deps(&split, "D"), ["Ma", "Mb", "B"]);
    let check = run(&repo, &["plan", "check", "split.json"]);
    assert_eq!(check.code, Some(0), "{check}");
    assert_eq!(repo.task("fan", "M")["status"], "PENDING");

    // Without --write and without a terminal: the diff, nothing written.
    let out = run(&repo, &["plan", "decompose", "fan", "--task", "M"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("-      \"id\": \"M\""), "{out}");
    assert!(
        out.stderr.contains("add --write to split it in the queue"),
        "{out}"
    );
    assert!(events(&repo, "task.split").is_empty());

    // --write: the same diff, then the split goes into the queue.
    let out = run(
        &repo,
        &["plan", "decompose", "fan", "--task", "M", "--write"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("+      \"id\": \"Ma\""), "{out}");
    assert!(
        out.stderr
            .contains("split in the queue: M → Ma, Mb; rewired C → [Ma, Mb], D → [Ma, Mb, B]"),
        "{out}"
    );
    assert_eq!(prompts(&log), 3);
    let tasks = repo.tasks("fan");
    let ids: Vec<&str> = tasks.iter().map(|t| t["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["A", "B", "Ma", "Mb", "C", "D"]);
    assert!(tasks.iter().all(|t| t["status"] == "PENDING"), "{tasks:?}");
    let exported = run(&repo, &["plan", "export", "fan"]);
    assert_eq!(exported.code, Some(0), "{exported}");
    let exported: Value = serde_json::from_str(&exported.stdout).unwrap();
    assert_eq!(deps(&exported, "Ma"), ["A", "B"], "fan-in inherited");
    assert_eq!(deps(&exported, "Mb"), ["Ma"]);
    assert_eq!(deps(&exported, "C"), ["Ma", "Mb"], "fan-out rewired");
    assert_eq!(deps(&exported, "D"), ["Ma", "Mb", "B"]);

    // The audit trail: the split on the parent, one creation per subtask, one update per
    // dependent.
    let split = events(&repo, "task.split");
    assert_eq!(split.len(), 1, "{split:?}");
    assert_eq!(split[0]["task_id"], "M");
    assert_eq!(
        split[0]["payload"]["subtasks"],
        serde_json::json!(["Ma", "Mb"])
    );
    let created: Vec<Value> = events(&repo, "task.created")
        .into_iter()
        .filter(|e| e["id"].as_i64() > split[0]["id"].as_i64())
        .map(|e| e["task_id"].clone())
        .collect();
    assert_eq!(created, [serde_json::json!("Ma"), serde_json::json!("Mb")]);
    let updated: Vec<Value> = events(&repo, "task.updated")
        .into_iter()
        .map(|e| e["task_id"].clone())
        .collect();
    assert_eq!(updated, [serde_json::json!("C"), serde_json::json!("D")]);

    // The parent is gone: asking for it again is a clear error, and nothing is asked.
    let out = run(
        &repo,
        &["plan", "decompose", "fan", "--task", "M", "--write"],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr.contains("--task M: plan fan has no such task"),
        "{out}"
    );
    assert_eq!(prompts(&log), 3);
}
