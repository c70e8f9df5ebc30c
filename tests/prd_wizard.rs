//! `whilly prd new|plan` and `whilly plan challenge` end to end with the command backend and a
//! scripted agent (tests/fake_agents/prd_agent.sh): interview from an answers file, the PRD file,
//! plan generation with and without the repair round, the raw reply kept on failure, import and
//! merge into an imported plan.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/tmux.rs"]
mod tmux;

use engine::{Output, Repo, agent, plan, task};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tmux::Tmux;

const LIMIT: Duration = Duration::from_secs(60);

/// A repository whose agent `fake` is the scripted PRD agent in `mode`, logging its prompts.
fn prd_repo(mode: &str) -> (Repo, PathBuf) {
    let repo = Repo::new(&plan("base", vec![task("B-1")]), "true");
    let log = repo.shared.join("prompts");
    let template = format!(
        "sh {} {mode} {} {{prompt_file}}",
        agent("prd_agent.sh").display(),
        log.display()
    );
    repo.write("whilly.toml", &engine::config(&template, &repo.wt_dir));
    (repo, log)
}

fn prompts(log: &Path) -> Vec<String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(log)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

fn run(repo: &Repo, args: &[&str]) -> Output {
    repo.run(args, LIMIT)
}

fn line_after<'a>(out: &'a Output, prefix: &str) -> &'a str {
    out.stdout
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_else(|| panic!("no {prefix:?} line in\n{out}"))
}

fn plan_json(repo: &Repo, id: &str) -> Value {
    let out = run(repo, &["plan", "show", id, "--json"]);
    assert_eq!(out.code, Some(0), "{out}");
    serde_json::from_str(&out.stdout).unwrap()
}

