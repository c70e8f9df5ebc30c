//! Workers sharing the queue: host, slots, tags, heartbeat age. With SQLite there is only this
//! process; with Postgres every `whilly worker` on every machine shows up.

use super::fmt::rough;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};

/// A worker whose heartbeat is older than this is shown as stale (the reaper's offline limit
/// is longer; this is only a hint for the operator).
const STALE_SECS: i64 = 60;

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let now = state.wall;
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(
            format!(
                " Workers on the {} queue: {} ",
                state.backend,
                state.online_workers().count()
            ),
            theme.title(),
        ));
    if state.online_workers().next().is_none() {
        frame.render_widget(
            Paragraph::new(Line::styled("no worker registered yet", theme.dim())).block(block),
            area,
        );
        return;
    }
    let running = |id: &str| {
        state
            .tasks
            .iter()
            .filter(|t| t.status.is_leased() && t.worker_id.as_deref() == Some(id))
            .count()
    };
    let rows: Vec<Row> = state
        .online_workers()
        .map(|w| {
            let age = (now - w.heartbeat_at).num_seconds().max(0);
            let beat = rough(std::time::Duration::from_secs(age as u64));
            let beat_style = if age > STALE_SECS {
                theme.error()
            } else {
                theme.ok()
            };
            Row::new(vec![
                Cell::from(w.id.clone()),
                Cell::from(w.host.clone()),
                Cell::from(format!("{}/{}", running(&w.id), w.slots)),
                Cell::from(Span::styled(format!("{beat} ago"), beat_style)),
                Cell::from(w.tags.join(",")),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Fill(2),
            Constraint::Fill(1),
            Constraint::Length(7),
            Constraint::Length(12),
            Constraint::Fill(1),
        ],
    )
    .header(Row::new(vec!["worker", "host", "busy", "heartbeat", "tags"]).style(theme.dim()))
    .block(block);
    frame.render_widget(table, area);
}
