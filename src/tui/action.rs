//! What the operator can ask the console to do. Bindable actions deserialise from the `[keys]`
//! config table by their snake_case names (`"q" = "quit"`); a few carry data (typed filter text,
//! popup answers) and are produced by the input layer only, never by the keymap.

use serde::Deserialize;
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Quit,
    Help,
    /// Task detail of the selected task (`d`).
    TaskDetail,
    /// The plan's events, following new ones (`l`).
    Events,
    /// All tasks, full screen (`t`).
    Tasks,
    Stats,
    Budget,
    NewPrd,
    ResetTask,
    Triz,
    Challenge,
    TogglePause,
    MoveUp,
    MoveDown,
    First,
    Last,
    FocusNext,
    FocusPrev,
    Zoom,
    /// Typing goes to the focused agent until `release`.
    Takeover,
    Release,
    Filter,
    /// Close the view or popup, clear the filter, unzoom.
    Back,
    ScrollUp,
    ScrollDown,
    /// Every task waiting for a human (`H`).
    Inbox,
    /// Workers sharing the queue (`w`).
    Workers,
    /// Accept the selected (or marked) inbox items.
    Approve,
    /// Accept every item in the inbox (asks first).
    ApproveAll,
    /// Land the work of the selected (or marked) tasks that wait as ready to merge (`m`).
    Merge,
    /// Refuse the selected (or marked) items, with a reason.
    Reject,
    /// Another attempt for the selected (or marked) items, with a comment.
    SendBack,
    /// Mark / unmark the selected inbox item for a batch decision.
    Mark,
    /// Replay the selected task's last attempt log in a pane (`o`).
    Replay,
    /// One ad-hoc task typed in, gate-checked and added to the running plan (`N`).
    AddTask,
    /// The selected task's changes against its base: worktree, branch or landed commit (`D`).
    Diff,
    /// Skip the selected task (SKIPPED; its dependants keep waiting), with confirmation (`S`).
    SkipTask,
    /// Split the selected task into subtasks by the agent: its diff shown, written into the
    /// queue on a yes (`X`).
    SplitTask,
    /// Kill the focused (or selected) task's running agent, with confirmation (`K`).
    KillAttempt,
    /// Removes a default binding (`"z" = "none"`).
    None,
    // Produced by the input layer (text entry, popup answers); not bindable.
    #[serde(skip)]
    FilterChar(char),
    #[serde(skip)]
    FilterBackspace,
    #[serde(skip)]
    FilterDone,
    #[serde(skip)]
    Answer(char),
    /// Text typed into a popup's input line.
    #[serde(skip)]
    TextChar(char),
    #[serde(skip)]
    TextBackspace,
    #[serde(skip)]
    TextSubmit,
    /// The terminal was resized (cols, rows).
    #[serde(skip)]
    Resize(u16, u16),
}

/// Every bindable action, in help order.
pub const BINDABLE: &[Action] = &[
    Action::Quit,
    Action::Help,
    Action::TaskDetail,
    Action::Events,
    Action::Tasks,
    Action::Stats,
    Action::Budget,
    Action::NewPrd,
    Action::ResetTask,
    Action::Triz,
    Action::Challenge,
    Action::TogglePause,
    Action::MoveUp,
    Action::MoveDown,
    Action::First,
    Action::Last,
    Action::FocusNext,
    Action::FocusPrev,
    Action::Zoom,
    Action::Takeover,
    Action::Release,
    Action::Filter,
    Action::Back,
    Action::ScrollUp,
    Action::ScrollDown,
    Action::Inbox,
    Action::Workers,
    Action::Approve,
    Action::ApproveAll,
    Action::Merge,
    Action::Reject,
    Action::SendBack,
    Action::Mark,
    Action::Replay,
    Action::Diff,
    Action::AddTask,
    Action::SkipTask,
    Action::SplitTask,
    Action::KillAttempt,
    Action::None,
];

