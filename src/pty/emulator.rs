//! The terminal emulator behind one small interface, so vt100 can be swapped later. The only
//! vt100 type that leaks out is `vt100::Screen`, because tui-term's widget renders from it.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

use super::keys::{InputModes, MouseEncoding, MouseMode};
use super::queries::Responder;
use super::spec::TermSize;

/// A screen plus scrollback fed with a child's raw output; answers the child's terminal queries.
pub struct Emulator {
    parser: vt100::Parser<Responder>,
    scrollback: usize,
    /// How many times a vt100 panic forced a rebuild (for diagnostics).
    rebuilds: u64,
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator")
            .field("size", &self.size())
            .field("scrollback", &self.scrollback)
            .field("rebuilds", &self.rebuilds)
            .finish_non_exhaustive()
    }
}

impl Emulator {
    pub fn new(size: TermSize, scrollback: usize) -> Self {
        let size = size.clamped();
        Self {
            parser: vt100::Parser::new_with_callbacks(
                size.rows,
                size.cols,
                scrollback,
                Responder::default(),
            ),
            scrollback,
            rebuilds: 0,
        }
    }

    /// Feeds child output; returns the replies owed to the child (empty when there were no
    /// queries). Sequences split across calls are reassembled by the parser.
    pub fn process(&mut self, bytes: &[u8]) -> Vec<u8> {
        let parser = &mut self.parser;
        if catch_unwind(AssertUnwindSafe(|| parser.process(bytes))).is_err() {
            tracing::warn!(
                len = bytes.len(),
                "vt100 panicked on child output; rebuilding the screen"
            );
            self.rebuild(self.size());
        }
        std::mem::take(&mut self.parser.callbacks_mut().replies)
    }

    /// Resizes the screen (clamped to 2×2). The normal screen reflows, as in tmux: its lines
    /// and scrollback are wrapped anew at the new width (see `reflow`). vt100 can panic on some
    /// shrinks (wide characters, one row or column); then the screen is rebuilt at the new size
    /// from what could be saved.
    pub fn resize(&mut self, size: TermSize) -> TermSize {
        let size = size.clamped();
        if size == self.size() {
            return size;
        }
        if !self.parser.screen().alternate_screen() && self.reflow(size) {
            return size;
        }
        let screen = self.parser.screen_mut();
        if catch_unwind(AssertUnwindSafe(|| screen.set_size(size.rows, size.cols))).is_err() {
            tracing::warn!(?size, "vt100 panicked on resize; rebuilding the screen");
            self.rebuild(size);
        }
        size
    }

    /// A fresh screen of `size` holding the old one's lines wrapped anew, with the child's
    /// modes, pen and cursor visibility, and the query state. False (nothing changed) if vt100
    /// panicked on the way.
    fn reflow(&mut self, size: TermSize) -> bool {
        let scrollback = self.scrollback;
        let old = &mut self.parser;
        let fresh = catch_unwind(AssertUnwindSafe(|| {
            let snap = super::reflow::snapshot(old.screen_mut());
            let screen = old.screen();
            let (modes, pen, hidden) = (
                screen.input_mode_formatted(),
                screen.attributes_formatted(),
                screen.hide_cursor(),
            );
            let mut fresh = vt100::Parser::new_with_callbacks(
                size.rows,
                size.cols,
                scrollback,
                Responder::default(),
            );
            fresh.process(&super::reflow::replay(&snap, size));
            fresh.process(&modes);
            fresh.process(&pen);
            if hidden {
                fresh.process(b"\x1b[?25l");
            }
            fresh
        }));
        match fresh {
            Ok(mut fresh) => {
                *fresh.callbacks_mut() = std::mem::take(self.parser.callbacks_mut());
                self.parser = fresh;
                true
            }
            Err(_) => {
                tracing::warn!(?size, "vt100 panicked while reflowing; resizing in place");
                false
            }
        }
    }

