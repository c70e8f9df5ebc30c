//! The checks section of `whilly plan check`: for every task, what will run after its agent
//! prints the marker (verification commands, test steps that are commands, the repository's
//! own checks) and which test steps stay prose, from the same function the engine uses.

use crate::domain::PlanSpec;
use crate::engine::checks::{CheckPolicy, on_path, task_checks};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;

/// The section as text and as JSON (`{"TASK": {"run": [...], "prose": [...]}}`).
pub(crate) fn checks_section(plan: &PlanSpec, repo: &Path, policy: CheckPolicy) -> (String, Value) {
    let mut text = String::from("\nChecks after each agent finishes:\n");
    let mut by_task = serde_json::Map::new();
    for task in &plan.tasks {
        let c = task_checks(task, plan, repo, policy, &on_path);
        let _ = writeln!(text, "  {}:", task.id);
        if c.checks.is_empty() {
            let _ = writeln!(
                text,
                "    (no checks: an agent that changes nothing fails the task as no_changes)"
            );
        }
        for check in &c.checks {
            let _ = writeln!(text, "    run    {:<24} $ {}", check.name, check.command);
        }
        for (i, step) in &c.prose_steps {
            let _ = writeln!(
                text,
                "    prose  {:<24} {step} (prompt only)",
                format!("test_steps[{i}]")
            );
        }
        by_task.insert(
            task.id.clone(),
            json!({
                "run": c.checks.iter().map(|v| json!({"name": v.name, "command": v.command})).collect::<Vec<_>>(),
                "prose": c.prose_steps.iter().map(|(i, s)| json!({"index": i, "step": s})).collect::<Vec<_>>(),
            }),
        );
    }
    if !policy.test_steps {
        let _ = writeln!(
            text,
            "  ([verification] test_steps = false: test steps are prompt only)"
        );
    }
    (text, Value::Object(by_task))
}
