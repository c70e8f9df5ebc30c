//! Panes reflow on resize as tmux does. vt100 cuts rows at the old width and never joins them
//! again, so a split or a zoom lost text for good. It does keep, per row, whether the text ran
//! on into the next one: from that the screen and its scrollback are read back as logical lines
//! (with their colours), and the lines are written again into a screen of the new size, which
//! wraps them anew. Like tmux, the cursor's line stays at the bottom when the lines fill the
//! screen and the content starts at the top when they do not; the alternate screen (full-screen
//! programs redraw themselves on SIGWINCH) is not reflowed.

use super::spec::TermSize;

/// How a run of text is drawn: the SGR state of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) struct Pen {
    fg: vt100::Color,
    bg: vt100::Color,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    inverse: bool,
}

/// One character cell of a logical line (a wide character is one glyph of width 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Glyph {
    text: String,
    wide: bool,
    pen: Pen,
}

impl Glyph {
    fn width(&self) -> usize {
        if self.wide { 2 } else { 1 }
    }

    fn is_blank(&self) -> bool {
        self.text.trim().is_empty() && self.pen == Pen::default()
    }
}

/// The normal screen and its scrollback as logical lines, and where the cursor is among them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Snapshot {
    lines: Vec<Vec<Glyph>>,
    /// The logical line the cursor is on.
    cursor_line: usize,
    /// The cursor's column counted from the start of its logical line.
    cursor_col: usize,
}

/// Reads the screen with its scrollback as logical lines. The scrollback view is moved to read
/// the stored rows and put back to the live screen.
pub(super) fn snapshot(screen: &mut vt100::Screen) -> Snapshot {
    let (rows, cols) = screen.size();
    let (cursor_row, cursor_c) = screen.cursor_position();
    screen.set_scrollback(usize::MAX);
    let stored = screen.scrollback();
    let total = stored + usize::from(rows);
    let cursor_phys = stored + usize::from(cursor_row);
    let mut physical: Vec<(Vec<Glyph>, bool)> = Vec::with_capacity(total);
    let mut index = 0;
    // With offset o the view shows rows [stored - o, stored - o + rows) of scrollback + screen.
    while index < total {
        let (offset, skip) = if index < stored {
            (stored - index, 0)
        } else {
            (0, index - stored)
        };
        screen.set_scrollback(offset);
        let before = index;
        for r in skip..usize::from(rows) {
            if index >= total {
                break;
            }
            let r = u16::try_from(r).unwrap_or(u16::MAX);
            physical.push((row_glyphs(screen, r, cols), screen.row_wrapped(r)));
            index += 1;
        }
        if index == before {
            break;
        }
    }
    screen.set_scrollback(0);
    logical_lines(
        physical,
        cursor_phys,
        usize::from(cursor_c),
        usize::from(cols),
    )
}

fn row_glyphs(screen: &vt100::Screen, row: u16, cols: u16) -> Vec<Glyph> {
    (0..cols)
        .filter_map(|c| screen.cell(row, c))
        .filter(|cell| !cell.is_wide_continuation())
        .map(|cell| Glyph {
            text: if cell.has_contents() {
                cell.contents().to_string()
            } else {
                " ".to_string()
            },
            wide: cell.is_wide(),
            pen: Pen {
                fg: cell.fgcolor(),
                bg: cell.bgcolor(),
                bold: cell.bold(),
                dim: cell.dim(),
                italic: cell.italic(),
                underline: cell.underline(),
                inverse: cell.inverse(),
            },
        })
        .collect()
}

/// Joins physical rows (their glyphs, whether they wrapped) into logical lines. Rows that did
/// not wrap lose their trailing blanks; the cursor, at `cursor_col` of physical row
/// `cursor_phys`, becomes a column of its logical line. Empty lines after the cursor's go.
fn logical_lines(
    physical: Vec<(Vec<Glyph>, bool)>,
    cursor_phys: usize,
    cursor_col: usize,
    cols: usize,
) -> Snapshot {
    let mut snap = Snapshot::default();
    let mut line: Vec<Glyph> = Vec::new();
    // Columns of the current logical line in the rows before this one.
    let mut before = 0usize;
    let count = physical.len();
    for (i, (mut glyphs, wrapped)) in physical.into_iter().enumerate() {
        if i == cursor_phys {
            snap.cursor_line = snap.lines.len();
            snap.cursor_col = before + cursor_col;
        }
        if wrapped && i + 1 < count {
            before += cols;
            line.append(&mut glyphs);
            continue;
        }
        while glyphs.last().is_some_and(Glyph::is_blank) {
            glyphs.pop();
        }
        line.append(&mut glyphs);
        snap.lines.push(std::mem::take(&mut line));
        before = 0;
    }
    while snap.lines.len() > snap.cursor_line + 1 && snap.lines.last().is_some_and(Vec::is_empty) {
        snap.lines.pop();
    }
    snap
}

/// The bytes that draw `snap` into a fresh screen of `size`: the lines, then the cursor put
/// where it was in its line. The pen is left reset (the caller restores the child's).
pub(super) fn replay(snap: &Snapshot, size: TermSize) -> Vec<u8> {
    let cols = usize::from(size.cols.max(1));
    let mut out = Vec::new();
    let mut pen = Pen::default();
    let mut at = Layout::new(cols);
    let mut cursor = (0usize, 0usize);
    for (n, line) in snap.lines.iter().enumerate() {
        if n > 0 {
            out.extend_from_slice(b"\r\n");
            at.newline();
        }
        let mut col_in_line = 0usize;
        for g in line {
            if n == snap.cursor_line && col_in_line == snap.cursor_col {
                cursor = at.next_cell();
            }
            if g.pen != pen {
                write_sgr(&mut out, g.pen);
                pen = g.pen;
            }
            out.extend_from_slice(g.text.as_bytes());
            at.place(g.width());
            col_in_line += g.width();
        }
        if n == snap.cursor_line && snap.cursor_col >= col_in_line {
            cursor = at.advanced(snap.cursor_col - col_in_line);
        }
    }
    if pen != Pen::default() {
        out.extend_from_slice(b"\x1b[0m");
    }
    let top = (at.row + 1).saturating_sub(usize::from(size.rows));
    let row = cursor.0.saturating_sub(top).min(usize::from(size.rows) - 1);
    out.extend_from_slice(format!("\x1b[{};{}H", row + 1, cursor.1 + 1).as_bytes());
    out
}

