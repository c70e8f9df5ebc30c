//! Getting work into the queue: one pipeline for every source of tasks — a plan file, the GitHub
//! issues with a label, a Projects board's column, a Jira search. A [`Source`] fetches the plan
//! (and what to import SKIPPED, and what it refused); then, the same for all of them, the
//! decision gate ([`gate`]), the guards' warnings, the budget, the store's import and the
//! gate's verdicts as events. The CLI parses, calls [`import`] and prints; nothing here prints.

mod gate;
pub(crate) mod github;
pub(crate) mod jira;
pub(crate) mod plan_file;

use crate::config::Config;
use crate::domain::{PlanSpec, Usd, validate_id};
use crate::engine::setup::SetupError;
use crate::forge::github::GitHubError;
use crate::forge::jira::JiraError;
use crate::store::{ImportOptions, ImportReport, Store, StoreError};
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) use gate::decision_gate;

/// Something an import has to say while it works, in order: the CLI prints each on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Note {
    /// A line already formatted (a plan file's diagnostic with its location).
    Line(String),
    Warning(String),
    /// An item of the source that was not imported, and why.
    Refused(String),
    /// What the import found that the operator may want to know.
    Info(String),
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Note::Line(l) => f.write_str(l),
            Note::Warning(w) => write!(f, "warning: {w}"),
            Note::Refused(r) => write!(f, "refused: {r}"),
            Note::Info(i) => write!(f, "note: {i}"),
        }
    }
}

/// Where notes go while an import works.
pub(crate) type Notes<'a> = &'a (dyn Fn(Note) + Send + Sync);

/// What every source and the pipeline read: the queue, the configuration, where the repository
/// and its state are.
pub(crate) struct IntakeEnv<'a> {
    pub store: &'a dyn Store,
    /// `None` when the configuration could not be read: a plan file still imports (with the
    /// defaults); the trackers need theirs.
    pub cfg: Option<&'a Config>,
    pub repo_root: &'a Path,
    pub state_dir: &'a Path,
    pub notes: Notes<'a>,
}

impl IntakeEnv<'_> {
    fn config(&self) -> Result<&Config, IntakeError> {
        self.cfg.ok_or_else(|| {
            IntakeError::Config(
                "the configuration could not be read (see `whilly config show`)".into(),
            )
        })
    }
}

/// How the import was asked.
#[derive(Debug, Clone, Default)]
pub(crate) struct IntakeOptions {
    /// Tasks the gate fails are imported SKIPPED (`decision_gate_failed`) rather than warned about.
    pub strict: bool,
    /// In US dollars; overrides the plan's own.
    pub budget: Option<f64>,
    /// Import under this id (plan files only: a tracker's plan id is fixed, so re-imports find it).
    pub plan_id: Option<String>,
    /// The gate's warnings are not said (`whilly run FILE` reports the import itself).
    pub quiet_gate: bool,
}

/// A plan fetched from its source, before the gate.
#[derive(Debug, Clone)]
pub(crate) struct Fetched {
    pub spec: PlanSpec,
    /// Tasks to import SKIPPED, with the reason (closed upstream, say).
    pub skip: BTreeMap<String, String>,
    /// What the source left out, and why (already said as [`Note::Refused`]).
    pub refused: Vec<String>,
    /// Where the tasks came from, for the closing line (`from Jira (3 issues for …)`).
    pub origin: Option<String>,
}

/// What an import did.
#[derive(Debug, Clone)]
pub(crate) struct Imported {
    pub report: ImportReport,
    pub refused: Vec<String>,
    pub origin: Option<String>,
}

