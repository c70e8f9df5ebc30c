//! The checks an attempt runs, put together: the plan's and the task's `verification_commands`,
//! the task's `test_steps` that are shell commands, and — when there are no verification
//! commands — the repository's own checks (see [`crate::domain::checks`]). `plan check` shows
//! the same list, from the same function.

use crate::domain::checks::{RepoFiles, missing_programs, profile_checks, step_checks};
use crate::domain::{PlanSpec, TaskSpec, VerificationCommand};
use std::path::Path;

/// Which of the optional sources run (`[verification]` in the config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CheckPolicy {
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
pub(crate) struct TaskChecks {
    pub checks: Vec<VerificationCommand>,
    /// Test steps that stay prose (prompt only), with their index.
    pub prose_steps: Vec<(usize, String)>,
    /// Checks that cannot pass here: a program they run is not on PATH. They stay in `checks`
    /// (run, they fail): a check that cannot run is a failed check, never a skipped one.
    pub missing: Vec<MissingProgram>,
}

/// A check and the programs it runs that this machine does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MissingProgram {
    /// The check's name: `test_steps[0]`, `profile: pytest`, or a verification command's name.
    pub check: String,
    pub command: String,
    pub programs: Vec<String>,
}

impl MissingProgram {
    /// A repository's own check (`profile: pytest`), not one the plan wrote.
    pub(crate) fn is_profile(&self) -> bool {
        self.check.starts_with("profile: ")
    }
}

/// Whether `name` is an executable on this process's PATH.
pub(crate) fn on_path(name: &str) -> bool {
    crate::agent::binary::resolve_binary(name, "").is_ok()
}

/// What the repository in `dir` says about itself.
pub(crate) fn read_repo_files(dir: &Path) -> RepoFiles {
    // The worktree is the agent's: a FIFO or a link to a device in place of package.json
    // must not hang or fill the engine (one that is not a small regular file says nothing).
    let text = |name: &str| {
        crate::fsutil::read_untrusted(&dir.join(name), 4 << 20)
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
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
pub(crate) fn declared_checks(task: &TaskSpec, plan: &PlanSpec) -> Vec<VerificationCommand> {
    let mut out = plan.verification_commands.clone();
    if let Some(v) = task.extra.get("verification_commands")
        && let Ok(extra) = serde_json::from_value::<Vec<VerificationCommand>>(v.clone())
    {
        out.extend(extra);
    }
    out
}

/// Every check of `task`, run in `dir` (its worktree, or the repository for `plan check`).
pub(crate) fn task_checks(
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
            if !has(&out.checks, &p.command) {
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
    out.missing = out
        .checks
        .iter()
        .filter_map(|c| {
            let programs = missing_programs(&c.command, is_program);
            (!programs.is_empty()).then(|| MissingProgram {
                check: c.name.clone(),
                command: c.command.clone(),
                programs,
            })
        })
        .collect();
    out
}

/// Every check of every task in `tasks` that cannot pass on this machine, by task id.
pub(crate) fn plan_missing_programs<'a>(
    tasks: impl IntoIterator<Item = &'a TaskSpec>,
    plan: &PlanSpec,
    dir: &Path,
    policy: CheckPolicy,
) -> Vec<(String, MissingProgram)> {
    let mut out = Vec::new();
    for task in tasks {
        for m in task_checks(task, plan, dir, policy, &on_path).missing {
            out.push((task.id.clone(), m));
        }
    }
    out
}

/// The lines an operator reads about missing programs: one per program, with its tasks and
/// the fix.
pub(crate) fn describe_missing(missing: &[(String, MissingProgram)]) -> Vec<String> {
    // Per program: where it is needed, and whether only profile checks need it.
    let mut by_program: std::collections::BTreeMap<&str, (Vec<String>, bool)> = Default::default();
    for (task, m) in missing {
        for p in &m.programs {
            let entry = by_program.entry(p.as_str()).or_insert((Vec::new(), true));
            entry.1 &= m.is_profile();
            let at = format!("{task} {}", m.check);
            if !entry.0.contains(&at) {
                entry.0.push(at);
            }
        }
    }
    by_program
        .into_iter()
        .map(|(program, (at, profile))| {
            format!(
                "program `{program}` is not on PATH, so these checks cannot pass: {}; {}",
                at.join(", "),
                remedy(program, profile)
            )
        })
        .collect()
}

/// What the operator can do about a missing program, in one line.
pub(crate) fn remedy(program: &str, profile_only: bool) -> String {
    if profile_only {
        format!(
            "install {program} or put it on PATH, give the plan verification_commands of its own, or set [verification] profile = \"off\""
        )
    } else {
        format!("install {program} or put it on PATH, or change the check")
    }
}