fn task_ids(plan: &Value) -> Vec<String> {
    plan["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn new_with_answers_file_writes_prd_and_imports_a_checked_plan() {
    let (repo, log) = prd_repo("clean");
    repo.write(
        "answers.txt",
        "the operations team\nbefore the end of the quarter\n",
    );
    let out = run(
        &repo,
        &[
            "prd",
            "new",
            "--idea",
            "Sync our two team calendars automatically",
            "--answers-file",
            "answers.txt",
            "--import",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");

    // Two questions, one at a time, each answered from the file, then DONE.
    assert!(
        out.stdout
            .contains("Q1: Scripted question 1: who will use it?"),
        "{out}"
    );
    assert!(
        out.stdout.contains("A2: before the end of the quarter"),
        "{out}"
    );
    let p = prompts(&log);
    // The answers ran out after two: no third question is asked.
    assert_eq!(p.len(), 4, "two questions, the PRD, the plan: {p:#?}");
    assert!(p[1].contains("A1: the operations team"), "{}", p[1]);
    assert!(p[2].contains("Write a product requirements document"));
    assert!(
        p[2].contains("A2: before the end of the quarter"),
        "{}",
        p[2]
    );
    assert!(
        p[3].contains("\"plan_id\": \"prd-calendar-sync\""),
        "{}",
        p[3]
    );

    // The PRD: chatter dropped, named after its title.
    let prd = line_after(&out, "prd: ");
    assert!(prd.ends_with("docs/PRD-calendar-sync.md"), "{prd}");
    let text = std::fs::read_to_string(prd).unwrap();
    assert!(text.starts_with("# Calendar Sync\n"), "{text}");

    // The plan: our id and PRD path, every task through the gate, written beside the PRD,
    // imported.
    assert!(
        out.stdout
            .contains("plan prd-calendar-sync: 3 tasks (1 agent call)"),
        "{out}"
    );
    assert!(!out.stdout.contains("gate: "), "{out}");
    let plan_file = line_after(&out, "plan file: ");
    assert!(
        plan_file.ends_with("docs/PRD-calendar-sync.plan.json"),
        "{plan_file}"
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(plan_file).unwrap()).unwrap();
    assert_eq!(file["plan_id"], "prd-calendar-sync");
    assert_eq!(file["prd_file"], "docs/PRD-calendar-sync.md");
    let shown = plan_json(&repo, "prd-calendar-sync");
    assert_eq!(task_ids(&shown), ["TASK-001", "TASK-002", "TASK-003"]);
    assert!(
        shown["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "PENDING")
    );

    // A second run with the same idea never replaces the first PRD or the first plan.
    let again = run(
        &repo,
        &[
            "prd",
            "new",
            "--idea",
            "Sync calendars",
            "--no-interview",
            "--import",
        ],
    );
    assert_eq!(again.code, Some(0), "{again}");
    assert!(line_after(&again, "prd: ").ends_with("docs/PRD-calendar-sync.md"));
    assert!(
        again.stdout.contains("imported plan prd-calendar-sync-2"),
        "{again}"
    );
    assert_eq!(task_ids(&plan_json(&repo, "prd-calendar-sync")).len(), 3);
}

#[test]
fn tasks_failing_the_gate_are_kept_in_a_file_not_put_into_the_queue() {
    let (repo, _log) = prd_repo("good");
    let out = run(
        &repo,
        &[
            "prd",
            "new",
            "--idea",
            "Sync calendars",
            "--no-interview",
            "--import",
        ],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stdout.contains("gate: TASK-003 fails: description is"),
        "{out}"
    );
    assert!(
        out.stderr.contains("errors (TASK-003)")
            && out.stderr.contains("nothing entered the queue"),
        "{out}"
    );
    // The plan waits in its file, with the way on.
    let plan_file = line_after(&out, "plan file: ");
    assert!(
        plan_file.ends_with("docs/PRD-calendar-sync.plan.json"),
        "{plan_file}"
    );
    let file: Value = serde_json::from_str(&std::fs::read_to_string(plan_file).unwrap()).unwrap();
    assert_eq!(file["tasks"].as_array().unwrap().len(), 3);
    assert!(
        out.stderr
            .contains(&format!("`whilly plan import {plan_file}`")),
        "{out}"
    );
    let list = run(&repo, &["plan", "list", "--json"]);
    assert!(!list.stdout.contains("prd-calendar-sync"), "{list}");

    // Nor into a running plan.
    assert_eq!(run(&repo, &["plan", "import", "plan.json"]).code, Some(0));
    let out = run(
        &repo,
        &[
            "prd",
            "plan",
            "docs/PRD-calendar-sync.md",
            "--merge-into",
            "base",
        ],
    );
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(task_ids(&plan_json(&repo, "base")), ["B-1"]);
}

#[test]
fn invalid_json_gets_one_repair_round_with_the_errors() {
    let (repo, log) = prd_repo("repair");
    let out = run(
        &repo,
        &[
            "prd",
            "new",
            "--idea",
            "Sync calendars",
            "--no-interview",
            "--plan-out",
            "out.json",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.contains("3 tasks (2 agent calls)"), "{out}");
    let p = prompts(&log);
    assert_eq!(p.len(), 3, "PRD, plan, repair");
    let repair = &p[2];
    assert!(
        repair.contains("Your previous reply could not be used"),
        "{repair}"
    );
    assert!(
        repair.contains("plan:2:"),
        "the located syntax error goes back: {repair}"
    );
    assert!(
        repair.contains("\"description\": }"),
        "the previous reply goes back"
    );
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(repo.repo.join("out.json")).unwrap())
            .unwrap();
    assert_eq!(file["tasks"].as_array().unwrap().len(), 3);
}

#[test]
fn a_reply_that_never_parses_is_kept_and_named() {
    let (repo, log) = prd_repo("never");
    repo.write("docs/PRD-given.md", "# Given\n\nFR-1. something\n");
    let out = run(&repo, &["prd", "plan", "docs/PRD-given.md", "--import"]);
    assert_eq!(out.code, Some(1), "{out}");
    assert_eq!(prompts(&log).len(), 2, "the plan call and one repair round");
    let kept = out
        .stderr
        .lines()
        .find_map(|l| l.split("its last reply is kept in ").nth(1))
        .unwrap_or_else(|| panic!("no kept file named\n{out}"));
    assert!(kept.contains(".whilly/prd/plan-reply-prd-given-"), "{kept}");
    let raw = std::fs::read_to_string(kept.trim()).unwrap();
    assert!(raw.contains("\"description\": }"), "{raw}");
    assert!(out.stderr.contains("json_syntax"), "{out}");
    // Nothing was imported.
    let list = run(&repo, &["plan", "list", "--json"]);
    assert!(!list.stdout.contains("prd-given"), "{list}");
}

#[test]
fn plan_merges_into_an_imported_plan_renaming_clashing_ids() {
    let (repo, _log) = prd_repo("clean");
    let base = plan("base", vec![task("TASK-001"), task("TASK-002")]);
    repo.write("base.json", &serde_json::to_string(&base).unwrap());
    assert_eq!(run(&repo, &["plan", "import", "base.json"]).code, Some(0));
    repo.write("docs/PRD-given.md", "# Given\n\nFR-1. something\n");
    let out = run(
        &repo,
        &["prd", "plan", "docs/PRD-given.md", "--merge-into", "base"],
    );
    assert_eq!(out.code, Some(0), "{out}");
    // The new plan's own TASK-003 keeps its id, so the clashing ones go past it.
    assert!(
        out.stdout.contains("renamed: TASK-001 -> TASK-004"),
        "{out}"
    );
    assert!(
        out.stdout.contains("renamed: TASK-002 -> TASK-005"),
        "{out}"
    );
    let shown = plan_json(&repo, "base");
    assert_eq!(
        task_ids(&shown),
        ["TASK-001", "TASK-002", "TASK-004", "TASK-005", "TASK-003"]
    );
    assert!(
        shown["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["status"] == "PENDING")
    );
    let deps = |id: &str| {
        shown["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == id)
            .map(|t| t["spec"]["dependencies"].clone())
            .unwrap()
    };
    assert_eq!(deps("TASK-005"), serde_json::json!(["TASK-004"]));
    assert_eq!(deps("TASK-003"), serde_json::json!(["TASK-005"]));
}

#[test]
fn challenge_prints_the_agents_critique_and_failures_are_typed() {
    let (repo, log) = prd_repo("good");
    let out = run(&repo, &["plan", "challenge", "plan.json"]);
    assert_eq!(out.code, Some(0), "{out}");
    assert!(out.stdout.starts_with("## Verdict\nrevise"), "{out}");
    let p = prompts(&log);
    assert!(p[0].contains("B-1") && p[0].contains("TRIZ"), "{}", p[0]);

    let (failing, _) = prd_repo("fail");
    let out = run(&failing, &["plan", "challenge", "plan.json"]);
    assert_eq!(out.code, Some(1), "{out}");
    assert!(
        out.stderr.contains("failed (exit 3") && out.stderr.contains("told to fail"),
        "{out}"
    );
    let out = run(
        &failing,
        &[
            "-c",
            "agents.fake.template=no-such-agent-binary {prompt}",
            "plan",
            "challenge",
            "plan.json",
        ],
    );
    assert_eq!(out.code, Some(4), "{out}");
    assert!(out.stderr.contains("agents.fake.bin"), "{out}");
}

#[test]
fn new_on_a_terminal_asks_and_reads_answers_until_ctrl_d() {
    let (repo, log) = prd_repo("good");
    let path = tmux::whilly_script(&repo, &[], "prd new --idea 'Sync calendars' --no-plan");
    let tmux = Tmux::running(
        "prd",
        &repo.repo,
        150,
        40,
        &format!("sh {}", path.display()),
    );
    // Keep the pane after the script ends so its last screen can be read.
    let _ = tmux
        .cmd(&["set-option", "-t", "0", "remain-on-exit", "on"])
        .status();
    let seen = |needle: &'static str| move |s: &str| s.contains(needle);
    tmux.wait("Q1", LIMIT.as_secs(), seen("Q1: Scripted question 1"));
    tmux.literal("the ops team");
    tmux.keys(&["Enter"]);
    tmux.wait("Q2", LIMIT.as_secs(), seen("Q2: Scripted question 2"));
    tmux.keys(&["C-d"]);
    let screen = tmux.wait("the end", LIMIT.as_secs(), seen("EXIT="));
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("prd: "), "{screen}");
    let p = prompts(&log);
    assert_eq!(p.len(), 3, "two questions and the PRD: {p:#?}");
    assert!(
        p[2].contains("A1: the ops team") && !p[2].contains("Q2:"),
        "{}",
        p[2]
    );
}

/// The wizard's calls only read and answer: under the sandbox (the default) an agent that tries
/// to write into the operator's checkout is refused, and the checkout is untouched.
#[test]
fn the_wizards_calls_cannot_write_into_the_checkout() {
    let (repo, log) = prd_repo("writer");
    repo.write(
        "answers.txt",
        "the operations team\nbefore the end of the quarter\n",
    );
    let out = run(
        &repo,
        &[
            "prd",
            "new",
            "--idea",
            "Sync our two team calendars automatically",
            "--answers-file",
            "answers.txt",
        ],
    );
    assert_eq!(out.code, Some(0), "{out}");
    let writes = std::fs::read_to_string(log.with_extension("writes")).unwrap();
    assert!(
        !writes.is_empty() && writes.lines().all(|l| l == "refused"),
        "{writes}"
    );
    assert!(!repo.repo.join("WIZARD_WROTE.txt").exists());
}
