//! The PRD wizard as one pure state machine, driven both by `whilly prd new|plan` (stdin and
//! stdout, `cli/prd_cmd.rs`) and by the console's `n` (an editor, `tui/wizard/`): idea →
//! questions and answers → the PRD (the operator may edit it) → the plan (the operator may edit
//! or delete its tasks) → merged into a plan, imported as a plan of its own, or written to a file.
//!
//! [`Wizard::handle`] takes an [`Input`] — what the operator typed or chose, or the [`Reply`] of
//! the [`Job`] it asked for — and returns [`Effect`]s: a job to run (`prd::jobs::run_job` runs it
//! with the agent, the files and the queue), something to show, a refusal, or the end. There is
//! no IO here, so every rule of the wizard lives in this file and is tested by driving it:
//!
//! - at most [`WizardOptions::max_questions`] questions (the agent may say DONE sooner, the
//!   operator may end the interview at any question);
//! - an empty answer is an answer: "decide yourself" (the prompts say so to the agent);
//! - a reply is taken only while its job runs (a late one from an abandoned job is dropped);
//! - no plan enters the queue (merge, import) while a task fails validation or the decision
//!   gate: the gate's rules are what a task must pass before an agent is given it, and a merged
//!   task is claimed by a running engine at once. A file may hold such a plan (the operator
//!   fixes it there), never one that does not validate.

use super::interview::{DEFAULT_MAX_QUESTIONS, QaPair};
use super::merge::default_plan_path;
use super::plan_gen::{DEFAULT_REPAIR_ROUNDS, check_spec};
use crate::domain::{PlanSpec, TaskSpec};
use crate::plan::GateResult;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where the wizard keeps prompt files and failed plan replies, under the project root.
pub const STATE_DIR: &str = ".whilly/prd";

/// How the plan is made from the PRD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanOptions {
    /// Rounds in which the agent gets its invalid plan back with the problems.
    pub repair_rounds: u32,
    /// The plan's id; default `prd-<slug of the PRD file>`.
    pub plan_id: Option<String>,
    /// The plan's project; default the root directory's name.
    pub project: Option<String>,
}

impl Default for PlanOptions {
    fn default() -> PlanOptions {
        PlanOptions {
            repair_rounds: DEFAULT_REPAIR_ROUNDS,
            plan_id: None,
            project: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WizardOptions {
    /// Questions asked at most (0: no interview).
    pub max_questions: usize,
    pub plan: PlanOptions,
}

impl Default for WizardOptions {
    fn default() -> WizardOptions {
        WizardOptions {
            max_questions: DEFAULT_MAX_QUESTIONS,
            plan: PlanOptions::default(),
        }
    }
}

/// Where the wizard is.
#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// Waiting for the idea ([`Input::Idea`]) or a PRD file ([`Input::UsePrd`]).
    Idea,
    /// [`Job::Ask`] runs.
    Asking,
    /// Waiting for the operator's answer to `question`.
    Answering { question: String },
    /// [`Job::WritePrd`] runs.
    WritingPrd,
    /// The PRD at `path` is written: the operator may edit it, then [`Input::MakePlan`].
    PrdReady { path: PathBuf },
    /// [`Job::MakePlan`] runs.
    Planning,
    /// The plan is ready to review, edit, merge, import or write.
    PlanReady,
    /// [`Job::Merge`], [`Job::Import`] or [`Job::WritePlan`] runs.
    Applying,
    /// A job failed: [`Input::Retry`] runs it again; after a failed plan, [`Input::EditPrd`]
    /// goes back to the PRD.
    Failed,
    /// Over.
    Finished(Applied),
}

/// What the operator did, or what came back from a job.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// The idea, in a sentence or a page.
    Idea(String),
    /// Skip the interview: make the plan from this PRD file.
    UsePrd(PathBuf),
    /// The answer to the question shown (empty: the agent decides).
    Answer(String),
    /// An answer, and enough questions.
    LastAnswer(String),
    /// Enough questions: the one shown is dropped.
    EndInterview,
    /// On from the PRD to the plan; `edited` is the operator's text, saved first.
    MakePlan { edited: Option<String> },
    /// After a failed plan: back to the PRD as it was sent.
    EditPrd,
    /// Run the failed job again.
    Retry,
    /// Replace task `index` of the plan (re-checked).
    SetTask { index: usize, task: TaskSpec },
    /// Delete task `index` of the plan (re-checked).
    DeleteTask(usize),
    /// Replace the whole plan (re-checked).
    SetPlan(PlanSpec),
    /// Add the plan's tasks to the plan the driver runs or names.
    Merge,
    /// Save the plan as a file (default: beside the PRD) and import it as a plan of its own.
    Import(Option<PathBuf>),
    /// Only write the plan to a file (default: beside the PRD).
    WritePlan(Option<PathBuf>),
    /// What the running job came back with.
    Reply(Reply),
}

/// What a job came back with.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The agent's next question.
    Question(String),
    /// The agent has enough to write the PRD.
    InterviewDone,
    /// The PRD, saved at `path`.
    Prd { path: PathBuf, text: String },
    /// The plan (parsed, validated, normalised).
    Plan(PlanSpec),
    /// The plan was merged, imported or written.
    Applied(Applied),
    /// The job failed; `raw` is where the agent's unusable reply was kept.
    Failed {
        message: String,
        raw: Option<PathBuf>,
    },
}

