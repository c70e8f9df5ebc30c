//! Agent panes: each session's emulated screen drawn live with tui-term, titled
//! `task · agent · attempt · elapsed · $cost · [state]` (the state is the engine's, not guessed).

use super::UiContext;
use super::fmt::{clock, money};
use crate::engine::sessions::SessionState;
use crate::engine::setup::Observer;
use crate::tui::grid::{MAX_PANES, pane_rects};
use crate::tui::model::{Focus, PaneMeta};
use crate::tui::state::AppState;
use crate::tui::theme::{Theme, badge_text};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Wrap};
use tui_term::widget::{Cursor, PseudoTerminal};

/// The pane title, as rich as `width` allows: the state badge is kept to the last, since it is
/// what the operator scans for.
pub(super) fn title<'a>(
    state: &AppState,
    p: &PaneMeta,
    theme: &Theme,
    takeover: bool,
    width: u16,
) -> Line<'a> {
    let cost = state
        .task_by_pk(p.task_pk)
        .map(|t| t.cost)
        .unwrap_or_default();
    let elapsed = state.now.saturating_duration_since(p.started);
    let id = format!(" {} ", p.task_id);
    let room = usize::from(width.saturating_sub(2));
    let badge = if p.waiting_input {
        let long = "[waiting for input]";
        if id.chars().count() + long.chars().count() < room {
            long.to_string()
        } else {
            "[input?]".to_string()
        }
    } else {
        format!("[{}]", badge_text(p.state))
    };
    // The double border and the footer already say "takeover" when the title has no room.
    let takeover = takeover && id.chars().count() + badge.chars().count() + 11 <= room;
    let mark = if takeover { " TAKEOVER " } else { "" };
    let details = [
        format!(
            "· {}{} · #{} · {} · {} · ",
            p.agent,
            p.remote
                .as_deref()
                .map(|h| format!(" on {h}"))
                .unwrap_or_default(),
            p.attempt,
            clock(elapsed),
            money(cost)
        ),
        format!("· #{} · {} · {} · ", p.attempt, clock(elapsed), money(cost)),
        format!("· {} · ", clock(elapsed)),
        "· ".to_string(),
    ];
    let fixed = mark.chars().count() + id.chars().count() + badge.chars().count() + 1;
    let detail = details
        .iter()
        .find(|d| fixed + d.chars().count() <= room)
        .cloned()
        .unwrap_or_default();
    let mut spans = Vec::new();
    if takeover {
        spans.push(Span::styled(
            mark,
            theme.warn().add_modifier(Modifier::REVERSED),
        ));
    }
    spans.push(Span::styled(id, theme.text().add_modifier(Modifier::BOLD)));
    spans.push(Span::styled(detail, theme.dim()));
    let badge_style = if p.waiting_input {
        theme.warn().add_modifier(Modifier::REVERSED)
    } else {
        theme.badge(p.state)
    };
    spans.push(Span::styled(badge, badge_style));
    spans.push(Span::raw(" "));
    Line::from(spans)
}

/// Draws `panes` in a grid over `area`; returns each pane's inner (terminal) rectangle.
pub(super) fn render(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    panes: &[PaneMeta],
    ui: &UiContext,
) -> Vec<(i64, Rect)> {
    let theme = ui.theme;
    let rects = pane_rects(area, panes.len());
    let hidden = panes.len().saturating_sub(MAX_PANES);
    let mut out = Vec::with_capacity(rects.len());
    for (i, (p, rect)) in panes.iter().zip(rects).enumerate() {
        let focused = state.focus == Focus::Pane(p.task_pk);
        let takeover = state.takeover == Some(p.task_pk);
        let mut block = Block::default()
            .borders(Borders::ALL)
            .border_type(if takeover {
                BorderType::Double
            } else {
                BorderType::Plain
            })
            .border_style(theme.border(focused, takeover))
            .title(title(state, p, theme, takeover, rect.width));
        if hidden > 0 && i + 1 == MAX_PANES {
            block = block.title_bottom(Line::styled(
                format!(" +{hidden} more (Tab) "),
                theme.warn(),
            ));
        }
        let inner = block.inner(rect);
        out.push((p.task_pk, inner));
        let mut drawn = false;
        if p.has_screen {
            drawn = ui.screens.with_screen(p.task_pk, &mut |screen| {
                // The agent's cursor only matters while someone types into it.
                let term = PseudoTerminal::new(screen)
                    .block(block.clone())
                    .cursor(Cursor::default().visibility(takeover));
                frame.render_widget(term, rect);
            });
        }
        if !drawn {
            let note = match p.state {
                SessionState::Preparing => "preparing the worktree…",
                SessionState::WaitingForHuman => {
                    "waiting for a human: H opens the inbox to review and approve (or `whilly handoff complete`)"
                }
                SessionState::Verifying => "running verification checks…",
                SessionState::Delivering => "delivering the work…",
                SessionState::Running => "starting…",
                SessionState::Done => "done",
                SessionState::Failed => "failed",
            };
            let mut lines = vec![Line::styled(note, theme.dim())];
            // A human's approval whose checks failed started this new handoff: say so here.
            if p.state == SessionState::WaitingForHuman
                && let Some(b) = p.note.clone().or_else(|| {
                    state
                        .task_by_pk(p.task_pk)
                        .and_then(|t| crate::engine::trail::bounced(&state.task_events(&t.id)))
                })
            {
                let mut it = b.lines();
                if let Some(head) = it.next() {
                    lines.push(Line::raw(""));
                    lines.push(Line::styled(format!("Bounced: {head}"), theme.error()));
                }
                lines.extend(it.map(|l| Line::styled(l.to_string(), theme.dim())));
            }
            frame.render_widget(
                Paragraph::new(lines).wrap(Wrap { trim: true }).block(block),
                rect,
            );
        }
    }
    out
}

