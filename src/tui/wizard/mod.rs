//! The PRD wizard (`n`) in the console: its editor and screens over `prd::Wizard`, the one state
//! machine `whilly prd` drives too. Keys become the wizard's [`Input`]s, its [`Effect`]s become
//! what the screen shows, and its jobs go to the console to run on a task ([`run`]); their
//! outcome comes back as a [`WizardReply`]. Text is typed in a `ratatui-textarea` editor; Ctrl-S
//! sends what was typed (Enter is a newline in an editor), Esc twice closes the wizard.

pub(crate) mod run;

use crate::domain::{PlanSpec, TaskSpec};
use crate::prd::QaPair;
use crate::prd::wizard::{self as core, Effect, Input};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui_textarea::{TextArea, WrapMode};
use std::path::PathBuf;
use std::time::Instant;

/// A job of the wizard, for the console to run ([`run::run`]).
pub use crate::prd::wizard::Job as WizardEffect;
pub use crate::prd::wizard::PlanProblem;
/// What came back from a job.
pub use crate::prd::wizard::Reply as WizardReply;

/// The screen shown: the wizard's stage, with the table's selection and the task being edited.
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

pub struct Wizard {
    core: core::Wizard,
    pub editor: TextArea<'static>,
    /// The last refusal or failure, shown until the next step.
    pub error: Option<String>,
    /// Where the agent's unusable reply was kept.
    pub raw_reply: Option<PathBuf>,
    /// When the current wait began (for the spinner and elapsed time).
    pub waiting_since: Option<Instant>,
    /// Esc was pressed once: a second one closes.
    pub closing: bool,
    pub closed: bool,
    /// The task selected in the plan's table.
    selected: usize,
    /// The task open in the editor.
    editing_task: Option<usize>,
}

impl Default for Wizard {
    fn default() -> Self {
        Wizard::new()
    }
}

impl Wizard {
    pub fn new() -> Wizard {
        Wizard {
            core: core::Wizard::default(),
            editor: editor(Vec::new()),
            error: None,
            raw_reply: None,
            waiting_since: None,
            closing: false,
            closed: false,
            selected: 0,
            editing_task: None,
        }
    }

    pub fn stage(&self) -> Stage {
        match self.core.stage() {
            core::Stage::Idea => Stage::Idea,
            core::Stage::Asking => Stage::Asking,
            core::Stage::Answering { question } => Stage::Answer {
                question: question.clone(),
            },
            core::Stage::WritingPrd => Stage::Writing,
            core::Stage::PrdReady { path } => Stage::EditPrd { path: path.clone() },
            core::Stage::Planning => Stage::Planning,
            core::Stage::PlanReady => match self.editing_task {
                Some(index) => Stage::EditTask { index },
                None => Stage::Review {
                    selected: self.selected,
                },
            },
            core::Stage::Applying => Stage::Applying,
            core::Stage::Failed => Stage::Failed,
            core::Stage::Finished(applied) => Stage::Finished {
                message: applied.to_string(),
            },
        }
    }

    /// Whether the wizard waits for an agent or a write.
    pub fn busy(&self) -> bool {
        self.core.busy()
    }

    /// Whether keys go to the text editor.
    pub fn editing(&self) -> bool {
        matches!(
            self.stage(),
            Stage::Idea | Stage::Answer { .. } | Stage::EditPrd { .. } | Stage::EditTask { .. }
        )
    }

    pub fn answers(&self) -> &[QaPair] {
        self.core.answers()
    }

    pub fn plan(&self) -> Option<&PlanSpec> {
        self.core.plan()
    }

    pub fn problems(&self) -> &[PlanProblem] {
        self.core.problems()
    }

    /// The problems of one task.
    pub fn problems_of(&self, task_id: &str) -> Vec<&PlanProblem> {
        self.core.problems_of(task_id)
    }

    /// Whether the plan may be merged or saved: it exists and has no errors.
    pub fn plan_ready(&self) -> bool {
        self.core.plan_ready()
    }