impl Action {
    /// The config name (`task_detail`), for help and error messages.
    pub fn name(self) -> &'static str {
        match self {
            Action::Quit => "quit",
            Action::Help => "help",
            Action::TaskDetail => "task_detail",
            Action::Events => "events",
            Action::Tasks => "tasks",
            Action::Stats => "stats",
            Action::Budget => "budget",
            Action::NewPrd => "new_prd",
            Action::ResetTask => "reset_task",
            Action::Triz => "triz",
            Action::Challenge => "challenge",
            Action::TogglePause => "toggle_pause",
            Action::MoveUp => "move_up",
            Action::MoveDown => "move_down",
            Action::First => "first",
            Action::Last => "last",
            Action::FocusNext => "focus_next",
            Action::FocusPrev => "focus_prev",
            Action::Zoom => "zoom",
            Action::Takeover => "takeover",
            Action::Release => "release",
            Action::Filter => "filter",
            Action::Back => "back",
            Action::ScrollUp => "scroll_up",
            Action::ScrollDown => "scroll_down",
            Action::Inbox => "inbox",
            Action::Workers => "workers",
            Action::Approve => "approve",
            Action::ApproveAll => "approve_all",
            Action::Merge => "merge",
            Action::Reject => "reject",
            Action::SendBack => "send_back",
            Action::Mark => "mark",
            Action::Replay => "replay",
            Action::Diff => "diff",
            Action::AddTask => "add_task",
            Action::SkipTask => "skip_task",
            Action::SplitTask => "split_task",
            Action::KillAttempt => "kill_attempt",
            Action::None => "none",
            Action::FilterChar(_)
            | Action::FilterBackspace
            | Action::FilterDone
            | Action::Answer(_)
            | Action::TextChar(_)
            | Action::TextBackspace
            | Action::TextSubmit
            | Action::Resize(..) => "",
        }
    }

    /// One line for the help popup.
    pub fn describe(self) -> &'static str {
        // Short: the help groups them under headings (what a section is about is said there),
        // and at 80 columns two columns of entries must fit without cutting a word.
        match self {
            Action::Quit => "quit (asks if agents run)",
            Action::Help => "this help",
            Action::TaskDetail => "task detail",
            Action::Events => "event log",
            Action::Tasks => "all tasks",
            Action::Stats => "statistics",
            Action::Budget => "budget and burn rate",
            Action::NewPrd => "new PRD (wizard)",
            Action::ResetTask => "reset task to PENDING",
            Action::Triz => "TRIZ analysis",
            Action::Challenge => "agent challenges the plan",
            Action::TogglePause => "pause / resume the plan",
            Action::MoveUp => "previous",
            Action::MoveDown => "next",
            Action::First => "first",
            Action::Last => "last",
            Action::FocusNext => "focus next pane",
            Action::FocusPrev => "focus previous pane",
            Action::Zoom => "zoom pane / back",
            Action::Takeover => "type into the agent",
            Action::Release => "give control back",
            Action::Filter => "filter tasks",
            Action::Back => "close / unzoom / clear",
            Action::ScrollUp => "scroll back",
            Action::ScrollDown => "scroll forward",
            Action::Inbox => "inbox: waits for a human",
            Action::Workers => "workers on the queue",
            Action::Approve => "approve selected/marked",
            Action::ApproveAll => "approve the whole inbox",
            Action::Merge => "merge work ready to land",
            Action::Reject => "reject with a reason",
            Action::SendBack => "send back with a comment",
            Action::Mark => "mark for a batch",
            Action::Replay => "replay the last attempt",
            Action::Diff => "what the task changed",
            Action::AddTask => "add a task to the plan",
            Action::SkipTask => "skip task (asks first)",
            Action::SplitTask => "split task (agent, asks)",
            Action::KillAttempt => "kill the pane's agent",
            Action::None | Action::FilterChar(_) | Action::FilterBackspace => "",
            Action::FilterDone | Action::Answer(_) | Action::Resize(..) => "",
            Action::TextChar(_) | Action::TextBackspace | Action::TextSubmit => "",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown action {0:?}; known actions: {known}", known = known_names())]
pub struct UnknownAction(pub String);

fn known_names() -> String {
    BINDABLE
        .iter()
        .map(|a| a.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for Action {
    type Err = UnknownAction;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim();
        BINDABLE
            .iter()
            .copied()
            .find(|a| a.name() == name)
            .ok_or_else(|| UnknownAction(name.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for a in BINDABLE {
            assert_eq!(a.name().parse::<Action>(), Ok(*a));
            let via_serde: Action =
                serde_json::from_value(serde_json::json!(a.name())).expect("serde name");
            assert_eq!(via_serde, *a);
            assert!(!a.name().is_empty());
        }
    }

    #[test]
    fn the_example_config_lists_every_bindable_action() {
        let example = include_str!("../../whilly.example.toml");
        let start = example.find("# Actions:").expect("an Actions: list");
        // The list runs from "# Actions:" to the first `;`.
        let text = &example[start + "# Actions:".len()..];
        let text = &text[..text.find(';').expect("the list ends with ;")];
        let listed: Vec<&str> = text
            .lines()
            .flat_map(|l| l.trim_start_matches('#').split_whitespace())
            .collect();
        for a in BINDABLE.iter().filter(|a| **a != Action::None) {
            assert!(
                listed.contains(&a.name()),
                "{} missing from whilly.example.toml",
                a.name()
            );
        }
        for name in listed {
            assert!(name.parse::<Action>().is_ok(), "{name} is not an action");
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_list() {
        let err = "quitt".parse::<Action>().unwrap_err();
        assert!(err.to_string().contains("quitt"));
        assert!(err.to_string().contains("task_detail"));
        assert!("filter_char".parse::<Action>().is_err());
    }
}
