//! Rendering: a pure function of the state (plus the panes' screens) into a ratatui frame.
//! Returns where each pane's terminal landed, so the loop can size PTYs and route mouse events.

mod budget;
mod detail;
mod diff;
mod events;
mod fmt;
mod geometry;
mod header;
mod help;
mod inbox;
mod link;
mod panes;
mod popups;
mod stats;
mod tasks;
mod wizard;
mod workers;

pub use fmt::{clock, money};

use super::grid::MAX_PANES;
use super::keymap::Keymap;
use super::model::View;
use super::screens::PaneScreens;
use super::state::AppState;
use super::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

/// Below this the console shows only a one-line note instead of its layout.
const MIN_WIDTH: u16 = 20;
const MIN_HEIGHT: u16 = 5;

pub struct UiContext<'a> {
    pub keymap: &'a Keymap,
    pub theme: &'a Theme,
    pub screens: &'a dyn PaneScreens,
}

/// Where things were drawn in the last frame.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameInfo {
    /// Task pk → the inner rectangle of its pane (the terminal cells).
    pub panes: Vec<(i64, Rect)>,
    /// The task list's inner rectangle and the index of its first visible row.
    pub task_list: Option<(Rect, usize)>,
    /// Where the pane grid goes in the main view (for sizing agents not yet shown).
    pub pane_area: Option<Rect>,
    /// The replay view's terminal cells.
    pub replay: Option<Rect>,
}

pub fn draw(frame: &mut Frame, state: &AppState, ui: &UiContext) -> FrameInfo {
    let area = frame.area();
    let mut info = FrameInfo::default();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let note = Paragraph::new(Line::styled(
            "whilly: enlarge the terminal",
            ui.theme.warn(),
        ));
        frame.render_widget(note, area);
        return info;
    }
    let [head, body, foot] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    header::render(frame, head, state, ui.theme);
    match state.view {
        View::Main => main_view(frame, body, state, ui, &mut info),
        View::Tasks => {
            info.task_list = tasks::render(frame, body, state, ui.theme, true);
        }
        View::TaskDetail => detail::render(frame, body, state, ui.theme),
        View::Events => events::render(frame, body, state, ui.theme),
        View::Budget => budget::render(frame, body, state, ui.theme),
        View::Stats => stats::render(frame, body, state, ui.theme),
        View::Triz => stats::render_triz(frame, body, state, ui.theme),
        View::Inbox => inbox::render(frame, body, state, ui.theme, ui.keymap),
        View::Workers => workers::render(frame, body, state, ui.theme),
        View::Wizard => wizard::render(frame, body, state, ui.theme),
        View::Challenge => stats::render_challenge(frame, body, state, ui.theme),
        View::Diff => diff::render(frame, body, state, ui.theme),
        View::Replay => {
            if let Some(inner) = panes::render_replay(frame, body, state, ui) {
                info.replay = Some(inner);
            }
        }
    }
    header::footer(frame, foot, state, ui);
    popups::render(frame, area, state, ui);
    info
}

fn main_view(
    frame: &mut Frame,
    body: Rect,
    state: &AppState,
    ui: &UiContext,
    info: &mut FrameInfo,
) {
    if let Some(pk) = state.zoom
        && let Some(pane) = state.pane(pk)
    {
        info.panes = panes::render(frame, body, state, std::slice::from_ref(pane), ui);
        return;
    }
    let (list, right) = if body.width >= 120 {
        let w = (body.width * 2 / 5).min(64);
        let [l, r] = Layout::horizontal([Constraint::Length(w), Constraint::Min(1)]).areas(body);
        (l, r)
    } else if body.width >= 60 {
        let [l, r] = Layout::horizontal([Constraint::Length(30), Constraint::Min(1)]).areas(body);
        (l, r)
    } else {
        let [l, r] = Layout::vertical([Constraint::Percentage(35), Constraint::Min(1)]).areas(body);
        (l, r)
    };
    info.task_list = tasks::render(frame, list, state, ui.theme, false);
    info.pane_area = Some(right);
    if state.panes.is_empty() {
        panes::render_empty(frame, right, state, ui.theme);
    } else {
        info.panes = panes::render(frame, right, state, &shown_panes(state), ui);
    }
}

/// The panes the grid shows: the first [`MAX_PANES`], with the focused one swapped into the last
/// slot when it would otherwise be hidden.
fn shown_panes(state: &AppState) -> Vec<super::model::PaneMeta> {
    let mut panes = state.panes.clone();
    if panes.len() > MAX_PANES
        && let super::model::Focus::Pane(pk) = state.focus
        && let Some(i) = panes.iter().position(|p| p.task_pk == pk)
        && i >= MAX_PANES
    {
        panes.swap(i, MAX_PANES - 1);
    }
    panes
}