/// Where the plan went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// Its tasks were added to plan `into` (`renamed`: clashing ids, old → new).
    Merged {
        into: String,
        added: Vec<String>,
        renamed: Vec<(String, String)>,
    },
    /// Saved to `path` and imported as plan `plan_id` (which may have got a suffix).
    Imported {
        path: PathBuf,
        plan_id: String,
        tasks: usize,
    },
    /// Written to `path`, not imported.
    Written { path: PathBuf, plan_id: String },
}

impl fmt::Display for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Applied::Merged {
                into,
                added,
                renamed,
            } => {
                write!(
                    f,
                    "merged {} task(s) into plan {into}: {}",
                    added.len(),
                    added.join(", ")
                )?;
                if !renamed.is_empty() {
                    let renames: Vec<String> =
                        renamed.iter().map(|(a, b)| format!("{a} → {b}")).collect();
                    write!(f, " (renamed: {})", renames.join(", "))?;
                }
                f.write_str("; the engine picks them up like any ready task")
            }
            Applied::Imported {
                path,
                plan_id,
                tasks,
            } => write!(
                f,
                "saved plan {plan_id} ({tasks} task(s)) to {} and imported it; run it with \
                 `whilly run --plan {plan_id}`",
                path.display()
            ),
            Applied::Written { path, plan_id } => {
                write!(f, "wrote plan {plan_id} to {}", path.display())
            }
        }
    }
}

/// Work the wizard needs done outside it; its outcome comes back as [`Input::Reply`].
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// Ask the agent for the next question (or to say it has enough).
    Ask {
        idea: String,
        answers: Vec<QaPair>,
        max_questions: usize,
    },
    /// Have the agent write the PRD and save it under `docs/` (never replacing another file).
    WritePrd { idea: String, answers: Vec<QaPair> },
    /// Save `edited` over the PRD (if given), then have the agent turn the PRD into a plan.
    MakePlan {
        prd: PathBuf,
        edited: Option<String>,
        opts: PlanOptions,
    },
    /// Add the plan's tasks to the driver's plan and re-import it.
    Merge(PlanSpec),
    /// Write the plan to `path` (relative: to the project root) and import it.
    Import { plan: PlanSpec, path: PathBuf },
    /// Write the plan to `path` (relative: to the project root).
    WritePlan { plan: PlanSpec, path: PathBuf },
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Run this job and feed its [`Reply`] back.
    Run(Job),
    /// Show the operator this question; an answer (or the end of the interview) comes next.
    ShowQuestion(String),
    /// The PRD is written: show it (the operator may edit it).
    ShowPrd { path: PathBuf, text: String },
    /// The plan ([`Wizard::plan`], [`Wizard::problems`]) is new or changed: show it.
    ShowPlan,
    /// The input was not taken, for this reason; nothing else changed.
    Refused(String),
    /// The job failed (see [`Stage::Failed`]; a failed merge or import goes back to the plan).
    Failed {
        message: String,
        raw: Option<PathBuf>,
    },
    /// The wizard is over.
    Done(Applied),
}

/// A problem of the plan, for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanProblem {
    /// The task it is about, if any.
    pub task_id: Option<String>,
    pub message: String,
    /// Errors keep the plan out of the queue; warnings do not.
    pub error: bool,
}

