use std::ffi::OsString;
use std::path::PathBuf;

use super::PtyError;
use super::filter::LineFilter;

/// Scrollback kept by the emulator when the spec does not say (≈ 2.4 KiB per 80-column row).
pub const DEFAULT_SCROLLBACK: usize = 5000;

/// A terminal size in character cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TermSize {
    pub rows: u16,
    pub cols: u16,
}

impl TermSize {
    /// The smallest size the emulator and agent TUIs cope with.
    pub const MIN: TermSize = TermSize { rows: 2, cols: 2 };

    pub fn new(rows: u16, cols: u16) -> Self {
        Self { rows, cols }
    }

    /// Clamped to at least 2×2: vt100 and most TUIs misbehave on 1-row or 1-column terminals.
    pub fn clamped(self) -> Self {
        Self {
            rows: self.rows.max(Self::MIN.rows),
            cols: self.cols.max(Self::MIN.cols),
        }
    }
}

impl Default for TermSize {
    fn default() -> Self {
        Self { rows: 24, cols: 80 }
    }
}

/// What to run in a PTY and how.
#[derive(Debug)]
pub struct SpawnSpec {
    /// Program followed by its arguments.
    pub argv: Vec<OsString>,
    /// Working directory; the parent's when `None`.
    pub cwd: Option<PathBuf>,
    /// Variables added to (or overriding) the inherited environment. `TERM` is always
    /// `xterm-256color`; `COLUMNS`/`LINES` are removed (even if given here) so programs ask the
    /// PTY, which stays right after a resize (a stale `LINES` wins over the ioctl in ncurses).
    pub env: Vec<(OsString, OsString)>,
    /// The PTY is opened at this size before the child starts.
    pub size: TermSize,
    /// Raw output is appended here (parent directories are created); no log when `None`.
    pub log_path: Option<PathBuf>,
    /// The most bytes the log keeps (its head and its tail, with a note of what was left out
    /// between them); 0: no limit.
    pub log_limit: u64,
    /// Lines of scrollback the emulator keeps.
    pub scrollback: usize,
    /// What the screen shows instead of raw JSON lines (see [`LineFilter`]); the log always gets
    /// the raw bytes. `None` (the default) feeds the emulator the raw output untouched.
    pub display_filter: Option<Box<dyn LineFilter>>,
}

impl SpawnSpec {
    /// A spec for `argv` with defaults: 24×80, 5000 lines of scrollback, no log, inherited cwd.
    pub fn new<I, S>(argv: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Self {
            argv: argv.into_iter().map(Into::into).collect(),
            cwd: None,
            env: Vec::new(),
            size: TermSize::default(),
            log_path: None,
            log_limit: 0,
            scrollback: DEFAULT_SCROLLBACK,
            display_filter: None,
        }
    }

    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn size(mut self, rows: u16, cols: u16) -> Self {
        self.size = TermSize::new(rows, cols);
        self
    }

    pub fn log_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.log_path = Some(path.into());
        self
    }

    /// See [`SpawnSpec::log_limit`].
    pub fn log_limit(mut self, bytes: u64) -> Self {
        self.log_limit = bytes;
        self
    }

    pub fn scrollback(mut self, lines: usize) -> Self {
        self.scrollback = lines;
        self
    }

    pub fn display_filter(mut self, filter: Box<dyn LineFilter>) -> Self {
        self.display_filter = Some(filter);
        self
    }

    /// Rejects specs that cannot work before anything is opened or started.
    pub(crate) fn validate(&self) -> Result<(), PtyError> {
        match self.argv.first() {
            None => {
                return Err(PtyError::InvalidSpec(
                    "argv is empty: give at least the program".into(),
                ));
            }
            Some(p) if p.is_empty() => {
                return Err(PtyError::InvalidSpec(
                    "argv[0] (the program) is an empty string".into(),
                ));
            }
            Some(_) => {}
        }
        if self.size.rows == 0 || self.size.cols == 0 {
            return Err(PtyError::InvalidSpec(format!(
                "size {}x{} has a zero dimension: rows and cols must be at least 2",
                self.size.rows, self.size.cols
            )));
        }
        for (k, _) in &self.env {
            let k = k.to_string_lossy();
            if k.is_empty() || k.contains('=') || k.contains('\0') {
                return Err(PtyError::InvalidSpec(format!(
                    "environment variable name {k:?} is empty or contains '=' or NUL"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validate_rejects_empty_argv_and_zero_size() {
        assert!(SpawnSpec::new(Vec::<String>::new()).validate().is_err());
        assert!(SpawnSpec::new([""]).validate().is_err());
        assert!(SpawnSpec::new(["true"]).size(0, 80).validate().is_err());
        assert!(SpawnSpec::new(["true"]).env("A=B", "x").validate().is_err());
        assert!(SpawnSpec::new(["true"]).validate().is_ok());
    }

    #[test]
    fn clamp_keeps_at_least_two_by_two() {
        assert_eq!(TermSize::new(1, 0).clamped(), TermSize::new(2, 2));
        assert_eq!(TermSize::new(30, 100).clamped(), TermSize::new(30, 100));
    }
}
