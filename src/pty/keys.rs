//! Turning crossterm key, mouse, paste and focus events into the bytes a program in a terminal
//! expects (xterm conventions). Pure: the modes come from the emulator, nothing here does IO.

use crossterm::event::{
    KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};

/// Which mouse events the child asked for (DECSET 9 / 1000 / 1002 / 1003).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MouseMode {
    #[default]
    None,
    Press,
    PressRelease,
    ButtonMotion,
    AnyMotion,
}

/// How mouse reports are encoded (default X10 bytes, DECSET 1005 UTF-8, DECSET 1006 SGR).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MouseEncoding {
    #[default]
    Default,
    Utf8,
    Sgr,
}

/// The input-related modes the child has switched on; read from the emulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InputModes {
    /// DECCKM: arrows and Home/End as `ESC O x` instead of `ESC [ x`.
    pub application_cursor: bool,
    /// DECKPAM (kept for completeness; crossterm does not tell keypad keys apart).
    pub application_keypad: bool,
    /// Mode 2004: pastes wrapped in `ESC[200~ … ESC[201~`.
    pub bracketed_paste: bool,
    /// Mode 1004: focus in/out reported as `ESC[I` / `ESC[O`.
    pub focus_events: bool,
    pub mouse_mode: MouseMode,
    pub mouse_encoding: MouseEncoding,
}

const ESC: u8 = 0x1b;

/// xterm's modifier parameter: 1 + Shift(1) + Alt(2) + Ctrl(4). `None` when no modifier applies.
fn modifier_param(mods: KeyModifiers) -> Option<u8> {
    let mut m = 0;
    if mods.contains(KeyModifiers::SHIFT) {
        m += 1;
    }
    if mods.contains(KeyModifiers::ALT) {
        m += 2;
    }
    if mods.contains(KeyModifiers::CONTROL) {
        m += 4;
    }
    (m > 0).then_some(m + 1)
}

/// Keys whose unmodified form is `ESC [ x` or `ESC O x` (cursor keys, Home/End, F1–F4).
fn letter_key(letter: u8, mods: KeyModifiers, ss3: bool) -> Vec<u8> {
    match modifier_param(mods) {
        Some(m) => format!("\x1b[1;{m}{}", letter as char).into_bytes(),
        None if ss3 => vec![ESC, b'O', letter],
        None => vec![ESC, b'[', letter],
    }
}

/// Keys of the form `ESC [ n ~` (Insert, Delete, PageUp/Down, F5–F12).
fn tilde_key(n: u8, mods: KeyModifiers) -> Vec<u8> {
    match modifier_param(mods) {
        Some(m) => format!("\x1b[{n};{m}~").into_bytes(),
        None => format!("\x1b[{n}~").into_bytes(),
    }
}

/// The control byte for Ctrl+`c`, if the key has one.
fn ctrl_byte(c: char) -> Option<u8> {
    match c {
        'a'..='z' => Some(c as u8 - b'a' + 1),
        'A'..='Z' => Some(c as u8 - b'A' + 1),
        ' ' | '@' | '2' | '`' => Some(0),
        '[' | '3' => Some(0x1b),
        '\\' | '4' => Some(0x1c),
        ']' | '5' => Some(0x1d),
        '^' | '6' => Some(0x1e),
        '_' | '7' | '/' => Some(0x1f),
        '8' | '?' => Some(0x7f),
        _ => None,
    }
}

fn with_alt(alt: bool, mut bytes: Vec<u8>) -> Vec<u8> {
    if alt && !bytes.is_empty() {
        bytes.insert(0, ESC);
    }
    bytes
}