#[derive(Debug, Clone)]
pub struct Wizard {
    opts: WizardOptions,
    stage: Stage,
    idea: String,
    qa: Vec<QaPair>,
    prd_path: Option<PathBuf>,
    /// The PRD's text as last written or edited (unknown for a PRD file given as it is).
    prd_text: Option<String>,
    plan: Option<PlanSpec>,
    problems: Vec<PlanProblem>,
    gate: Vec<GateResult>,
    /// The plan does not validate (gate failures aside).
    invalid: bool,
    /// The job running, or the one that failed (for [`Input::Retry`]).
    job: Option<Job>,
}

impl Default for Wizard {
    fn default() -> Wizard {
        Wizard::new(WizardOptions::default())
    }
}

impl Wizard {
    pub fn new(opts: WizardOptions) -> Wizard {
        Wizard {
            opts,
            stage: Stage::Idea,
            idea: String::new(),
            qa: Vec::new(),
            prd_path: None,
            prd_text: None,
            plan: None,
            problems: Vec::new(),
            gate: Vec::new(),
            invalid: false,
            job: None,
        }
    }

    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    pub fn options(&self) -> &WizardOptions {
        &self.opts
    }

    /// Whether a job runs (the driver waits for its reply).
    pub fn busy(&self) -> bool {
        matches!(
            self.stage,
            Stage::Asking | Stage::WritingPrd | Stage::Planning | Stage::Applying
        )
    }

    pub fn idea(&self) -> &str {
        &self.idea
    }

    pub fn answers(&self) -> &[QaPair] {
        &self.qa
    }

    pub fn prd_path(&self) -> Option<&Path> {
        self.prd_path.as_deref()
    }

    pub fn plan(&self) -> Option<&PlanSpec> {
        self.plan.as_ref()
    }

    /// Every problem of the plan: validation diagnostics and decision-gate failures.
    pub fn problems(&self) -> &[PlanProblem] {
        &self.problems
    }

    /// The problems of one task.
    pub fn problems_of(&self, task_id: &str) -> Vec<&PlanProblem> {
        self.problems
            .iter()
            .filter(|p| p.task_id.as_deref() == Some(task_id))
            .collect()
    }

    /// The tasks failing the decision gate (only those).
    pub fn gate(&self) -> &[GateResult] {
        &self.gate
    }

