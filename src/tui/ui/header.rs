//! The header (plan, counts, cost against budget, elapsed, queue backend, progress gauge) and
//! the footer (key hints, filter entry, takeover banner, messages).

use super::UiContext;
use super::fmt::{clock, money};
use crate::tui::action::Action;
use crate::tui::state::{AppState, Level};
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};

pub fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let [top, bar] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
    let c = state.counts();
    let b = state.budget();
    let plan = state.plan.as_ref().map(|p| p.id.as_str()).unwrap_or("…");
    let mut spans = vec![
        Span::styled(" whilly ", theme.title()),
        Span::styled(plan.to_string(), theme.text().add_modifier(Modifier::BOLD)),
    ];
    if state.plan.as_ref().is_some_and(|p| p.paused) {
        spans.push(Span::styled(" PAUSED", theme.warn()));
    }
    let sep = || Span::styled(" · ", theme.dim());
    spans.push(sep());
    spans.push(Span::styled(format!("done {}", c.done), theme.ok()));
    spans.push(Span::raw(format!(" pend {}", c.pending)));
    spans.push(Span::styled(
        format!(" run {}", c.running),
        theme.status(crate::domain::Status::InProgress),
    ));
    let failed = if c.failed > 0 {
        theme.error()
    } else {
        theme.text()
    };
    spans.push(Span::styled(format!(" fail {}", c.failed), failed));
    if c.skipped > 0 {
        spans.push(Span::styled(format!(" skip {}", c.skipped), theme.dim()));
    }
    if c.held > 0 {
        spans.push(Span::styled(format!(" held {}", c.held), theme.warn()));
    }
    let waiting = state.inbox().len();
    if waiting > 0 {
        spans.push(sep());
        spans.push(Span::styled(
            format!("inbox {waiting}"),
            theme.warn().add_modifier(Modifier::REVERSED),
        ));
    }
    spans.push(sep());
    let cost = match b.limit {
        Some(limit) => format!(
            "{} / {} ({:.0}%)",
            money(b.spent),
            money(limit),
            b.ratio.unwrap_or(0.0).min(9.99) * 100.0
        ),
        None => money(b.spent),
    };
    spans.push(Span::styled(cost, theme.budget(b.state)));
    spans.push(sep());
    spans.push(Span::raw(clock(state.elapsed())));
    spans.push(sep());
    spans.push(Span::styled(state.backend.clone(), theme.dim()));
    let online = state.online_workers().count();
    if online > 0 {
        spans.push(Span::styled(format!(" {online} worker(s)"), theme.dim()));
    }
    frame.render_widget(Paragraph::new(Line::from(spans)), top);

    let finished = c.done + c.skipped;
    let ratio = if c.total == 0 {
        0.0
    } else {
        finished as f64 / c.total as f64
    };
    let mut label = format!("{finished}/{} tasks ({:.0}%)", c.total, ratio * 100.0);
    if let Some(s) = &state.summary {
        label.push_str(&format!(
            " · finished: {} · exit {}",
            s.end.describe(),
            s.exit_code
        ));
    } else if state.engine_error.is_some() {
        label.push_str(" · engine stopped with an error");
    }
    let gauge = Gauge::default()
        .ratio(ratio.clamp(0.0, 1.0))
        .label(label)
        .gauge_style(theme.gauge(crate::engine::budget::BudgetState::Ok));
    frame.render_widget(gauge, bar);
}

pub fn footer(frame: &mut Frame, area: Rect, state: &AppState, ui: &UiContext) {
    let theme = ui.theme;
    let key = |a: Action| {
        ui.keymap
            .keys_for(a)
            .into_iter()
            .min_by_key(|k| k.len())
            .unwrap_or_else(|| "?".into())
    };
    let line = if state.filter_editing {
        Line::from(vec![
            Span::styled(" filter: ", theme.key()),
            Span::raw(state.filter.clone()),
            Span::styled("▏", theme.key()),
            Span::styled("  enter keep · esc clear", theme.dim()),
        ])
    } else if let Some((text, level)) = &state.status {
        let style = match level {
            Level::Info => theme.text(),
            Level::Warn => theme.warn(),
        };
        Line::from(Span::styled(format!(" {text}"), style))
    } else if let Some(pk) = state.takeover {
        let task = state.pane(pk).map(|p| p.task_id.as_str()).unwrap_or("?");
        Line::from(vec![
            Span::styled(" TAKEOVER ", theme.warn().add_modifier(Modifier::REVERSED)),
            Span::raw(format!(" keys go to {task} · ")),
            Span::styled(key(Action::Release), theme.key()),
            Span::raw(" gives control back"),
        ])
    } else if state.finished() {
        Line::from(vec![
            Span::styled(
                " run finished ",
                theme.ok().add_modifier(Modifier::REVERSED),
            ),
            Span::raw(" press "),
            Span::styled(key(Action::Quit), theme.key()),
            Span::raw(" to quit · "),
            Span::styled(key(Action::Help), theme.key()),
            Span::raw(" help"),
        ])
    } else {
        let mut spans = Vec::new();
        let waiting = state.inbox().len();
        if waiting > 0 {
            spans.push(Span::styled(
                format!(" {}", key(Action::Inbox)),
                theme.key(),
            ));
            spans.push(Span::styled(format!(" inbox ({waiting})"), theme.warn()));
        }
        for (a, label) in [
            (Action::Quit, "quit"),
            (Action::Help, "help"),
            (Action::FocusNext, "focus"),
            (Action::Zoom, "zoom"),
            (Action::Takeover, "type"),
            (Action::Filter, "filter"),
            (Action::TaskDetail, "detail"),
            (Action::Events, "events"),
            (Action::Budget, "budget"),
        ] {
            spans.push(Span::styled(format!(" {}", key(a)), theme.key()));
            spans.push(Span::styled(format!(" {label}"), theme.dim()));
        }
        if !state.filter.is_empty() {
            spans.push(Span::styled(format!("  [/{}]", state.filter), theme.warn()));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}
