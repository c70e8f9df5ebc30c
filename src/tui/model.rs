//! The console's vocabulary: the views, popups and effects, what a pane and an inbox item are,
//! the figures the header shows. A leaf: the state machine, the views, the feed and the
//! renderers all speak it, and it imports none of them.

use crate::domain::Usd;
pub use crate::engine::awaiting_human::{InboxItem, InboxKind};
use crate::engine::budget::{BudgetState, budget_state};
use crate::engine::sessions::SessionState;
use crate::workspace::WorktreeDiff;
use std::time::{Duration, Instant};

/// Events kept in memory for the events view and task detail.
pub const MAX_EVENTS: usize = 2000;
/// Lines scrolled by one scroll action in a pane.
pub const SCROLL_STEP: i32 = 10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Main,
    Tasks,
    TaskDetail,
    Events,
    Budget,
    Stats,
    Triz,
    Inbox,
    Workers,
    /// The PRD wizard (keys go to it).
    Wizard,
    /// The agent's challenge of the plan.
    Challenge,
    /// A finished attempt's log replayed into a pane.
    Replay,
    /// What a task changed against its base.
    Diff,
}

/// The diff view's task and what was loaded for it.
#[derive(Debug, Clone, PartialEq)]
pub struct DiffMeta {
    pub task_pk: i64,
    pub task_id: String,
    /// `None` while loading; the diff with where it came from, or why there is none.
    pub loaded:
        Option<Result<(crate::workspace::DiffSource, crate::workspace::WorktreeDiff), String>>,
}

/// The pane key the replayed log's screen goes by (no task pk is negative).
pub const REPLAY_PK: i64 = -1;

/// Which log the replay view shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayMeta {
    pub task_pk: i64,
    pub task_id: String,
    /// The log file, once found.
    pub path: Option<std::path::PathBuf>,
    /// Why there is nothing to show.
    pub error: Option<String>,
}

impl View {
    pub fn title(self) -> &'static str {
        match self {
            View::Main => "main",
            View::Tasks => "tasks",
            View::TaskDetail => "task detail",
            View::Events => "events",
            View::Budget => "budget",
            View::Stats => "statistics",
            View::Triz => "TRIZ",
            View::Inbox => "inbox",
            View::Workers => "workers",
            View::Wizard => "PRD wizard",
            View::Challenge => "challenge",
            View::Replay => "replay",
            View::Diff => "diff",
        }
    }
}

/// Where keys go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Focus {
    TaskList,
    /// The pane of the session for this task pk.
    Pane(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirm {
    ResetTask(String),
    SkipTask(String),
    /// Kill the agent of this pane (task pk, task id).
    KillAttempt(i64, String),
    /// Quit while agents run: stop them (tasks released), let them finish first, leave them to
    /// finish in the background (`background`: only when a launcher can take the terminal back)
    /// or keep waiting.
    Quit {
        running: usize,
        background: bool,
    },
    /// Approve several inbox items at once.
    Approve(Vec<InboxTarget>),
    /// Approve a handoff whose worktree has no change: its checks run on the base as it is,
    /// which is rarely what the human meant.
    ApproveUnchanged(InboxTarget),
}

/// An inbox item a decision is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxTarget {
    pub task_pk: i64,
    pub task_id: String,
    pub kind: InboxKind,
}

/// What a typed line is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputPurpose {
    Reject(Vec<InboxTarget>),
    SendBack(Vec<InboxTarget>),
    /// An ad-hoc task, a field at a time: what to do, then its criteria, then its test steps.
    AddTask(AddStep, TaskDraft),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddStep {
    Description,
    Criteria,
    Tests,
}

/// The ad-hoc task typed so far.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TaskDraft {
    pub description: String,
    pub criteria: Vec<String>,
}

