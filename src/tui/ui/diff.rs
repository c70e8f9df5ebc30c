//! The diff view (`D`): what a task changed against its base, from its worktree while it runs
//! or waits, from its branch or its landed commit once it is done.

use super::inbox::{diff_size, diff_style};
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::workspace::DiffSource;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let Some(d) = &state.diff else {
        return;
    };
    let mut lines: Vec<Line> = Vec::new();
    match &d.loaded {
        None => lines.push(Line::styled("loading the changes…", theme.dim())),
        Some(Err(e)) => lines.push(Line::styled(e.clone(), theme.warn())),
        Some(Ok((source, diff))) => {
            let from = match source {
                DiffSource::Worktree(p) => format!("worktree {} against its base", p.display()),
                DiffSource::Branch(b) => format!("branch {b} against where it forked"),
                DiffSource::Landed(c) => {
                    format!("landed commit {} against its parent", &c[..c.len().min(12)])
                }
            };
            lines.push(Line::styled(from, theme.dim()));
            lines.push(Line::styled(diff_size(diff), theme.title()));
            if diff.files == 0 {
                lines.push(Line::styled("no changes", theme.dim()));
            }
            lines.extend(
                diff.patch
                    .lines()
                    .map(|l| Line::styled(l.to_string(), diff_style(l, theme))),
            );
        }
    }
    let title = format!(" {} · diff (D or esc back, pgup/pgdn scroll) ", d.task_id);
    frame.render_widget(
        Paragraph::new(lines)
            .scroll((state.detail_scroll, 0))
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.dim())
                    .title(Span::styled(
                        super::fmt::ellipsize(&title, usize::from(area.width.saturating_sub(2))),
                        theme.title(),
                    )),
            ),
        area,
    );
}
