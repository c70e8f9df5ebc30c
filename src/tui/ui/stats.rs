//! Statistics of the run and the TRIZ report of the plan.

use super::fmt::{clock, money};
use crate::domain::Usd;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use std::collections::BTreeMap;

fn block<'a>(title: &'a str, theme: &Theme) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(title, theme.title()))
}

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let c = state.counts();
    let attempts: i64 = state.tasks.iter().map(|t| t.attempts).sum();
    let cost = state.tasks.iter().fold(Usd::ZERO, |a, t| a + t.cost);
    let hours = state.elapsed().as_secs_f64() / 3600.0;
    let mut lines = vec![
        Line::raw(format!(
            "tasks {} · done {} · pending {} · running {} · failed {} · skipped {} · held {}",
            c.total, c.done, c.pending, c.running, c.failed, c.skipped, c.held
        )),
        Line::raw(format!(
            "attempts {attempts} · retries {}",
            (attempts - (c.done + c.failed + c.running) as i64).max(0)
        )),
        Line::raw(format!(
            "cost {} · per done task {}",
            money(cost),
            if c.done > 0 {
                money(Usd(cost.0 / c.done as i64))
            } else {
                "-".into()
            }
        )),
        Line::raw(format!(
            "elapsed {} · throughput {:.1} tasks/h",
            clock(state.elapsed()),
            if hours > 0.0 {
                c.done as f64 / hours
            } else {
                0.0
            }
        )),
        Line::raw(""),
        Line::styled("By agent", theme.title()),
    ];
    let mut by_agent: BTreeMap<String, (usize, Usd)> = BTreeMap::new();
    for t in &state.tasks {
        let agent = t.spec.agent.clone().unwrap_or_else(|| "(default)".into());
        let e = by_agent.entry(agent).or_default();
        e.0 += 1;
        e.1 += t.cost;
    }
    for (agent, (n, cost)) in by_agent {
        lines.push(Line::raw(format!("  {agent}: {n} tasks, {}", money(cost))));
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((state.detail_scroll, 0))
            .block(block(" Statistics (esc back) ", theme)),
        area,
    );
}

pub(super) fn render_triz(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let mut lines = Vec::new();
    match &state.triz {
        None => lines.push(Line::raw("no report")),
        Some(r) => {
            lines.push(Line::from(vec![
                Span::raw(format!(
                    "plan {} · {} tasks · verdict ",
                    r.plan_id, r.task_count
                )),
                Span::styled(
                    r.verdict.to_string(),
                    if r.approved() {
                        theme.ok()
                    } else {
                        theme.warn()
                    },
                ),
                Span::raw(format!(" · ideality {:.3}", r.ideality)),
            ]));
            if r.findings.is_empty() {
                lines.push(Line::styled("no findings", theme.ok()));
            }
            for f in &r.findings {
                lines.push(Line::raw(""));
                lines.push(Line::from(vec![
                    Span::styled(format!("[{}] ", f.severity.as_str()), theme.warn()),
                    Span::styled(f.kind, theme.title()),
                    Span::raw(format!(" ({})", f.task_ids.join(", "))),
                ]));
                lines.push(Line::raw(format!("  {}", f.message)));
                lines.push(Line::styled(
                    format!(
                        "  → {} (principle {} {})",
                        f.suggestion, f.principle.number, f.principle.name
                    ),
                    theme.dim(),
                ));
            }
        }
    }
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((state.detail_scroll, 0))
            .block(block(" TRIZ analysis (esc back) ", theme)),
        area,
    );
}

/// The agent's challenge of the plan (`c`): its critique as text, or where it stands.
pub(super) fn render_challenge(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let mut lines = Vec::new();
    match &state.challenge {
        None => lines.push(Line::raw("no challenge yet: press c")),
        Some(c) if c.running => lines.push(Line::styled(
            "the agent is reading the plan (read-only)… the answer appears here",
            theme.key(),
        )),
        Some(c) => {
            if let Some(e) = &c.error {
                lines.push(Line::styled(e.clone(), theme.error()));
            }
            for l in c.text.lines() {
                let style = if l.starts_with('#') {
                    theme.title()
                } else {
                    theme.text()
                };
                lines.push(Line::styled(l.to_string(), style));
            }
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(
            " Challenge: the agent's critique of the plan (c again to refresh, esc back) ",
            theme.title(),
        ));
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((state.detail_scroll, 0))
            .block(block),
        area,
    );
}