/// Where text lands as a terminal wraps it: the row (from the first line written), the column,
/// and whether the last column was just filled (the next character goes to the next row).
struct Layout {
    cols: usize,
    row: usize,
    col: usize,
    pending: bool,
}

impl Layout {
    fn new(cols: usize) -> Self {
        Layout {
            cols,
            row: 0,
            col: 0,
            pending: false,
        }
    }

    fn place(&mut self, width: usize) {
        if self.pending || self.col + width > self.cols {
            self.row += 1;
            self.col = 0;
        }
        self.col += width;
        self.pending = self.col >= self.cols;
        if self.pending {
            self.col = self.cols - 1;
        }
    }

    fn newline(&mut self) {
        self.row += 1;
        self.col = 0;
        self.pending = false;
    }

    /// Where the next character of width 1 would go.
    fn next_cell(&self) -> (usize, usize) {
        if self.pending {
            (self.row + 1, 0)
        } else {
            (self.row, self.col)
        }
    }

    /// Where the cursor is `extra` columns past the end of the text.
    fn advanced(&self, extra: usize) -> (usize, usize) {
        let (row, col) = self.next_cell();
        let linear = col + extra;
        (row + linear / self.cols, linear % self.cols)
    }
}

fn write_sgr(out: &mut Vec<u8>, pen: Pen) {
    let mut codes: Vec<String> = vec!["0".into()];
    for (on, code) in [
        (pen.bold, "1"),
        (pen.dim, "2"),
        (pen.italic, "3"),
        (pen.underline, "4"),
        (pen.inverse, "7"),
    ] {
        if on {
            codes.push(code.into());
        }
    }
    color_codes(&mut codes, pen.fg, 30, 90, 38);
    color_codes(&mut codes, pen.bg, 40, 100, 48);
    out.extend_from_slice(format!("\x1b[{}m", codes.join(";")).as_bytes());
}

fn color_codes(codes: &mut Vec<String>, color: vt100::Color, base: u8, bright: u8, ext: u8) {
    match color {
        vt100::Color::Default => {}
        vt100::Color::Idx(i) if i < 8 => codes.push((base + i).to_string()),
        vt100::Color::Idx(i) if i < 16 => codes.push((bright + i - 8).to_string()),
        vt100::Color::Idx(i) => codes.push(format!("{ext};5;{i}")),
        vt100::Color::Rgb(r, g, b) => codes.push(format!("{ext};2;{r};{g};{b}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen_after(size: TermSize, bytes: &[u8]) -> vt100::Parser {
        let mut p = vt100::Parser::new(size.rows, size.cols, 1000);
        p.process(bytes);
        p
    }

    fn reflowed(p: &mut vt100::Parser, size: TermSize) -> vt100::Parser {
        let snap = snapshot(p.screen_mut());
        screen_after(size, &replay(&snap, size))
    }

    fn text(p: &vt100::Parser) -> Vec<String> {
        let (_, cols) = p.screen().size();
        p.screen()
            .rows(0, cols)
            .map(|r| r.trim_end().to_string())
            .collect()
    }

    #[test]
    fn narrowing_wraps_and_widening_joins_again() {
        let line = "the quick brown fox jumps over the lazy dog";
        let mut p = screen_after(TermSize::new(5, 20), format!("{line}\r\n$ ").as_bytes());
        let mut narrow = reflowed(&mut p, TermSize::new(5, 10));
        assert_eq!(
            text(&narrow),
            ["brown fox", "jumps over", " the lazy", "dog", "$"],
            "the cursor's line at the bottom, the start in the scrollback"
        );
        assert_eq!(narrow.screen().cursor_position(), (4, 2));
        let wide = reflowed(&mut narrow, TermSize::new(5, 60));
        assert_eq!(
            text(&wide),
            [line, "$", "", "", ""],
            "joined again, at the top"
        );
        assert_eq!(wide.screen().cursor_position(), (1, 2));
    }

    #[test]
    fn colours_and_wide_characters_survive() {
        let mut p = screen_after(
            TermSize::new(4, 8),
            "\x1b[31mred\x1b[0m 日本語です\r\n".as_bytes(),
        );
        let mut wide = reflowed(&mut p, TermSize::new(4, 30));
        assert_eq!(text(&wide)[0], "red 日本語です");
        let cell = wide.screen().cell(0, 0).expect("a cell");
        assert_eq!(cell.fgcolor(), vt100::Color::Idx(1));
        assert!(wide.screen().cell(0, 4).is_some_and(vt100::Cell::is_wide));
        let back = reflowed(&mut wide, TermSize::new(4, 8));
        assert_eq!(text(&back)[..2], ["red 日本", "語です"]);
    }

    #[test]
    fn a_cursor_past_the_text_keeps_its_column() {
        let mut p = screen_after(TermSize::new(3, 10), b"abc\r\n\x1b[5C");
        let q = reflowed(&mut p, TermSize::new(3, 20));
        assert_eq!(q.screen().cursor_position(), (1, 5));
    }
}
