//! Configuration errors. Every problem names where the bad value came from (file and line,
//! environment variable, or flag) and the dotted key, so the user can go straight to it.

use std::fmt;
use std::path::PathBuf;

/// Where a value (or a problem with it) came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A position in a config file; line and column are 1-based.
    File {
        path: PathBuf,
        line: usize,
        col: usize,
    },
    /// An environment variable.
    Env(String),
    /// A command-line override (`-c key=value`, `--database-url`).
    Flag,
    /// The built-in default (a problem here is a bug in whilly, not in the user's input).
    Default,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File { path, line, col } => write!(f, "{}:{line}:{col}", path.display()),
            Origin::Env(var) => write!(f, "environment variable {var}"),
            Origin::Flag => f.write_str("command-line flag"),
            Origin::Default => f.write_str("built-in default"),
        }
    }
}

/// One invalid setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub origin: Origin,
    /// Dotted key, e.g. `queue.lease_secs`; empty when the problem is not tied to one key
    /// (a TOML syntax error).
    pub key: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.key.is_empty() {
            write!(f, "{}: {}", self.origin, self.message)
        } else {
            write!(f, "{}: `{}`: {}", self.origin, self.key, self.message)
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// One or more settings are invalid; all of them are listed.
    #[error("{}", render_problems(.0))]
    Invalid(Vec<Problem>),
    #[error("{}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A secret reference could not be resolved (missing variable, unreadable file, no keyring entry).
    #[error("{0}")]
    Secret(String),
    /// The OS keyring cannot be used at all on this machine.
    #[error("keyring unavailable: {why}; use env: or file: instead")]
    KeyringUnavailable { why: String },
    /// A command-line argument that is not a valid setting (e.g. a malformed `-c` override).
    #[error("{0}")]
    Usage(String),
}

impl ConfigError {
    pub fn problem(origin: Origin, key: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid(vec![Problem {
            origin,
            key: key.into(),
            message: message.into(),
        }])
    }

    /// The individual problems (empty for errors that are not about a setting's value).
    pub fn problems(&self) -> &[Problem] {
        match self {
            ConfigError::Invalid(p) => p,
            _ => &[],
        }
    }
}

fn render_problems(problems: &[Problem]) -> String {
    match problems {
        [one] => format!("invalid configuration: {one}"),
        many => {
            let mut s = format!("invalid configuration ({} problems):", many.len());
            for p in many {
                s.push_str("\n  ");
                s.push_str(&p.to_string());
            }
            s
        }
    }
}

/// 1-based line and column (in characters) of a byte offset into `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let mut start = offset;
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let before = &text[..start];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before[line_start..].chars().count() + 1;
    (line, col)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_from_one() {
        let text = "a = 1\nbé = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 10), (2, 4));
        assert_eq!(line_col(text, 999), (3, 1));
    }
}
