//! The task list's filter being typed: it takes the keys that edit it and passes the rest on
//! (typing ends with them).

use crate::tui::action::Action;

/// The task list's filter and whether it is being typed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilterEditor {
    pub text: String,
    pub editing: bool,
}

/// What the filter did with a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKey {
    /// The text changed (the selection starts again at the top).
    Edited,
    /// Typing ended; the filter stays.
    Closed,
    /// Not the filter's key (typing ends, the key goes on).
    Passed,
}

impl FilterEditor {
    pub fn key(&mut self, action: &Action) -> FilterKey {
        if !self.editing {
            return FilterKey::Passed;
        }
        match action {
            Action::FilterChar(c) => {
                self.text.push(*c);
                FilterKey::Edited
            }
            Action::FilterBackspace => {
                self.text.pop();
                FilterKey::Edited
            }
            Action::FilterDone => {
                self.editing = false;
                FilterKey::Closed
            }
            Action::Back => {
                self.editing = false;
                self.text.clear();
                FilterKey::Edited
            }
            _ => {
                self.editing = false;
                FilterKey::Passed
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}
