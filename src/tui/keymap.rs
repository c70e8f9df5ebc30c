//! Key chords, the default keymap (close to the original dashboard's hotkeys) and the user's
//! `[keys]` table merged over it. Only bindings that survive SSH and tmux: no Ctrl+Shift, no
//! kitty keyboard protocol. `Ctrl-]` gives control back from a taken-over pane.

use super::action::{Action, UnknownAction};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use std::collections::BTreeMap;
use std::fmt;

/// A key without modifiers, independent of the terminal library.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Char(char),
    Enter,
    Tab,
    BackTab,
    Esc,
    Backspace,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Insert,
    Delete,
    F(u8),
}

/// A key with the modifiers that pass through terminals reliably.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyChord {
    pub key: Key,
    pub ctrl: bool,
    pub alt: bool,
}

impl KeyChord {
    pub const fn plain(key: Key) -> Self {
        KeyChord {
            key,
            ctrl: false,
            alt: false,
        }
    }

    pub const fn ctrl(c: char) -> Self {
        KeyChord {
            key: Key::Char(c),
            ctrl: true,
            alt: false,
        }
    }

    /// The chord a crossterm key press stands for; `None` for releases and unmappable keys.
    pub fn from_event(ev: &KeyEvent) -> Option<KeyChord> {
        if ev.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = ev.modifiers.contains(KeyModifiers::CONTROL);
        let alt = ev.modifiers.contains(KeyModifiers::ALT);
        let shift = ev.modifiers.contains(KeyModifiers::SHIFT);
        let key = match ev.code {
            KeyCode::Char(c) if ctrl => Key::Char(normalise_ctrl_char(c)),
            KeyCode::Char(c) => Key::Char(c),
            KeyCode::Enter => Key::Enter,
            KeyCode::Tab if shift => Key::BackTab,
            KeyCode::Tab => Key::Tab,
            KeyCode::BackTab => Key::BackTab,
            KeyCode::Esc => Key::Esc,
            KeyCode::Backspace => Key::Backspace,
            KeyCode::Up => Key::Up,
            KeyCode::Down => Key::Down,
            KeyCode::Left => Key::Left,
            KeyCode::Right => Key::Right,
            KeyCode::Home => Key::Home,
            KeyCode::End => Key::End,
            KeyCode::PageUp => Key::PageUp,
            KeyCode::PageDown => Key::PageDown,
            KeyCode::Insert => Key::Insert,
            KeyCode::Delete => Key::Delete,
            KeyCode::F(n) => Key::F(n),
            _ => return None,
        };
        Some(KeyChord { key, ctrl, alt })
    }
}

/// Terminals send Ctrl-\ ] ^ _ as the bytes 0x1c–0x1f, which crossterm reports as Ctrl-4…7;
/// letters under Ctrl arrive lower- or upper-case depending on the terminal.
fn normalise_ctrl_char(c: char) -> char {
    match c {
        '4' => '\\',
        '5' => ']',
        '6' => '^',
        '7' => '_',
        c if c.is_ascii_uppercase() => c.to_ascii_lowercase(),
        c => c,
    }
}

impl fmt::Display for KeyChord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.key {
            Key::Char(' ') => f.write_str("space"),
            Key::Char(c) => write!(f, "{c}"),
            Key::Enter => f.write_str("enter"),
            Key::Tab => f.write_str("tab"),
            Key::BackTab => f.write_str("shift-tab"),
            Key::Esc => f.write_str("esc"),
            Key::Backspace => f.write_str("backspace"),
            Key::Up => f.write_str("up"),
            Key::Down => f.write_str("down"),
            Key::Left => f.write_str("left"),
            Key::Right => f.write_str("right"),
            Key::Home => f.write_str("home"),
            Key::End => f.write_str("end"),
            Key::PageUp => f.write_str("pageup"),
            Key::PageDown => f.write_str("pagedown"),
            Key::Insert => f.write_str("insert"),
            Key::Delete => f.write_str("delete"),
            Key::F(n) => write!(f, "f{n}"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeymapError {
    #[error(
        "[keys] {chord:?}: {reason} (write e.g. \"q\", \"ctrl-r\", \"alt-x\", \"enter\", \"f5\", \"pageup\")"
    )]
    BadChord { chord: String, reason: String },
    #[error("[keys] {chord:?}: {source}")]
    BadAction {
        chord: String,
        source: UnknownAction,
    },
}

