//! The console's terminal input: keys (to the agent in takeover, to the wizard's editor, to text
//! prompts, or through the keymap), pastes and the mouse.

use super::Console;
use crate::pty::MouseMode;
use crate::tui::action::Action;
use crate::tui::keymap::{Key, KeyChord};
use crate::tui::model::{Focus, Level};
use crate::tui::msg::Msg;
use crossterm::event::{Event, KeyEvent, MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::Position;
use std::time::Instant;

/// Lines a mouse wheel notch scrolls a pane.
const WHEEL_LINES: i32 = 3;

impl Console {
    pub(super) fn on_input(&mut self, ev: Event) {
        let before = self.state.takeover;
        // Mouse motion (any-motion reporting) arrives in floods: it redraws only if it did
        // something.
        if !matches!(&ev, Event::Mouse(m) if m.kind == MouseEventKind::Moved) {
            self.dirty = true;
        }
        self.on_input_inner(ev);
        if self.state.takeover != before {
            self.dirty = true;
            // Agents that asked for focus reports (mode 1004) learn when typing starts and ends.
            if let Some(pty) = before.and_then(|pk| self.ptys.get(&pk)) {
                let _ = pty.send_focus(false);
            }
            if let Some(pty) = self.state.takeover.and_then(|pk| self.ptys.get(&pk)) {
                let _ = pty.send_focus(true);
            }
        }
    }

    fn on_input_inner(&mut self, ev: Event) {
        match ev {
            Event::Key(key) => self.on_key(key),
            Event::Paste(text) => self.on_paste(&text),
            Event::Mouse(m) => self.on_mouse(m),
            Event::Resize(w, h) => self.act(Action::Resize(w, h)),
            Event::FocusGained | Event::FocusLost => {}
        }
    }

    fn on_key(&mut self, key: KeyEvent) {
        let Some(chord) = KeyChord::from_event(&key) else {
            return;
        };
        if let Some(pk) = self.state.takeover
            && self.state.popups.is_empty()
        {
            if self.opts.keymap.is_release(&chord) {
                self.act(Action::Release);
            } else if let Some(pty) = self.ptys.get(&pk) {
                if let Err(e) = pty.send_key(key) {
                    self.state.set_status(format!("typing: {e}"), Level::Warn);
                }
            } else if let Some(remote) = self.remote.as_ref().filter(|_| self.opts.remote_takeover)
                && let Some(modes) = remote.input_modes(pk)
            {
                remote.send_keys(pk, crate::pty::encode_key(key, &modes));
            }
            return;
        }
        if self.state.view == crate::tui::model::View::Wizard
            && self.state.wizard.is_some()
            && self.state.popups.is_empty()
        {
            self.state.now = Instant::now();
            self.update(Msg::WizardKey(key));
            if self.state.wizard.is_none()
                && let Some(task) = self.wizard_task.take()
            {
                // Closed while an agent call ran: dropping the call kills the agent.
                task.abort();
            }
            return;
        }
        if self.state.wants_text() {
            let action = match chord.key {
                Key::Char(c) if !chord.ctrl && !chord.alt => Some(Action::TextChar(c)),
                Key::Backspace => Some(Action::TextBackspace),
                Key::Enter => Some(Action::TextSubmit),
                Key::Esc => Some(Action::Back),
                _ => None,
            };
            if let Some(a) = action {
                self.act(a);
            }
            return;
        }
        if self.state.wants_answer() {
            let action = match chord.key {
                Key::Char(c) if !chord.ctrl && !chord.alt => Some(Action::Answer(c)),
                Key::Enter => Some(Action::Answer('y')),
                Key::Esc => Some(Action::Back),
                // Arrows and page keys scroll a dialog that scrolls (the split's diff).
                _ => self.opts.keymap.action(&chord).filter(|a| {
                    matches!(
                        a,
                        Action::Quit
                            | Action::MoveUp
                            | Action::MoveDown
                            | Action::ScrollUp
                            | Action::ScrollDown
                    )
                }),
            };
            if let Some(a) = action {
                self.act(a);
            }
            return;
        }
        if self.state.filter.editing && self.state.popups.is_empty() {
            let action = match chord.key {
                Key::Char(c) if !chord.ctrl && !chord.alt => Some(Action::FilterChar(c)),
                Key::Backspace => Some(Action::FilterBackspace),
                Key::Enter => Some(Action::FilterDone),
                Key::Esc => Some(Action::Back),
                _ => self.opts.keymap.action(&chord),
            };
            if let Some(a) = action {
                self.act(a);
            }
            return;
        }
        match self.opts.keymap.action(&chord) {
            Some(a) => self.act(a),
            // Any key closes the help popup.
            None if !self.state.popups.is_empty() => self.act(Action::Back),
            None => {}
        }
    }

    fn on_paste(&mut self, text: &str) {
        if self.state.view == crate::tui::model::View::Wizard
            && let Some(w) = self.state.wizard.as_mut()
        {
            if w.editing() {
                w.editor.insert_str(text);
            }
            return;
        }
        if let Some(pk) = self.state.takeover
            && let Some(pty) = self.ptys.get(&pk)
        {
            if let Err(e) = pty.paste(text) {
                self.state.set_status(format!("paste: {e}"), Level::Warn);
            }
        } else if let Some(pk) = self.state.takeover
            && let Some(remote) = self.remote.as_ref().filter(|_| self.opts.remote_takeover)
            && let Some(modes) = remote.input_modes(pk)
        {
            remote.send_keys(pk, crate::pty::encode_paste(text, &modes));
        } else if self.state.wants_text() {
            for c in text.chars().filter(|c| !c.is_control()) {
                self.act(Action::TextChar(c));
            }
        } else if self.state.filter.editing {
            for c in text.chars().filter(|c| !c.is_control()) {
                self.act(Action::FilterChar(c));
            }
        }
    }

    fn on_mouse(&mut self, m: MouseEvent) {
        let at = Position::new(m.column, m.row);
        let pane = self
            .frame
            .panes
            .iter()
            .find(|(_, r)| r.contains(at))
            .map(|(pk, r)| (*pk, *r));
        if let Some((pk, rect)) = pane {
            let engaged = self.state.takeover == Some(pk) || self.state.focus == Focus::Pane(pk);
            if engaged
                && let Some(pty) = self.ptys.get(&pk)
                && pty.input_modes().mouse_mode != MouseMode::None
            {
                let local = MouseEvent {
                    column: m.column - rect.x,
                    row: m.row - rect.y,
                    ..m
                };
                let _ = pty.send_mouse(local);
                return;
            }
            match m.kind {
                MouseEventKind::Down(MouseButton::Left) => {
                    if self.state.takeover.is_some_and(|t| t != pk) {
                        self.state.takeover = None;
                    }
                    self.state.focus = Focus::Pane(pk);
                }
                MouseEventKind::ScrollUp => self.scroll_pane(pk, WHEEL_LINES),
                MouseEventKind::ScrollDown => self.scroll_pane(pk, -WHEEL_LINES),
                _ => {}
            }
            return;
        }
        if let Some((rect, offset)) = self.frame.task_list
            && rect.contains(at)
        {
            match m.kind {
                MouseEventKind::Down(MouseButton::Left) if m.row > rect.y => {
                    let row = usize::from(m.row - rect.y - 1) + offset;
                    if row < self.state.visible_tasks().len() {
                        self.state.selected = row;
                        self.state.focus = Focus::TaskList;
                    }
                }
                MouseEventKind::ScrollUp => self.act(Action::MoveUp),
                MouseEventKind::ScrollDown => self.act(Action::MoveDown),
                _ => {}
            }
        }
    }

    pub(super) fn scroll_pane(&mut self, pk: i64, delta: i32) {
        if let Some(pty) = self.ptys.get(&pk) {
            let cur = pty.scrollback_offset() as i64;
            let next = (cur + i64::from(delta)).max(0) as usize;
            pty.set_scrollback_offset(next);
        }
    }
}
