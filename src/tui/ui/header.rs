//! The header (plan, counts, cost against budget, elapsed, queue backend, progress gauge) and
//! the footer (key hints, filter entry, takeover banner, messages).

use super::UiContext;
use super::fmt::{Part, clock, fit_parts, money};
use crate::tui::action::Action;
use crate::tui::model::Level;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph};
use unicode_width::UnicodeWidthStr;

#[expect(
    clippy::too_many_lines,
    reason = "the header is a list of segments drawn in order"
)]
pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let [top, bar] = Layout::vertical([Constraint::Length(1), Constraint::Length(1)]).areas(area);
    let c = state.counts();
    let b = state.budget();
    let plan = state.plan.as_ref().map(|p| p.id.as_str()).unwrap_or("…");
    // Each part gives way in turn on a narrow terminal (see `fit_parts`): the backend first,
    // then the counts shorten, the clock leaves, the cost loses its percentage.
    let mut title = vec![
        Span::styled(" whilly ", theme.title()),
        Span::styled(plan.to_string(), theme.text().add_modifier(Modifier::BOLD)),
    ];
    if state.plan.as_ref().is_some_and(|p| p.paused) {
        title.push(Span::styled(" PAUSED", theme.warn()));
    }
    let failed = if c.failed > 0 {
        theme.error()
    } else {
        theme.text()
    };
    let running = theme.status(crate::domain::Status::InProgress);
    let counts = |long: bool| {
        let name = |full: &'static str, letter: &'static str| if long { full } else { letter };
        let mut v = vec![
            Span::styled(format!("{} {}", name("done", "✓"), c.done), theme.ok()),
            Span::raw(format!(" {} {}", name("pend", "○"), c.pending)),
            Span::styled(format!(" {} {}", name("run", "▶"), c.running), running),
            Span::styled(format!(" {} {}", name("fail", "✗"), c.failed), failed),
        ];
        if c.skipped > 0 {
            v.push(Span::styled(
                format!(" {} {}", name("skip", "-"), c.skipped),
                theme.dim(),
            ));
        }
        if c.held > 0 {
            v.push(Span::styled(
                format!(" {} {}", name("held", "⏸"), c.held),
                theme.warn(),
            ));
        }
        v
    };
    let mut parts = vec![
        Part {
            full: title,
            short: None,
            rank: 0,
        },
        Part {
            full: counts(true),
            short: Some(counts(false)),
            rank: 4,
        },
    ];
    let waiting = state.inbox_len();
    if waiting > 0 {
        parts.push(Part {
            full: vec![Span::styled(
                format!("inbox {waiting}"),
                theme.warn().add_modifier(Modifier::REVERSED),
            )],
            short: None,
            rank: 0,
        });
    }
    let typing = state.waiting_input();
    if typing > 0 {
        parts.push(Part {
            full: vec![Span::styled(
                format!("waiting for input {typing}"),
                theme.warn().add_modifier(Modifier::REVERSED),
            )],
            short: Some(vec![Span::styled(
                format!("input {typing}"),
                theme.warn().add_modifier(Modifier::REVERSED),
            )]),
            // Shortens with the counts, before anything is left out.
            rank: 4,
        });
    }
    if let Some(trouble) = &state.sync_trouble {
        parts.push(Part {
            full: vec![Span::styled(
                trouble.chars().take(60).collect::<String>(),
                theme.warn().add_modifier(Modifier::REVERSED),
            )],
            short: Some(vec![Span::styled(
                "out of step",
                theme.warn().add_modifier(Modifier::REVERSED),
            )]),
            rank: 4,
        });
    }
    for p in state.agent_pauses() {
        parts.push(Part {
            full: vec![Span::styled(p.label(&chrono::Local), theme.warn())],
            short: Some(vec![Span::styled(
                format!("{} paused", p.agent),
                theme.warn(),
            )]),
            rank: 4,
        });
    }
    if let Some(wait) = &state.github_wait {
        parts.push(Part {
            full: vec![Span::styled(wait.clone(), theme.warn())],
            short: Some(vec![Span::styled("GitHub: waiting", theme.warn())]),
            rank: 4,
        });
    }
    let cost_style = theme.budget(b.state);
    let (cost, short_cost) = match b.limit {
        Some(limit) => (
            format!(
                "{} / {} ({:.0}%)",
                money(b.spent),
                money(limit),
                b.ratio.unwrap_or(0.0).min(9.99) * 100.0
            ),
            Some(format!("{}/{}", money(b.spent), money(limit))),
        ),
        None => (money(b.spent), None),
    };
    parts.push(Part {
        full: vec![Span::styled(cost, cost_style)],
        short: short_cost.map(|t| vec![Span::styled(t, cost_style)]),
        rank: 2,
    });
    parts.push(Part {
        full: vec![Span::raw(clock(state.elapsed()))],
        short: None,
        rank: 3,
    });
    let mut backend = vec![Span::styled(state.backend.clone(), theme.dim())];
    // Watchers (no slots) are listed in the workers view but are not workers.
    let online = state.online_workers().filter(|w| w.slots > 0).count();
    if online > 0 {
        backend.push(Span::styled(format!(" {online} worker(s)"), theme.dim()));
    }
    parts.push(Part {
        full: backend,
        short: None,
        rank: 5,
    });
    let spans = fit_parts(
        parts,
        Span::styled(" · ", theme.dim()),
        usize::from(top.width),
    );
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

pub(super) fn footer(frame: &mut Frame, area: Rect, state: &AppState, ui: &UiContext) {
    let theme = ui.theme;
    let key = |a: Action| {
        ui.keymap
            .keys_for(a)
            .into_iter()
            .min_by_key(|k| k.len())
            .unwrap_or_else(|| "?".into())
    };
    let line = if state.filter.editing {
        Line::from(vec![
            Span::styled(" filter: ", theme.key()),
            Span::raw(state.filter.text.clone()),
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
        let waiting = state.inbox_len();
        if waiting > 0 {
            spans.push(Span::styled(
                format!(" {}", key(Action::Inbox)),
                theme.key(),
            ));
            spans.push(Span::styled(format!(" inbox ({waiting})"), theme.warn()));
        }
        let filter = (!state.filter.text.is_empty()).then(|| format!("  [/{}]", state.filter.text));
        let mut room = usize::from(area.width)
            .saturating_sub(spans.iter().map(Span::width).sum::<usize>())
            .saturating_sub(filter.as_deref().map_or(0, str::len));
        // Whole hints only, as many as fit: `?` lists the rest.
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
            let k = format!(" {}", key(a));
            let l = format!(" {label}");
            let w = k.width() + l.width();
            if w > room {
                break;
            }
            room -= w;
            spans.push(Span::styled(k, theme.key()));
            spans.push(Span::styled(l, theme.dim()));
        }
        if let Some(f) = filter {
            spans.push(Span::styled(f, theme.warn()));
        }
        Line::from(spans)
    };
    frame.render_widget(Paragraph::new(line), area);
}
