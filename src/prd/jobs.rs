//! The wizard's [`Job`]s run for real: read-only agent calls in the project root, the PRD and plan
//! files, merges and imports into the queue. The CLI and the console both run them here, each
//! with its own agent, store and target plan; what comes back is fed to [`super::Wizard`].

use super::document;
use super::error::PrdError;
use super::interview::{self, Step};
use super::merge::{self, Collisions};
use super::oneshot::OneShot;
use super::plan_gen::{self, PlanRequest};
use super::wizard::{Applied, Job, PlanOptions, Reply, STATE_DIR};
use crate::domain::{PlanSpec, Usd};
use crate::store::Store;
use std::path::{Path, PathBuf};

/// What the jobs run with.
#[derive(Clone, Copy)]
pub struct JobContext<'a> {
    pub agent: &'a OneShot,
    /// The project: the agent's working directory, `docs/` for the PRD, the base of relative
    /// plan paths.
    pub root: &'a Path,
    /// The queue, for merges and imports.
    pub store: Option<&'a dyn Store>,
    /// The plan [`Job::Merge`] adds to.
    pub merge_into: Option<&'a str>,
}

/// What a job's agent calls cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub cost: Usd,
    pub calls: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct JobDone {
    pub reply: Reply,
    pub spent: Spent,
}

impl Reply {
    /// The reply of a job that failed with `e`.
    pub fn failed(e: &PrdError) -> Reply {
        let raw = match e {
            PrdError::PlanInvalid { raw_file, .. } => Some(raw_file.clone()),
            _ => None,
        };
        Reply::Failed {
            message: e.to_string(),
            raw,
        }
    }
}

/// Runs `job`. Dropping the future (aborting the task holding it) kills a running agent.
pub async fn run_job(cx: &JobContext<'_>, job: Job) -> Result<JobDone, PrdError> {
    let done = |reply, cost, calls| JobDone {
        reply,
        spent: Spent { cost, calls },
    };
    match job {
        Job::Ask {
            idea,
            answers,
            max_questions,
        } => {
            let (step, cost) =
                interview::next_question(cx.agent, cx.root, &idea, &answers, max_questions).await?;
            let reply = match step {
                Step::Question(q) => Reply::Question(q),
                Step::Done => Reply::InterviewDone,
            };
            Ok(done(reply, cost, 1))
        }
        Job::WritePrd { idea, answers } => {
            let draft = document::write_prd(cx.agent, cx.root, &idea, &answers).await?;
            let (root, title, text) = (cx.root.to_path_buf(), draft.title, draft.markdown);
            let saved = text.clone();
            let path = blocking(move || document::save_prd(&root, &title, &saved)).await?;
            Ok(done(Reply::Prd { path, text }, draft.cost, 1))
        }
        Job::MakePlan { prd, edited, opts } => {
            let path = cx.root.join(prd);
            if let Some(text) = edited {
                let at = path.clone();
                blocking(move || write_file(&at, text.as_bytes())).await?;
            }
            let req = plan_request(cx.root, &path, &opts)?;
            let raw_dir = cx.root.join(STATE_DIR);
            let generated = plan_gen::generate_plan(cx.agent, cx.root, &req, &raw_dir).await?;
            Ok(done(
                Reply::Plan(generated.spec),
                generated.cost,
                generated.calls,
            ))
        }
        Job::Merge(plan) => {
            let (store, into) = match (cx.store, cx.merge_into) {
                (Some(s), Some(p)) => (s, p),
                _ => return Err(PrdError::Missing("a queue and a plan to merge into")),
            };
            let (outcome, _report) =
                merge::merge_and_import(store, into, &plan, Collisions::Rename).await?;
            let applied = Applied::Merged {
                into: into.to_string(),
                added: outcome.added,
                renamed: outcome.renamed,
            };
            Ok(done(Reply::Applied(applied), Usd::ZERO, 0))
        }
        Job::Import { plan, path } => {
            let store = cx
                .store
                .ok_or(PrdError::Missing("a queue to import into"))?;
            let path = cx.root.join(path);
            let (spec, report) = merge::save_as_new_plan(store, &plan, &path).await?;
            let applied = Applied::Imported {
                path,
                plan_id: spec.id,
                tasks: report.created.len(),
            };
            Ok(done(Reply::Applied(applied), Usd::ZERO, 0))
        }
        Job::WritePlan { plan, path } => {
            let path = cx.root.join(path);
            let at = path.clone();
            let spec: PlanSpec = plan.clone();
            blocking(move || merge::write_plan_file(&at, &spec)).await?;
            let applied = Applied::Written {
                path,
                plan_id: plan.id,
            };
            Ok(done(Reply::Applied(applied), Usd::ZERO, 0))
        }
    }
}

/// The plan request for the PRD at `prd_path`, read now (with the operator's edits). The plan's
/// id defaults to `prd-<slug of the file>`, its project to the root directory's name.
pub fn plan_request(
    root: &Path,
    prd_path: &Path,
    opts: &PlanOptions,
) -> Result<PlanRequest, PrdError> {
    let prd = document::read_prd(prd_path)?;
    let prd_file = prd_path
        .strip_prefix(root)
        .unwrap_or(prd_path)
        .to_string_lossy()
        .into_owned();
    let project = opts.project.clone().unwrap_or_else(|| {
        root.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "project".to_string())
    });
    Ok(PlanRequest {
        prd,
        prd_file,
        plan_id: opts
            .plan_id
            .clone()
            .unwrap_or_else(|| format!("prd-{}", document::slug_of_file(prd_path))),
        project,
        repair_rounds: opts.repair_rounds,
    })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PrdError> {
    crate::fsutil::atomic_write(path, bytes).map_err(|source| PrdError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// File IO off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, PrdError> + Send + 'static,
) -> Result<T, PrdError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| PrdError::Io {
            path: PathBuf::new(),
            source: std::io::Error::other(e.to_string()),
        })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// The console runs each job in a tokio task: the future must be `Send`.
    #[allow(dead_code)]
    fn jobs_are_send(cx: JobContext<'_>, job: Job) {
        assert_send(&run_job(&cx, job));
    }
}