/// The bytes for a key press as xterm would send them. Releases (kitty protocol) send nothing;
/// keys without a terminal encoding (CapsLock, media keys, F13+) send nothing.
pub fn encode_key(key: KeyEvent, modes: &InputModes) -> Vec<u8> {
    if key.kind == KeyEventKind::Release {
        return Vec::new();
    }
    let mods = key.modifiers;
    let alt = mods.contains(KeyModifiers::ALT);
    let ctrl = mods.contains(KeyModifiers::CONTROL);
    let app = modes.application_cursor;
    match key.code {
        KeyCode::Char(c) => {
            let bytes = match ctrl.then(|| ctrl_byte(c)).flatten() {
                Some(b) => vec![b],
                None => c.to_string().into_bytes(),
            };
            with_alt(alt, bytes)
        }
        KeyCode::Enter => with_alt(alt, vec![b'\r']),
        KeyCode::Backspace => with_alt(alt, vec![if ctrl { 0x08 } else { 0x7f }]),
        KeyCode::Tab if mods.contains(KeyModifiers::SHIFT) => b"\x1b[Z".to_vec(),
        KeyCode::Tab => with_alt(alt, vec![b'\t']),
        KeyCode::BackTab => b"\x1b[Z".to_vec(),
        KeyCode::Esc => with_alt(alt, vec![ESC]),
        KeyCode::Null => with_alt(alt, vec![0]),
        KeyCode::Up => letter_key(b'A', mods, app),
        KeyCode::Down => letter_key(b'B', mods, app),
        KeyCode::Right => letter_key(b'C', mods, app),
        KeyCode::Left => letter_key(b'D', mods, app),
        KeyCode::Home => letter_key(b'H', mods, app),
        KeyCode::End => letter_key(b'F', mods, app),
        KeyCode::Insert => tilde_key(2, mods),
        KeyCode::Delete => tilde_key(3, mods),
        KeyCode::PageUp => tilde_key(5, mods),
        KeyCode::PageDown => tilde_key(6, mods),
        KeyCode::F(n @ 1..=4) => letter_key(b"PQRS"[usize::from(n - 1)], mods, true),
        KeyCode::F(n @ 5..=12) => {
            tilde_key([15, 17, 18, 19, 20, 21, 23, 24][usize::from(n - 5)], mods)
        }
        _ => Vec::new(),
    }
}

/// A paste: wrapped in bracketed-paste markers only when the child enabled mode 2004 (any end
/// marker inside the text is removed so a paste cannot end the bracket early). Without brackets,
/// line feeds become carriage returns, as if the lines were typed.
pub fn encode_paste(text: &str, modes: &InputModes) -> Vec<u8> {
    if modes.bracketed_paste {
        let mut out = b"\x1b[200~".to_vec();
        out.extend_from_slice(text.replace("\x1b[201~", "").as_bytes());
        out.extend_from_slice(b"\x1b[201~");
        out
    } else {
        text.replace("\r\n", "\r").replace('\n', "\r").into_bytes()
    }
}

/// Focus in/out, only when the child enabled mode 1004.
pub fn encode_focus(gained: bool, modes: &InputModes) -> Vec<u8> {
    match (modes.focus_events, gained) {
        (false, _) => Vec::new(),
        (true, true) => b"\x1b[I".to_vec(),
        (true, false) => b"\x1b[O".to_vec(),
    }
}