/// Why nothing was imported.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IntakeError {
    /// A plan file with structural errors: its check, rendered for the operator.
    #[error("{rendered}nothing was imported")]
    Refused { rendered: String },
    /// A flag or a source the operator must correct.
    #[error("{0}")]
    Input(String),
    /// Something outside the project is missing (a token, a tracker's configuration).
    #[error("{0}")]
    Environment(String),
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error(transparent)]
    Jira(#[from] JiraError),
    #[error(transparent)]
    Setup(#[from] SetupError),
    #[error(transparent)]
    PlanFile(#[from] crate::plan::PlanFileError),
    #[error("importing {source_name}: {error}")]
    Store {
        source_name: String,
        #[source]
        error: StoreError,
    },
}

impl IntakeError {
    /// 4 for what the environment must fix (a token, the network, an unreachable queue), 1
    /// otherwise.
    pub(crate) fn exit_code(&self) -> i32 {
        match self {
            IntakeError::Environment(_) => crate::domain::exit_codes::ENVIRONMENT,
            IntakeError::GitHub(e) => e.exit_code(),
            IntakeError::Jira(e) => e.exit_code(),
            IntakeError::Setup(e) if e.is_environment() => crate::domain::exit_codes::ENVIRONMENT,
            IntakeError::Store { error, .. } if error.is_environment() => {
                crate::domain::exit_codes::ENVIRONMENT
            }
            _ => 1,
        }
    }

    fn store(source: &dyn Source, error: StoreError) -> IntakeError {
        IntakeError::Store {
            source_name: source.describe(),
            error,
        }
    }
}

/// Where a plan's tasks come from.
#[async_trait::async_trait]
pub(crate) trait Source: Send + Sync {
    /// The source as the operator wrote it (`gh:octo/api:whilly`, `tasks.json`).
    fn describe(&self) -> String;

    /// The plan to import, fetched and checked; refusals and findings go to `env.notes` as they
    /// are found.
    async fn fetch(
        &self,
        env: &IntakeEnv<'_>,
        opts: &IntakeOptions,
    ) -> Result<Fetched, IntakeError>;

    /// After a successful import (a plan file records where it came from).
    fn imported(&self, _env: &IntakeEnv<'_>, _report: &ImportReport) {}
}

/// Imports what `source` holds: fetch, gate, guards, budget, import, verdicts.
pub(crate) async fn import(
    source: &dyn Source,
    env: &IntakeEnv<'_>,
    opts: &IntakeOptions,
) -> Result<Imported, IntakeError> {
    if let Some(id) = &opts.plan_id {
        validate_id(id).map_err(|e| IntakeError::Input(format!("--id: {e}")))?;
    }
    if let Some(b) = opts.budget
        && (!b.is_finite() || b < 0.0)
    {
        return Err(IntakeError::Input(format!(
            "--budget {b}: expected a non-negative number of US dollars"
        )));
    }
    let Fetched {
        spec,
        mut skip,
        refused,
        origin,
    } = source.fetch(env, opts).await?;
    let verdicts = decision_gate(env, &spec, &mut skip, opts.strict, opts.quiet_gate).await;
    if let Some(cfg) = env.cfg {
        warn_guarded_tasks(env, &spec, cfg)?;
    }
    let budget = budget(env.store, &spec, opts).await;
    let import_opts = ImportOptions {
        budget,
        plan_id: opts.plan_id.clone(),
        skip,
        default_max_attempts: env.cfg.map_or(3, |c| c.queue.default_max_attempts),
    };
    let report = env
        .store
        .import_plan(&spec, &import_opts)
        .await
        .map_err(|e| IntakeError::store(source, e))?;
    verdicts.record(env.store, &report.plan_id).await;
    source.imported(env, &report);
    Ok(Imported {
        report,
        refused,
        origin,
    })
}

/// `--budget`, else the plan's own, else the budget the stored plan has: one set earlier with
/// `--budget` is in no source, and re-importing without the flag must keep it rather than
/// silently lift the limit.
async fn budget(store: &dyn Store, spec: &PlanSpec, opts: &IntakeOptions) -> Option<Usd> {
    match (opts.budget, spec.budget_usd) {
        (Some(b), _) => Some(Usd::from_f64(b)),
        (None, Some(_)) => None,
        (None, None) => {
            let id = opts.plan_id.as_deref().unwrap_or(&spec.id);
            store.get_plan(id).await.ok().and_then(|p| p.budget)
        }
    }
}

/// What the guards will refuse is said now (the text may be someone else's); the run refuses it
/// before any agent sees it.
fn warn_guarded_tasks(
    env: &IntakeEnv<'_>,
    spec: &PlanSpec,
    cfg: &Config,
) -> Result<(), IntakeError> {
    let guards = crate::agent::Guards::new(&cfg.guards.injection_patterns)
        .map_err(|e| IntakeError::Config(format!("[guards] injection_patterns: {e}")))?;
    for t in &spec.tasks {
        if let Err(reason) = guards.check_task(t) {
            (env.notes)(Note::Warning(format!(
                "{}: {reason}; it will be refused before any agent runs",
                t.id
            )));
        }
    }
    Ok(())
}

/// The stored tasks of `plan_id`, none when it was never imported.
async fn stored_tasks(
    source: &dyn Source,
    store: &dyn Store,
    plan_id: &str,
) -> Result<Vec<crate::domain::TaskSpec>, IntakeError> {
    match store.export_plan(plan_id).await {
        Ok(spec) => Ok(spec.tasks),
        Err(StoreError::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(IntakeError::store(source, e)),
    }
}
