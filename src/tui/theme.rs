//! Colours in one place: the 16 ANSI colours only (they follow the user's terminal palette), and
//! a monochrome theme for `NO_COLOR` or `[tui] theme = "mono"` that relies on bold/reverse/dim.

use crate::domain::Status;
use crate::engine::budget::BudgetState;
use crate::engine::sessions::SessionState;
use ratatui::style::{Color, Modifier, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Default for Theme {
    fn default() -> Self {
        Theme { color: true }
    }
}

impl Theme {
    pub const MONO: Theme = Theme { color: false };

    /// The configured theme name, unless `NO_COLOR` is set (to anything non-empty).
    pub fn resolve(name: &str, no_color_env: Option<&str>) -> Theme {
        let no_color = no_color_env.is_some_and(|v| !v.is_empty());
        let mono = matches!(
            name.trim().to_ascii_lowercase().as_str(),
            "mono" | "monochrome" | "no_color" | "none"
        );
        Theme {
            color: !(no_color || mono),
        }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn text(&self) -> Style {
        Style::default()
    }

    pub fn dim(&self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default().add_modifier(Modifier::DIM)
        }
    }

    pub fn title(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }

    pub fn key(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn selected(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }

    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }

    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }

    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }

    pub fn status(&self, s: Status) -> Style {
        match s {
            Status::Done => self.ok(),
            Status::Failed => self.error(),
            Status::Claimed | Status::InProgress => {
                self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
            }
            Status::Blocked | Status::HumanLoop => self.warn(),
            Status::Skipped => self.dim(),
            Status::Pending => self.text(),
        }
    }

    /// Green under 80 %, yellow from 80 %, red at or over the limit.
    pub fn budget(&self, s: BudgetState) -> Style {
        match s {
            BudgetState::Ok => self.ok(),
            BudgetState::Warning => self.warn(),
            BudgetState::Exhausted => self.error(),
        }
    }

    pub fn badge(&self, s: SessionState) -> Style {
        match s {
            SessionState::Preparing => self.dim(),
            SessionState::Running => self.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            SessionState::WaitingForHuman => self.warn().add_modifier(Modifier::REVERSED),
            SessionState::Verifying | SessionState::Delivering => self.fg(Color::Magenta),
            SessionState::Done => self.ok(),
            SessionState::Failed => self.error(),
        }
    }

    pub fn border(&self, focused: bool, takeover: bool) -> Style {
        match (takeover, focused) {
            (true, _) => self.fg(Color::Yellow).add_modifier(Modifier::BOLD),
            (false, true) => self.fg(Color::Cyan).add_modifier(Modifier::BOLD),
            (false, false) => self.dim(),
        }
    }

    pub fn gauge(&self, s: BudgetState) -> Style {
        match s {
            BudgetState::Ok => self.fg(Color::Green),
            BudgetState::Warning => self.fg(Color::Yellow),
            BudgetState::Exhausted => self.fg(Color::Red),
        }
    }
}

/// Short badge text for a session state.
pub fn badge_text(s: SessionState) -> &'static str {
    match s {
        SessionState::Preparing => "preparing",
        SessionState::Running => "running",
        SessionState::WaitingForHuman => "waiting for human",
        SessionState::Verifying => "verifying",
        SessionState::Delivering => "delivering",
        SessionState::Done => "done",
        SessionState::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_color_wins_over_the_theme_name() {
        assert!(Theme::resolve("default", None).color);
        assert!(!Theme::resolve("default", Some("1")).color);
        assert!(Theme::resolve("default", Some("")).color);
        assert!(!Theme::resolve("mono", None).color);
    }

    #[test]
    fn mono_uses_no_colours() {
        let t = Theme::MONO;
        for s in Status::ALL {
            assert_eq!(t.status(s).fg, None);
        }
        for b in [
            BudgetState::Ok,
            BudgetState::Warning,
            BudgetState::Exhausted,
        ] {
            assert_eq!(t.budget(b).fg, None);
        }
    }
}