    fn rebuild(&mut self, size: TermSize) {
        self.rebuilds += 1;
        let old = &mut self.parser;
        let saved = catch_unwind(AssertUnwindSafe(|| {
            (
                old.screen().contents_formatted(),
                std::mem::take(old.callbacks_mut()),
            )
        }))
        .ok();
        let mut fresh = vt100::Parser::new_with_callbacks(
            size.rows,
            size.cols,
            self.scrollback,
            Responder::default(),
        );
        if let Some((formatted, callbacks)) = saved {
            if catch_unwind(AssertUnwindSafe(|| fresh.process(&formatted))).is_err() {
                fresh = vt100::Parser::new_with_callbacks(
                    size.rows,
                    size.cols,
                    self.scrollback,
                    Responder::default(),
                );
            }
            *fresh.callbacks_mut() = callbacks;
        }
        self.parser = fresh;
    }

    pub fn screen(&self) -> &vt100::Screen {
        self.parser.screen()
    }

    pub fn size(&self) -> TermSize {
        let (rows, cols) = self.parser.screen().size();
        TermSize { rows, cols }
    }

    /// The visible screen as text: trailing spaces and trailing empty lines removed.
    pub fn screen_text(&self) -> String {
        let screen = self.parser.screen();
        let (_, cols) = screen.size();
        join_trimmed(screen.rows(0, cols))
    }

    /// Up to `max_lines` of scrollback followed by the visible screen (the last `max_lines`
    /// lines of the whole), as text. The scrollback offset is left as it was.
    pub fn contents_with_scrollback(&mut self, max_lines: usize) -> String {
        let screen = self.parser.screen_mut();
        let (rows, cols) = screen.size();
        let rows = usize::from(rows);
        let saved = screen.scrollback();
        screen.set_scrollback(usize::MAX);
        let stored = screen.scrollback();
        let total = stored + rows;
        let mut index = total.saturating_sub(max_lines);
        let mut lines = Vec::with_capacity(total - index);
        // With offset o the view shows lines [stored - o, stored - o + rows) of scrollback+screen.
        while index < total {
            let (offset, skip) = if index < stored {
                (stored - index, 0)
            } else {
                (0, index - stored)
            };
            screen.set_scrollback(offset);
            let before = lines.len();
            lines.extend(screen.rows(0, cols).skip(skip).take(total - index));
            let got = lines.len() - before;
            if got == 0 {
                break;
            }
            index += got;
        }
        screen.set_scrollback(saved);
        join_trimmed(lines.into_iter())
    }

    /// Cursor position, 0-based (row, col).
    pub fn cursor_position(&self) -> (u16, u16) {
        self.parser.screen().cursor_position()
    }

    pub fn hide_cursor(&self) -> bool {
        self.parser.screen().hide_cursor()
    }

    /// The window title last set with OSC 0 or OSC 2.
    pub fn title(&self) -> &str {
        &self.parser.callbacks().title
    }

    pub fn alternate_screen(&self) -> bool {
        self.parser.screen().alternate_screen()
    }

    /// True while the child is inside a synchronized-output block (mode 2026): a renderer should
    /// hold the pane's repaint until it ends (with a timeout, see `sync_output_since`).
    pub fn sync_output_active(&self) -> bool {
        self.parser.callbacks().sync_since.is_some()
    }

    pub fn sync_output_since(&self) -> Option<Instant> {
        self.parser.callbacks().sync_since
    }

    /// Audible bells seen so far (a hint that an agent wants attention).
    pub fn bells(&self) -> u64 {
        self.parser.callbacks().bells
    }

