//! The help cannot drift from what the keys do: in every view, an action the help does not list
//! for it changes nothing on screen and asks for nothing; one it lists answers in some state.

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use whilly::tui::action::{Action, BINDABLE};
use whilly::tui::keymap::Keymap;
use whilly::tui::model::View;
use whilly::tui::state::AppState;
use whilly::tui::testkit::{demo_screens, demo_state, fixed_now, inbox_state};
use whilly::tui::theme::Theme;
use whilly::tui::ui::{self, UiContext};

const VIEWS: &[View] = &[
    View::Main,
    View::Tasks,
    View::TaskDetail,
    View::Events,
    View::Budget,
    View::Stats,
    View::Triz,
    View::Inbox,
    View::Workers,
    View::Wizard,
    View::Challenge,
    View::Replay,
    View::Diff,
];

fn render(state: &AppState) -> String {
    let keymap = Keymap::default();
    let theme = Theme::default();
    let screens = demo_screens();
    let ctx = UiContext {
        keymap: &keymap,
        theme: &theme,
        screens: &screens,
    };
    let mut term = Terminal::new(TestBackend::new(120, 40)).expect("test terminal");
    term.draw(|f| {
        ui::draw(f, state, &ctx);
    })
    .expect("draw");
    let buf = term.backend().buffer().clone();
    let mut out = String::new();
    for y in 0..buf.area.height {
        for x in 0..buf.area.width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

/// Opens `view` the way the operator does: its key.
fn open(s: &mut AppState, view: View) {
    let key = match view {
        View::Main => return,
        View::Tasks => Action::Tasks,
        View::TaskDetail => Action::TaskDetail,
        View::Events => Action::Events,
        View::Budget => Action::Budget,
        View::Stats => Action::Stats,
        View::Triz => Action::Triz,
        View::Inbox => Action::Inbox,
        View::Workers => Action::Workers,
        View::Wizard => Action::NewPrd,
        View::Challenge => Action::Challenge,
        View::Replay => Action::Replay,
        View::Diff => Action::Diff,
    };
    let _ = s.handle(key);
    assert_eq!(s.view, view, "{key:?} opens {view:?}");
}

/// The states a view is tried in: the demo plan and one with handoffs waiting, each as opened,
/// moved down, moved up, scrolled, focused on the next pane, and typing into an agent.
fn states_in(view: View) -> Vec<AppState> {
    let mut out = Vec::new();
    let bases: [fn(std::time::Instant) -> AppState; 2] = [demo_state, inbox_state];
    for base in bases {
        for prep in [
            &[][..],
            &[Action::MoveDown, Action::MoveDown],
            &[Action::MoveUp, Action::MoveUp],
            &[Action::ScrollDown],
            &[Action::FocusNext],
            &[Action::FocusNext, Action::Takeover],
        ] {
            let mut s = base(fixed_now());
            open(&mut s, view);
            for &a in prep {
                let _ = s.handle(a);
            }
            // Any key clears the status line; what a key says is what counts.
            s.status = None;
            out.push(s);
        }
    }
    out
}

/// What the operator can see of a state: the screen and where the console stands.
fn seen(s: &AppState) -> String {
    format!(
        "{}{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}{:?}",
        render(s),
        s.view,
        s.focus,
        s.zoom,
        s.takeover,
        s.selected,
        s.filter,
        s.popups,
        s.status,
        s.events_offset,
        s.detail_scroll,
        s.inbox_ui.selected,
        s.inbox_ui.marked,
    )
}

/// The wizard takes every key itself (the input layer sends them there), so it is not tried.
fn tried() -> impl Iterator<Item = View> {
    VIEWS.iter().copied().filter(|v| *v != View::Wizard)
}

#[test]
fn an_action_the_help_does_not_list_does_nothing() {
    let mut drift = Vec::new();
    for view in tried() {
        for &action in BINDABLE {
            if action == Action::None || whilly::tui::views::help(view).contains(&action) {
                continue;
            }
            for (n, mut s) in states_in(view).into_iter().enumerate() {
                let before = seen(&s);
                let effects = s.handle(action);
                if !effects.is_empty() || seen(&s) != before {
                    drift.push(format!(
                        "{view:?} (state {n}): {action:?} is not in its help but {}",
                        if effects.is_empty() {
                            "changes the screen"
                        } else {
                            "asks for effects"
                        }
                    ));
                }
            }
        }
    }
    assert!(
        drift.is_empty(),
        "help and keys disagree:\n{}",
        drift.join("\n")
    );
}

#[test]
fn an_action_the_help_lists_answers_in_some_state() {
    let mut idle = Vec::new();
    for view in tried() {
        for action in whilly::tui::views::help(view) {
            let answers = states_in(view).into_iter().any(|mut s| {
                let before = seen(&s);
                let effects = s.handle(action);
                !effects.is_empty() || seen(&s) != before
            });
            if !answers {
                idle.push(format!("{view:?}: {action:?}"));
            }
        }
    }
    assert!(
        idle.is_empty(),
        "listed in the help but doing nothing:\n{}",
        idle.join("\n")
    );
}
