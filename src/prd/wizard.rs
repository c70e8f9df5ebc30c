//! The wizard as a state machine a console drives step by step from a tokio task:
//! idea → questions and answers → PRD saved (the operator may edit the file) → plan generated
//! (the operator may edit its tasks) → merged, saved as a new plan, or discarded.

use super::document::{self, PrdDraft};
use super::error::PrdError;
use super::interview::{self, DEFAULT_MAX_QUESTIONS, QaPair, Step};
use super::merge::{self, Collisions, MergeOutcome};
use super::oneshot::OneShot;
use super::plan_gen::{self, DEFAULT_REPAIR_ROUNDS, GeneratedPlan, PlanRequest};
use crate::domain::{PlanSpec, Usd};
use crate::plan::CheckReport;
use crate::store::{ImportReport, Store};
use std::path::{Path, PathBuf};

/// Where the wizard keeps prompt files and failed plan replies, under the project root.
pub const STATE_DIR: &str = ".whilly/prd";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WizardOptions {
    pub max_questions: usize,
    pub repair_rounds: u32,
    /// The generated plan's id; default `prd-<slug>`.
    pub plan_id: Option<String>,
    /// The generated plan's project; default the root directory's name.
    pub project: Option<String>,
}

impl Default for WizardOptions {
    fn default() -> WizardOptions {
        WizardOptions {
            max_questions: DEFAULT_MAX_QUESTIONS,
            repair_rounds: DEFAULT_REPAIR_ROUNDS,
            plan_id: None,
            project: None,
        }
    }
}

/// Where a wizard is, for the console to show the right screen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Questions may still come ([`Wizard::next_question`]; a pending one needs an answer).
    Interviewing,
    /// The interview is over: [`Wizard::write_prd`] is next.
    InterviewDone,
    /// The PRD is on disk (editable): [`Wizard::generate_plan`] is next.
    PrdWritten,
    /// A plan is ready to edit, merge, save or discard.
    PlanReady,
}

/// One run of the wizard. Every agent call is an `async fn` taking `&mut self`; dropping the
/// future (or aborting the task holding it) stops the agent.
#[derive(Debug)]
pub struct Wizard {
    agent: OneShot,
    root: PathBuf,
    opts: WizardOptions,
    idea: String,
    qa: Vec<QaPair>,
    pending: Option<String>,
    interview_over: bool,
    prd: Option<(PathBuf, String)>,
    plan: Option<GeneratedPlan>,
    cost: Usd,
}

impl Wizard {
    /// A wizard for `idea` in the project at `root` (the agent's working directory; the PRD goes
    /// to `root/docs/`).
    pub fn new(
        agent: OneShot,
        root: &Path,
        idea: impl Into<String>,
        opts: WizardOptions,
    ) -> Wizard {
        Wizard {
            agent,
            root: root.to_path_buf(),
            opts,
            idea: idea.into(),
            qa: Vec::new(),
            pending: None,
            interview_over: false,
            prd: None,
            plan: None,
            cost: Usd::ZERO,
        }
    }

    pub fn stage(&self) -> Stage {
        match (&self.plan, &self.prd, self.interview_over) {
            (Some(_), _, _) => Stage::PlanReady,
            (None, Some(_), _) => Stage::PrdWritten,
            (None, None, true) => Stage::InterviewDone,
            (None, None, false) => Stage::Interviewing,
        }
    }

    pub fn idea(&self) -> &str {
        &self.idea
    }

    pub fn answers(&self) -> &[QaPair] {
        &self.qa
    }

    /// The question waiting for [`Wizard::answer`].
    pub fn pending_question(&self) -> Option<&str> {
        self.pending.as_deref()
    }

    /// What every agent call of this wizard cost so far.
    pub fn cost(&self) -> Usd {
        self.cost
    }

    pub fn prd_path(&self) -> Option<&Path> {
        self.prd.as_ref().map(|(p, _)| p.as_path())
    }

    pub fn plan(&self) -> Option<&GeneratedPlan> {
        self.plan.as_ref()
    }

    /// The agent's next question (the pending one again if it is still unanswered), or
    /// [`Step::Done`] once the agent is satisfied, the cap is reached or the operator ended it.
    pub async fn next_question(&mut self) -> Result<Step, PrdError> {
        if let Some(q) = &self.pending {
            return Ok(Step::Question(q.clone()));
        }
        if self.interview_over {
            return Ok(Step::Done);
        }
        let (step, cost) = interview::next_question(
            &self.agent,
            &self.root,
            &self.idea,
            &self.qa,
            self.opts.max_questions,
        )
        .await?;
        self.cost += cost;
        match &step {
            Step::Question(q) => self.pending = Some(q.clone()),
            Step::Done => self.interview_over = true,
        }
        Ok(step)
    }

    /// Records the operator's answer to the pending question (empty: let the agent decide).
    pub fn answer(&mut self, answer: impl Into<String>) -> Result<(), PrdError> {
        let question = self
            .pending
            .take()
            .ok_or(PrdError::WrongStep("no question is waiting for an answer"))?;
        self.qa.push(QaPair {
            question,
            answer: answer.into(),
        });
        Ok(())
    }

