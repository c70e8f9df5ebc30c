//! Terminal queries vt100 parses but does not answer, and the state it does not track (title,
//! synchronized output, focus reporting). vt100 hands them to these callbacks already parsed, so a
//! query split across two reads is reassembled by the parser itself.

use std::time::Instant;

/// What this terminal calls itself in XTVERSION replies.
pub(crate) const XTVERSION: &str = concat!("whilly ", env!("CARGO_PKG_VERSION"));

/// Colours reported for OSC 10/11 queries: a light grey on black, like most dark terminals.
pub(crate) const DEFAULT_FG_RGB: (u8, u8, u8) = (0xd0, 0xd0, 0xd0);
pub(crate) const DEFAULT_BG_RGB: (u8, u8, u8) = (0x00, 0x00, 0x00);

/// Mode numbers tracked here because vt100 ignores them.
const MODE_FOCUS: u16 = 1004;
const MODE_SYNC: u16 = 2026;

/// Callbacks given to vt100: collect replies and the state vt100 drops.
#[derive(Debug, Default)]
pub(crate) struct Responder {
    /// Replies not yet written to the child, in order.
    pub(crate) replies: Vec<u8>,
    pub(crate) title: String,
    pub(crate) icon_name: String,
    pub(crate) focus_events: bool,
    /// Set while the child is inside a `CSI ? 2026 h` … `CSI ? 2026 l` block.
    pub(crate) sync_since: Option<Instant>,
    pub(crate) bells: u64,
    pub(crate) queries_answered: u64,
}

fn first(params: &[&[u16]], i: usize) -> Option<u16> {
    params.get(i).and_then(|p| p.first()).copied()
}

fn osc_colour(code: &[u8], (r, g, b): (u8, u8, u8)) -> Vec<u8> {
    // 16-bit per channel, as xterm reports it.
    let mut out = b"\x1b]".to_vec();
    out.extend_from_slice(code);
    out.extend_from_slice(
        format!(";rgb:{r:02x}{r:02x}/{g:02x}{g:02x}/{b:02x}{b:02x}\x1b\\").as_bytes(),
    );
    out
}

impl Responder {
    fn reply(&mut self, bytes: &[u8]) {
        self.replies.extend_from_slice(bytes);
        self.queries_answered += 1;
    }

    /// DECRQM for a private mode: 1 = set, 2 = reset, 0 = not recognised.
    fn private_mode_state(&self, screen: &vt100::Screen, mode: u16) -> u8 {
        let flag = |on: bool| if on { 1 } else { 2 };
        match mode {
            1 => flag(screen.application_cursor()),
            25 => flag(!screen.hide_cursor()),
            47 | 1047 | 1049 => flag(screen.alternate_screen()),
            9 => flag(screen.mouse_protocol_mode() == vt100::MouseProtocolMode::Press),
            1000 => flag(screen.mouse_protocol_mode() == vt100::MouseProtocolMode::PressRelease),
            1002 => flag(screen.mouse_protocol_mode() == vt100::MouseProtocolMode::ButtonMotion),
            1003 => flag(screen.mouse_protocol_mode() == vt100::MouseProtocolMode::AnyMotion),
            1005 => flag(screen.mouse_protocol_encoding() == vt100::MouseProtocolEncoding::Utf8),
            1006 => flag(screen.mouse_protocol_encoding() == vt100::MouseProtocolEncoding::Sgr),
            MODE_FOCUS => flag(self.focus_events),
            2004 => flag(screen.bracketed_paste()),
            MODE_SYNC => flag(self.sync_since.is_some()),
            _ => 0,
        }
    }

    fn set_private_modes(&mut self, params: &[&[u16]], on: bool) {
        for p in params {
            match p.first().copied() {
                Some(MODE_FOCUS) => self.focus_events = on,
                Some(MODE_SYNC) => {
                    self.sync_since = match (on, self.sync_since) {
                        (true, Some(t)) => Some(t),
                        (true, None) => Some(Instant::now()),
                        (false, _) => None,
                    }
                }
                _ => {}
            }
        }
    }
}