impl InputPurpose {
    pub fn prompt(&self) -> String {
        let (verb, targets) = match self {
            InputPurpose::Reject(t) => ("Reject", t),
            InputPurpose::SendBack(t) => ("Send back", t),
            InputPurpose::AddTask(step, _) => {
                return match step {
                    AddStep::Description => {
                        "New task (1/3): what to do and where, 20 characters at least".into()
                    }
                    AddStep::Criteria => {
                        "New task (2/3): acceptance criteria, separated by ;".into()
                    }
                    AddStep::Tests => {
                        "New task (3/3): test steps (commands), separated by ;".into()
                    }
                };
            }
        };
        let what = match targets.as_slice() {
            [one] => one.task_id.clone(),
            many => format!("{} tasks", many.len()),
        };
        let asks = match self {
            InputPurpose::Reject(_) => "reason",
            InputPurpose::SendBack(_) => "comment for the next attempt",
            InputPurpose::AddTask(..) => "",
        };
        format!("{verb} {what}: {asks}")
    }
}

/// The prompt and the worktree's changes of the inbox item being read.
#[derive(Debug, Clone, PartialEq)]
pub struct InboxDetail {
    pub task_pk: i64,
    /// The task as the plan states it (description, criteria, test steps), not the agent's
    /// prompt with its envelope.
    pub brief: String,
    /// What the agent said about it last (its message, or why the attempt stopped).
    pub said: Option<String>,
    /// The last attempt ended on a failed check (an approval that bounced): which, and the
    /// output's tail.
    pub bounced: Option<String>,
    /// Where a handoff's files are, for answering it from a shell.
    pub handoff_dir: Option<std::path::PathBuf>,
    pub diff: Option<WorktreeDiff>,
    /// Where the work is (a human doing a handoff works there).
    pub worktree: Option<std::path::PathBuf>,
    /// Why the diff is missing (no worktree, git error).
    pub diff_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Popup {
    Help,
    Confirm(Confirm),
    /// A line of text to type (reject reason, send-back comment).
    Input {
        purpose: InputPurpose,
        text: String,
    },
    /// The split of a task: the agent at work, then its diff to write or discard
    /// ([`AppState::split`]).
    Split,
}

/// What the event loop must do after an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    SkipTask(String),
    /// Ask the agent to split this task (the answer comes back as `Msg::Split`).
    ProposeSplit(String),
    /// Stop the agent splitting a task: the operator closed the dialog.
    CancelSplit,
    /// Write the split into the queue (`Store::split_task`, one transaction per task).
    WriteSplit(Box<crate::prd::decompose::Decomposition>),
    KillAttempt(i64),
    /// Leave the console (nothing left running, or the run is over).
    Quit,
    /// Stop the engine now (agents killed, their tasks released) and leave once it has ended.
    StopAgentsAndQuit,
    /// Claim nothing more, let running agents finish (no grace period: their own timeouts
    /// apply), then leave.
    FinishAndQuit,
    /// Give the terminal back and go on in this process, detached from the terminal (see
    /// `tui::detach`): only the running agents, to their end (nothing new is claimed), or the
    /// whole plan (`whole_plan`).
    Background {
        whole_plan: bool,
    },
    ResetTask(String),
    SetPaused(bool),
    /// Move a pane's scrollback view by `delta` lines (positive = back in time).
    ScrollPane {
        task_pk: i64,
        delta: i32,
    },
    /// Apply the operator's decision to inbox items.
    Decide(Vec<InboxTarget>, Decision),
    /// Load the prompt and worktree diff of an inbox item into [`AppState::inbox_ui`].
    LoadInboxDetail(InboxTarget),
    /// Run a step of the PRD wizard.
    Wizard(Box<super::wizard::WizardEffect>),
    /// Ask the agent to challenge the plan.
    Challenge,
    /// Find the task's last attempt log and replay it into the replay pane.
    LoadReplay {
        task_pk: i64,
        task_id: String,
    },
    /// Scroll the replay pane (positive = back in time).
    ScrollReplay(i32),
    /// Add this task to the running plan (it passed the decision gate).
    AddTask(Box<crate::domain::TaskSpec>),
    /// Load what the task changed into [`AppState::diff`].
    LoadDiff {
        task_pk: i64,
        task_id: String,
    },
    /// Tell the operator (desktop notification or terminal bell, per `[notifications]`).
    Notify(Box<crate::notify::Notice>),
}

