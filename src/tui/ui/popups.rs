//! Popups over any view: help (`help.rs`: every key of the current view, from the keymap),
//! confirmations (reset a task; quit while agents run) and the split of a task (its diff).

use super::UiContext;
use super::fmt::ellipsize;
use super::geometry::centred;
use crate::engine::sessions::SessionState;
use crate::tui::model::{Confirm, Popup};
use crate::tui::state::AppState;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, ui: &UiContext) {
    for popup in &state.popups {
        match popup {
            Popup::Help => super::help::render(frame, area, state, ui),
            Popup::Confirm(c) => confirm(frame, area, c, state, ui),
            Popup::Input { purpose, text } => input(frame, area, &purpose.prompt(), text, ui),
            Popup::Split => split(frame, area, state, ui),
        }
    }
}

/// The split dialog (`X`): the agent at work, then the change as a diff to write or discard.
fn split(frame: &mut Frame, area: Rect, state: &AppState, ui: &UiContext) {
    let theme = ui.theme;
    let Some(view) = &state.split else {
        return;
    };
    let rect = centred(
        area,
        area.width.saturating_sub(4).max(40),
        area.height.saturating_sub(2).max(8),
    );
    frame.render_widget(Clear, rect);
    let (lines, hint): (Vec<Line>, &str) = match &view.proposal {
        None => (
            vec![Line::styled(
                format!(
                    "asking the agent to split {} into subtasks… (esc stops it)",
                    view.task_id
                ),
                theme.dim(),
            )],
            " esc cancel ",
        ),
        Some(p) => (
            p.diff
                .lines()
                .map(|l| Line::styled(l.to_string(), super::inbox::diff_style(l, theme)))
                .collect(),
            " y write into the queue · n/esc discard · ↑↓ j k pgup pgdn scroll ",
        ),
    };
    let width = usize::from(rect.width.saturating_sub(2));
    frame.render_widget(
        Paragraph::new(lines).scroll((view.scroll, 0)).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.warn())
                .title(Span::styled(
                    ellipsize(&format!(" Split {} ", view.task_id), width),
                    theme.warn(),
                ))
                .title_bottom(Line::styled(ellipsize(hint, width), theme.key())),
        ),
        rect,
    );
}

fn input(frame: &mut Frame, area: Rect, prompt: &str, text: &str, ui: &UiContext) {
    let theme = ui.theme;
    let rect = centred(area, 70, 5);
    frame.render_widget(Clear, rect);
    let inner_w = usize::from(rect.width.saturating_sub(4));
    // Show the end of a long line: that is where the cursor is.
    let shown: String = {
        let n = text.chars().count();
        text.chars().skip(n.saturating_sub(inner_w)).collect()
    };
    let lines = vec![
        Line::from(vec![Span::raw(shown), Span::styled("▏", theme.key())]),
        Line::raw(""),
        Line::from(vec![
            Span::styled("enter", theme.key()),
            Span::raw(" send   "),
            Span::styled("esc", theme.key()),
            Span::raw(" cancel"),
        ]),
    ];
    frame.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.warn())
                .title(Span::styled(format!(" {prompt} "), theme.warn())),
        ),
        rect,
    );
}

