//! The budget panel: plan spent against its limit, burn rate per hour, projected time to
//! exhaustion, the 80 % warning, and cost per task.

use super::fmt::{money, rough};
use crate::engine::budget::BudgetState;
use crate::engine::sessions::SessionState;
use crate::store::TaskRecord;
use crate::tui::model::{BudgetFigures, PaneMeta};
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::usage::{short_count, usage_by_task};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Table, TableState};

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let b = state.budget();
    let pauses = state.agent_pauses();
    let [summary, gauge, table] = Layout::vertical([
        Constraint::Length(if pauses.is_empty() { 5 } else { 6 }),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(area);
    let limit = b.limit.map(money).unwrap_or_else(|| "no limit".into());
    let state_text = match b.state {
        BudgetState::Ok => Span::styled("ok", theme.ok()),
        BudgetState::Warning => Span::styled("WARNING: over 80 % spent", theme.warn()),
        BudgetState::Exhausted => Span::styled("EXHAUSTED: agents stopped", theme.error()),
    };
    let reserved = state.plan.as_ref().map(|p| p.reserved).unwrap_or_default();
    let usage = usage_by_task(&state.events, state.wall);
    let (tin, tout) = usage.values().fold((0, 0), |(i, o), u| {
        (i + u.input_tokens, o + u.output_tokens)
    });
    let runs: i64 = state.tasks.iter().map(|t| t.attempts).sum();
    let mut lines = vec![
        Line::from(vec![
            Span::raw(format!("spent {} of {} · ", money(b.spent), limit)),
            state_text,
        ]),
        Line::raw(format!(
            "reserved by running claims {} · {runs} run(s) · tokens in {} / out {}",
            money(reserved),
            short_count(tin),
            short_count(tout)
        )),
        Line::raw(format!("burn rate ${:.2}/h", b.burn_per_hour)),
        Line::raw(projection_text(
            &b,
            agents_spending(&state.panes, &state.tasks),
        )),
    ];
    if !pauses.is_empty() {
        let text: Vec<String> = pauses.iter().map(|p| p.label(&chrono::Local)).collect();
        lines.push(Line::from(Span::styled(text.join(" · "), theme.warn())));
    }
    let block = Block::default()
        .borders(Borders::TOP)
        .border_style(theme.dim())
        .title(Span::styled(" Budget ($ back) ", theme.title()));
    frame.render_widget(Paragraph::new(lines).block(block), summary);
    if let Some(ratio) = b.ratio {
        frame.render_widget(
            Gauge::default()
                .ratio(ratio.clamp(0.0, 1.0))
                .label(format!("{:.0}%", (ratio * 100.0).min(999.0)))
                .gauge_style(theme.gauge(b.state)),
            gauge,
        );
    }
    let visible = state.visible_tasks();
    let rows: Vec<Row> = visible
        .iter()
        .map(|t| {
            let u = usage.get(&t.id).copied().unwrap_or_default();
            let tokens = if u.input_tokens + u.output_tokens == 0 {
                "-".to_string()
            } else {
                format!(
                    "{}/{}",
                    short_count(u.input_tokens),
                    short_count(u.output_tokens)
                )
            };
            let time = if u.busy.is_zero() {
                "-".to_string()
            } else {
                rough(u.busy)
            };
            Row::new(vec![
                Cell::from(t.id.clone()),
                Cell::from(Span::styled(t.status.as_str(), theme.status(t.status))),
                Cell::from(t.tries_text()),
                Cell::from(money(t.cost)),
                Cell::from(tokens),
                Cell::from(time),
                Cell::from(money(t.reserved)),
                Cell::from(t.spec.budget_usd.map(money).unwrap_or_else(|| "-".into())),
            ])
        })
        .collect();
    let mut ts =
        TableState::default().with_selected((!visible.is_empty()).then_some(state.selected));
    let t = Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Length(11),
            Constraint::Length(5),
            Constraint::Length(9),
            Constraint::Length(13),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(
        Row::new([
            "Task",
            "Status",
            "Try",
            "Cost",
            "Tokens i/o",
            "Time",
            "Reserved",
            "Budget",
        ])
        .style(theme.dim()),
    )
    .row_highlight_style(theme.selected())
    .block(
        Block::default()
            .borders(Borders::TOP)
            .border_style(theme.dim()),
    );
    frame.render_stateful_widget(t, table, &mut ts);
}

/// Agents that may be spending the plan's budget now: this console's sessions at work (a
/// handoff is a human and spends nothing; an ended session spends no more), and leased tasks with
/// no session here (an agent starting, or another worker's), unless the task is a handoff.
fn agents_spending(panes: &[PaneMeta], tasks: &[TaskRecord]) -> usize {
    let here = panes
        .iter()
        .filter(|p| {
            !matches!(
                p.state,
                SessionState::WaitingForHuman | SessionState::Done | SessionState::Failed
            )
        })
        .count();
    let elsewhere = tasks
        .iter()
        .filter(|t| {
            t.status.is_leased()
                && t.spec.agent.as_deref() != Some("handoff")
                && !panes.iter().any(|p| p.task_pk == t.pk)
        })
        .count();
    here + elsewhere
}

/// The projection line. The burn rate is an average since the console started: with no agent
/// at work nothing is being spent, and a projection from it would count down to an exhaustion
/// that is not coming (a run parked on a human handoff said "lasts ~1m" for hours).
fn projection_text(b: &BudgetFigures, spending: usize) -> String {
    match (b.limit, b.to_exhaustion) {
        (None, _) => "no limit: never exhausted".to_string(),
        (Some(_), None) => "nothing spent yet".to_string(),
        (Some(_), Some(_)) if spending == 0 => "no agent is spending now".to_string(),
        (Some(_), Some(d)) => format!("at this rate the budget lasts ~{}", rough(d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Status, Usd};
    use crate::tui::model::budget_figures;
    use crate::tui::testkit::{fixed_now, pane, task};
    use std::time::Duration;

    fn at(pk: i64, state: SessionState) -> PaneMeta {
        pane(
            pk,
            &format!("T{pk}"),
            state,
            fixed_now(),
            Duration::from_secs(30),
        )
    }

    #[test]
    fn a_handoff_is_not_an_agent_spending() {
        let mut review = task(1, "T1", Status::InProgress);
        review.spec.agent = Some("handoff".into());
        let tasks = vec![review, task(2, "T2", Status::InProgress)];
        let waiting = [at(1, SessionState::WaitingForHuman)];
        // T2 is leased with no session here: an agent starting, or another worker's.
        assert_eq!(agents_spending(&waiting, &tasks), 1);
        let both = [
            at(1, SessionState::WaitingForHuman),
            at(2, SessionState::Running),
        ];
        assert_eq!(agents_spending(&both, &tasks), 1);
        assert_eq!(agents_spending(&waiting, &tasks[..1]), 0);
        assert_eq!(agents_spending(&[], &[]), 0);
        let ended = [at(2, SessionState::Done)];
        assert_eq!(agents_spending(&ended, &[]), 0);
        let checking = [at(2, SessionState::Verifying)];
        assert_eq!(agents_spending(&checking, &[]), 1);
    }

    #[test]
    fn no_projection_while_no_agent_is_spending() {
        let b = budget_figures(
            Usd::from_f64(2.0),
            Some(Usd::from_f64(10.0)),
            Duration::from_secs(1800),
        );
        assert_eq!(
            projection_text(&b, 1),
            "at this rate the budget lasts ~2h 0m"
        );
        assert_eq!(projection_text(&b, 0), "no agent is spending now");
        let unlimited = budget_figures(Usd::from_f64(2.0), None, Duration::from_secs(1800));
        assert_eq!(projection_text(&unlimited, 0), "no limit: never exhausted");
        let fresh = budget_figures(
            Usd::ZERO,
            Some(Usd::from_f64(10.0)),
            Duration::from_secs(60),
        );
        assert_eq!(projection_text(&fresh, 1), "nothing spent yet");
        assert_eq!(projection_text(&fresh, 0), "nothing spent yet");
    }
}