impl vt100::Callbacks for Responder {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells += 1;
    }

    fn set_window_icon_name(&mut self, _: &mut vt100::Screen, icon_name: &[u8]) {
        self.icon_name = String::from_utf8_lossy(icon_name).into_owned();
    }

    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        self.title = String::from_utf8_lossy(title).into_owned();
    }

    fn unhandled_csi(
        &mut self,
        screen: &mut vt100::Screen,
        i1: Option<u8>,
        i2: Option<u8>,
        params: &[&[u16]],
        c: char,
    ) {
        match (i1, i2, c) {
            // DSR 5: status report.
            (None, None, 'n') if first(params, 0) == Some(5) => self.reply(b"\x1b[0n"),
            // DSR 6: cursor position (1-based), at the moment of the query.
            (None, None, 'n') if first(params, 0) == Some(6) => {
                let (row, col) = screen.cursor_position();
                self.reply(format!("\x1b[{};{}R", row + 1, col + 1).as_bytes());
            }
            // DECXCPR: the private variant of the cursor report.
            (Some(b'?'), None, 'n') if first(params, 0) == Some(6) => {
                let (row, col) = screen.cursor_position();
                self.reply(format!("\x1b[?{};{}R", row + 1, col + 1).as_bytes());
            }
            // DA1: a VT220 with ANSI colour.
            (None, None, 'c') if first(params, 0).unwrap_or(0) == 0 => self.reply(b"\x1b[?62;22c"),
            // DA2: terminal type 1 (VT220), firmware version 10.
            (Some(b'>'), None, 'c') if first(params, 0).unwrap_or(0) == 0 => {
                self.reply(b"\x1b[>1;10;0c");
            }
            // XTVERSION.
            (Some(b'>'), None, 'q') if first(params, 0).unwrap_or(0) == 0 => {
                self.reply(format!("\x1bP>|{XTVERSION}\x1b\\").as_bytes());
            }
            // DECRQM for private modes (`CSI ? Ps $ p`): synchronized output is supported.
            (Some(b'?'), Some(b'$'), 'p') => {
                let mode = first(params, 0).unwrap_or(0);
                let state = self.private_mode_state(screen, mode);
                self.reply(format!("\x1b[?{mode};{state}$y").as_bytes());
            }
            // DECRQM for ANSI modes: none are reported as recognised.
            (Some(b'$'), None, 'p') => {
                let mode = first(params, 0).unwrap_or(0);
                self.reply(format!("\x1b[{mode};0$y").as_bytes());
            }
            // Kitty keyboard query (`CSI ? u`): deliberately unanswered. The protocol's detection
            // is "ask for flags, then DA1; only DA1 answered means unsupported", and we do not
            // encode keys the kitty way, so answering (even with flags 0) would be a lie.
            (Some(b'?'), None, 'u') => {}
            // Window reports: text area size in cells (18) and in pixels (14, at 8×16 cells).
            (None, None, 't') if first(params, 0) == Some(18) => {
                let (rows, cols) = screen.size();
                self.reply(format!("\x1b[8;{rows};{cols}t").as_bytes());
            }
            (None, None, 't') if first(params, 0) == Some(14) => {
                let (rows, cols) = screen.size();
                self.reply(
                    format!("\x1b[4;{};{}t", u32::from(rows) * 16, u32::from(cols) * 8).as_bytes(),
                );
            }
            (Some(b'?'), None, 'h') => self.set_private_modes(params, true),
            (Some(b'?'), None, 'l') => self.set_private_modes(params, false),
            _ => {}
        }
    }

    fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
        match params {
            [b"10", b"?"] => {
                let r = osc_colour(b"10", DEFAULT_FG_RGB);
                self.reply(&r);
            }
            [b"11", b"?"] => {
                let r = osc_colour(b"11", DEFAULT_BG_RGB);
                self.reply(&r);
            }
            // Several colours asked at once (`OSC 10;?;? ST` asks fg then bg).
            [b"10", rest @ ..] if !rest.is_empty() && rest.iter().all(|p| *p == b"?") => {
                let mut r = osc_colour(b"10", DEFAULT_FG_RGB);
                if rest.len() > 1 {
                    r.extend(osc_colour(b"11", DEFAULT_BG_RGB));
                }
                self.reply(&r);
            }
            _ => {}
        }
    }
}
