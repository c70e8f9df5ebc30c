//! Small text formatters shared by the views.

use crate::domain::Usd;
use ratatui::text::Span;
use std::time::Duration;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `text` cut to `width` terminal cells, its end replaced by `…` when it had to be cut: a
/// reader sees that something is missing.
pub(super) fn ellipsize(text: &str, width: usize) -> String {
    if text.width() <= width {
        return text.to_string();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > width - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    out
}

/// One part of a line that gives way when the line is too narrow: its full form, a shorter
/// form (or none), and its rank (higher ranks give way first; rank 0 always stays).
pub(super) struct Part<'a> {
    pub full: Vec<Span<'a>>,
    pub short: Option<Vec<Span<'a>>>,
    pub rank: u8,
}

/// The parts that fit in `width` cells: rank by rank from the highest, parts take their shorter
/// form and then leave; whatever still overflows (rank 0) is cut by the renderer.
pub(super) fn fit_parts<'a>(
    mut parts: Vec<Part<'a>>,
    sep: Span<'a>,
    width: usize,
) -> Vec<Span<'a>> {
    let mut shown = vec![true; parts.len()];
    let total = |parts: &[Part], shown: &[bool]| {
        let widths: Vec<usize> = parts
            .iter()
            .zip(shown)
            .filter(|(_, s)| **s)
            .map(|(p, _)| p.full.iter().map(Span::width).sum())
            .collect();
        widths.iter().sum::<usize>() + sep.width() * widths.len().saturating_sub(1)
    };
    let max_rank = parts.iter().map(|p| p.rank).max().unwrap_or(0);
    // Highest rank first: its parts take their shorter form, and leave if that is not enough.
    for rank in (0..=max_rank).rev() {
        if total(&parts, &shown) <= width {
            break;
        }
        for p in parts.iter_mut().filter(|p| p.rank == rank) {
            if let Some(short) = p.short.take() {
                p.full = short;
            }
        }
        if rank > 0 && total(&parts, &shown) > width {
            for (p, s) in parts.iter().zip(shown.iter_mut()) {
                if p.rank == rank {
                    *s = false;
                }
            }
        }
    }
    let mut out = Vec::new();
    for (i, p) in parts
        .into_iter()
        .zip(shown)
        .filter(|(_, s)| *s)
        .map(|(p, _)| p)
        .enumerate()
    {
        if i > 0 {
            out.push(sep.clone());
        }
        out.extend(p.full);
    }
    out
}

/// `mm:ss`, or `h:mm:ss` from an hour on.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// `$1.23` (four decimals under a cent, as `Usd` prints).
pub fn money(u: Usd) -> String {
    u.to_string()
}

/// A rough duration: `45s`, `12m`, `3h 20m`, `5d`.
pub(super) fn rough(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s / 60 % 60),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(clock(Duration::from_secs(65)), "01:05");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
        assert_eq!(rough(Duration::from_secs(7300)), "2h 1m");
    }

    #[test]
    fn ellipsis_marks_a_cut_and_counts_cells() {
        assert_eq!(ellipsize("quit (asks first)", 10), "quit (ask…");
        assert_eq!(ellipsize("short", 10), "short");
        assert_eq!(ellipsize("日本語テキスト", 7), "日本語…");
        assert_eq!(ellipsize("abc", 0), "");
    }

    #[test]
    fn parts_shorten_then_give_way_by_rank() {
        let part = |full: &'static str, short: Option<&'static str>, rank| Part {
            full: vec![Span::raw(full)],
            short: short.map(|s| vec![Span::raw(s)]),
            rank,
        };
        let text = |spans: Vec<Span>| {
            spans
                .iter()
                .map(|s| s.content.to_string())
                .collect::<String>()
        };
        let parts = || {
            vec![
                part("whilly demo", None, 0),
                part("done 1 pend 2", Some("d1 p2"), 1),
                part("01:05", None, 2),
                part("sqlite", None, 3),
            ]
        };
        assert_eq!(
            text(fit_parts(parts(), Span::raw(" · "), 80)),
            "whilly demo · done 1 pend 2 · 01:05 · sqlite"
        );
        // Too narrow for all: the highest rank leaves first, a lower one shortens before it
        // leaves.
        assert_eq!(
            text(fit_parts(parts(), Span::raw(" · "), 35)),
            "whilly demo · done 1 pend 2 · 01:05"
        );
        assert_eq!(
            text(fit_parts(parts(), Span::raw(" · "), 30)),
            "whilly demo · done 1 pend 2"
        );
        assert_eq!(
            text(fit_parts(parts(), Span::raw(" · "), 20)),
            "whilly demo · d1 p2"
        );
        assert_eq!(text(fit_parts(parts(), Span::raw(" · "), 5)), "whilly demo");
    }
}
