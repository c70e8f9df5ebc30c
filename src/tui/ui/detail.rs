//! Task detail: description, acceptance criteria, test steps, key files, dependencies,
//! status and reason, attempts and cost, and the task's latest events.

use super::fmt::money;
use super::tasks::deps_text;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};

/// How many of the task's events the detail shows.
const LAST_EVENTS: usize = 12;

#[expect(
    clippy::too_many_lines,
    reason = "the detail view is a list of sections drawn in order"
)]
pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let Some(t) = state.selected_task() else {
        frame.render_widget(
            Paragraph::new("no task selected").block(Block::default().borders(Borders::ALL)),
            area,
        );
        return;
    };
    let head = |s: &str| Line::styled(s.to_string(), theme.title());
    let mut lines = vec![
        Line::from(vec![
            Span::styled(format!("{}  ", t.id), theme.title()),
            Span::styled(t.status.as_str(), theme.status(t.status)),
            Span::raw(format!("  priority {}", t.priority)),
        ]),
        Line::raw(format!(
            "attempts {} · cost {} · deps {}",
            t.tries_text(),
            money(t.cost),
            deps_text(t)
        )),
    ];
    if let Some(reason) = &t.reason {
        lines.push(Line::styled(format!("reason: {reason}"), theme.warn()));
    }
    let events = state.task_events(&t.id);
    // (line index, label width, link text, url) for the links drawn after the layout.
    let mut links: Vec<(usize, usize, String, String)> = Vec::new();
    if let Some((repo, n, url)) = crate::forge::intake::source_of(&t.spec) {
        let label = "issue ";
        let text = format!("{repo}#{n}");
        links.push((lines.len(), label.len(), text.clone(), url.clone()));
        lines.push(Line::from(vec![
            Span::raw(label),
            Span::styled(text, theme.title()),
            Span::styled(format!("  {url}"), theme.dim()),
        ]));
    }
    if let Some(pr) = state.pulls.get(&t.id) {
        let label = "pull request ";
        let text = format!("#{}", pr.number);
        links.push((lines.len(), label.len(), text.clone(), pr.url.clone()));
        lines.push(Line::from(vec![
            Span::raw(label),
            Span::styled(text, theme.title()),
            Span::raw(format!(
                " ({})",
                crate::engine::pull_watch::state_label(pr.state)
            )),
            Span::styled(format!("  {}", pr.url), theme.dim()),
        ]));
    }
    if let Some((key, url)) = crate::forge::jira::intake::source_of(&t.spec) {
        let label = "jira ";
        links.push((lines.len(), label.len(), key.clone(), url.clone()));
        let status = state
            .jira_status
            .get(&t.id)
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        lines.push(Line::from(vec![
            Span::raw(label),
            Span::styled(key, theme.title()),
            Span::raw(status),
            Span::styled(format!("  {url}"), theme.dim()),
        ]));
    }
    if let Some(column) = state.board_column.get(&t.id) {
        lines.push(Line::raw(format!("board card: {column}")));
    }
    if let Some(p) = state.pane(t.pk) {
        lines.push(Line::raw(format!(
            "agent {}{} · attempt #{} · {}",
            p.agent,
            p.remote
                .as_deref()
                .map(|h| format!(" on {h}"))
                .unwrap_or_default(),
            p.attempt,
            crate::tui::theme::badge_text(p.state)
        )));
    }
    lines.push(Line::raw(""));
    lines.push(head("Description"));
    for l in t.spec.description.lines() {
        lines.push(Line::raw(format!("  {l}")));
    }
    let list = |lines: &mut Vec<Line>, title: &str, items: &[String]| {
        if items.is_empty() {
            return;
        }
        lines.push(Line::raw(""));
        lines.push(head(title));
        for i in items {
            lines.push(Line::raw(format!("  • {i}")));
        }
    };
    list(
        &mut lines,
        "Acceptance criteria",
        &t.spec.acceptance_criteria,
    );
    list(&mut lines, "Test steps", &t.spec.test_steps);
    list(&mut lines, "Key files", &t.spec.key_files);
    list(&mut lines, "Dependencies", &t.spec.dependencies);
    let tried = crate::tui::attempts::attempts(&events);
    if !tried.is_empty() {
        lines.push(Line::raw(""));
        lines.push(head("Attempts"));
        // Numbered as the task's attempt counter counts them: a release gives its attempt back.
        let mut n = 0;
        for a in &tried {
            let mut text = if a.counted {
                n += 1;
                format!("  #{n} {}", a.ended)
            } else {
                format!("  -- {} (the attempt is given back)", a.ended)
            };
            if let Some(r) = &a.reason {
                text.push_str(&format!(" ({r})"));
            }
            for part in [a.agent.as_deref(), a.exit.as_deref()]
                .into_iter()
                .flatten()
            {
                text.push_str(&format!(" · {part}"));
            }
            if let Some(c) = a.cost_usd {
                text.push_str(&format!(" · ${c:.2}"));
            }
            let style = if a.ended == "done" {
                theme.ok()
            } else {
                theme.text()
            };
            lines.push(Line::styled(text, style));
            let several = a.rounds.len() > 1;
            for (r, checks) in a.rounds.iter().enumerate() {
                if several {
                    let then = if r + 1 < a.rounds.len() {
                        " → repair"
                    } else {
                        ""
                    };
                    lines.push(Line::styled(
                        format!("     check round {}{then}", r + 1),
                        theme.dim(),
                    ));
                }
                for c in checks {
                    let (mark, style) = if c.passed {
                        ("✓", theme.ok())
                    } else {
                        ("✗", theme.error())
                    };
                    let exit = c
                        .exit_code
                        .map(|e| format!(" (exit {e})"))
                        .unwrap_or_default();
                    lines.push(Line::styled(format!("     {mark} {}{exit}", c.name), style));
                    for l in &c.tail {
                        lines.push(Line::styled(format!("       {l}"), theme.dim()));
                    }
                }
            }
        }
    }
    let notes = crate::tui::attempts::outcome_notes(&events);
    if !notes.is_empty() {
        lines.push(Line::raw(""));
        lines.push(head("Notes on the last attempt"));
        for n in notes {
            lines.push(Line::styled(format!("  ! {n}"), theme.warn()));
        }
    }
    if !events.is_empty() {
        lines.push(Line::raw(""));
        lines.push(head("Last events"));
        let skip = events.len().saturating_sub(LAST_EVENTS);
        for e in &events[skip..] {
            lines.push(super::events::event_line(e, theme, false));
        }
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(" Task detail (esc back) ", theme.title()));
    let inner = block.inner(area);
    // Rows each line takes once wrapped, to find where a link's text landed.
    let width = inner.width.max(1) as usize;
    let rows: Vec<usize> = lines
        .iter()
        .map(|l| l.width().div_ceil(width).max(1))
        .collect();
    frame.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .scroll((state.detail_scroll, 0))
            .block(block),
        area,
    );
    for (index, label, text, url) in links {
        let row = rows[..index].iter().sum::<usize>() as i64 - state.detail_scroll as i64;
        if row < 0 || label + text.chars().count() > width {
            continue;
        }
        let y = inner.y.saturating_add(row as u16);
        let x = inner.x.saturating_add(label as u16);
        super::link::hyperlink(frame.buffer_mut(), inner, x, y, &text, &url);
    }
}
