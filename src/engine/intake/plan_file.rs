//! A plan file as a source: checked (structural errors refuse the import before anything is
//! written; the decision gate never does), its warnings said, and where it came from recorded
//! for `whilly doctor`'s ghost plans.

use super::{Fetched, IntakeEnv, IntakeError, IntakeOptions, Note, Source};
use crate::domain::PlanSpec;
use crate::engine::checks::{CheckPolicy, on_path, task_checks};
use crate::plan::{self, Diagnostic, Location};
use crate::store::ImportReport;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A plan file on disk.
pub(crate) struct PlanFile(pub PathBuf);

#[async_trait::async_trait]
impl Source for PlanFile {
    fn describe(&self) -> String {
        self.0.display().to_string()
    }

    async fn fetch(
        &self,
        env: &IntakeEnv<'_>,
        _opts: &IntakeOptions,
    ) -> Result<Fetched, IntakeError> {
        let report = plan::load_plan_file(&self.0, false)?;
        let spec = match (&report.plan, report.has_errors()) {
            (Some(spec), false) => spec.clone(),
            _ => {
                return Err(IntakeError::Refused {
                    rendered: plan::render_check(&report, false),
                });
            }
        };
        // Warnings are said on import too (an unknown key that does nothing, a check this
        // machine cannot run), not only by `plan check`.
        let policy = env
            .cfg
            .map(crate::engine::configure::check_policy)
            .unwrap_or_default();
        let text = std::fs::read_to_string(&self.0).ok();
        let missing = missing_program_diagnostics(&spec, env.repo_root, policy, text.as_deref());
        for d in report.diagnostics.iter().chain(&missing) {
            (env.notes)(Note::Line(plan::render_diagnostic(&report.file, d)));
        }
        Ok(Fetched {
            spec,
            skip: BTreeMap::new(),
            refused: Vec::new(),
            origin: None,
        })
    }

    fn imported(&self, env: &IntakeEnv<'_>, report: &ImportReport) {
        // A diagnosis aid only: a failure to record is logged, the import stands.
        if let Err(e) = plan::sources::record(env.state_dir, &report.plan_id, &self.0) {
            tracing::warn!("recording the source of plan {}: {e}", report.plan_id);
        }
    }
}

/// Warnings for the checks that cannot pass on this machine (a program they run is not on PATH),
/// located in the plan file's `text`: a test step at its own line, any other check at its task.
pub(crate) fn missing_program_diagnostics(
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
