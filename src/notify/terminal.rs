//! The terminal's own notification escapes. OSC 9 (iTerm2, WezTerm, Windows Terminal, kitty,
//! foot, Ghostty…) carries one text; OSC 777 (rxvt-unicode, and others that took it up) carries a
//! title and a body. Inside tmux the escape is wrapped in a DCS passthrough so it reaches the
//! outer terminal (tmux needs `allow-passthrough on` for that; without it the wrapper is
//! dropped harmlessly). Text is stripped of control characters: task ids and messages come from
//! plan files and agents, and must never smuggle in escapes of their own.

use super::Notice;

/// Whether the terminal wants OSC 777 rather than OSC 9, from `TERM` and `TERM_PROGRAM`.
pub(crate) fn prefers_osc777(term: &str, term_program: &str) -> bool {
    term.starts_with("rxvt") || term_program.eq_ignore_ascii_case("urxvt")
}

/// The escape for `notice`, wrapped for tmux when `tmux`.
pub(crate) fn notification(notice: &Notice, osc777: bool, tmux: bool) -> Vec<u8> {
    let title = clean(&notice.title);
    let body = clean(&notice.body);
    let seq = if osc777 {
        // `;` separates the fields of OSC 777.
        format!(
            "\x1b]777;notify;{};{}\x07",
            title.replace(';', ","),
            body.replace(';', ",")
        )
    } else {
        // ConEmu reads `OSC 9 ; <digit>` as a command: the text never starts with a digit
        // because titles start with "whilly".
        format!("\x1b]9;{title}: {body}\x07")
    };
    if tmux { tmux_wrap(&seq) } else { seq }.into_bytes()
}

/// DCS passthrough: `ESC P tmux; <escape with every ESC doubled> ESC \`.
fn tmux_wrap(seq: &str) -> String {
    format!("\x1bPtmux;{}\x1b\\", seq.replace('\x1b', "\x1b\x1b"))
}

/// Printable text only, bounded: control characters (ESC, BEL, C1) become spaces.
fn clean(text: &str) -> String {
    const MAX: usize = 200;
    let mut out: String = text
        .chars()
        .map(|c| {
            if c.is_control() || ('\u{80}'..='\u{9f}').contains(&c) {
                ' '
            } else {
                c
            }
        })
        .take(MAX)
        .collect();
    if text.chars().count() > MAX {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notify::NoticeKind;

    fn n(title: &str, body: &str) -> Notice {
        Notice {
            kind: NoticeKind::PlanFinished,
            title: title.into(),
            body: body.into(),
        }
    }

    #[test]
    fn osc9_and_osc777() {
        let x = n("whilly: p", "all done");
        assert_eq!(
            notification(&x, false, false),
            b"\x1b]9;whilly: p: all done\x07"
        );
        assert_eq!(
            notification(&x, true, false),
            b"\x1b]777;notify;whilly: p;all done\x07"
        );
    }

    #[test]
    fn tmux_passthrough_doubles_escapes() {
        let x = n("whilly", "b");
        let out = String::from_utf8(notification(&x, false, true)).unwrap();
        assert_eq!(out, "\x1bPtmux;\x1b\x1b]9;whilly: b\x07\x1b\\");
    }

    #[test]
    fn hostile_text_cannot_inject_escapes() {
        let x = n("whilly", "T\x1b]0;pwned\x07\u{9b}31m;x");
        let out = notification(&x, true, false);
        let text = String::from_utf8(out).unwrap();
        // Exactly one ESC (the opener) and one BEL (the terminator).
        assert_eq!(text.matches('\x1b').count(), 1, "{text:?}");
        assert_eq!(text.matches('\x07').count(), 1, "{text:?}");
        assert!(!text.contains('\u{9b}'));
        // OSC 777 fields cannot be split by the body.
        assert_eq!(text.matches(';').count(), 3, "{text:?}");
    }

    #[test]
    fn long_text_is_bounded() {
        let x = n("whilly", &"x".repeat(5000));
        assert!(notification(&x, false, false).len() < 300);
    }

    #[test]
    fn term_detection() {
        assert!(prefers_osc777("rxvt-unicode-256color", ""));
        assert!(!prefers_osc777("xterm-256color", "iTerm.app"));
        assert!(!prefers_osc777("tmux-256color", ""));
    }
}
