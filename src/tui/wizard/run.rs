//! Running the wizard's jobs, the challenge and the split key's agent call for the console:
//! `prd` with the run's agent (read-only) in the project root, merges going into the plan the
//! console runs.

use super::{WizardEffect, WizardReply};
use crate::prd::{self, JobContext, OneShot};
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;

/// What the agent calls need: the agent, the project, the queue and the plan being run.
#[derive(Clone)]
pub(crate) struct WizardContext {
    pub agent: Arc<OneShot>,
    pub root: PathBuf,
    pub store: Arc<dyn Store>,
    pub plan_id: String,
}

pub(crate) async fn run(cx: &WizardContext, effect: WizardEffect) -> WizardReply {
    let jobs = JobContext {
        agent: &cx.agent,
        root: &cx.root,
        store: Some(cx.store.as_ref()),
        merge_into: Some(&cx.plan_id),
    };
    match prd::run_job(&jobs, effect).await {
        Ok(done) => done.reply,
        Err(e) => WizardReply::failed(&e),
    }
}

/// The agent's critique of the plan as it stands in the queue.
pub(crate) async fn challenge(cx: &WizardContext) -> Result<String, String> {
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

/// The agent's split of `task_id` in the plan as it stands in the queue (checked and applied,
/// not written: the operator sees the diff first).
pub(crate) async fn split(
    cx: &WizardContext,
    task_id: &str,
) -> Result<prd::decompose::Decomposition, String> {
    use crate::plan::decompose::{SplitRules, candidates};
    let spec = cx
        .store
        .export_plan(&cx.plan_id)
        .await
        .map_err(|e| e.to_string())?;
    let picked = candidates(&spec, &[task_id.to_string()])?;
    let raw_dir = cx.root.join(prd::STATE_DIR);
    let call = prd::preflight::Call {
        agent: &cx.agent,
        cwd: &cx.root,
        raw_dir: &raw_dir,
    };
    prd::decompose::decompose_tasks(call, &spec, &picked, SplitRules::default(), |_, _| {})
        .await
        .map_err(|e| e.to_string())
}