    pub fn handle_key(&mut self, key: KeyEvent, now: Instant) -> Vec<WizardEffect> {
        if key.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let stage = self.stage();
        if let Stage::Finished { .. } = stage {
            self.closed = true;
            return Vec::new();
        }
        if key.code == KeyCode::Esc
            && let Stage::EditTask { .. } = stage
        {
            // Leaving a task's editor drops the edit, not the wizard.
            self.editing_task = None;
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
        if stage == Stage::Failed {
            return match key.code {
                KeyCode::Char('r') => self.feed(Input::Retry, now),
                KeyCode::Char('e') => self.feed(Input::EditPrd, now),
                _ => Vec::new(),
            };
        }
        if self.editing() {
            if ctrl && matches!(key.code, KeyCode::Char('s')) {
                return self.submit(stage, now);
            }
            if ctrl
                && matches!(key.code, KeyCode::Char('n'))
                && matches!(stage, Stage::Answer { .. })
            {
                // Enough questions: what is typed is the last answer, then the PRD.
                let text = self.text();
                let input = if text.trim().is_empty() {
                    Input::EndInterview
                } else {
                    Input::LastAnswer(text)
                };
                return self.feed(input, now);
            }
            self.editor.input(key);
            return Vec::new();
        }
        if let Stage::Review { selected } = stage {
            return self.review_key(key, selected, now);
        }
        Vec::new()
    }

    fn text(&self) -> String {
        self.editor.lines().join("\n")
    }

    fn submit(&mut self, stage: Stage, now: Instant) -> Vec<WizardEffect> {
        let text = self.text();
        match stage {
            Stage::Idea => self.feed(Input::Idea(text), now),
            Stage::Answer { .. } => self.feed(Input::Answer(text), now),
            Stage::EditPrd { .. } => self.feed(Input::MakePlan { edited: Some(text) }, now),
            Stage::EditTask { index } => match serde_json::from_str::<TaskSpec>(&text) {
                Ok(task) => {
                    self.editing_task = None;
                    self.selected = index;
                    self.feed(Input::SetTask { index, task }, now)
                }
                Err(e) => {
                    self.error = Some(format!(
                        "the task is not valid JSON at line {} column {}: {e}",
                        e.line(),
                        e.column()
                    ));
                    Vec::new()
                }
            },
            _ => Vec::new(),
        }
    }

    fn review_key(&mut self, key: KeyEvent, selected: usize, now: Instant) -> Vec<WizardEffect> {
        let n = self.plan().map_or(0, |p| p.tasks.len());
        match key.code {
            KeyCode::Up | KeyCode::Char('k') => self.selected = selected.saturating_sub(1),
            KeyCode::Down | KeyCode::Char('j') => {
                self.selected = (selected + 1).min(n.saturating_sub(1));
            }
            KeyCode::Enter | KeyCode::Char('e') => {
                if let Some(task) = self.plan().and_then(|p| p.tasks.get(selected)) {
                    let json = serde_json::to_string_pretty(task).unwrap_or_default();
                    self.editor = editor(json.lines().map(str::to_string).collect());
                    self.editing_task = Some(selected);
                }
            }
            KeyCode::Char('d') | KeyCode::Delete => {
                return self.feed(Input::DeleteTask(selected), now);
            }
            KeyCode::Char('m') => return self.feed(Input::Merge, now),
            KeyCode::Char('s') => return self.feed(Input::Import(None), now),
            _ => {}
        }
        Vec::new()
    }

    /// Feeds the outcome of the running job back.
    pub fn apply(&mut self, reply: WizardReply, now: Instant) -> Vec<WizardEffect> {
        if matches!(reply, WizardReply::Plan(_)) && self.core.stage() == &core::Stage::Planning {
            // A new plan is reviewed from its first task.
            self.selected = 0;
        }
        self.feed(Input::Reply(reply), now)
    }

    /// One input to the wizard: what it shows goes to the screen, the jobs to the console.
    fn feed(&mut self, input: Input, now: Instant) -> Vec<WizardEffect> {
        let mut jobs = Vec::new();
        for effect in self.core.handle(input) {
            match effect {
                Effect::Run(job) => {
                    self.error = None;
                    self.waiting_since = Some(now);
                    jobs.push(job);
                }
                Effect::ShowQuestion(_) => {
                    self.waiting_since = None;
                    self.editor = editor(Vec::new());
                }
                Effect::ShowPrd { text, .. } => {
                    self.waiting_since = None;
                    self.error = None;
                    self.editor = editor(text.lines().map(str::to_string).collect());
                }
                Effect::ShowPlan => {
                    self.waiting_since = None;
                    self.raw_reply = None;
                    self.error = None;
                    self.editing_task = None;
                    let n = self.plan().map_or(0, |p| p.tasks.len());
                    self.selected = self.selected.min(n.saturating_sub(1));
                }
                Effect::Refused(why) => self.error = Some(why),
                Effect::Failed { message, raw } => {
                    self.waiting_since = None;
                    self.error = Some(message);
                    self.raw_reply = raw;
                }
                Effect::Done(_) => self.waiting_since = None,
            }
        }
        jobs
    }
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