/// A mouse event, with `column`/`row` already relative to the pane (0-based). Nothing is sent
/// unless the child enabled a mouse mode that covers this kind of event.
pub fn encode_mouse(event: MouseEvent, modes: &InputModes) -> Vec<u8> {
    let button_code = |b: MouseButton| match b {
        MouseButton::Left => 0u32,
        MouseButton::Middle => 1,
        MouseButton::Right => 2,
    };
    // (code, is_release, allowed in this mode)
    let (code, release) = match event.kind {
        MouseEventKind::Down(b) => (button_code(b), false),
        MouseEventKind::Up(b) => (button_code(b), true),
        MouseEventKind::Drag(b) => (button_code(b) + 32, false),
        MouseEventKind::Moved => (3 + 32, false),
        MouseEventKind::ScrollUp => (64, false),
        MouseEventKind::ScrollDown => (65, false),
        MouseEventKind::ScrollLeft => (66, false),
        MouseEventKind::ScrollRight => (67, false),
    };
    let wanted = match modes.mouse_mode {
        MouseMode::None => false,
        MouseMode::Press => matches!(event.kind, MouseEventKind::Down(_)),
        MouseMode::PressRelease => {
            !matches!(event.kind, MouseEventKind::Drag(_) | MouseEventKind::Moved)
        }
        MouseMode::ButtonMotion => !matches!(event.kind, MouseEventKind::Moved),
        MouseMode::AnyMotion => true,
    };
    if !wanted {
        return Vec::new();
    }
    let mut code = code;
    if event.modifiers.contains(KeyModifiers::SHIFT) {
        code += 4;
    }
    if event.modifiers.contains(KeyModifiers::ALT) {
        code += 8;
    }
    if event.modifiers.contains(KeyModifiers::CONTROL) {
        code += 16;
    }
    let x = u32::from(event.column) + 1;
    let y = u32::from(event.row) + 1;
    match modes.mouse_encoding {
        MouseEncoding::Sgr => {
            format!("\x1b[<{code};{x};{y}{}", if release { 'm' } else { 'M' }).into_bytes()
        }
        MouseEncoding::Default | MouseEncoding::Utf8 => {
            // The legacy encodings cannot say which button was released.
            let code = if release { 3 + (code & !3) } else { code };
            let mut out = b"\x1b[M".to_vec();
            for v in [code + 32, x + 32, y + 32] {
                if modes.mouse_encoding == MouseEncoding::Utf8 {
                    match char::from_u32(v).filter(|_| v <= 2047 + 32) {
                        Some(c) => out.extend_from_slice(c.to_string().as_bytes()),
                        None => return Vec::new(),
                    }
                } else if v <= 255 {
                    out.push(v as u8);
                } else {
                    // Beyond column 223 the X10 encoding has no byte for it: send nothing.
                    return Vec::new();
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crossterm::event::{KeyEventState, MouseButton};

    fn key(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    fn enc(code: KeyCode, mods: KeyModifiers) -> Vec<u8> {
        encode_key(key(code, mods), &InputModes::default())
    }

    fn app() -> InputModes {
        InputModes {
            application_cursor: true,
            ..InputModes::default()
        }
    }

    const NONE: KeyModifiers = KeyModifiers::NONE;
    const SHIFT: KeyModifiers = KeyModifiers::SHIFT;
    const ALT: KeyModifiers = KeyModifiers::ALT;
    const CTRL: KeyModifiers = KeyModifiers::CONTROL;

    #[test]
    fn plain_characters_are_utf8() {
        assert_eq!(enc(KeyCode::Char('a'), NONE), b"a");
        assert_eq!(enc(KeyCode::Char('A'), SHIFT), b"A");
        assert_eq!(enc(KeyCode::Char('é'), NONE), "é".as_bytes());
        assert_eq!(enc(KeyCode::Char('日'), NONE), "日".as_bytes());
    }

    #[test]
    fn enter_backspace_tab_esc() {
        assert_eq!(enc(KeyCode::Enter, NONE), b"\r");
        assert_eq!(enc(KeyCode::Backspace, NONE), [0x7f]);
        assert_eq!(enc(KeyCode::Backspace, CTRL), [0x08]);
        assert_eq!(enc(KeyCode::Backspace, ALT), [0x1b, 0x7f]);
        assert_eq!(enc(KeyCode::Tab, NONE), b"\t");
        assert_eq!(enc(KeyCode::BackTab, SHIFT), b"\x1b[Z");
        assert_eq!(enc(KeyCode::Tab, SHIFT), b"\x1b[Z");
        assert_eq!(enc(KeyCode::Esc, NONE), [0x1b]);
        assert_eq!(enc(KeyCode::Enter, ALT), b"\x1b\r");
        assert_eq!(enc(KeyCode::Null, NONE), [0]);
    }

    #[test]
    fn arrows_follow_application_cursor_mode() {
        let normal = InputModes::default();
        for (code, letter) in [
            (KeyCode::Up, b'A'),
            (KeyCode::Down, b'B'),
            (KeyCode::Right, b'C'),
            (KeyCode::Left, b'D'),
        ] {
            assert_eq!(encode_key(key(code, NONE), &normal), [0x1b, b'[', letter]);
            assert_eq!(encode_key(key(code, NONE), &app()), [0x1b, b'O', letter]);
        }
        assert_eq!(encode_key(key(KeyCode::Home, NONE), &normal), b"\x1b[H");
        assert_eq!(encode_key(key(KeyCode::End, NONE), &normal), b"\x1b[F");
        assert_eq!(encode_key(key(KeyCode::Home, NONE), &app()), b"\x1bOH");
        assert_eq!(encode_key(key(KeyCode::End, NONE), &app()), b"\x1bOF");
    }

    #[test]
    fn modified_cursor_keys_use_csi_1_m() {
        assert_eq!(enc(KeyCode::Up, SHIFT), b"\x1b[1;2A");
        assert_eq!(enc(KeyCode::Down, ALT), b"\x1b[1;3B");
        assert_eq!(enc(KeyCode::Right, SHIFT | ALT), b"\x1b[1;4C");
        assert_eq!(enc(KeyCode::Left, CTRL), b"\x1b[1;5D");
        assert_eq!(enc(KeyCode::Left, CTRL | SHIFT), b"\x1b[1;6D");
        assert_eq!(enc(KeyCode::Home, CTRL | ALT), b"\x1b[1;7H");
        assert_eq!(enc(KeyCode::End, CTRL | ALT | SHIFT), b"\x1b[1;8F");
        // Modifiers win over application cursor mode, as in xterm.
        assert_eq!(encode_key(key(KeyCode::Up, CTRL), &app()), b"\x1b[1;5A");
    }

    #[test]
    fn tilde_keys() {
        assert_eq!(enc(KeyCode::Insert, NONE), b"\x1b[2~");
        assert_eq!(enc(KeyCode::Delete, NONE), b"\x1b[3~");
        assert_eq!(enc(KeyCode::PageUp, NONE), b"\x1b[5~");
        assert_eq!(enc(KeyCode::PageDown, NONE), b"\x1b[6~");
        assert_eq!(enc(KeyCode::Delete, CTRL), b"\x1b[3;5~");
        assert_eq!(enc(KeyCode::PageUp, SHIFT), b"\x1b[5;2~");
    }

    #[test]
    fn function_keys() {
        let expected: [&[u8]; 12] = [
            b"\x1bOP",
            b"\x1bOQ",
            b"\x1bOR",
            b"\x1bOS",
            b"\x1b[15~",
            b"\x1b[17~",
            b"\x1b[18~",
            b"\x1b[19~",
            b"\x1b[20~",
            b"\x1b[21~",
            b"\x1b[23~",
            b"\x1b[24~",
        ];
        for (i, want) in expected.iter().enumerate() {
            let n = u8::try_from(i + 1).unwrap_or(0);
            assert_eq!(enc(KeyCode::F(n), NONE), *want, "F{n}");
        }
        assert_eq!(enc(KeyCode::F(1), SHIFT), b"\x1b[1;2P");
        assert_eq!(enc(KeyCode::F(4), CTRL), b"\x1b[1;5S");
        assert_eq!(enc(KeyCode::F(5), CTRL), b"\x1b[15;5~");
        assert_eq!(enc(KeyCode::F(12), ALT), b"\x1b[24;3~");
        assert!(enc(KeyCode::F(13), NONE).is_empty());
        assert!(enc(KeyCode::F(0), NONE).is_empty());
    }

    #[test]
    fn ctrl_letters_and_symbols() {
        assert_eq!(enc(KeyCode::Char('a'), CTRL), [0x01]);
        assert_eq!(enc(KeyCode::Char('c'), CTRL), [0x03]);
        assert_eq!(enc(KeyCode::Char('z'), CTRL), [0x1a]);
        assert_eq!(enc(KeyCode::Char('C'), CTRL | SHIFT), [0x03]);
        assert_eq!(enc(KeyCode::Char(' '), CTRL), [0x00]);
        assert_eq!(enc(KeyCode::Char('@'), CTRL), [0x00]);
        assert_eq!(enc(KeyCode::Char('['), CTRL), [0x1b]);
        assert_eq!(enc(KeyCode::Char('\\'), CTRL), [0x1c]);
        assert_eq!(enc(KeyCode::Char(']'), CTRL), [0x1d]);
        assert_eq!(enc(KeyCode::Char('^'), CTRL), [0x1e]);
        assert_eq!(enc(KeyCode::Char('_'), CTRL), [0x1f]);
        assert_eq!(enc(KeyCode::Char('?'), CTRL), [0x7f]);
        // No control byte for this one: the character itself goes through.
        assert_eq!(enc(KeyCode::Char('.'), CTRL), b".");
    }

    #[test]
    fn alt_prefixes_escape() {
        assert_eq!(enc(KeyCode::Char('x'), ALT), b"\x1bx");
        assert_eq!(enc(KeyCode::Char('X'), ALT | SHIFT), b"\x1bX");
        assert_eq!(enc(KeyCode::Char('c'), CTRL | ALT), [0x1b, 0x03]);
        assert_eq!(enc(KeyCode::Esc, ALT), [0x1b, 0x1b]);
    }

    #[test]
    fn releases_and_unknown_keys_send_nothing() {
        let mut release = key(KeyCode::Char('a'), NONE);
        release.kind = KeyEventKind::Release;
        assert!(encode_key(release, &InputModes::default()).is_empty());
        let mut repeat = key(KeyCode::Char('a'), NONE);
        repeat.kind = KeyEventKind::Repeat;
        repeat.state = KeyEventState::NONE;
        assert_eq!(encode_key(repeat, &InputModes::default()), b"a");
        assert!(enc(KeyCode::CapsLock, NONE).is_empty());
    }

    #[test]
    fn paste_is_bracketed_only_when_enabled() {
        let plain = InputModes::default();
        assert_eq!(encode_paste("a\nb\r\nc", &plain), b"a\rb\rc");
        let bracketed = InputModes {
            bracketed_paste: true,
            ..InputModes::default()
        };
        assert_eq!(encode_paste("a\nb", &bracketed), b"\x1b[200~a\nb\x1b[201~");
        // An end marker inside the text cannot close the bracket early.
        assert_eq!(
            encode_paste("x\x1b[201~rm -rf", &bracketed),
            b"\x1b[200~xrm -rf\x1b[201~"
        );
    }

    #[test]
    fn focus_only_with_mode_1004() {
        assert!(encode_focus(true, &InputModes::default()).is_empty());
        let on = InputModes {
            focus_events: true,
            ..InputModes::default()
        };
        assert_eq!(encode_focus(true, &on), b"\x1b[I");
        assert_eq!(encode_focus(false, &on), b"\x1b[O");
    }

    fn mouse(kind: MouseEventKind, column: u16, row: u16, modifiers: KeyModifiers) -> MouseEvent {
        MouseEvent {
            kind,
            column,
            row,
            modifiers,
        }
    }

    #[test]
    fn mouse_needs_a_mode() {
        let ev = mouse(MouseEventKind::Down(MouseButton::Left), 0, 0, NONE);
        assert!(encode_mouse(ev, &InputModes::default()).is_empty());
    }

    #[test]
    fn mouse_sgr() {
        let modes = InputModes {
            mouse_mode: MouseMode::ButtonMotion,
            mouse_encoding: MouseEncoding::Sgr,
            ..InputModes::default()
        };
        let m = |kind, c, r, mods| encode_mouse(mouse(kind, c, r, mods), &modes);
        assert_eq!(
            m(MouseEventKind::Down(MouseButton::Left), 4, 9, NONE),
            b"\x1b[<0;5;10M"
        );
        assert_eq!(
            m(MouseEventKind::Up(MouseButton::Left), 4, 9, NONE),
            b"\x1b[<0;5;10m"
        );
        assert_eq!(
            m(MouseEventKind::Down(MouseButton::Right), 0, 0, NONE),
            b"\x1b[<2;1;1M"
        );
        assert_eq!(
            m(MouseEventKind::Drag(MouseButton::Left), 1, 1, NONE),
            b"\x1b[<32;2;2M"
        );
        assert_eq!(m(MouseEventKind::ScrollUp, 0, 0, NONE), b"\x1b[<64;1;1M");
        assert_eq!(m(MouseEventKind::ScrollDown, 0, 0, NONE), b"\x1b[<65;1;1M");
        assert_eq!(
            m(
                MouseEventKind::Down(MouseButton::Middle),
                0,
                0,
                CTRL | SHIFT
            ),
            b"\x1b[<21;1;1M"
        );
        // Motion without a button is only for any-motion mode.
        assert!(m(MouseEventKind::Moved, 0, 0, NONE).is_empty());
        // SGR has no column limit.
        assert_eq!(
            m(MouseEventKind::Down(MouseButton::Left), 299, 0, NONE),
            b"\x1b[<0;300;1M"
        );
    }

    #[test]
    fn mouse_modes_filter_events() {
        let press = InputModes {
            mouse_mode: MouseMode::Press,
            mouse_encoding: MouseEncoding::Sgr,
            ..InputModes::default()
        };
        assert!(
            encode_mouse(
                mouse(MouseEventKind::Up(MouseButton::Left), 0, 0, NONE),
                &press
            )
            .is_empty()
        );
        assert!(
            !encode_mouse(
                mouse(MouseEventKind::Down(MouseButton::Left), 0, 0, NONE),
                &press
            )
            .is_empty()
        );
        let pr = InputModes {
            mouse_mode: MouseMode::PressRelease,
            ..press
        };
        assert!(
            encode_mouse(
                mouse(MouseEventKind::Drag(MouseButton::Left), 0, 0, NONE),
                &pr
            )
            .is_empty()
        );
        assert!(!encode_mouse(mouse(MouseEventKind::ScrollUp, 0, 0, NONE), &pr).is_empty());
        let any = InputModes {
            mouse_mode: MouseMode::AnyMotion,
            ..press
        };
        assert_eq!(
            encode_mouse(mouse(MouseEventKind::Moved, 2, 3, NONE), &any),
            b"\x1b[<35;3;4M"
        );
    }

    #[test]
    fn mouse_legacy_encodings() {
        let x10 = InputModes {
            mouse_mode: MouseMode::PressRelease,
            ..InputModes::default()
        };
        assert_eq!(
            encode_mouse(
                mouse(MouseEventKind::Down(MouseButton::Left), 0, 0, NONE),
                &x10
            ),
            [0x1b, b'[', b'M', 32, 33, 33]
        );
        // Release is button 3 in the legacy encoding.
        assert_eq!(
            encode_mouse(
                mouse(MouseEventKind::Up(MouseButton::Right), 1, 2, NONE),
                &x10
            ),
            [0x1b, b'[', b'M', 35, 34, 35]
        );
        // Column 300 does not fit in a byte: nothing rather than garbage.
        assert!(
            encode_mouse(
                mouse(MouseEventKind::Down(MouseButton::Left), 300, 0, NONE),
                &x10
            )
            .is_empty()
        );
        let utf8 = InputModes {
            mouse_encoding: MouseEncoding::Utf8,
            ..x10
        };
        let out = encode_mouse(
            mouse(MouseEventKind::Down(MouseButton::Left), 300, 0, NONE),
            &utf8,
        );
        assert_eq!(
            out,
            [b"\x1b[M ".as_slice(), "\u{14d}".as_bytes(), b"!"].concat()
        );
    }
}
