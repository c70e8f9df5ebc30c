//! The task list: status, priority, dependencies ready/blocked, agent, attempts, cost.

use super::fmt::money;
use crate::domain::Status;
use crate::store::TaskRecord;
use crate::tui::model::Focus;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Row, Table, TableState};

pub(super) fn status_short(s: Status) -> &'static str {
    match s {
        Status::Pending => "PEND",
        Status::Claimed => "CLMD",
        Status::InProgress => "RUN",
        Status::Blocked => "BLKD",
        Status::HumanLoop => "HUMN",
        Status::Done => "DONE",
        Status::Failed => "FAIL",
        Status::Skipped => "SKIP",
    }
}

pub(super) fn deps_text(t: &TaskRecord) -> String {
    if t.spec.dependencies.is_empty() {
        "-".into()
    } else if t.pending_deps > 0 {
        format!("wait {}", t.pending_deps)
    } else {
        "ok".into()
    }
}

fn agent_of<'a>(state: &'a AppState, t: &'a TaskRecord) -> &'a str {
    state
        .pane(t.pk)
        .map(|p| p.agent.as_str())
        .or(t.spec.agent.as_deref())
        .unwrap_or("-")
}

/// Draws the list; returns its inner area and the first visible row's index.
pub(super) fn render(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    theme: &Theme,
    full: bool,
) -> Option<(Rect, usize)> {
    let visible_count = state.visible_count();
    let focused = state.focus == Focus::TaskList;
    let mut title = vec![Span::styled(" Tasks ", theme.title())];
    title.push(Span::styled(
        format!("{}/{} ", visible_count, state.tasks.len()),
        theme.dim(),
    ));
    if !state.filter.text.is_empty() {
        title.push(Span::styled(
            format!("/{} ", state.filter.text),
            theme.warn(),
        ));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.border(focused, false))
        .title(Line::from(title));
    let inner = block.inner(area);
    // Columns by the room there is: the status and id always, the rest as width allows.
    let wide = full || inner.width >= 46;
    let mut header_cells = vec!["St", "ID", "P", "Deps"];
    let mut widths = vec![
        Constraint::Length(4),
        Constraint::Fill(1),
        Constraint::Length(if full { 8 } else { 1 }),
        Constraint::Length(6),
    ];
    // The GitHub column when some task has an issue or a pull request behind it; where the
    // list is narrow it takes the agent's place (the pane titles name the agents).
    let github = wide
        && (!state.pulls.is_empty()
            || state.visible_range(0, 1).first().is_some_and(|t| {
                crate::forge::intake::source_of(&t.spec).is_some()
                    || crate::forge::jira::intake::source_of(&t.spec).is_some()
            }));
    let agent_col = wide && (!github || full || inner.width >= 62);
    if wide {
        if agent_col {
            header_cells.push("Agent");
            widths.push(Constraint::Length(8));
        }
        header_cells.extend(["Try", "Cost"]);
        widths.extend([Constraint::Length(3), Constraint::Length(7)]);
    } else {
        header_cells.push("Try");
        widths.push(Constraint::Length(3));
    }
    if github {
        header_cells.push("Issue/PR");
        widths.push(Constraint::Length(12));
    }
    if full {
        header_cells[2] = "Pri";
        header_cells.push("Description");
        widths[1] = Constraint::Length(12);
        widths.push(Constraint::Fill(3));
    }
    let header = Row::new(header_cells).style(theme.dim());
    // Only the rows on screen are built: a frame costs the same for 10 tasks or 100,000.
    let body_rows = usize::from(inner.height.saturating_sub(1)).max(1);
    let offset = (state.selected + 1).saturating_sub(body_rows);
    let rows: Vec<Row> = state
        .visible_range(offset, offset + body_rows)
        .into_iter()
        .map(|t| {
            let pri = if full {
                t.priority.as_str().to_string()
            } else {
                t.priority.as_str()[..1].to_ascii_uppercase()
            };
            let deps_style = if t.pending_deps > 0 {
                theme.warn()
            } else {
                theme.text()
            };
            let mut cells = vec![
                Cell::from(Span::styled(status_short(t.status), theme.status(t.status))),
                Cell::from(t.id.clone()),
                Cell::from(pri),
                Cell::from(Span::styled(deps_text(t), deps_style)),
            ];
            if agent_col {
                cells.push(Cell::from(agent_of(state, t).to_string()));
            }
            cells.push(Cell::from(t.tries_text()));
            if wide {
                cells.push(Cell::from(money(t.cost)));
            }
            if github {
                cells.push(github_cell(state, t, theme));
            }
            if full {
                cells.push(Cell::from(t.spec.description.clone()));
            }
            Row::new(cells)
        })
        .collect();
    let mut ts = TableState::default()
        .with_selected((visible_count > 0).then_some(state.selected.saturating_sub(offset)));
    let table = Table::new(rows, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .row_highlight_style(theme.selected());
    frame.render_stateful_widget(table, area, &mut ts);
    Some((inner, offset + ts.offset()))
}

/// `PR#57 draft` when the task has a pull request, else `#42` for the issue it came from.
fn github_cell<'a>(state: &AppState, t: &TaskRecord, theme: &Theme) -> Cell<'a> {
    use crate::engine::pull_watch::state_label;
    use crate::forge::github::PrState;
    if let Some(p) = state.pulls.get(&t.id) {
        let style = match p.state {
            PrState::Merged => theme.status(Status::Done),
            PrState::Closed => theme.warn(),
            PrState::Draft | PrState::Open => theme.text(),
        };
        return Cell::from(Span::styled(
            format!("PR#{} {}", p.number, state_label(p.state)),
            style,
        ));
    }
    if let Some((key, _)) = crate::forge::jira::intake::source_of(&t.spec) {
        return match state.jira_status.get(&t.id) {
            Some(s) => Cell::from(format!("{key} {s}")),
            None => Cell::from(Span::styled(key, theme.dim())),
        };
    }
    match crate::forge::intake::source_of(&t.spec) {
        Some((_, n, _)) => Cell::from(Span::styled(format!("#{n}"), theme.dim())),
        None => Cell::from(""),
    }
}
