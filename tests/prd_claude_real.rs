//! The PRD wizard with the real Claude Code CLI against the scripted model server: idea →
//! interview → docs/PRD-<slug>.md → plan (read-only call) → import, then a challenge of the
//! imported plan. The CLI comes from `WHILLY_CLAUDE_BIN`, `/work/claude-cli/node_modules/.bin/
//! claude`, or PATH (`WHILLY_SKIP_REAL_AGENT=1` skips).

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/model_server.rs"]
mod model_server;

use claude_env::{claude_bin, claude_repo, run_whilly};
use engine::{plan, task};
use model_server::{ModelServer, Rule, Scenario};
use serde_json::Value;
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(180);

const PRD: &str = "# Calendar Sync\n\n## Problem\nTeams keep two calendars by hand.\n\n\
## Functional requirements\nFR-1. Fetch and push events.\nFR-2. Run every five minutes.\n";

const PLAN: &str = r#"```json
{"project": "x", "plan_id": "y", "tasks": [
  {"id": "TASK-001", "status": "pending", "priority": "high",
   "description": "Create the calendar sync module with a fetch and a push function.",
   "acceptance_criteria": ["the module builds"], "test_steps": ["cargo build"]},
  {"id": "TASK-002", "status": "pending", "priority": "medium",
   "description": "Schedule the sync every five minutes and log every failure.",
   "dependencies": ["TASK-001"],
   "acceptance_criteria": ["a sync runs every five minutes"], "test_steps": ["cargo test schedule"]}
]}
```"#;

fn rules() -> Vec<Rule> {
    vec![
        Rule::new(&["Interview the operator", "A1: "], "DONE"),
        Rule::new(
            &["Interview the operator"],
            "QUESTION: Who will use the calendar sync?",
        ),
        Rule::new(
            &["Write a product requirements document"],
            &format!("Here it is:\n\n{PRD}"),
        ),
        Rule::new(&["Turn the product requirements document"], PLAN),
        Rule::new(
            &["Challenge the plan"],
            "## Verdict\nrevise: TASK-002 has no retry.",
        ),
    ]
}

#[test]
fn prd_new_to_imported_plan_and_challenge_with_the_real_cli() {
    let Some(bin) = claude_bin() else { return };
    let repo = claude_repo(&plan("base", vec![task("B-1")]), &bin, 1);
    // Two answers, but the agent says DONE after the first: the second is never used.
    repo.write("answers.txt", "the operations team\nnever asked for\n");
    let server = ModelServer::start(Scenario::Rules(rules()));
    let out = run_whilly(
        &repo,
        &server,
        &[
            "prd",
            "new",
            "--idea",
            "Sync our two team calendars automatically",
            "--answers-file",
            "answers.txt",
            "--import",
        ],
        LIMIT,
    );
    assert_eq!(
        out.code,
        Some(0),
        "{}\n{}\n--- server\n{}",
        out.stdout,
        out.stderr,
        server.log()
    );
    assert!(
        out.stdout
            .contains("Q1: Who will use the calendar sync?\nA1: the operations team"),
        "{}",
        out.stdout
    );
    let prd = repo.repo.join("docs/PRD-calendar-sync.md");
    assert_eq!(std::fs::read_to_string(&prd).unwrap(), PRD);
    assert!(
        out.stdout
            .contains("imported plan prd-calendar-sync with 2 tasks"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("never asked for"), "{}", out.stdout);
    // The question, DONE, the PRD, the plan: four agent-loop requests, each a read-only CLI run.
    let main: Vec<_> = server.requests().into_iter().filter(|r| r.main).collect();
    assert_eq!(main.len(), 4, "{}", server.log());
    for r in &main {
        let tools: Vec<&str> = r.body.as_ref().unwrap()["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        for refused in ["Bash", "Edit", "Write"] {
            assert!(!tools.contains(&refused), "{refused} offered: {tools:?}");
        }
    }
    let cost = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("cost: $"))
        .and_then(|c| c.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no cost line\n{}", out.stdout));
    assert!(cost > 0.0, "the CLI reports a cost for every call");

    let shown = run_whilly(
        &repo,
        &server,
        &["plan", "show", "prd-calendar-sync", "--json"],
        LIMIT,
    );
    let shown: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(shown["tasks"].as_array().unwrap().len(), 2);
    assert_eq!(shown["tasks"][1]["spec"]["dependencies"][0], "TASK-001");

    let ch = run_whilly(
        &repo,
        &server,
        &["plan", "challenge", "--plan", "prd-calendar-sync"],
        LIMIT,
    );
    assert_eq!(ch.code, Some(0), "{}\n{}", ch.stdout, ch.stderr);
    assert!(
        ch.stdout.contains("revise: TASK-002 has no retry."),
        "{}",
        ch.stdout
    );
}