pub(super) fn render_empty(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(" Agents ", theme.title()));
    let mut lines = Vec::new();
    match &state.observer {
        Some(Observer::Watching) => {
            lines.push(Line::styled(
                "Watching: this console claims no task (--watch).",
                theme.warn(),
            ));
            lines.push(Line::styled(
                "It shows what the workers do (w), answers their handoffs (H) and keeps the plan (r, S, p). Open it without --watch to run tasks here too.",
                theme.dim(),
            ));
            lines.push(Line::raw(""));
        }
        Some(Observer::MissingAgents(why)) => {
            lines.push(Line::styled(
                "Observer: this console runs no tasks of this plan.",
                theme.warn(),
            ));
            lines.push(Line::raw(format!("It cannot: {why}.")));
            lines.push(Line::styled(
                "It shows what other workers do, answers their handoffs (H) and keeps the plan (r, S, p); install the agent or set [agents.NAME] bin, then open it again to run tasks here.",
                theme.dim(),
            ));
            lines.push(Line::raw(""));
        }
        None => {}
    }
    if let Some(s) = &state.summary {
        lines.push(Line::styled(
            format!("Run finished: {} (exit {})", s.end.describe(), s.exit_code),
            if s.exit_code == 0 {
                theme.ok()
            } else {
                theme.error()
            },
        ));
        lines.push(Line::raw(format!(
            "{} done · {} failed · {} skipped of {} · {} attempts",
            s.done, s.failed, s.skipped, s.total, s.attempts
        )));
        lines.push(Line::raw(format!(
            "cost ${:.2} · {:.1}s",
            s.cost_usd, s.elapsed_sec
        )));
        if !s.stuck.is_empty() {
            lines.push(Line::styled(
                format!(
                    "stuck: {}",
                    s.stuck
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                theme.warn(),
            ));
        }
        lines.push(Line::raw(""));
        lines.push(Line::styled(
            "The console keeps serving the plan: tasks reset (r), sent back or merged in run now.",
            theme.dim(),
        ));
        lines.push(Line::styled("press q to quit", theme.key()));
    } else if let Some(e) = &state.engine_error {
        lines.push(Line::styled(
            "The engine stopped with an error:",
            theme.error(),
        ));
        lines.push(Line::raw(e.clone()));
        lines.push(Line::styled("press q to quit", theme.key()));
    } else if state.stopping {
        lines.push(Line::styled("stopping…", theme.warn()));
    } else if state.plan.as_ref().is_some_and(|p| p.paused) {
        lines.push(Line::styled(
            "The plan is paused: no new agents start (p resumes).",
            theme.warn(),
        ));
    } else if let elsewhere @ [_, ..] = &running_elsewhere(state)[..] {
        lines.push(Line::styled(
            format!(
                "{} task(s) run in another worker: {}.",
                elsewhere.len(),
                elsewhere.join(", ")
            ),
            theme.dim(),
        ));
        lines.push(Line::styled(
            "Their agents run in that process, not on this screen; w lists the workers, H answers their handoffs.",
            theme.dim(),
        ));
    } else if state.observer.is_some() {
        lines.push(Line::styled(
            "No worker runs a task of this plan now.",
            theme.dim(),
        ));
        lines.push(Line::styled(
            "Ready tasks wait for a worker (`whilly worker` where the agents are); w lists the workers.",
            theme.dim(),
        ));
    } else {
        lines.push(Line::styled("No agent running yet.", theme.dim()));
        lines.push(Line::styled(
            "Waiting for ready tasks (dependencies, budget, free slots)…",
            theme.dim(),
        ));
    }
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(block),
        area,
    );
}

/// Tasks held by a worker while no pane of this console shows them (at most a line's worth).
fn running_elsewhere(state: &AppState) -> Vec<String> {
    state
        .tasks_held_elsewhere()
        .into_iter()
        .take(8)
        .map(|t| t.id.clone())
        .collect()
}

/// The replay view: a finished attempt's log in a pane of the whole body. Returns the inner
/// rectangle (the loop sizes the replay's emulator to it).
pub(super) fn render_replay(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    ui: &UiContext,
) -> Option<Rect> {
    let theme = ui.theme;
    let r = state.replay.as_ref()?;
    let what = match &r.path {
        Some(p) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        None => "…".to_string(),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(
            format!(
                " {} · replay of {what} · pgup/pgdn scroll · esc back ",
                r.task_id
            ),
            theme.title(),
        ));
    let inner = block.inner(area);
    let drawn = ui
        .screens
        .with_screen(crate::tui::model::REPLAY_PK, &mut |screen| {
            frame.render_widget(
                PseudoTerminal::new(screen)
                    .block(block.clone())
                    .cursor(Cursor::default().visibility(false)),
                area,
            );
        });
    if !drawn {
        let note = match (&r.error, &r.path) {
            (Some(e), _) => Line::styled(e.clone(), theme.error()),
            _ => Line::styled("reading the log…", theme.dim()),
        };
        frame.render_widget(Paragraph::new(note).block(block), area);
    }
    Some(inner)
}
