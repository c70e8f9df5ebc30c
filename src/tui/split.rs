//! The console's split key (`X`): the selected task split by the agent, the change shown as a
//! diff in a scrollable dialog, written into the queue on a yes. The state machine's part
//! (pure): how keys and the agent's answer move the dialog (its state, `SplitView`, is in
//! `model.rs`). The agent call
//! and the write run off the UI thread (`app/effects.rs`, through `prd::decompose`).

use super::action::Action;
use super::model::{Effect, Level, Popup};
use super::model::{Proposal, SplitView};
use super::state::AppState;
use crate::domain::Status;
use crate::prd::decompose::Decomposition;

/// Lines a page key scrolls.
const PAGE: i32 = 10;

impl AppState {
    /// `X` on a task: ask the agent to split it, unless it has started (the queue would refuse).
    pub(super) fn ask_split(&mut self) -> Vec<Effect> {
        let Some(task) = self.selected_task() else {
            self.set_status("no task selected", Level::Info);
            return Vec::new();
        };
        if task.status != Status::Pending || task.attempts > 0 {
            let msg = format!(
                "{} is {}{}; only a task that has never started can be split",
                task.id,
                task.status,
                if task.attempts > 0 {
                    " and has run before"
                } else {
                    ""
                }
            );
            self.set_status(msg, Level::Warn);
            return Vec::new();
        }
        let id = task.id.clone();
        self.split = Some(SplitView {
            task_id: id.clone(),
            proposal: None,
            scroll: 0,
        });
        self.popups.push(Popup::Split);
        vec![Effect::ProposeSplit(id)]
    }

    /// The agent's split of `task_id`, or why there is none (to the status line). An answer for
    /// a dialog that was closed meanwhile is dropped.
    pub fn set_split(&mut self, task_id: &str, result: Result<Box<Decomposition>, String>) {
        let Some(view) = self.split.as_mut().filter(|v| v.task_id == task_id) else {
            return;
        };
        match result {
            Ok(d) => {
                let diff = d.diff(&format!("{} (queue)", d.before.id));
                view.proposal = Some(Box::new(Proposal {
                    decomposition: *d,
                    diff,
                }));
            }
            Err(e) => {
                self.close_split();
                let first = e.lines().next().unwrap_or_default();
                self.set_status(format!("split {task_id}: {first}"), Level::Warn);
            }
        }
    }

    /// Keys while the split dialog is on top: y writes, n/esc closes (stopping the agent if it
    /// still works), arrows, j/k and page keys scroll.
    pub(super) fn split_key(&mut self, action: Action) -> Vec<Effect> {
        let lines = match action {
            Action::MoveUp | Action::Answer('k') => -1,
            Action::MoveDown | Action::Answer('j') => 1,
            Action::ScrollUp => -PAGE,
            Action::ScrollDown => PAGE,
            Action::Answer('y') => return self.confirm_split(),
            Action::Answer('n') | Action::Back | Action::Quit => {
                let Some(view) = self.close_split() else {
                    return Vec::new();
                };
                self.set_status(format!("split of {} discarded", view.task_id), Level::Info);
                return if view.proposal.is_none() {
                    vec![Effect::CancelSplit]
                } else {
                    Vec::new()
                };
            }
            _ => return Vec::new(),
        };
        if let Some(v) = self.split.as_mut() {
            let max = v
                .proposal
                .as_ref()
                .map_or(0, |p| p.diff.lines().count().saturating_sub(1));
            let next = (i64::from(v.scroll) + i64::from(lines)).clamp(0, max as i64);
            v.scroll = u16::try_from(next).unwrap_or(u16::MAX);
        }
        Vec::new()
    }

    fn confirm_split(&mut self) -> Vec<Effect> {
        if self.split.as_ref().is_some_and(|v| v.proposal.is_none()) {
            self.set_status("the agent is still splitting the task", Level::Info);
            return Vec::new();
        }
        let Some(proposal) = self.close_split().and_then(|v| v.proposal) else {
            return Vec::new();
        };
        let ids: Vec<&str> = proposal
            .decomposition
            .splits
            .iter()
            .map(|s| s.task.as_str())
            .collect();
        self.set_status(
            format!("splitting {} in the queue…", ids.join(", ")),
            Level::Info,
        );
        vec![Effect::WriteSplit(Box::new(proposal.decomposition))]
    }

