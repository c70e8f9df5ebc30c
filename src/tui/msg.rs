//! What reaches the console's state besides keys: the answers of the work its effects started
//! (store writes, inbox details, wizard steps, the challenge, a task's split, replays) and the queue's news.
//! Everything goes through [`super::state::AppState::update`], so a reply is tested like a key.

use super::action::Action;
use super::model::{InboxDetail, Level};
use super::wizard::WizardReply;
use crate::engine::RunSummary;
use crate::store::{Event as StoreEvent, PlanRecord, TaskRecord, WorkerRecord};
use std::collections::BTreeSet;
use std::path::PathBuf;

#[derive(Debug)]
pub struct FeedData {
    pub plan: PlanRecord,
    pub tasks: TaskLoad,
    pub events: Vec<StoreEvent>,
    /// Reloaded now and then ([`super::feed::WORKERS_RELOAD`]) and with every full load.
    pub workers: Option<Vec<WorkerRecord>>,
    /// Likewise ([`super::feed::HANDOFF_RELOAD`]): this plan's tasks whose handoff waits for a human (any process's: a console
    /// opened beside a background run answers its handoffs).
    pub handoffs: Option<BTreeSet<String>>,
}

/// The tasks a load brings.
#[derive(Debug)]
pub enum TaskLoad {
    /// All the plan's tasks, in import order (the first load, and after a gap).
    All(Vec<TaskRecord>),
    /// Only the tasks that changed since the last load.
    Changed(Vec<TaskRecord>),
}

#[derive(Debug)]
pub enum Msg {
    /// The operator's action (a key, a click, a resize), after the keymap.
    Action(Action),
    /// A key for the open PRD wizard (its editor takes keys as they are).
    WizardKey(crossterm::event::KeyEvent),
    /// A line for the status bar: how an effect ended.
    Note(String, Level),
    /// An inbox item's detail, loaded.
    InboxDetail(InboxDetail),
    /// A PRD wizard step's answer.
    Wizard(WizardReply),
    /// The agent's critique of the plan, or why there is none.
    Challenge(Result<String, String>),
    /// The agent's split of a task (the plan before and after), or why there is none.
    Split(
        String,
        Result<Box<crate::prd::decompose::Decomposition>, String>,
    ),
    /// A replay's log, found (its screen goes to the console's emulator), or why not.
    Replay(i64, Result<PathBuf, String>),
    /// What a task changed (for the diff view), or why it cannot be shown.
    Diff(
        i64,
        Result<(crate::workspace::DiffSource, crate::workspace::WorktreeDiff), String>,
    ),
    /// The queue's news: the plan, its tasks, new events (and with a full reload the workers and
    /// the waiting handoffs).
    Data(Box<FeedData>),
    /// The queue did not answer a load.
    FeedFailed(String),
    /// The run is over (the engine ended or ran out of work).
    Finished(RunSummary),
    /// The serving engine has work again.
    Resumed,
    /// The engine failed.
    EngineFailed(String),
    /// Where the plan's pull requests stand, as GitHub answered (replaces what the events said).
    Pulls(std::collections::BTreeMap<String, crate::engine::pull_watch::TaskPull>),
}