/// Parses `q`, `?`, `ctrl-]`, `alt-x`, `shift-tab`, `enter`, `f5`, `pageup`, `space`, `-`.
pub fn parse_chord(text: &str) -> Result<KeyChord, KeymapError> {
    let bad = |reason: &str| KeymapError::BadChord {
        chord: text.to_string(),
        reason: reason.to_string(),
    };
    if text.is_empty() {
        return Err(bad("empty key"));
    }
    let mut rest = text;
    let (mut ctrl, mut alt, mut shift) = (false, false, false);
    // A single character is always a key, even `-`.
    while rest.chars().count() > 1 {
        let lower = rest.to_ascii_lowercase();
        let strip = |p: &str| lower.starts_with(p).then_some(p.len());
        if let Some(n) = strip("ctrl-").or_else(|| strip("c-")) {
            ctrl = true;
            rest = &rest[n..];
        } else if let Some(n) = strip("alt-")
            .or_else(|| strip("m-"))
            .or_else(|| strip("a-"))
        {
            alt = true;
            rest = &rest[n..];
        } else if let Some(n) = strip("shift-").or_else(|| strip("s-")) {
            shift = true;
            rest = &rest[n..];
        } else {
            break;
        }
    }
    let mut chars = rest.chars();
    let key = match (chars.next(), chars.next()) {
        (None, _) => return Err(bad("a modifier without a key")),
        (Some(c), None) => {
            if ctrl && shift {
                return Err(bad(
                    "ctrl-shift chords do not pass through SSH and tmux; bind another key",
                ));
            }
            let c = if ctrl {
                normalise_ctrl_char(c)
            } else if shift {
                c.to_ascii_uppercase()
            } else {
                c
            };
            Key::Char(c)
        }
        _ => match rest.to_ascii_lowercase().as_str() {
            "enter" | "return" | "cr" => Key::Enter,
            "tab" if shift => Key::BackTab,
            "tab" => Key::Tab,
            "backtab" => Key::BackTab,
            "esc" | "escape" => Key::Esc,
            "backspace" | "bs" => Key::Backspace,
            "space" => Key::Char(' '),
            "up" => Key::Up,
            "down" => Key::Down,
            "left" => Key::Left,
            "right" => Key::Right,
            "home" => Key::Home,
            "end" => Key::End,
            "pageup" | "pgup" => Key::PageUp,
            "pagedown" | "pgdn" | "pgdown" => Key::PageDown,
            "insert" | "ins" => Key::Insert,
            "delete" | "del" => Key::Delete,
            other => match other.strip_prefix('f').and_then(|n| n.parse::<u8>().ok()) {
                Some(n @ 1..=12) => Key::F(n),
                _ => return Err(bad("unknown key name")),
            },
        },
    };
    if shift && !matches!(key, Key::Char(_) | Key::BackTab) {
        return Err(bad(
            "shift with this key does not pass through every terminal",
        ));
    }
    Ok(KeyChord { key, ctrl, alt })
}

/// Chord → action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    bindings: BTreeMap<KeyChord, Action>,
}

const DEFAULTS: &[(&str, Action)] = &[
    ("q", Action::Quit),
    ("ctrl-c", Action::Quit),
    ("?", Action::Help),
    ("h", Action::Help),
    ("d", Action::TaskDetail),
    ("l", Action::Events),
    ("t", Action::Tasks),
    ("s", Action::Stats),
    ("$", Action::Budget),
    ("n", Action::NewPrd),
    ("r", Action::ResetTask),
    ("g", Action::Triz),
    ("c", Action::Challenge),
    ("p", Action::TogglePause),
    ("k", Action::MoveUp),
    ("up", Action::MoveUp),
    ("j", Action::MoveDown),
    ("down", Action::MoveDown),
    ("home", Action::First),
    ("end", Action::Last),
    ("tab", Action::FocusNext),
    ("shift-tab", Action::FocusPrev),
    ("z", Action::Zoom),
    ("enter", Action::Zoom),
    ("i", Action::Takeover),
    ("ctrl-]", Action::Release),
    ("/", Action::Filter),
    ("esc", Action::Back),
    ("pageup", Action::ScrollUp),
    ("pagedown", Action::ScrollDown),
    ("H", Action::Inbox),
    ("w", Action::Workers),
    ("a", Action::Approve),
    ("A", Action::ApproveAll),
    ("m", Action::Merge),
    ("x", Action::Reject),
    ("b", Action::SendBack),
    ("space", Action::Mark),
    ("o", Action::Replay),
    ("D", Action::Diff),
    ("N", Action::AddTask),
    ("S", Action::SkipTask),
    ("X", Action::SplitTask),
    ("K", Action::KillAttempt),
];

impl Default for Keymap {
    fn default() -> Self {
        let mut bindings = BTreeMap::new();
        for (chord, action) in DEFAULTS {
            if let Ok(c) = parse_chord(chord) {
                bindings.insert(c, *action);
            }
        }
        Keymap { bindings }
    }
}

