//! The PRD wizard's screens: the editor for the idea, answers and the PRD; a spinner while the
//! agent works; the generated plan as a table with each task's problems; failures with the path
//! of the agent's raw reply.

use super::fmt::ellipsize;
use crate::tui::state::AppState;
use crate::tui::theme::Theme;
use crate::tui::wizard::{Stage, Wizard};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

const SPINNER: [char; 8] = ['⣾', '⣽', '⣻', '⢿', '⡿', '⣟', '⣯', '⣷'];

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, theme: &Theme) {
    let Some(w) = &state.wizard else {
        return;
    };
    let (step, name) = step_of(&w.stage());
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.title())
        .title(Span::styled(
            format!(" New PRD · step {step}/5: {name} "),
            theme.title(),
        ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let hints = hint_lines(w, theme);
    // The key hints wrap on a narrow terminal rather than lose their end.
    let hint_h: u16 = hints
        .iter()
        .map(|l| l.width().div_ceil(usize::from(inner.width.max(1))).max(1) as u16)
        .sum::<u16>()
        .max(2);
    let [context, main, hint] = Layout::vertical([
        Constraint::Length(context_height(w, inner.height)),
        Constraint::Min(3),
        Constraint::Length(hint_h),
    ])
    .areas(inner);
    frame.render_widget(
        Paragraph::new(context_lines(w, theme)).wrap(Wrap { trim: false }),
        context,
    );
    match &w.stage() {
        Stage::Idea | Stage::Answer { .. } | Stage::EditPrd { .. } | Stage::EditTask { .. } => {
            let mut editor = w.editor.clone();
            editor.set_block(
                Block::default()
                    .borders(Borders::ALL)
                    .border_style(theme.key()),
            );
            editor.set_cursor_line_style(ratatui::style::Style::default());
            frame.render_widget(&editor, main);
        }
        Stage::Asking | Stage::Writing | Stage::Planning | Stage::Applying => {
            let secs = w
                .waiting_since
                .map(|t| state.now.saturating_duration_since(t).as_secs())
                .unwrap_or(0);
            let spin = SPINNER[(secs as usize) % SPINNER.len()];
            let what = match w.stage() {
                Stage::Asking => "the agent is thinking of the next question",
                Stage::Writing => "the agent is writing the PRD",
                Stage::Planning => "the agent is turning the PRD into a plan (read-only)",
                _ => "importing the plan",
            };
            frame.render_widget(
                Paragraph::new(Line::styled(format!("{spin} {what}… {secs}s"), theme.key())),
                main,
            );
        }
        Stage::Review { selected } => review(frame, main, w, *selected, theme),
        Stage::Failed => {
            let mut lines = vec![Line::styled(
                w.error.clone().unwrap_or_default(),
                theme.error(),
            )];
            if let Some(raw) = &w.raw_reply {
                lines.push(Line::raw(""));
                lines.push(Line::raw(format!(
                    "The agent's reply is kept in {}",
                    raw.display()
                )));
            }
            frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), main);
        }
        Stage::Finished { message } => {
            frame.render_widget(
                Paragraph::new(Line::styled(message.clone(), theme.ok()))
                    .wrap(Wrap { trim: false }),
                main,
            );
        }
    }
    frame.render_widget(Paragraph::new(hints).wrap(Wrap { trim: false }), hint);
}

fn step_of(stage: &Stage) -> (u8, &'static str) {
    match stage {
        Stage::Idea => (1, "the idea"),
        Stage::Asking | Stage::Answer { .. } => (2, "interview"),
        Stage::Writing | Stage::EditPrd { .. } => (3, "the PRD"),
        Stage::Planning | Stage::Review { .. } | Stage::EditTask { .. } | Stage::Failed => {
            (4, "the plan")
        }
        Stage::Applying | Stage::Finished { .. } => (5, "into the queue"),
    }
}

fn context_height(w: &Wizard, available: u16) -> u16 {
    let want: u16 = match &w.stage() {
        Stage::Idea => 2,
        Stage::Answer { .. } | Stage::Asking => (w.answers().len() as u16 * 2 + 3).min(12),
        Stage::EditPrd { .. } | Stage::Writing => 2,
        Stage::EditTask { .. } => 2,
        _ => 1,
    };
    want.min(available / 3)
}

fn context_lines<'a>(w: &'a Wizard, theme: &Theme) -> Vec<Line<'a>> {
    match w.stage() {
        Stage::Idea => vec![Line::raw(
            "Describe the idea: what to build, for whom, and why. An agent then interviews you.",
        )],
        Stage::Asking | Stage::Answer { .. } => {
            let mut lines = Vec::new();
            // The newest answers matter most when space is short.
            let skip = w.answers().len().saturating_sub(4);
            for qa in &w.answers()[skip..] {
                lines.push(Line::styled(format!("Q: {}", qa.question), theme.dim()));
                lines.push(Line::styled(format!("A: {}", qa.answer), theme.dim()));
            }
            if let Stage::Answer { question } = w.stage() {
                lines.push(Line::styled(format!("Q: {question}"), theme.title()));
            }
            lines
        }
        Stage::EditPrd { path } => vec![Line::raw(format!(
            "{} — edit it as you like; it is saved when you go on.",
            path.display()
        ))],
        Stage::EditTask { index } => vec![Line::raw(format!(
            "Task #{} as JSON: change any field (description, acceptance_criteria, dependencies…).",
            index + 1
        ))],
        _ => Vec::new(),
    }
}

