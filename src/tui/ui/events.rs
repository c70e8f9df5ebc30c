//! The plan's audit trail, newest at the bottom, following new events unless scrolled back.

use crate::store::Event;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub(super) fn event_line<'a>(e: &Event, theme: &Theme, with_task: bool) -> Line<'a> {
    let mut spans = vec![
        Span::styled(e.ts.format("%H:%M:%S ").to_string(), theme.dim()),
        Span::styled(
            format!("{:<16}", e.event_type),
            match e.to_status {
                Some(s) => theme.status(s),
                None => theme.text(),
            },
        ),
    ];
    if with_task && let Some(t) = &e.task_id {
        spans.push(Span::raw(format!(" {t}")));
    }
    if let (Some(f), Some(to)) = (e.from_status, e.to_status) {
        spans.push(Span::styled(format!(" {f}→{to}"), theme.dim()));
    }
    if let Some(r) = e.payload.get("reason").and_then(|r| r.as_str()) {
        spans.push(Span::styled(format!(" {r}"), theme.warn()));
    }
    if let Some(c) = e.payload.get("cost_usd").and_then(|c| c.as_f64())
        && c > 0.0
    {
        spans.push(Span::raw(format!(" ${c:.4}")));
    }
    Line::from(spans)
}

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let title = if state.events_offset == 0 {
        " Events (following) ".to_string()
    } else {
        format!(" Events ({} back · End follows) ", state.events_offset)
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(title, theme.title()));
    let inner_h = usize::from(block.inner(area).height);
    let end = state.events.len().saturating_sub(state.events_offset);
    let start = end.saturating_sub(inner_h);
    let lines: Vec<Line> = state.events[start..end]
        .iter()
        .map(|e| event_line(e, theme, true))
        .collect();
    frame.render_widget(Paragraph::new(lines).block(block), area);
}