fn confirm(frame: &mut Frame, area: Rect, c: &Confirm, state: &AppState, ui: &UiContext) {
    let theme = ui.theme;
    let (title, lines) = match c {
        Confirm::ResetTask(id) => (
            " Reset task ",
            vec![
                Line::raw(format!("Reset {id} to PENDING? Its attempts start over.")),
                Line::raw(""),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" reset   "),
                    Span::styled("n", theme.key()),
                    Span::raw("/esc cancel"),
                ]),
            ],
        ),
        Confirm::SkipTask(id) => (
            " Skip task ",
            vec![
                Line::raw(format!(
                    "Skip {id}? It will not run; tasks that depend on it keep waiting."
                )),
                Line::raw(""),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" skip   "),
                    Span::styled("n", theme.key()),
                    Span::raw("/esc cancel"),
                ]),
            ],
        ),
        Confirm::KillAttempt(_, id) => (
            " Kill attempt ",
            vec![
                Line::raw(format!(
                    "Kill {id}'s agent now? The attempt fails and is retried while attempts remain."
                )),
                Line::raw(""),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" kill   "),
                    Span::styled("n", theme.key()),
                    Span::raw("/esc cancel"),
                ]),
            ],
        ),
        Confirm::ApproveUnchanged(target) => (
            " Approve without a change? ",
            vec![
                Line::raw(format!(
                    "{}'s worktree has no change since the handoff began.",
                    target.task_id
                )),
                Line::raw(
                    "Its checks will run on the code as it was; if they fail, a new handoff starts.",
                ),
                Line::raw("Approve anyway?"),
                Line::raw(""),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" approve   "),
                    Span::styled("n", theme.key()),
                    Span::raw("/esc cancel"),
                ]),
            ],
        ),
        Confirm::Approve(targets) => (
            " Approve ",
            vec![
                Line::raw(format!(
                    "Approve {} task(s): {}?",
                    targets.len(),
                    targets
                        .iter()
                        .map(|t| t.task_id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Line::raw(""),
                Line::from(vec![
                    Span::styled("y", theme.key()),
                    Span::raw(" approve   "),
                    Span::styled("n", theme.key()),
                    Span::raw("/esc cancel"),
                ]),
            ],
        ),
        Confirm::Quit {
            running,
            background,
        } => {
            let option = |key: &'static str, what: &'static str| {
                Line::from(vec![
                    Span::styled(format!(" {key:<3} "), theme.key()),
                    Span::raw(what),
                ])
            };
            let waiting = state
                .panes
                .iter()
                .filter(|p| p.state == SessionState::WaitingForHuman)
                .count();
            let mut lines: Vec<Line> = quit_headline(*running, waiting)
                .into_iter()
                .map(Line::raw)
                .collect();
            lines.extend([
                option("s", "stop them now (their tasks go back to PENDING)"),
                option("f", "let them finish, start nothing new, then quit"),
            ]);
            if *background {
                lines.push(option(
                    "b",
                    "let them finish in the background; the prompt is back now",
                ));
                lines.push(option(
                    "d",
                    "detach: the whole plan goes on in the background",
                ));
            }
            lines.push(option("w", "keep going (esc)"));
            (" Quit ", lines)
        }
    };
    // Room for every line (the quit choices), never less than the usual box.
    let rect = centred(area, 64, (lines.len() as u16 + 2).max(8));
    frame.render_widget(Clear, rect);
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }).block(
            Block::default()
                .borders(Borders::ALL)
                .border_style(theme.warn())
                .title(Span::styled(title, theme.warn())),
        ),
        rect,
    );
}

/// The first lines of the quit dialog. `running` is what the console counted when q was pressed,
/// human handoffs included; `waiting` of those wait for a human. They are told apart: a handoff
/// has no agent to stop or wait for, and calling it an agent running was wrong.
fn quit_headline(running: usize, waiting: usize) -> Vec<String> {
    let agents = running.saturating_sub(waiting);
    let mut lines = Vec::new();
    match agents {
        0 => {}
        1 => lines.push("1 agent still running.".to_string()),
        n => lines.push(format!("{n} agents still running.")),
    }
    match waiting {
        0 => {}
        1 => lines.push("1 task waiting for a human (its handoff stays open).".to_string()),
        n => lines.push(format!(
            "{n} tasks waiting for a human (their handoffs stay open)."
        )),
    }
    if lines.is_empty() {
        // The agents counted at q have finished since.
        lines.push("No agent is running any more.".to_string());
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quit_dialog_counts_agents_and_handoffs_apart() {
        assert_eq!(quit_headline(1, 0), ["1 agent still running."]);
        assert_eq!(quit_headline(2, 0), ["2 agents still running."]);
        assert_eq!(
            quit_headline(1, 1),
            ["1 task waiting for a human (its handoff stays open)."]
        );
        assert_eq!(
            quit_headline(3, 1),
            [
                "2 agents still running.",
                "1 task waiting for a human (its handoff stays open)."
            ]
        );
        assert_eq!(
            quit_headline(3, 2),
            [
                "1 agent still running.",
                "2 tasks waiting for a human (their handoffs stay open)."
            ]
        );
        // More waiting than counted (a handoff opened after q): never a negative agent count.
        assert_eq!(
            quit_headline(1, 2),
            ["2 tasks waiting for a human (their handoffs stay open)."]
        );
    }
}
