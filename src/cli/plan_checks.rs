//! The checks section of `whilly plan check`: for every task, what will run after its agent
//! prints the marker (verification commands, test steps that are commands, the repository's
//! own checks) and which test steps stay prose, from the same function the engine uses.

use crate::domain::PlanSpec;
use crate::engine::checks::{CheckPolicy, on_path, task_checks};
use crate::plan::{Diagnostic, Location};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::Path;

/// The section as text and as JSON (`{"TASK": {"run": [...], "prose": [...]}}`).
pub fn checks_section(plan: &PlanSpec, repo: &Path, policy: CheckPolicy) -> (String, Value) {
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

/// Warnings for the checks that cannot pass on this machine (a program they run is not on PATH),
/// located in the plan file's `text`: a test step at its own line, any other check at its task.
pub fn missing_program_diagnostics(
    plan: &PlanSpec,
    repo: &Path,
    policy: CheckPolicy,
    text: Option<&str>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (n, task) in plan.tasks.iter().enumerate() {
        for m in task_checks(task, plan, repo, policy, &on_path).missing {
            let pointer = match m
                .check
                .strip_prefix("test_steps[")
                .and_then(|r| r.strip_suffix(']'))
            {
                Some(i) => format!("/tasks/{n}/test_steps/{i}"),
                None => format!("/tasks/{n}"),
            };
            let programs = m.programs.join("`, `");
            // A warning: the plan is right, this machine lacks the program. The run refuses.
            let mut d = Diagnostic::warning(
                "check_program_missing",
                Location::Pointer(pointer),
                format!(
                    "{} {}: `{programs}` is not on PATH here, so `{}` cannot pass; a run refuses to start until it can",
                    task.id, m.check, m.command
                ),
            );
            d.hint = Some(crate::engine::checks::remedy(&programs, m.is_profile()));
            out.push(d);
        }
    }
    if let Some(text) = text {
        let pointers: Vec<&str> = out.iter().filter_map(Diagnostic::pointer).collect();
        let found = crate::plan::locate::locate_pointers(text, &pointers);
        for d in &mut out {
            if let Location::Pointer(p) = &d.location {
                d.line_col = found.get(p).copied();
            }
        }
    }
    out
}

/// Tasks taken in from a tracker: what the guards will refuse is said now; the text is someone
/// else's (the decision gate is `import_gate`'s, as for a file).
pub fn warn_guarded_tasks(
    tasks: &[crate::domain::TaskSpec],
    cfg: &crate::config::Config,
) -> anyhow::Result<()> {
    let guards = crate::agent::Guards::new(&cfg.guards.injection_patterns)
        .map_err(|e| anyhow::anyhow!("[guards] injection_patterns: {e}"))?;
    for t in tasks {
        if let Err(reason) = guards.check_task(t) {
            errln!(
                "warning: {}: {reason}; it will be refused before any agent runs",
                t.id
            );
        }
    }
    Ok(())
}