impl Keymap {
    /// The defaults with the user's `[keys]` on top; `"x" = "none"` removes a binding.
    pub fn with_overrides(user: &BTreeMap<String, String>) -> Result<Keymap, KeymapError> {
        let mut map = Keymap::default();
        for (chord_text, action_text) in user {
            let chord = parse_chord(chord_text)?;
            let action: Action = action_text
                .parse()
                .map_err(|source| KeymapError::BadAction {
                    chord: chord_text.clone(),
                    source,
                })?;
            if action == Action::None {
                map.bindings.remove(&chord);
            } else {
                map.bindings.insert(chord, action);
            }
        }
        // Without a way back from a taken-over pane the console would be stuck.
        if !map.bindings.values().any(|a| *a == Action::Release) {
            map.bindings.insert(KeyChord::ctrl(']'), Action::Release);
        }
        Ok(map)
    }

    pub fn action(&self, chord: &KeyChord) -> Option<Action> {
        self.bindings.get(chord).copied()
    }

    /// The chords bound to `action`, as text.
    pub fn keys_for(&self, action: Action) -> Vec<String> {
        self.bindings
            .iter()
            .filter(|(_, a)| **a == action)
            .map(|(c, _)| c.to_string())
            .collect()
    }

    /// Whether `chord` gives control back from a taken-over pane.
    pub fn is_release(&self, chord: &KeyChord) -> bool {
        self.action(chord) == Some(Action::Release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: KeyCode, mods: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, mods)
    }

    #[test]
    fn chords_parse_and_print() {
        for text in [
            "q", "?", "$", "/", "-", "ctrl-]", "alt-x", "enter", "f5", "pageup", "space",
        ] {
            let c = parse_chord(text).unwrap();
            assert_eq!(parse_chord(&c.to_string()).unwrap(), c, "{text}");
        }
        assert_eq!(parse_chord("C-r").unwrap(), KeyChord::ctrl('r'));
        assert_eq!(parse_chord("ctrl-R").unwrap(), KeyChord::ctrl('r'));
        assert_eq!(parse_chord("shift-tab").unwrap().key, Key::BackTab);
        assert_eq!(parse_chord("shift-a").unwrap().key, Key::Char('A'));
    }

    #[test]
    fn bad_chords_are_refused_with_the_chord_named() {
        for text in ["", "ctrl-", "hyper-q", "ctrl-shift-x", "f13", "shift-up"] {
            let err = parse_chord(text).unwrap_err().to_string();
            assert!(err.contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn ctrl_bracket_arrives_as_ctrl_5_and_still_releases() {
        let km = Keymap::default();
        let chord = KeyChord::from_event(&ev(KeyCode::Char('5'), KeyModifiers::CONTROL)).unwrap();
        assert!(km.is_release(&chord));
        let chord = KeyChord::from_event(&ev(KeyCode::Char(']'), KeyModifiers::CONTROL)).unwrap();
        assert!(km.is_release(&chord));
    }

    #[test]
    fn shifted_symbols_map_without_shift() {
        let km = Keymap::default();
        let chord = KeyChord::from_event(&ev(KeyCode::Char('$'), KeyModifiers::SHIFT)).unwrap();
        assert_eq!(km.action(&chord), Some(Action::Budget));
        let chord = KeyChord::from_event(&ev(KeyCode::Char('?'), KeyModifiers::SHIFT)).unwrap();
        assert_eq!(km.action(&chord), Some(Action::Help));
        let chord = KeyChord::from_event(&ev(KeyCode::Tab, KeyModifiers::SHIFT)).unwrap();
        assert_eq!(km.action(&chord), Some(Action::FocusPrev));
    }

    #[test]
    fn user_keys_override_and_unbind() {
        let mut user = BTreeMap::new();
        user.insert("x".to_string(), "quit".to_string());
        user.insert("z".to_string(), "none".to_string());
        let km = Keymap::with_overrides(&user).unwrap();
        assert_eq!(
            km.action(&KeyChord::plain(Key::Char('x'))),
            Some(Action::Quit)
        );
        assert_eq!(km.action(&KeyChord::plain(Key::Char('z'))), None);
        assert_eq!(
            km.action(&KeyChord::plain(Key::Char('q'))),
            Some(Action::Quit)
        );
    }

    #[test]
    fn unknown_action_is_refused_naming_the_key() {
        let mut user = BTreeMap::new();
        user.insert("ctrl-q".to_string(), "quitt".to_string());
        let err = Keymap::with_overrides(&user).unwrap_err().to_string();
        assert!(err.contains("\"ctrl-q\""), "{err}");
        assert!(err.contains("\"quitt\""), "{err}");
    }

    #[test]
    fn release_cannot_be_unbound_entirely() {
        let mut user = BTreeMap::new();
        user.insert("ctrl-]".to_string(), "none".to_string());
        let km = Keymap::with_overrides(&user).unwrap();
        assert!(km.is_release(&KeyChord::ctrl(']')));
    }
}