    pub fn queries_answered(&self) -> u64 {
        self.parser.callbacks().queries_answered
    }

    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    pub fn input_modes(&self) -> InputModes {
        let screen = self.parser.screen();
        InputModes {
            application_cursor: screen.application_cursor(),
            application_keypad: screen.application_keypad(),
            bracketed_paste: screen.bracketed_paste(),
            focus_events: self.parser.callbacks().focus_events,
            mouse_mode: match screen.mouse_protocol_mode() {
                vt100::MouseProtocolMode::None => MouseMode::None,
                vt100::MouseProtocolMode::Press => MouseMode::Press,
                vt100::MouseProtocolMode::PressRelease => MouseMode::PressRelease,
                vt100::MouseProtocolMode::ButtonMotion => MouseMode::ButtonMotion,
                vt100::MouseProtocolMode::AnyMotion => MouseMode::AnyMotion,
            },
            mouse_encoding: match screen.mouse_protocol_encoding() {
                vt100::MouseProtocolEncoding::Default => MouseEncoding::Default,
                vt100::MouseProtocolEncoding::Utf8 => MouseEncoding::Utf8,
                vt100::MouseProtocolEncoding::Sgr => MouseEncoding::Sgr,
            },
        }
    }

    /// Scrolls the view `rows` lines back into the scrollback (0 = live screen); clamped to the
    /// scrollback held. Returns the offset actually applied.
    pub fn set_scrollback_offset(&mut self, rows: usize) -> usize {
        let screen = self.parser.screen_mut();
        screen.set_scrollback(rows);
        screen.scrollback()
    }

    pub fn scrollback_offset(&self) -> usize {
        self.parser.screen().scrollback()
    }

    /// Lines currently held in scrollback (the largest useful offset).
    pub fn scrollback_len(&mut self) -> usize {
        let screen = self.parser.screen_mut();
        let saved = screen.scrollback();
        screen.set_scrollback(usize::MAX);
        let len = screen.scrollback();
        screen.set_scrollback(saved);
        len
    }
}

