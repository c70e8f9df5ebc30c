//! The PRD wizard (`n`): idea → interview → PRD → plan → merged, saved or discarded.
//!
//! A state machine over key presses and the replies of agent calls; no IO. The console runs its
//! [`WizardEffect`]s (agent calls, file writes, imports) on tasks and feeds the outcome back as a
//! [`WizardReply`]. Text is typed in a `ratatui-textarea` editor; Ctrl-S sends what was typed
//! (Enter is a newline in an editor), Esc twice closes the wizard.

pub mod run;

use crate::domain::{PlanSpec, TaskSpec};
use crate::plan::check::check_plan;
use crate::plan::export::canonical_json;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui_textarea::{TextArea, WrapMode};
use std::path::PathBuf;
use std::time::Instant;

/// How many questions the interview asks at most before writing the PRD anyway.
pub const MAX_QUESTIONS: usize = 8;

#[derive(Debug, Clone, PartialEq)]
pub enum Stage {
    /// Typing the idea.
    Idea,
    /// Waiting for the agent's next question.
    Asking,
    /// Typing the answer to `question`.
    Answer { question: String },
    /// Waiting for the agent to write the PRD.
    Writing,
    /// The PRD at `path`, open for editing.
    EditPrd { path: PathBuf },
    /// Waiting for the agent to turn the PRD into a plan.
    Planning,
    /// The generated plan as a table; `selected` task.
    Review { selected: usize },
    /// One task of the plan as JSON in the editor.
    EditTask { index: usize },
    /// Merging or saving the plan.
    Applying,
    /// A step failed (the message is in `error`): `r` retries it, `e` edits the PRD again.
    Failed,
    /// Over: what happened (the wizard closes on the next key).
    Finished { message: String },
}

/// What the console must do for the wizard.
#[derive(Debug, Clone, PartialEq)]
pub enum WizardEffect {
    /// Ask the agent for the next interview question (or to say it has enough).
    Ask {
        idea: String,
        answers: Vec<(String, String)>,
    },
    /// Have the agent write the PRD and save it under `docs/`.
    WritePrd {
        idea: String,
        answers: Vec<(String, String)>,
    },
    /// Save the edited PRD, then turn it into a plan.
    SaveAndPlan { path: PathBuf, text: String },
    /// Add the plan's tasks to the running plan.
    Merge(PlanSpec),
    /// Import the plan as a plan of its own, its file written beside the PRD (if there is one).
    SaveAs(PlanSpec, Option<PathBuf>),
}

/// What came back from an effect.
#[derive(Debug, Clone, PartialEq)]
pub enum WizardReply {
    Question(String),
    /// The agent has enough to write the PRD.
    InterviewDone,
    Prd {
        path: PathBuf,
        text: String,
    },
    Plan(PlanSpec),
    /// The effect failed; `raw` keeps the agent's reply when it could not be used.
    Failed {
        message: String,
        raw: Option<PathBuf>,
    },
    /// The plan was merged or saved.
    Applied(String),
}

/// A problem of the generated plan, for the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanProblem {
    /// The task it is about, if any.
    pub task_id: Option<String>,
    pub message: String,
    /// Errors block merging and saving; warnings do not.
    pub error: bool,
}

pub struct Wizard {
    pub stage: Stage,
    pub idea: String,
    pub answers: Vec<(String, String)>,
    pub editor: TextArea<'static>,
    pub plan: Option<PlanSpec>,
    /// The PRD file the plan comes from.
    pub prd_path: Option<PathBuf>,
    pub problems: Vec<PlanProblem>,
    /// The last failure, shown until the next step.
    pub error: Option<String>,
    /// Where the agent's unusable reply was kept.
    pub raw_reply: Option<PathBuf>,
    /// When the current wait began (for the spinner and elapsed time).
    pub waiting_since: Option<Instant>,
    /// Esc was pressed once: a second one closes.
    pub closing: bool,
    pub closed: bool,
    /// The stage to go back to with `r` after a failure.
    retry: Option<WizardEffect>,
}

impl Default for Wizard {
    fn default() -> Self {
        Wizard::new()
    }
}

impl Wizard {
    pub fn new() -> Wizard {
        Wizard {
            stage: Stage::Idea,
            idea: String::new(),
            answers: Vec::new(),
            editor: editor(Vec::new()),
            plan: None,
            prd_path: None,
            problems: Vec::new(),
            error: None,
            raw_reply: None,
            waiting_since: None,
            closing: false,
            closed: false,
            retry: None,
        }
    }

    /// Whether the wizard waits for an agent or a write.
    pub fn busy(&self) -> bool {
        matches!(
            self.stage,
            Stage::Asking | Stage::Writing | Stage::Planning | Stage::Applying
        )
    }