    fn close_split(&mut self) -> Option<SplitView> {
        self.popups.retain(|p| *p != Popup::Split);
        self.split.take()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::tui::msg::Msg;
    use crate::tui::testkit::{demo_state, fixed_now};

    fn state_on(id: &str) -> AppState {
        let mut s = demo_state(fixed_now());
        for _ in 0..10 {
            if s.selected_task().is_some_and(|t| t.id == id) {
                return s;
            }
            s.handle(Action::MoveDown);
        }
        panic!("no task {id} in the demo state")
    }

    fn decomposition() -> Decomposition {
        crate::tui::testkit::demo_split()
    }

    #[test]
    fn the_key_asks_the_agent_shows_the_diff_and_writes_on_yes() {
        let mut s = state_on("DOCS-5");
        assert_eq!(
            s.handle(Action::SplitTask),
            [Effect::ProposeSplit("DOCS-5".into())]
        );
        assert_eq!(s.popups, [Popup::Split]);
        assert!(s.wants_answer());
        // Before the answer, y writes nothing.
        assert!(s.handle(Action::Answer('y')).is_empty());
        assert_eq!(s.popups, [Popup::Split]);
        // An answer for another task (a dialog closed earlier) is dropped.
        s.update(Msg::Split("E2E-6".into(), Ok(Box::new(decomposition()))));
        assert!(s.split.as_ref().unwrap().proposal.is_none());

        s.update(Msg::Split("DOCS-5".into(), Ok(Box::new(decomposition()))));
        let diff = s
            .split
            .as_ref()
            .unwrap()
            .proposal
            .as_ref()
            .unwrap()
            .diff
            .clone();
        assert!(diff.contains("+      \"id\": \"DOCS-5a\""), "{diff}");
        assert!(diff.contains("-      \"id\": \"DOCS-5\""), "{diff}");
        // The diff scrolls, within its length.
        s.handle(Action::ScrollDown);
        s.handle(Action::Answer('j'));
        assert_eq!(s.split.as_ref().unwrap().scroll, 11);
        for _ in 0..1000 {
            s.handle(Action::ScrollDown);
        }
        let max = diff.lines().count() as u16 - 1;
        assert_eq!(s.split.as_ref().unwrap().scroll, max);
        s.handle(Action::MoveUp);
        assert_eq!(s.split.as_ref().unwrap().scroll, max - 1);

        let fx = s.handle(Action::Answer('y'));
        assert_eq!(fx, [Effect::WriteSplit(Box::new(decomposition()))]);
        assert!(s.popups.is_empty() && s.split.is_none());
        assert!(s.status.as_ref().unwrap().0.contains("splitting DOCS-5"));
    }

    #[test]
    fn closing_while_the_agent_works_stops_it_and_errors_go_to_the_status_line() {
        let mut s = state_on("DOCS-5");
        s.handle(Action::SplitTask);
        assert_eq!(s.handle(Action::Back), [Effect::CancelSplit]);
        assert!(s.popups.is_empty() && s.split.is_none());
        // The late answer changes nothing.
        s.update(Msg::Split("DOCS-5".into(), Ok(Box::new(decomposition()))));
        assert!(s.popups.is_empty() && s.split.is_none());

        s.handle(Action::SplitTask);
        s.update(Msg::Split(
            "DOCS-5".into(),
            Err("the agent gave no usable split after 2 call(s)\nproblems: …".into()),
        ));
        assert!(s.popups.is_empty() && s.split.is_none());
        let (text, level) = s.status.clone().unwrap();
        assert_eq!(level, Level::Warn);
        assert_eq!(
            text,
            "split DOCS-5: the agent gave no usable split after 2 call(s)"
        );

        // A proposal discarded: no agent to stop, nothing written.
        s.handle(Action::SplitTask);
        s.update(Msg::Split("DOCS-5".into(), Ok(Box::new(decomposition()))));
        assert!(s.handle(Action::Answer('n')).is_empty());
        assert!(s.popups.is_empty() && s.split.is_none());
    }

    #[test]
    fn started_tasks_are_refused_before_any_agent_is_asked() {
        let mut s = state_on("API-2"); // running
        assert!(s.handle(Action::SplitTask).is_empty());
        assert!(s.popups.is_empty());
        let (text, level) = s.status.clone().unwrap();
        assert_eq!(level, Level::Warn);
        assert!(text.contains("API-2 is IN_PROGRESS"), "{text}");
        let mut s = state_on("AUTH-1"); // done
        assert!(s.handle(Action::SplitTask).is_empty());
        assert!(s.status.unwrap().0.contains("never started"));
    }

    #[test]
    fn the_key_is_bound_and_listed_where_tasks_are_picked() {
        let keys = crate::tui::keymap::Keymap::default().keys_for(Action::SplitTask);
        assert_eq!(keys, ["X"]);
        for view in [
            crate::tui::model::View::Main,
            crate::tui::model::View::Tasks,
        ] {
            assert!(
                crate::tui::views::help(view).contains(&Action::SplitTask),
                "{view:?}"
            );
        }
    }
}