    /// The operator ends the interview early (a pending question is dropped).
    pub fn finish_interview(&mut self) {
        self.pending = None;
        self.interview_over = true;
    }

    /// Has the agent write the PRD and saves it as `docs/PRD-<slug>.md` (never replacing a
    /// different file). Returns the path; the operator may edit the file before the plan.
    pub async fn write_prd(&mut self) -> Result<PathBuf, PrdError> {
        self.finish_interview();
        let PrdDraft {
            title,
            markdown,
            cost,
        } = document::write_prd(&self.agent, &self.root, &self.idea, &self.qa).await?;
        self.cost += cost;
        let slug = document::slug(&title);
        let path = document::save_prd(&self.root, &slug, &markdown)?;
        self.prd = Some((path.clone(), slug));
        Ok(path)
    }

    /// Uses an existing PRD file instead of writing one (the operator already has it).
    pub fn use_prd_file(&mut self, path: &Path) {
        self.finish_interview();
        self.prd = Some((path.to_path_buf(), document::slug_of_file(path)));
    }

    /// Turns the PRD (as it is on disk now, with the operator's edits) into a plan: see
    /// [`plan_gen::generate_plan`]. The plan is kept for editing and the final choice.
    pub async fn generate_plan(&mut self) -> Result<&GeneratedPlan, PrdError> {
        let Some((path, slug)) = self.prd.clone() else {
            return Err(PrdError::WrongStep("the PRD has not been written yet"));
        };
        let req = plan_request(&self.root, &path, &slug, &self.opts)?;
        let result =
            plan_gen::generate_plan(&self.agent, &self.root, &req, &self.root.join(STATE_DIR))
                .await;
        let generated = result?;
        self.cost += generated.cost;
        Ok(self.plan.insert(generated))
    }

    /// Replaces the plan with the operator's edited version and re-checks it (parse, validation
    /// and gate exactly as for a plan file). An invalid edit is kept too, so the operator can fix
    /// it; [`Wizard::merge_into`] and [`Wizard::save_as_new_plan`] refuse it until then.
    pub fn set_plan(&mut self, spec: PlanSpec) -> CheckReport {
        let report = plan_gen::check_spec(&spec);
        let (cost, calls) = self
            .plan
            .as_ref()
            .map_or((Usd::ZERO, 0), |p| (p.cost, p.calls));
        self.plan = Some(GeneratedPlan {
            gate: report.gate.clone(),
            warnings: plan_gen::warnings_text(&report),
            spec,
            calls,
            cost,
        });
        report
    }

    fn plan_spec(&self) -> Result<&PlanSpec, PrdError> {
        self.plan
            .as_ref()
            .map(|p| &p.spec)
            .ok_or(PrdError::WrongStep("no plan has been generated yet"))
    }

    /// Merges the plan into the imported plan `plan_id` (the running one) and re-imports it.
    pub async fn merge_into(
        &self,
        store: &dyn Store,
        plan_id: &str,
        collisions: Collisions,
    ) -> Result<(MergeOutcome, ImportReport), PrdError> {
        merge::merge_and_import(store, plan_id, self.plan_spec()?, collisions).await
    }

    /// Saves the plan as its own file (default: beside the PRD) and imports it. Returns the
    /// file, the plan as imported (its id may have got a suffix) and the import report.
    pub async fn save_as_new_plan(
        &self,
        store: &dyn Store,
        path: Option<&Path>,
    ) -> Result<(PathBuf, PlanSpec, ImportReport), PrdError> {
        let spec = self.plan_spec()?;
        let path = match (path, &self.prd) {
            (Some(p), _) => p.to_path_buf(),
            (None, Some((prd, _))) => merge::default_plan_path(prd),
            (None, None) => self
                .root
                .join(STATE_DIR)
                .join(format!("{}.plan.json", crate::domain::safe_id(&spec.id))),
        };
        let (spec, report) = merge::save_as_new_plan(store, spec, &path).await?;
        Ok((path, spec, report))
    }
}

/// The plan request for the PRD at `prd_path`, read now.
pub fn plan_request(
    root: &Path,
    prd_path: &Path,
    slug: &str,
    opts: &WizardOptions,
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
            .unwrap_or_else(|| format!("prd-{}", document::slug(slug))),
        project,
        repair_rounds: opts.repair_rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>(_: &T) {}

    /// The console runs each step in a tokio task: every step's future must be `Send`.
    #[allow(dead_code)]
    async fn steps_are_send(mut w: Wizard, store: std::sync::Arc<dyn Store>) {
        assert_send(&w.next_question());
        assert_send(&w.write_prd());
        assert_send(&w.generate_plan());
        assert_send(&w.merge_into(store.as_ref(), "p", Collisions::Rename));
        assert_send(&w.save_as_new_plan(store.as_ref(), None));
        assert_send(&w);
    }
}
