//! Clickable links (OSC 8 hyperlinks) in the console: modern terminals open them on click, also
//! over SSH; others show the text, and the URL is printed beside it for them.
//!
//! ratatui measures a cell's symbol to lay text out, so escape sequences cannot go into the text
//! itself. After the frame is laid out, the cells that show the link's text get the sequence
//! wrapped around them in two-character chunks (each chunk's first cell carries it, the second
//! is skipped), which keeps every width right.

use ratatui::buffer::{Buffer, CellDiffOption};
use ratatui::layout::Rect;
use std::num::NonZeroU16;

/// Makes the `text` shown at (`x`, `y`) a link to `url`, if it is there in full.
pub(super) fn hyperlink(buf: &mut Buffer, area: Rect, x: u16, y: u16, text: &str, url: &str) {
    if y < area.y || y >= area.y.saturating_add(area.height) || !safe(url) {
        return;
    }
    let right = area.x.saturating_add(area.width);
    let chars: Vec<char> = text.chars().collect();
    if x.saturating_add(chars.len() as u16) > right {
        return;
    }
    // Only where the text really is (a narrower layout may have cut it).
    for (i, c) in chars.iter().enumerate() {
        let Some(cell) = buf.cell((x + i as u16, y)) else {
            return;
        };
        if cell.symbol() != c.to_string() {
            return;
        }
    }
    for (i, chunk) in chars.chunks(2).enumerate() {
        let cx = x + (i * 2) as u16;
        let shown: String = chunk.iter().collect();
        if let Some(cell) = buf.cell_mut((cx, y)) {
            cell.set_symbol(&format!("\x1b]8;;{url}\x1b\\{shown}\x1b]8;;\x1b\\"));
            // The sequence's own characters take no cells: the chunk's width is its text's.
            if let Some(w) = NonZeroU16::new(chunk.len() as u16) {
                cell.set_diff_option(CellDiffOption::ForcedWidth(w));
            }
        }
        if chunk.len() == 2
            && let Some(next) = buf.cell_mut((cx + 1, y))
        {
            next.set_diff_option(CellDiffOption::Skip);
        }
    }
}

/// A URL safe to put inside an escape sequence: printable ASCII, no ESC or BEL.
fn safe(url: &str) -> bool {
    (url.starts_with("https://") || url.starts_with("http://"))
        && url.chars().all(|c| c.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_link_wraps_the_cells_that_show_its_text() {
        let area = Rect::new(0, 0, 20, 1);
        let mut buf = Buffer::empty(area);
        buf.set_string(2, 0, "#42 x", ratatui::style::Style::default());
        hyperlink(
            &mut buf,
            area,
            2,
            0,
            "#42",
            "https://github.com/o/r/pull/42",
        );
        let first = buf.cell((2, 0)).unwrap().symbol().to_string();
        assert!(first.starts_with("\x1b]8;;https://github.com/o/r/pull/42\x1b\\#4"));
        assert_eq!(buf.cell((3, 0)).unwrap().diff_option, CellDiffOption::Skip);
        assert!(buf.cell((4, 0)).unwrap().symbol().contains('2'));
        // Text that is not there (cut by a narrow layout) gets no link.
        let mut other = Buffer::empty(area);
        hyperlink(&mut other, area, 2, 0, "#42", "https://x.y/1");
        assert_eq!(other.cell((2, 0)).unwrap().symbol(), " ");
        // Nothing that could end the sequence early.
        let mut evil = Buffer::empty(area);
        evil.set_string(0, 0, "ab", ratatui::style::Style::default());
        hyperlink(&mut evil, area, 0, 0, "ab", "https://x.y/\x1b]0;pwned");
        assert_eq!(evil.cell((0, 0)).unwrap().symbol(), "a");
    }
}