/// The agent's critique of the plan (`c`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ChallengeView {
    pub running: bool,
    pub text: String,
    pub error: Option<String>,
}

/// One live agent session as the console shows it (from `engine::sessions::SessionInfo`).
#[derive(Debug, Clone, PartialEq)]
pub struct PaneMeta {
    pub task_pk: i64,
    pub task_id: String,
    pub agent: String,
    pub attempt: i64,
    pub started: Instant,
    pub state: SessionState,
    /// Whether a terminal is attached (none while preparing or for a human handoff).
    pub has_screen: bool,
    /// The agent is blocked reading its terminal: it waits for someone to type (from /proc).
    pub waiting_input: bool,
    /// The host of the worker running the agent when it runs in another process (a remote
    /// pane): read-only unless `[remote] takeover`.
    pub remote: Option<String>,
    /// What the session says beyond its state (see `SessionInfo::note`).
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
}

/// Task counts for the header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub total: usize,
    pub done: usize,
    pub pending: usize,
    pub running: usize,
    pub failed: usize,
    pub skipped: usize,
    /// BLOCKED or HUMAN_LOOP: waiting for an operator.
    pub held: usize,
}

/// Budget numbers for the header and the budget panel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetFigures {
    pub spent: Usd,
    pub limit: Option<Usd>,
    /// Spent over limit, 0.0–∞ (None without a limit).
    pub ratio: Option<f64>,
    pub state: BudgetState,
    /// Dollars per hour since the console started.
    pub burn_per_hour: f64,
    /// Time until the limit at the current burn rate.
    pub to_exhaustion: Option<Duration>,
}

/// Spend against the limit, the burn rate since `elapsed` began, and the projected time left.
pub fn budget_figures(spent: Usd, limit: Option<Usd>, elapsed: Duration) -> BudgetFigures {
    let hours = elapsed.as_secs_f64() / 3600.0;
    let burn_per_hour = if hours > 0.0 {
        spent.as_f64() / hours
    } else {
        0.0
    };
    let ratio = limit.map(|l| {
        if l.0 <= 0 {
            if spent.0 > 0 { f64::INFINITY } else { 1.0 }
        } else {
            spent.as_f64() / l.as_f64()
        }
    });
    let to_exhaustion = match limit {
        Some(l) if burn_per_hour > 0.0 => {
            let left = (l - spent).as_f64().max(0.0);
            Some(Duration::from_secs_f64(
                (left / burn_per_hour * 3600.0).min(1e9),
            ))
        }
        _ => None,
    };
    BudgetFigures {
        spent,
        limit,
        ratio,
        state: budget_state(limit, spent),
        burn_per_hour,
        to_exhaustion,
    }
}

/// What the operator decided about one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The work is accepted: DONE (a handoff still runs its verification first).
    Approve,
    /// Not accepted: FAILED, with the reason.
    Reject(String),
    /// Another attempt, with the operator's comment for it: back to PENDING.
    SendBack(String),
    /// Land work that is ready to merge: DONE once it is on the base branch.
    Merge,
}

impl Decision {
    pub fn verb(&self) -> &'static str {
        match self {
            Decision::Approve => "approve",
            Decision::Reject(_) => "reject",
            Decision::SendBack(_) => "send back",
            Decision::Merge => "merge",
        }
    }

    pub fn text(&self) -> &str {
        match self {
            Decision::Approve | Decision::Merge => "",
            Decision::Reject(t) | Decision::SendBack(t) => t,
        }
    }
}

/// The split dialog.
#[derive(Debug, Clone, PartialEq)]
pub struct SplitView {
    pub task_id: String,
    /// `None` while the agent works.
    pub proposal: Option<Box<Proposal>>,
    /// Lines scrolled down the diff.
    pub scroll: u16,
}

/// The agent's split, ready to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub decomposition: crate::prd::decompose::Decomposition,
    pub diff: String,
}