    /// Whether the plan may enter the queue: it has tasks and no errors.
    pub fn plan_ready(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| !p.tasks.is_empty())
            && !self.problems.iter().any(|p| p.error)
    }

    pub fn handle(&mut self, input: Input) -> Vec<Effect> {
        match input {
            Input::Reply(reply) => self.reply(reply),
            Input::Idea(text) => {
                if self.stage != Stage::Idea {
                    return refused("the idea is already given");
                }
                let text = text.trim();
                if text.is_empty() {
                    return refused("the idea is empty: say what to build, for whom and why");
                }
                self.idea = text.to_string();
                self.next_question()
            }
            Input::UsePrd(path) => {
                if self.stage != Stage::Idea {
                    return refused("the wizard has started already");
                }
                self.prd_path = Some(path.clone());
                self.start(Job::MakePlan {
                    prd: path,
                    edited: None,
                    opts: self.opts.plan.clone(),
                })
            }
            Input::Answer(text) => self.answer(text, false),
            Input::LastAnswer(text) => self.answer(text, true),
            Input::EndInterview => {
                if !matches!(self.stage, Stage::Answering { .. }) {
                    return refused("no question is waiting for an answer");
                }
                self.write_prd()
            }
            Input::MakePlan { edited } => self.make_plan(edited),
            Input::EditPrd => self.edit_prd(),
            Input::Retry => match (&self.stage, self.job.clone()) {
                (Stage::Failed, Some(job)) => self.start(job),
                _ => refused("nothing failed to retry"),
            },
            Input::SetTask { index, task } => self.edit_plan(|plan| {
                let slot = plan.tasks.get_mut(index).ok_or("no such task")?;
                *slot = task;
                Ok(())
            }),
            Input::DeleteTask(index) => self.edit_plan(|plan| {
                if index >= plan.tasks.len() {
                    return Err("no such task");
                }
                plan.tasks.remove(index);
                Ok(())
            }),
            Input::SetPlan(spec) => self.edit_plan(|plan| {
                *plan = spec;
                Ok(())
            }),
            Input::Merge => match self.queue_ready() {
                Ok(plan) => self.start(Job::Merge(plan)),
                Err(why) => refused(why),
            },
            Input::Import(path) => match self.queue_ready() {
                Ok(plan) => {
                    let path = self.plan_path(path, &plan);
                    self.start(Job::Import { plan, path })
                }
                Err(why) => refused(why),
            },
            Input::WritePlan(path) => {
                let Some(plan) = self.plan.clone().filter(|_| self.stage == Stage::PlanReady)
                else {
                    return refused("there is no plan yet");
                };
                if self.invalid {
                    return refused(self.unready_reason());
                }
                let path = self.plan_path(path, &plan);
                self.start(Job::WritePlan { plan, path })
            }
        }
    }

    fn answer(&mut self, text: String, last: bool) -> Vec<Effect> {
        let Stage::Answering { question } = &self.stage else {
            return refused("no question is waiting for an answer");
        };
        self.qa.push(QaPair {
            question: question.clone(),
            answer: text.trim().to_string(),
        });
        if last {
            self.write_prd()
        } else {
            self.next_question()
        }
    }

    /// The next question, unless the cap is reached: then the PRD.
    fn next_question(&mut self) -> Vec<Effect> {
        if self.qa.len() >= self.opts.max_questions {
            return self.write_prd();
        }
        self.start(Job::Ask {
            idea: self.idea.clone(),
            answers: self.qa.clone(),
            max_questions: self.opts.max_questions,
        })
    }

    fn write_prd(&mut self) -> Vec<Effect> {
        self.start(Job::WritePrd {
            idea: self.idea.clone(),
            answers: self.qa.clone(),
        })
    }

    fn make_plan(&mut self, edited: Option<String>) -> Vec<Effect> {
        let Stage::PrdReady { path } = &self.stage else {
            return refused("there is no PRD to make a plan from yet");
        };
        let path = path.clone();
        if edited.as_deref().is_some_and(|t| t.trim().is_empty()) {
            return refused("the PRD is empty");
        }
        if edited.is_some() {
            self.prd_text = edited.clone();
        }
        self.start(Job::MakePlan {
            prd: path,
            edited,
            opts: self.opts.plan.clone(),
        })
    }

    fn edit_prd(&mut self) -> Vec<Effect> {
        let (Stage::Failed, Some(Job::MakePlan { prd, .. })) = (&self.stage, &self.job) else {
            return refused("only a failed plan goes back to the PRD");
        };
        let path = prd.clone();
        let Some(text) = self.prd_text.clone() else {
            return refused(format!(
                "edit {} itself, then retry the plan",
                path.display()
            ));
        };
        self.stage = Stage::PrdReady { path: path.clone() };
        self.job = None;
        vec![Effect::ShowPrd { path, text }]
    }

    fn edit_plan(
        &mut self,
        edit: impl FnOnce(&mut PlanSpec) -> Result<(), &'static str>,
    ) -> Vec<Effect> {
        if self.stage != Stage::PlanReady {
            return refused("there is no plan to edit yet");
        }
        let Some(plan) = self.plan.as_mut() else {
            return refused("there is no plan to edit yet");
        };
        if let Err(why) = edit(plan) {
            return refused(why);
        }
        self.recheck();
        vec![Effect::ShowPlan]
    }

    /// The plan, if it may enter the queue now; else why not.
    fn queue_ready(&self) -> Result<PlanSpec, String> {
        match &self.plan {
            Some(plan) if self.stage == Stage::PlanReady => {
                if self.plan_ready() {
                    Ok(plan.clone())
                } else {
                    Err(self.unready_reason())
                }
            }
            _ => Err("there is no plan yet".to_string()),
        }
    }

    fn unready_reason(&self) -> String {
        if self.plan.as_ref().is_some_and(|p| p.tasks.is_empty()) {
            return "the plan has no tasks".to_string();
        }
        let mut tasks: Vec<&str> = Vec::new();
        for p in self.problems.iter().filter(|p| p.error) {
            let t = p.task_id.as_deref().unwrap_or("the plan as a whole");
            if !tasks.contains(&t) {
                tasks.push(t);
            }
        }
        format!(
            "the plan has errors ({}): fix or delete those tasks first",
            tasks.join(", ")
        )
    }

    /// `path`, else beside the PRD, else `.whilly/prd/<plan id>.plan.json`.
    fn plan_path(&self, path: Option<PathBuf>, plan: &PlanSpec) -> PathBuf {
        path.or_else(|| self.prd_path.as_deref().map(default_plan_path))
            .unwrap_or_else(|| {
                Path::new(STATE_DIR).join(format!("{}.plan.json", crate::domain::safe_id(&plan.id)))
            })
    }

    /// Moves to the stage that waits for `job` and asks for it to run.
    fn start(&mut self, job: Job) -> Vec<Effect> {
        self.stage = match &job {
            Job::Ask { .. } => Stage::Asking,
            Job::WritePrd { .. } => Stage::WritingPrd,
            Job::MakePlan { .. } => Stage::Planning,
            Job::Merge(_) | Job::Import { .. } | Job::WritePlan { .. } => Stage::Applying,
        };
        self.job = Some(job.clone());
        vec![Effect::Run(job)]
    }

    fn reply(&mut self, reply: Reply) -> Vec<Effect> {
        match (&self.stage, reply) {
            (Stage::Asking, Reply::Question(question)) => {
                if self.qa.len() >= self.opts.max_questions {
                    // One question too many: the cap holds whatever the agent says.
                    return self.write_prd();
                }
                self.job = None;
                self.stage = Stage::Answering {
                    question: question.clone(),
                };
                vec![Effect::ShowQuestion(question)]
            }
            (Stage::Asking, Reply::InterviewDone) => self.write_prd(),
            (Stage::WritingPrd, Reply::Prd { path, text }) => {
                self.job = None;
                self.prd_path = Some(path.clone());
                self.prd_text = Some(text.clone());
                self.stage = Stage::PrdReady { path: path.clone() };
                vec![Effect::ShowPrd { path, text }]
            }
            (Stage::Planning, Reply::Plan(spec)) => {
                self.job = None;
                self.plan = Some(spec);
                self.recheck();
                self.stage = Stage::PlanReady;
                vec![Effect::ShowPlan]
            }
            (Stage::Applying, Reply::Applied(applied)) => {
                self.job = None;
                self.stage = Stage::Finished(applied.clone());
                vec![Effect::Done(applied)]
            }
            (_, Reply::Failed { message, raw }) if self.busy() => {
                // A failed merge or import leaves the plan to review; anything else waits for a
                // retry (or, after the plan, an edit of the PRD).
                self.stage = if matches!(self.stage, Stage::Applying) {
                    self.job = None;
                    Stage::PlanReady
                } else {
                    Stage::Failed
                };
                vec![Effect::Failed { message, raw }]
            }
            // A reply no job of this stage asked for (from one abandoned earlier): dropped.
            _ => Vec::new(),
        }
    }

    /// Re-checks the plan as a whole (parse, validation and gate exactly as for a plan file).
    fn recheck(&mut self) {
        self.problems.clear();
        self.gate.clear();
        self.invalid = false;
        let Some(plan) = &self.plan else { return };
        let report = check_spec(plan);
        self.invalid = report.has_errors();
        for d in &report.diagnostics {
            self.problems.push(PlanProblem {
                task_id: task_of_pointer(plan, d.pointer().unwrap_or("")),
                message: d.message.clone(),
                error: d.is_error(),
            });
        }
        for g in &report.gate {
            for f in &g.failures {
                self.problems.push(PlanProblem {
                    task_id: Some(g.task_id.clone()),
                    message: format!("{f}: {}", f.hint()),
                    error: true,
                });
            }
        }
        self.gate = report.gate;
    }
}

fn refused(why: impl Into<String>) -> Vec<Effect> {
    vec![Effect::Refused(why.into())]
}

/// `/tasks/3/...` → the id of task 3.
fn task_of_pointer(plan: &PlanSpec, pointer: &str) -> Option<String> {
    let rest = pointer.strip_prefix("/tasks/")?;
    let index: usize = rest.split('/').next()?.parse().ok()?;
    plan.tasks.get(index).map(|t| t.id.clone())
}

#[cfg(test)]
#[path = "wizard_tests.rs"]
mod tests;
