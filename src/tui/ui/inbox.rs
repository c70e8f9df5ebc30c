//! The handoff inbox: the tasks waiting for a human, and the one being read (its prompt and the
//! diff of its worktree against its base).

use crate::tui::action::Action;
use crate::tui::keymap::Keymap;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

pub(super) fn render(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    theme: &Theme,
    keys: &Keymap,
) {
    if state.inbox_ui.open.is_some() {
        render_detail(frame, area, state, theme, keys);
        return;
    }
    let items = state.inbox();
    let [list, preview] = if area.height >= 16 {
        Layout::vertical([Constraint::Percentage(50), Constraint::Min(3)]).areas(area)
    } else {
        Layout::vertical([Constraint::Min(3), Constraint::Length(0)]).areas(area)
    };
    let key = |a: Action| keys.keys_for(a).first().cloned().unwrap_or_default();
    let merge = if items
        .iter()
        .any(|i| i.kind == crate::tui::model::InboxKind::ReadyToMerge)
    {
        format!(" · {} merge", key(Action::Merge))
    } else {
        String::new()
    };
    let title = format!(
        " Inbox ({}) · {} open · {} approve{merge} · {} reject · {} send back · {} mark · {} all ",
        items.len(),
        key(Action::Zoom),
        key(Action::Approve),
        key(Action::Reject),
        key(Action::SendBack),
        key(Action::Mark),
        key(Action::ApproveAll),
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.dim())
        .title(Span::styled(title, theme.title()));
    if items.is_empty() {
        frame.render_widget(
            Paragraph::new(Line::styled(
                "Nothing waits for a human. Handoff tasks, tasks parked in HUMAN_LOOP or BLOCKED, and work ready to merge appear here.",
                theme.dim(),
            ))
            .wrap(Wrap { trim: true })
            .block(block),
            list,
        );
        return;
    }
    let rows: Vec<Row> = items
        .iter()
        .map(|i| {
            let mark = if state.inbox_ui.marked.contains(&i.task_pk) {
                "●"
            } else {
                " "
            };
            Row::new(vec![
                Cell::from(Span::styled(mark, theme.key())),
                Cell::from(i.task_id.clone()),
                Cell::from(Span::styled(i.kind.label(), theme.warn())),
                Cell::from(i.note.clone()),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(16),
            Constraint::Length(14),
            Constraint::Fill(1),
        ],
    )
    .header(Row::new(vec!["", "task", "waits as", "note"]).style(theme.dim()))
    .row_highlight_style(theme.selected())
    .block(block);
    let mut ts = TableState::default().with_selected(Some(state.inbox_ui.selected));
    frame.render_stateful_widget(table, list, &mut ts);

    if preview.height > 0
        && let Some(item) = items.get(state.inbox_ui.selected)
        && let Some(task) = state.task_by_pk(item.task_pk)
    {
        let mut lines = vec![Line::styled(
            format!("{} · {}", task.id, task.status.as_str()),
            theme.title(),
        )];
        lines.extend(
            task.spec
                .description
                .lines()
                .map(|l| Line::raw(l.to_string())),
        );
        if !item.note.is_empty() {
            lines.push(Line::styled(format!("note: {}", item.note), theme.warn()));
        }
        frame.render_widget(
            Paragraph::new(lines).wrap(Wrap { trim: false }).block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.dim())
                    .title(Span::styled(" Selected ", theme.title())),
            ),
            preview,
        );
    }
}

