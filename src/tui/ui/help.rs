//! The help popup (`?`): the view's keys in sections (the view's own, then go-to, decide, tasks
//! and plan, console), as lazygit's and k9s's helps are. Sections flow into as many columns as
//! the width allows and as few as the height needs; a description that does not fit its column
//! wraps instead of being cut, so at 80×24 every entry reads whole.

use super::UiContext;
use super::fmt::ellipsize;
use crate::tui::action::Action;
use crate::tui::state::AppState;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use unicode_width::UnicodeWidthStr;

/// Two actions that read as one entry (`k up/j down  previous / next`).
const PAIRS: &[(Action, Action, &str)] = &[
    (Action::MoveUp, Action::MoveDown, "previous / next"),
    (Action::First, Action::Last, "first / last"),
    (
        Action::FocusNext,
        Action::FocusPrev,
        "focus next / previous",
    ),
    (
        Action::ScrollUp,
        Action::ScrollDown,
        "scroll back / forward",
    ),
    (Action::Takeover, Action::Release, "type in / give back"),
];

/// The narrowest column worth having: keys, a space, a short description.
const MIN_COLUMN: u16 = 36;
const GAP: u16 = 2;

/// One row of the help: its keys and what they do.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    keys: String,
    text: &'static str,
}

/// A section as it is drawn: its title and entries.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Section {
    title: String,
    entries: Vec<Entry>,
}

fn sections(state: &AppState, ui: &UiContext) -> Vec<Section> {
    let keys = |a: Action| -> String {
        let k = ui.keymap.keys_for(a);
        k.iter().take(2).cloned().collect::<Vec<_>>().join(" ")
    };
    crate::tui::views::help_sections(state.view)
        .into_iter()
        .map(|(title, actions)| {
            let mut entries = Vec::new();
            let mut i = 0;
            while i < actions.len() {
                let a = actions[i];
                let pair = actions.get(i + 1).and_then(|&b| {
                    PAIRS
                        .iter()
                        .find(|(x, y, _)| *x == a && *y == b)
                        .map(|(_, _, text)| (b, *text))
                });
                match pair {
                    Some((b, text)) if !keys(a).is_empty() && !keys(b).is_empty() => {
                        entries.push(Entry {
                            keys: format!("{}/{}", keys(a), keys(b)),
                            text,
                        });
                        i += 2;
                    }
                    _ => {
                        if !keys(a).is_empty() {
                            entries.push(Entry {
                                keys: keys(a),
                                text: a.describe(),
                            });
                        }
                        i += 1;
                    }
                }
            }
            Section { title, entries }
        })
        .filter(|s| !s.entries.is_empty())
        .collect()
}

/// The lines of `s` in a column `width` wide: the title, then each entry, its keys padded to
/// the section's widest, its description wrapped under itself when it does not fit.
fn section_lines(s: &Section, width: u16) -> Vec<(String, String)> {
    let key_w = s
        .entries
        .iter()
        .map(|e| e.keys.width())
        .max()
        .unwrap_or(1)
        .min(20);
    let mut out = vec![(String::new(), s.title.clone())];
    let desc_w = usize::from(width).saturating_sub(key_w + 1).max(8);
    for e in &s.entries {
        let mut first = true;
        for line in wrap(e.text, desc_w) {
            let keys = if first { e.keys.as_str() } else { "" };
            out.push((format!("{keys:<key_w$} "), line));
            first = false;
        }
    }
    out
}

/// `text` in lines of at most `width` cells, broken between words (a word longer than the
/// width is cut with `…`).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut cur = String::new();
    for word in text.split(' ') {
        let next = if cur.is_empty() {
            word.to_string()
        } else {
            format!("{cur} {word}")
        };
        if next.width() <= width || cur.is_empty() {
            cur = next;
        } else {
            lines.push(std::mem::take(&mut cur));
            cur = word.to_string();
        }
    }
    lines.push(cur);
    lines.into_iter().map(|l| ellipsize(&l, width)).collect()
}

/// Sections spread over at most `columns` columns in order, a section never split, the
/// tallest column as short as can be (a blank line between sections). Returns the columns'
/// section indexes. There are a handful of sections: every split is tried.
fn spread(heights: &[usize], columns: usize) -> Vec<Vec<usize>> {
    fn height(hs: &[usize]) -> usize {
        hs.iter().sum::<usize>() + hs.len().saturating_sub(1)
    }
    fn best(heights: &[usize], start: usize, columns: usize) -> (usize, Vec<usize>) {
        if columns <= 1 || start >= heights.len() {
            return (height(&heights[start..]), Vec::new());
        }
        let mut found = (height(&heights[start..]), Vec::new());
        for cut in start + 1..heights.len() {
            let (rest, mut cuts) = best(heights, cut, columns - 1);
            let tallest = height(&heights[start..cut]).max(rest);
            if tallest < found.0 {
                cuts.insert(0, cut);
                found = (tallest, cuts);
            }
        }
        found
    }
    let (_, cuts) = best(heights, 0, columns.max(1));
    let mut out = Vec::new();
    let mut from = 0;
    for cut in cuts.into_iter().chain(std::iter::once(heights.len())) {
        out.push((from..cut).collect());
        from = cut;
    }
    out
}

