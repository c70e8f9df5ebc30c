//! Running the wizard's effects and the challenge with a real agent (`crate::prd`): read-only
//! one-shot calls in the project root, the PRD saved under `docs/`, the plan merged into the
//! running plan or imported as its own. Each returns what the state machine needs next.

use super::{MAX_QUESTIONS, WizardEffect, WizardReply};
use crate::domain::PlanSpec;
use crate::fsutil::atomic_write;
use crate::prd::{
    self, Collisions, OneShot, PrdError, QaPair, Step, WizardOptions, default_plan_path,
};
use crate::store::Store;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the agent calls need: the agent, the project, the queue and the plan being run.
#[derive(Clone)]
pub struct WizardContext {
    pub agent: Arc<OneShot>,
    pub root: PathBuf,
    pub store: Arc<dyn Store>,
    pub plan_id: String,
}

pub async fn run(cx: &WizardContext, effect: WizardEffect) -> WizardReply {
    match step(cx, effect).await {
        Ok(reply) => reply,
        Err(e) => failed(e),
    }
}

fn failed(e: PrdError) -> WizardReply {
    let raw = match &e {
        PrdError::PlanInvalid { raw_file, .. } => Some(raw_file.clone()),
        _ => None,
    };
    WizardReply::Failed {
        message: e.to_string(),
        raw,
    }
}

fn qa(answers: &[(String, String)]) -> Vec<QaPair> {
    answers
        .iter()
        .map(|(q, a)| QaPair {
            question: q.clone(),
            answer: a.clone(),
        })
        .collect()
}

async fn step(cx: &WizardContext, effect: WizardEffect) -> Result<WizardReply, PrdError> {
    match effect {
        WizardEffect::Ask { idea, answers } => {
            let (step, _cost) =
                prd::next_question(&cx.agent, &cx.root, &idea, &qa(&answers), MAX_QUESTIONS)
                    .await?;
            Ok(match step {
                Step::Question(q) => WizardReply::Question(q),
                Step::Done => WizardReply::InterviewDone,
            })
        }
        WizardEffect::WritePrd { idea, answers } => {
            let draft = prd::write_prd(&cx.agent, &cx.root, &idea, &qa(&answers)).await?;
            let (root, title, text) = (cx.root.clone(), draft.title.clone(), draft.markdown);
            let saved = text.clone();
            let path = blocking(move || prd::save_prd(&root, &title, &saved)).await?;
            Ok(WizardReply::Prd { path, text })
        }
        WizardEffect::SaveAndPlan { path, text } => {
            let write_path = path.clone();
            blocking(move || {
                atomic_write(&write_path, text.as_bytes()).map_err(|source| PrdError::Io {
                    path: write_path.clone(),
                    source,
                })
            })
            .await?;
            let slug = prd::document::slug_of_file(&path);
            let req = prd::plan_request(&cx.root, &path, &slug, &WizardOptions::default())?;
            let raw_dir = cx.root.join(prd::STATE_DIR);
            let generated = prd::generate_plan(&cx.agent, &cx.root, &req, &raw_dir).await?;
            Ok(WizardReply::Plan(generated.spec))
        }
        WizardEffect::Merge(plan) => {
            let (outcome, _report) =
                prd::merge_and_import(&*cx.store, &cx.plan_id, &plan, Collisions::Rename).await?;
            let mut msg = format!(
                "merged {} task(s) into plan {}: {}",
                outcome.added.len(),
                cx.plan_id,
                outcome.added.join(", ")
            );
            if !outcome.renamed.is_empty() {
                let renames: Vec<String> = outcome
                    .renamed
                    .iter()
                    .map(|(from, to)| format!("{from} → {to}"))
                    .collect();
                msg.push_str(&format!(" (renamed: {})", renames.join(", ")));
            }
            msg.push_str("; the engine picks them up like any ready task");
            Ok(WizardReply::Applied(msg))
        }
        WizardEffect::SaveAs(plan, prd_path) => {
            let path = plan_path(&cx.root, &plan, prd_path.as_deref());
            let (spec, report) = prd::save_as_new_plan(&*cx.store, &plan, &path).await?;
            Ok(WizardReply::Applied(format!(
                "saved plan {} ({} task(s)) to {} and imported it; run it with `whilly run --plan {}`",
                spec.id,
                report.created.len(),
                path.display(),
                spec.id
            )))
        }
    }
}

/// Beside the PRD, else `.whilly/prd/<plan id>.plan.json`.
fn plan_path(root: &Path, plan: &PlanSpec, prd_path: Option<&Path>) -> PathBuf {
    match prd_path {
        Some(p) => default_plan_path(p),
        None => root
            .join(prd::STATE_DIR)
            .join(format!("{}.plan.json", crate::domain::safe_id(&plan.id))),
    }
}

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

/// The agent's critique of the plan as it stands in the queue.
pub async fn challenge(cx: &WizardContext) -> Result<String, String> {
    let spec = cx
        .store
        .export_plan(&cx.plan_id)
        .await
        .map_err(|e| e.to_string())?;
    prd::challenge_plan(&cx.agent, &cx.root, &spec)
        .await
        .map(|c| c.text)
        .map_err(|e| e.to_string())
}