    /// Whether keys go to the text editor.
    pub fn editing(&self) -> bool {
        matches!(
            self.stage,
            Stage::Idea | Stage::Answer { .. } | Stage::EditPrd { .. } | Stage::EditTask { .. }
        )
    }

    /// Whether the plan may be merged or saved: it exists and has no errors.
    pub fn plan_ready(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| !p.tasks.is_empty())
            && !self.problems.iter().any(|p| p.error)
    }

    pub fn handle_key(&mut self, key: KeyEvent, now: Instant) -> Vec<WizardEffect> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Stage::Finished { .. } = self.stage {
            self.closed = true;
            return Vec::new();
        }
        if key.code == KeyCode::Esc
            && let Stage::EditTask { index } = self.stage
        {
            // Leaving a task's editor drops the edit, not the wizard.
            self.stage = Stage::Review { selected: index };
            self.error = None;
            return Vec::new();
        }
        if key.code == KeyCode::Esc {
            if self.closing {
                self.closed = true;
            } else {
                self.closing = true;
            }
            return Vec::new();
        }
        self.closing = false;
        if self.busy() {
            return Vec::new();
        }
        if self.stage == Stage::Failed {
            match key.code {
                KeyCode::Char('r') => {
                    if let Some(effect) = self.retry.take() {
                        return vec![self.start(effect, now)];
                    }
                }
                KeyCode::Char('e') => {
                    if let Some(WizardEffect::SaveAndPlan { path, text }) = self.retry.clone() {
                        self.editor = editor(text.lines().map(str::to_string).collect());
                        self.stage = Stage::EditPrd { path };
                        self.error = None;
                    }
                }
                _ => {}
            }
            return Vec::new();
        }
        if self.editing() {
            if ctrl && matches!(key.code, KeyCode::Char('s')) {
                return self.submit(now);
            }
            if ctrl
                && matches!(key.code, KeyCode::Char('n'))
                && matches!(self.stage, Stage::Answer { .. })
            {
                // Enough questions: write the PRD from what is known.
                return vec![self.start(self.write_effect(), now)];
            }
            self.editor.input(key);
            return Vec::new();
        }
        if let Stage::Review { selected } = self.stage {
            return self.review_key(key, selected, now);
        }
        Vec::new()
    }

    fn submit(&mut self, now: Instant) -> Vec<WizardEffect> {
        let text = self.editor.lines().join("\n");
        let trimmed = text.trim().to_string();
        match self.stage.clone() {
            Stage::Idea => {
                if trimmed.is_empty() {
                    self.error = Some("type the idea first".into());
                    return Vec::new();
                }
                self.idea = trimmed;
                vec![self.start(self.ask_effect(), now)]
            }
            Stage::Answer { question } => {
                if trimmed.is_empty() {
                    self.error =
                        Some("type an answer (Ctrl-N skips the rest of the interview)".into());
                    return Vec::new();
                }
                self.answers.push((question, trimmed));
                let effect = if self.answers.len() >= MAX_QUESTIONS {
                    self.write_effect()
                } else {
                    self.ask_effect()
                };
                vec![self.start(effect, now)]
            }
            Stage::EditPrd { path } => {
                if trimmed.is_empty() {
                    self.error = Some("the PRD is empty".into());
                    return Vec::new();
                }
                vec![self.start(WizardEffect::SaveAndPlan { path, text }, now)]
            }
            Stage::EditTask { index } => {
                match serde_json::from_str::<TaskSpec>(&text) {
                    Ok(task) => {
                        if let Some(plan) = self.plan.as_mut()
                            && index < plan.tasks.len()
                        {
                            plan.tasks[index] = task;
                        }
                        self.recheck();
                        self.stage = Stage::Review { selected: index };
                        self.error = None;
                    }
                    Err(e) => {
                        self.error = Some(format!(
                            "the task is not valid JSON at line {} column {}: {e}",
                            e.line(),
                            e.column()
                        ));
                    }
                }
                Vec::new()
            }
            _ => Vec::new(),
        }
    }

    fn review_key(&mut self, key: KeyEvent, selected: usize, now: Instant) -> Vec<WizardEffect> {
        let n = self.plan.as_ref().map_or(0, |p| p.tasks.len());
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => {
                self.stage = Stage::Review {
                    selected: selected.saturating_sub(1),
                };
            }
            KeyCode::Down | KeyCode::Char('j') => {
                self.stage = Stage::Review {
                    selected: (selected + 1).min(n.saturating_sub(1)),
                };
            }
            KeyCode::Enter | KeyCode::Char('e') => {
                if let Some(task) = self.plan.as_ref().and_then(|p| p.tasks.get(selected)) {
                    let json = serde_json::to_string_pretty(task).unwrap_or_default();
                    self.editor = editor(json.lines().map(str::to_string).collect());
                    self.stage = Stage::EditTask { index: selected };
                }
            }
            KeyCode::Char('d') | KeyCode::Delete => {
                if let Some(plan) = self.plan.as_mut()
                    && selected < plan.tasks.len()
                {
                    plan.tasks.remove(selected);
                    self.recheck();
                    self.stage = Stage::Review {
                        selected: selected.min(n.saturating_sub(2)),
                    };
                }
            }
            KeyCode::Char('m') | KeyCode::Char('s') => {
                if !self.plan_ready() {
                    self.error = Some(
                        "the plan has errors: edit (e) or delete (d) the tasks marked ✗ first"
                            .into(),
                    );
                    return Vec::new();
                }
                let Some(plan) = self.plan.clone() else {
                    return Vec::new();
                };
                let effect = if key.code == KeyCode::Char('m') {
                    WizardEffect::Merge(plan)
                } else {
                    WizardEffect::SaveAs(plan, self.prd_path.clone())
                };
                return vec![self.start(effect, now)];
            }
            _ => {}
        }
        Vec::new()
    }

    /// Moves to the waiting stage of `effect` and returns it for the console to run.
    fn start(&mut self, effect: WizardEffect, now: Instant) -> WizardEffect {
        self.stage = match &effect {
            WizardEffect::Ask { .. } => Stage::Asking,
            WizardEffect::WritePrd { .. } => Stage::Writing,
            WizardEffect::SaveAndPlan { .. } => Stage::Planning,
            WizardEffect::Merge(_) | WizardEffect::SaveAs(..) => Stage::Applying,
        };
        self.error = None;
        self.waiting_since = Some(now);
        self.retry = Some(effect.clone());
        effect
    }

    fn ask_effect(&self) -> WizardEffect {
        WizardEffect::Ask {
            idea: self.idea.clone(),
            answers: self.answers.clone(),
        }
    }

    fn write_effect(&self) -> WizardEffect {
        WizardEffect::WritePrd {
            idea: self.idea.clone(),
            answers: self.answers.clone(),
        }
    }

    /// Feeds the outcome of the running effect back.
    pub fn apply(&mut self, reply: WizardReply, now: Instant) -> Vec<WizardEffect> {
        self.waiting_since = None;
        match reply {
            WizardReply::Question(q) => {
                self.editor = editor(Vec::new());
                self.stage = Stage::Answer { question: q };
            }
            WizardReply::InterviewDone => return vec![self.start(self.write_effect(), now)],
            WizardReply::Prd { path, text } => {
                self.prd_path = Some(path.clone());
                self.editor = editor(text.lines().map(str::to_string).collect());
                self.stage = Stage::EditPrd { path };
            }
            WizardReply::Plan(plan) => {
                self.plan = Some(plan);
                self.raw_reply = None;
                self.recheck();
                self.stage = Stage::Review { selected: 0 };
            }
            WizardReply::Failed { message, raw } => {
                self.error = Some(message);
                self.raw_reply = raw;
                // A failed merge or save leaves the plan to review; anything else waits for
                // `r` (retry) or `e` (edit the PRD).
                self.stage = if matches!(
                    self.retry,
                    Some(WizardEffect::Merge(_) | WizardEffect::SaveAs(..))
                ) {
                    Stage::Review { selected: 0 }
                } else {
                    Stage::Failed
                };
            }
            WizardReply::Applied(message) => {
                self.retry = None;
                self.stage = Stage::Finished { message };
            }
        }
        Vec::new()
    }

    /// Re-validates the plan as a whole (the same checks as `whilly plan check`) and gates every
    /// task.
    fn recheck(&mut self) {
        self.problems.clear();
        let Some(plan) = &self.plan else { return };
        let json = canonical_json(plan);
        let report = check_plan(json.as_bytes(), "generated plan", false);
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
    }

    /// The problems of one task.
    pub fn problems_of(&self, task_id: &str) -> Vec<&PlanProblem> {
        self.problems
            .iter()
            .filter(|p| p.task_id.as_deref() == Some(task_id))
            .collect()
    }
}

/// `/tasks/3/...` → the id of task 3.
fn task_of_pointer(plan: &PlanSpec, pointer: &str) -> Option<String> {
    let rest = pointer.strip_prefix("/tasks/")?;
    let index: usize = rest.split('/').next()?.parse().ok()?;
    plan.tasks.get(index).map(|t| t.id.clone())
}

fn editor(lines: Vec<String>) -> TextArea<'static> {
    let mut t = if lines.is_empty() {
        TextArea::default()
    } else {
        TextArea::new(lines)
    };
    t.set_wrap_mode(WrapMode::Word);
    t
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