fn hint_lines<'a>(w: &Wizard, theme: &Theme) -> Vec<Line<'a>> {
    let keys: &[(&str, &str)] = match &w.stage() {
        Stage::Idea => &[("ctrl-s", "send"), ("esc esc", "close")],
        Stage::Answer { .. } => &[
            ("ctrl-s", "answer"),
            ("ctrl-n", "enough questions: write the PRD"),
            ("esc esc", "close"),
        ],
        Stage::EditPrd { .. } => &[("ctrl-s", "save and make the plan"), ("esc esc", "close")],
        Stage::EditTask { .. } => &[("ctrl-s", "keep the edit"), ("esc", "drop the edit")],
        Stage::Review { .. } => &[
            ("e", "edit"),
            ("d", "delete"),
            ("m", "merge into the running plan"),
            ("s", "save as its own plan"),
            ("esc esc", "discard"),
        ],
        Stage::Failed => &[("r", "retry"), ("e", "edit the PRD"), ("esc esc", "close")],
        Stage::Finished { .. } => &[("any key", "close")],
        _ => &[("esc esc", "close (the agent call is abandoned)")],
    };
    let mut spans = Vec::new();
    for (k, d) in keys {
        spans.push(Span::styled(format!(" {k}"), theme.key()));
        spans.push(Span::styled(format!(" {d} "), theme.dim()));
    }
    let mut lines = vec![Line::from(spans)];
    if w.closing {
        lines.insert(
            0,
            Line::styled(
                " press esc again to close the wizard (unsaved work is lost)",
                theme.warn(),
            ),
        );
    } else if let Some(e) = &w.error
        && w.stage() != Stage::Failed
    {
        lines.insert(0, Line::styled(format!(" {e}"), theme.error()));
    }
    lines
}

fn review(frame: &mut Frame, area: Rect, w: &Wizard, selected: usize, theme: &Theme) {
    let Some(plan) = w.plan() else {
        frame.render_widget(Paragraph::new("no plan yet"), area);
        return;
    };
    let [table_area, problems_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(5)]).areas(area);
    // Borders, the mark and the fixed columns with their spacing: what the description keeps.
    let desc_w = usize::from(area.width.saturating_sub(2 + 1 + 14 + 9 + 14 + 4));
    let rows: Vec<Row> = plan
        .tasks
        .iter()
        .map(|t| {
            let bad = w.problems_of(&t.id).iter().any(|p| p.error);
            let mark = if bad {
                Span::styled("✗", theme.error())
            } else {
                Span::styled("✓", theme.ok())
            };
            Row::new(vec![
                Cell::from(mark),
                Cell::from(ellipsize(&t.id, 14)),
                Cell::from(t.priority.as_str()),
                Cell::from(ellipsize(&t.dependencies.join(","), 14)),
                Cell::from(ellipsize(&t.description, desc_w)),
            ])
        })
        .collect();
    let title = format!(
        " {} · {} task(s){} ",
        plan.id,
        plan.tasks.len(),
        if w.plan_ready() {
            " · ready".to_string()
        } else {
            format!(
                " · {} problem(s)",
                w.problems().iter().filter(|p| p.error).count()
            )
        }
    );
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Length(14),
            Constraint::Length(9),
            Constraint::Length(14),
            Constraint::Fill(1),
        ],
    )
    .header(Row::new(vec!["", "id", "priority", "deps", "description"]).style(theme.dim()))
    .row_highlight_style(theme.selected())
    .block(
        Block::default()
            .borders(Borders::ALL)
            .border_style(theme.dim())
            .title(Span::styled(title, theme.title())),
    );
    let mut ts = TableState::default().with_selected(Some(selected));
    frame.render_stateful_widget(table, table_area, &mut ts);
    let mut lines: Vec<Line> = Vec::new();
    if let Some(t) = plan.tasks.get(selected) {
        for p in w.problems_of(&t.id) {
            let style = if p.error { theme.error() } else { theme.warn() };
            lines.push(Line::styled(format!("{}: {}", t.id, p.message), style));
        }
    }
    for p in w.problems().iter().filter(|p| p.task_id.is_none()) {
        lines.push(Line::styled(p.message.clone(), theme.error()));
    }
    if lines.is_empty() {
        lines.push(Line::styled("no problems with this task", theme.dim()));
    }
    frame.render_widget(
        Paragraph::new(lines).wrap(Wrap { trim: true }),
        problems_area,
    );
}