fn render_detail(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme, keys: &Keymap) {
    let key = |a: Action| keys.keys_for(a).first().cloned().unwrap_or_default();
    let id = state
        .inbox_ui
        .open
        .and_then(|pk| state.task_by_pk(pk))
        .map(|t| t.id.clone())
        .unwrap_or_default();
    let ready = state
        .inbox_ui
        .open
        .and_then(|pk| state.task_by_pk(pk))
        .is_some_and(crate::engine::landing::waits_to_merge);
    let approve = if ready {
        format!("{} merge", key(Action::Merge))
    } else {
        format!("{} approve", key(Action::Approve))
    };
    let title = format!(
        " {id}: {approve} · {} reject · {} send back · esc back ",
        key(Action::Reject),
        key(Action::SendBack)
    );
    let mut lines: Vec<Line> = Vec::new();
    match &state.inbox_ui.detail {
        None => lines.push(Line::styled(
            "loading the prompt and the changes…",
            theme.dim(),
        )),
        Some(d) => {
            // The work comes first: it is what the operator decides on.
            if let Some(path) = &d.worktree {
                lines.push(Line::styled(
                    format!("Worktree: {}", path.display()),
                    theme.dim(),
                ));
            }
            let task = state.task_by_pk(d.task_pk);
            if let Some(pr) = task.and_then(|t| state.pulls.get(&t.id)) {
                lines.push(Line::styled(
                    format!(
                        "Pull request #{} ({}): {}",
                        pr.number,
                        crate::engine::pull_watch::state_label(pr.state),
                        pr.url
                    ),
                    theme.title(),
                ));
            }
            if let Some(t) = task.filter(|t| {
                t.reason.as_deref() == Some(crate::engine::remote_delivery::NOT_PUBLISHED)
            }) {
                lines.push(Line::styled(
                    format!(
                        "The work is kept but did not reach the remote or its pull request: `whilly forge --compose {}` finishes it.",
                        t.id
                    ),
                    theme.warn(),
                ));
            }
            if let Some(b) = &d.bounced {
                let mut it = b.lines();
                if let Some(head) = it.next() {
                    lines.push(Line::styled(format!("Bounced: {head}"), theme.error()));
                }
                lines.extend(it.map(|l| Line::styled(format!("  {l}"), theme.dim())));
                lines.push(Line::raw(""));
            }
            match (&d.diff, &d.diff_note) {
                (Some(diff), _) => {
                    lines.push(Line::styled(
                        format!("Changes against the base: {}", diff_size(diff)),
                        theme.title(),
                    ));
                    if diff.files == 0 {
                        lines.push(Line::styled("  no changes yet", theme.dim()));
                    }
                    for l in diff.patch.lines() {
                        lines.push(Line::styled(l.to_string(), diff_style(l, theme)));
                    }
                }
                (None, Some(note)) => {
                    lines.push(Line::styled("Changes", theme.title()));
                    lines.push(Line::styled(format!("  {note}"), theme.dim()));
                }
                (None, None) => {}
            }
            if let Some(said) = &d.said {
                lines.push(Line::raw(""));
                lines.push(Line::styled("What the agent said", theme.title()));
                lines.extend(said.lines().map(|l| Line::raw(format!("  {l}"))));
            }
            lines.push(Line::raw(""));
            lines.push(Line::styled("The task", theme.title()));
            lines.extend(d.brief.lines().map(|l| Line::raw(format!("  {l}"))));
            if let Some(dir) = &d.handoff_dir {
                lines.push(Line::raw(""));
                lines.push(Line::styled(
                    format!(
                        "  From a shell: whilly handoff complete {} --status complete|failed --message … (files in {})",
                        state
                            .task_by_pk(d.task_pk)
                            .map_or("ID", |t| t.id.as_str()),
                        dir.display()
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
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.dim())
                    .title(Span::styled(title, theme.title())),
            ),
        area,
    );
}

/// `2 file(s), +10 −3`, and `(cut)` when the patch was cut.
pub(super) fn diff_size(diff: &crate::workspace::WorktreeDiff) -> String {
    format!(
        "{} file(s), +{} −{}{}",
        diff.files,
        diff.insertions,
        diff.deletions,
        if diff.truncated { " (cut)" } else { "" }
    )
}

pub(super) fn diff_style(l: &str, theme: &Theme) -> ratatui::style::Style {
    if l.starts_with("+++") || l.starts_with("---") {
        theme.title()
    } else if l.starts_with('+') {
        theme.ok()
    } else if l.starts_with('-') {
        theme.error()
    } else if l.starts_with("@@") || l.starts_with("diff ") {
        theme.key()
    } else {
        theme.text()
    }
}
