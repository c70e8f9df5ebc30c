//! The console's PRD wizard (`n`) with the real Claude Code CLI against the scripted model server,
//! driven from the keyboard in tmux: idea → a question → the PRD → the plan → merged into the
//! running plan, whose new tasks the engine then runs with Claude to DONE.

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/claude_env.rs"]
mod claude_env;
#[path = "support/engine.rs"]
mod engine;
#[path = "support/model_server.rs"]
mod model_server;
#[path = "support/tmux.rs"]
mod tmux;

use claude_env::{claude_bin, claude_repo};
use engine::{plan, task};
use model_server::{ModelServer, Rule, Scenario};
use tmux::Tmux;

const PLAN: &str = r#"{"project": "x", "plan_id": "y", "tasks": [
  {"id": "TASK-001", "status": "pending", "priority": "high",
   "description": "Create the calendar sync module with a fetch and a push function.",
   "key_files": ["sync.txt"],
   "acceptance_criteria": ["the module builds"], "test_steps": ["true"]}
]}"#;

fn rules() -> Vec<Rule> {
    vec![
        Rule::new(&["Interview the operator", "A1: "], "DONE"),
        Rule::new(
            &["Interview the operator"],
            "QUESTION: Who will use the calendar sync?",
        ),
        Rule::new(
            &["Write a product requirements document"],
            "# Calendar Sync\n\n## Problem\nTwo calendars kept by hand.\n",
        ),
        Rule::new(&["Turn the product requirements document"], PLAN),
        // The merged task itself, run by the engine.
        Rule::new(&["TASK-001"], "Done.\n<promise>COMPLETE</promise>"),
    ]
}

#[test]
fn console_wizard_with_the_real_cli_merges_tasks_that_then_run() {
    let Some(bin) = claude_bin() else { return };
    // The base plan's only task waits for a human, so the run stays open for the wizard.
    let mut waiting = task("B-1");
    waiting["agent"] = "handoff".into();
    let repo = claude_repo(&plan("base", vec![waiting]), &bin, 2);
    let server = ModelServer::start(Scenario::Rules(rules()));

    let script = tmux::whilly_script(
        &repo,
        &[
            ("ANTHROPIC_BASE_URL", server.base_url()),
            ("ANTHROPIC_API_KEY", "test-key".to_string()),
            ("DISABLE_AUTOUPDATER", "1".to_string()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_string()),
            (
                "CLAUDE_CONFIG_DIR",
                repo.home.join(".claude").display().to_string(),
            ),
            ("TERM", "xterm-256color".to_string()),
        ],
        "tui plan.json",
    );

    let tmux = Tmux::start("wizard-claude", &repo.repo);
    tmux.literal(&format!("sh {}", script.display()));
    tmux.keys(&["Enter"]);
    tmux.wait("the console, B-1 waiting", 60, |s| s.contains("inbox 1"));

    tmux.literal("n");
    tmux.wait("wizard", 10, |s| s.contains("step 1/5"));
    tmux.literal("Sync our two team calendars");
    tmux.keys(&["C-s"]);
    tmux.wait("Claude's question", 90, |s| {
        s.contains("Q: Who will use the calendar sync?")
    });
    tmux.literal("the operations team");
    tmux.keys(&["C-s"]);
    tmux.wait("the PRD", 90, |s| {
        s.contains("step 3/5") && s.contains("# Calendar Sync")
    });
    tmux.keys(&["C-s"]);
    tmux.wait("the plan", 90, |s| {
        s.contains("· ready") && s.contains("TASK-001")
    });
    tmux.literal("m");
    tmux.wait("merged", 30, |s| {
        s.contains("merged 1 task(s) into plan base")
    });
    tmux.literal(" ");
    // The merged task runs with Claude, in its pane, to DONE.
    let s = tmux.wait("TASK-001 done", 120, |s| s.contains("DONE TASK-001"));
    assert!(s.contains("inbox 1"), "B-1 still waits: {s}");
    assert!(repo.repo.join("docs/PRD-calendar-sync.md").is_file());

    tmux.literal("q");
    // B-1 is a handoff: the dialog counts it as a task waiting for a human, not an agent.
    tmux.wait("quit question", 10, |s| {
        s.contains("still running") || s.contains("waiting for a human (")
    });
    tmux.literal("s");
    tmux.wait("shell", 60, |s| s.lines().any(|l| l.starts_with("EXIT=")));
    assert_eq!(repo.task("base", "TASK-001")["status"], "DONE");
    // Every wizard call was read-only: no editing tools offered.
    let reads: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.main)
        .filter(|r| {
            r.body
                .as_ref()
                .is_some_and(|b| !b.to_string().contains("autonomous coding agent"))
        })
        .collect();
    assert!(reads.len() >= 4, "{}", server.log());
    for r in &reads {
        let tools = r.body.as_ref().unwrap()["tools"].to_string();
        assert!(
            !tools.contains("\"Write\""),
            "Write offered to a wizard call"
        );
    }
}
