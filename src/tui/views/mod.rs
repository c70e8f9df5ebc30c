//! What each view answers, beside its key handling: [`AppState::handle`](super::state::AppState::handle)
//! offers a key to the open popup, then to the filter being typed, then to the view on screen
//! (its own keys: [`own`]), and what they pass on reaches the console-wide bindings
//! ([`CONSOLE_WIDE`]), which mean the same in every view. The help lists exactly these two
//! (`help`), and `tests/tui_keys_and_help.rs` holds them to what the keys do: a key the help
//! does not list for a view changes nothing there, and every key it lists answers.

pub(crate) mod filter;
pub(crate) mod inbox;

pub use filter::{FilterEditor, FilterKey};
pub use inbox::{InboxKey, InboxView};

use super::action::Action;
use super::model::View;

/// The main view: the task list beside the agents' panes.
const MAIN: &[Action] = &[
    Action::MoveUp,
    Action::MoveDown,
    Action::First,
    Action::Last,
    Action::Filter,
    Action::FocusNext,
    Action::FocusPrev,
    Action::Zoom,
    Action::Takeover,
    Action::Release,
    Action::ScrollUp,
    Action::ScrollDown,
];

/// The task lists (all tasks, the budget's): a selection and its filter.
const LIST: &[Action] = &[
    Action::MoveUp,
    Action::MoveDown,
    Action::First,
    Action::Last,
    Action::Filter,
];

/// The views that are read: moving scrolls them.
const READING: &[Action] = &[
    Action::MoveUp,
    Action::MoveDown,
    Action::First,
    Action::Last,
    Action::ScrollUp,
    Action::ScrollDown,
];

/// Keys that mean the same whatever view is on screen, by what they are for (the help's
/// sections after the view's own keys): switching views, deciding on the selected task or
/// inbox items, the plan's controls.
pub const CONSOLE_WIDE: &[(&str, &[Action])] = &[
    (
        "Go to",
        &[
            Action::Inbox,
            Action::Workers,
            Action::TaskDetail,
            Action::Events,
            Action::Tasks,
            Action::Stats,
            Action::Budget,
            Action::Triz,
            Action::Challenge,
            Action::Replay,
            Action::Diff,
        ],
    ),
    (
        "Decide",
        &[
            Action::Approve,
            Action::ApproveAll,
            Action::Merge,
            Action::Reject,
            Action::SendBack,
        ],
    ),
    (
        "Tasks and plan",
        &[
            Action::ResetTask,
            Action::SkipTask,
            Action::SplitTask,
            Action::KillAttempt,
            Action::TogglePause,
            Action::NewPrd,
            Action::AddTask,
        ],
    ),
    ("Console", &[Action::Help, Action::Back, Action::Quit]),
];

/// The help of `view` in sections, as lazygit's and k9s's are: the view's own keys first
/// (titled with the view), then the console-wide keys by what they are for. Together they are
/// exactly [`help`].
pub fn help_sections(view: View) -> Vec<(String, Vec<Action>)> {
    if view == View::Wizard {
        return vec![("Console".to_string(), vec![Action::Quit])];
    }
    let mut out = vec![(format!("{} view", view.title()), own(view).to_vec())];
    out.extend(
        CONSOLE_WIDE
            .iter()
            .map(|(title, actions)| ((*title).to_string(), actions.to_vec())),
    );
    out.retain(|(_, a)| !a.is_empty());
    out
}

/// The keys `view` answers itself.
pub fn own(view: View) -> &'static [Action] {
    match view {
        View::Main => MAIN,
        View::Tasks | View::Budget => LIST,
        View::Inbox => inbox::OWN,
        View::TaskDetail
        | View::Events
        | View::Stats
        | View::Triz
        | View::Workers
        | View::Challenge
        | View::Replay
        | View::Diff => READING,
        // The wizard takes every key itself; its hints are on its screen.
        View::Wizard => &[],
    }
}

/// What the help lists in `view`, in order: the view's own keys, then the console-wide ones.
pub fn help(view: View) -> Vec<Action> {
    help_sections(view)
        .into_iter()
        .flat_map(|(_, actions)| actions)
        .collect()
}

#[cfg(test)]
mod sections_tests {
    use super::*;

    #[test]
    fn no_console_wide_key_is_in_two_sections_or_a_views_own() {
        let listed: Vec<Action> = CONSOLE_WIDE
            .iter()
            .flat_map(|(_, a)| a.iter().copied())
            .collect();
        for (i, a) in listed.iter().enumerate() {
            assert!(!listed[i + 1..].contains(a), "{a:?} twice");
            assert!(
                !MAIN.contains(a) && !LIST.contains(a) && !READING.contains(a),
                "{a:?}"
            );
        }
    }
}
