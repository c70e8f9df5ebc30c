//! Running the wizard's jobs and the challenge for the console: `prd::run_job` with the run's
//! agent (read-only) in the project root, merges going into the plan the console runs.

use super::{WizardEffect, WizardReply};
use crate::prd::{self, JobContext, OneShot};
use crate::store::Store;
use std::path::PathBuf;
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