fn join_trimmed(rows: impl Iterator<Item = String>) -> String {
    let mut lines: Vec<String> = rows.map(|r| r.trim_end().to_string()).collect();
    while lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn emu() -> Emulator {
        Emulator::new(TermSize::new(24, 80), 100)
    }

    #[test]
    fn cursor_position_report_uses_the_cursor_at_query_time() {
        let mut e = emu();
        assert_eq!(e.process(b"\x1b[5;10Hab\x1b[6n"), b"\x1b[5;12R");
        assert_eq!(e.process(b"\x1b[H\x1b[6n"), b"\x1b[1;1R");
        assert_eq!(e.process(b"\x1b[?6n"), b"\x1b[?1;1R");
    }

    #[test]
    fn a_query_split_across_reads_is_answered_once() {
        let mut e = emu();
        assert!(e.process(b"hello\x1b[").is_empty());
        assert_eq!(e.process(b"6n"), b"\x1b[1;6R");
        assert!(e.process(b"\x1b]11;").is_empty());
        assert_eq!(e.process(b"?\x07"), b"\x1b]11;rgb:0000/0000/0000\x1b\\");
    }

    #[test]
    fn status_and_device_attributes() {
        let mut e = emu();
        assert_eq!(e.process(b"\x1b[5n"), b"\x1b[0n");
        assert_eq!(e.process(b"\x1b[c"), b"\x1b[?62;22c");
        assert_eq!(e.process(b"\x1b[0c"), b"\x1b[?62;22c");
        assert_eq!(e.process(b"\x1b[>c"), b"\x1b[>1;10;0c");
        let xt = e.process(b"\x1b[>q");
        assert!(
            xt.starts_with(b"\x1bP>|whilly ") && xt.ends_with(b"\x1b\\"),
            "{xt:?}"
        );
        assert_eq!(e.queries_answered(), 5);
    }

    #[test]
    fn kitty_keyboard_query_gets_no_answer_but_da1_does() {
        let mut e = emu();
        assert_eq!(e.process(b"\x1b[?u\x1b[c"), b"\x1b[?62;22c");
    }

    #[test]
    fn osc_colour_queries() {
        let mut e = emu();
        assert_eq!(
            e.process(b"\x1b]10;?\x1b\\"),
            b"\x1b]10;rgb:d0d0/d0d0/d0d0\x1b\\"
        );
        assert_eq!(
            e.process(b"\x1b]11;?\x07"),
            b"\x1b]11;rgb:0000/0000/0000\x1b\\"
        );
        // Setting a colour is not a query.
        assert!(e.process(b"\x1b]11;rgb:ff/ff/ff\x07").is_empty());
    }

    #[test]
    fn synchronized_output_is_tracked_and_reported() {
        let mut e = emu();
        assert_eq!(e.process(b"\x1b[?2026$p"), b"\x1b[?2026;2$y");
        e.process(b"\x1b[?2026h");
        assert!(e.sync_output_active());
        assert_eq!(e.process(b"\x1b[?2026$p"), b"\x1b[?2026;1$y");
        e.process(b"\x1b[?2026l");
        assert!(!e.sync_output_active());
        // Unknown modes are "not recognised"; known ones report their state.
        assert_eq!(e.process(b"\x1b[?9999$p"), b"\x1b[?9999;0$y");
        e.process(b"\x1b[?2004h");
        assert_eq!(e.process(b"\x1b[?2004$p"), b"\x1b[?2004;1$y");
    }

    #[test]
    fn modes_title_and_focus() {
        let mut e = emu();
        e.process(b"\x1b]0;agent one\x07\x1b[?1h\x1b[?2004h\x1b[?1004h\x1b[?1002h\x1b[?1006h");
        assert_eq!(e.title(), "agent one");
        let m = e.input_modes();
        assert!(m.application_cursor && m.bracketed_paste && m.focus_events);
        assert_eq!(m.mouse_mode, MouseMode::ButtonMotion);
        assert_eq!(m.mouse_encoding, MouseEncoding::Sgr);
        e.process(b"\x1b]2;second\x1b\\\x1b[?1004l\x1b[?1l");
        assert_eq!(e.title(), "second");
        assert!(!e.input_modes().focus_events && !e.input_modes().application_cursor);
    }

    #[test]
    fn window_size_reports() {
        let mut e = emu();
        assert_eq!(e.process(b"\x1b[18t"), b"\x1b[8;24;80t");
        e.resize(TermSize::new(10, 40));
        assert_eq!(e.process(b"\x1b[18t"), b"\x1b[8;10;40t");
    }

    #[test]
    fn screen_text_and_scrollback() {
        let mut e = Emulator::new(TermSize::new(3, 20), 100);
        for i in 1..=10 {
            e.process(format!("line {i}\r\n").as_bytes());
        }
        assert_eq!(e.screen_text(), "line 9\nline 10");
        assert_eq!(e.scrollback_len(), 8);
        assert_eq!(e.contents_with_scrollback(4), "line 8\nline 9\nline 10");
        let all = e.contents_with_scrollback(1000);
        assert!(
            all.starts_with("line 1\nline 2\n") && all.ends_with("line 10"),
            "{all}"
        );
        assert_eq!(all.lines().count(), 10);
        assert_eq!(e.set_scrollback_offset(2), 2);
        assert_eq!(e.screen_text(), "line 7\nline 8\nline 9");
        // Reading scrollback does not move the view.
        let _ = e.contents_with_scrollback(1000);
        assert_eq!(e.scrollback_offset(), 2);
        assert_eq!(e.set_scrollback_offset(10_000), 8);
        e.set_scrollback_offset(0);
    }

    #[test]
    fn resize_clamps_and_survives_odd_shrinks() {
        let mut e = emu();
        e.process(
            "日本語の文字 wide characters everywhere 日本語\r\n"
                .repeat(30)
                .as_bytes(),
        );
        for (r, c) in [(1, 1), (0, 0), (5, 3), (2, 1), (40, 200), (3, 2)] {
            let applied = e.resize(TermSize::new(r, c));
            assert!(applied.rows >= 2 && applied.cols >= 2);
            assert_eq!(e.size(), applied);
            e.process("more 日本 text\r\n".as_bytes());
        }
    }
}
