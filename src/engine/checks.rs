//! The checks an attempt runs, put together: the plan's and the task's `verification_commands`,
//! the task's `test_steps` that are shell commands, and — when there are no verification
//! commands — the repository's own checks (see [`crate::domain::checks`]). `plan check` shows
//! the same list, from the same function.

use crate::domain::checks::{ProfileCheck, RepoFiles, profile_checks, step_checks};
use crate::domain::{PlanSpec, TaskSpec, VerificationCommand};
use std::path::Path;

/// Which of the optional sources run (`[verification]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckPolicy {
    /// Test steps that are shell commands run as required checks.
    pub test_steps: bool,
    /// The repository's own checks run when the plan has no verification commands.
    pub profile: bool,
}

impl Default for CheckPolicy {
    fn default() -> Self {
        CheckPolicy {
            test_steps: true,
            profile: true,
        }
    }
}

/// A task's checks, and what was left out and why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskChecks {
    pub checks: Vec<VerificationCommand>,
    /// Test steps that stay prose (prompt only), with their index.
    pub prose_steps: Vec<(usize, String)>,
    /// Profile checks that cannot run here: their program is not on PATH.
    pub unavailable: Vec<ProfileCheck>,
}

/// Whether `name` is an executable on this process's PATH.
pub fn on_path(name: &str) -> bool {
    crate::agent::binary::resolve_binary(name, "").is_ok()
}

/// What the repository in `dir` says about itself.
pub fn read_repo_files(dir: &Path) -> RepoFiles {
    let text = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
    let exists = |name: &str| dir.join(name).is_file();
    RepoFiles {
        cargo_toml: exists("Cargo.toml"),
        pyproject: text("pyproject.toml"),
        setup_cfg: exists("setup.cfg"),
        ruff_toml: exists("ruff.toml") || exists(".ruff.toml"),
        package_json: text("package.json"),
        go_mod: exists("go.mod"),
    }
}

/// The plan-level verification commands plus the task's own (`verification_commands` in the
/// task), as written.
pub fn declared_checks(task: &TaskSpec, plan: &PlanSpec) -> Vec<VerificationCommand> {
    let mut out = plan.verification_commands.clone();
    if let Some(v) = task.extra.get("verification_commands")
        && let Ok(extra) = serde_json::from_value::<Vec<VerificationCommand>>(v.clone())
    {
        out.extend(extra);
    }
    out
}

/// Every check of `task`, run in `dir` (its worktree, or the repository for `plan check`).
pub fn task_checks(
    task: &TaskSpec,
    plan: &PlanSpec,
    dir: &Path,
    policy: CheckPolicy,
    is_program: &dyn Fn(&str) -> bool,
) -> TaskChecks {
    let mut out = TaskChecks {
        checks: declared_checks(task, plan),
        ..Default::default()
    };
    let declared_none = out.checks.is_empty();
    // Test steps and profile checks get the repairs the plan's own checks get, and at least one
    // round: a failing step goes back to the agent once before the task fails.
    let repairs = out
        .checks
        .iter()
        .map(|c| c.repair_max_attempts)
        .max()
        .unwrap_or(1);
    let has = |checks: &[VerificationCommand], cmd: &str| checks.iter().any(|c| c.command == cmd);
    let (steps, prose) = step_checks(&task.test_steps, repairs, is_program);
    out.prose_steps = prose;
    if policy.test_steps {
        for check in steps {
            if !has(&out.checks, &check.command) {
                out.checks.push(check);
            }
        }
    }
    if declared_none && policy.profile {
        for p in profile_checks(&read_repo_files(dir)) {
            if !is_program(&p.program) {
                out.unavailable.push(p);
            } else if !has(&out.checks, &p.command) {
                out.checks.push(VerificationCommand {
                    name: format!("profile: {}", p.name),
                    command: p.command,
                    required: true,
                    repair_max_attempts: repairs,
                    timeout_secs: None,
                });
            }
        }
    }
    out
}