pub(super) fn render(frame: &mut Frame, area: Rect, state: &AppState, ui: &UiContext) {
    let theme = ui.theme;
    let sections = sections(state, ui);
    let inner_w = area.width.saturating_sub(2);
    let inner_h = usize::from(area.height.saturating_sub(2));
    let most = usize::from((inner_w + GAP) / (MIN_COLUMN + GAP)).clamp(1, 4);
    // As few columns as the height needs (wider columns wrap less), as many as fit at most.
    let mut layout = None;
    for columns in 1..=most {
        let col_w = (inner_w + GAP) / columns as u16 - GAP;
        let lines: Vec<Vec<(String, String)>> =
            sections.iter().map(|s| section_lines(s, col_w)).collect();
        let heights: Vec<usize> = lines.iter().map(Vec::len).collect();
        let cols = spread(&heights, columns);
        let tallest = cols
            .iter()
            .map(|c| {
                c.iter()
                    .map(|&i| heights[i] + 1)
                    .sum::<usize>()
                    .saturating_sub(1)
            })
            .max()
            .unwrap_or(0);
        let fits = tallest <= inner_h;
        if fits || columns == most {
            layout = Some((columns, col_w, lines, cols, tallest));
            if fits {
                break;
            }
        }
    }
    let Some((columns, col_w, lines, cols, tallest)) = layout else {
        return;
    };
    let widest = lines
        .iter()
        .flatten()
        .map(|(k, d)| k.width() + d.width())
        .max()
        .unwrap_or(0) as u16;
    let w = if columns == 1 {
        (widest + 2).max(40).min(area.width)
    } else {
        area.width
    };
    let h = (tallest as u16).saturating_add(2).min(area.height);
    let rect = super::geometry::centred(area, w, h);
    frame.render_widget(Clear, rect);
    let release = ui.keymap.keys_for(Action::Release).join(" ");
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(theme.title())
        .title(Span::styled(
            ellipsize(
                &format!(" Help: {} view (any key closes) ", state.view.title()),
                usize::from(rect.width.saturating_sub(2)),
            ),
            theme.title(),
        ))
        .title_bottom(Line::styled(
            ellipsize(
                &format!(" takeover: every key goes to the agent; {release} returns "),
                usize::from(rect.width.saturating_sub(2)),
            ),
            theme.dim(),
        ));
    let inner = block.inner(rect);
    frame.render_widget(block, rect);
    for (c, sections_in) in cols.iter().enumerate() {
        let x = inner.x + c as u16 * (col_w + GAP);
        let width = if columns == 1 { inner.width } else { col_w };
        let mut text: Vec<Line> = Vec::new();
        for (n, &i) in sections_in.iter().enumerate() {
            if n > 0 {
                text.push(Line::raw(""));
            }
            for (k, (keys, desc)) in lines[i].iter().enumerate() {
                if k == 0 {
                    text.push(Line::styled(desc.clone(), theme.title()));
                } else {
                    text.push(Line::from(vec![
                        Span::styled(keys.clone(), theme.key()),
                        Span::raw(desc.clone()),
                    ]));
                }
            }
        }
        frame.render_widget(
            Paragraph::new(text),
            Rect::new(
                x,
                inner.y,
                width.min(inner.x + inner.width - x),
                inner.height,
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_instead_of_being_cut() {
        assert_eq!(
            wrap("approve the whole inbox", 12),
            ["approve the", "whole inbox"]
        );
        assert_eq!(wrap("short", 12), ["short"]);
    }

    #[test]
    fn sections_spread_in_order_without_splitting() {
        assert_eq!(spread(&[8, 12, 6, 8, 4], 2), [vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(spread(&[10, 12, 6, 8, 4], 2), [vec![0, 1], vec![2, 3, 4]]);
        assert_eq!(spread(&[3, 3, 3], 3), [vec![0], vec![1], vec![2]]);
        assert_eq!(spread(&[8, 12, 6, 8, 4], 1), [vec![0, 1, 2, 3, 4]]);
    }
}
