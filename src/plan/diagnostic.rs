//! Problems found in a plan file, each with where it is and, when we know one, what to do.

use serde::Serialize;
use serde::ser::{SerializeStruct, Serializer};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Where a problem is. Line and column are 1-based; the column counts characters, not bytes,
/// so it matches what an editor shows on lines with Cyrillic text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// The file as a whole (too large, unreadable, empty).
    File,
    LineCol {
        line: usize,
        col: usize,
    },
    /// An RFC 6901 JSON pointer into the document (`/tasks/3/priority`).
    Pointer(String),
}

/// One problem. `code` is stable and meant for machines; `message` for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub code: &'static str,
    pub message: String,
    pub location: Location,
    pub hint: Option<String>,
    /// For pointer locations: the line and column the pointer resolves to in the file, when the
    /// check had the file's text (filled in by `check_plan`).
    pub line_col: Option<(usize, usize)>,
}

impl Diagnostic {
    pub fn error(code: &'static str, location: Location, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            code,
            message: message.into(),
            location,
            hint: None,
            line_col: None,
        }
    }

    pub fn warning(
        code: &'static str,
        location: Location,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            code,
            message: message.into(),
            location,
            hint: None,
            line_col: None,
        }
    }

    pub fn at(code: &'static str, pointer: &str, message: impl Into<String>) -> Diagnostic {
        Diagnostic::error(code, Location::Pointer(pointer.to_string()), message)
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Diagnostic {
        self.hint = Some(hint.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    pub fn pointer(&self) -> Option<&str> {
        match &self.location {
            Location::Pointer(p) => Some(p),
            _ => None,
        }
    }
}

/// Flat JSON: `{severity, code, message, line?, column?, pointer?, hint?}`, easy to consume
/// from jq or an editor plugin.
impl Serialize for Diagnostic {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Diagnostic", 7)?;
        s.serialize_field("severity", &self.severity)?;
        s.serialize_field("code", self.code)?;
        s.serialize_field("message", &self.message)?;
        match &self.location {
            Location::File => {}
            Location::LineCol { line, col } => {
                s.serialize_field("line", line)?;
                s.serialize_field("column", col)?;
            }
            Location::Pointer(p) => {
                s.serialize_field("pointer", p)?;
                if let Some((line, col)) = self.line_col {
                    s.serialize_field("line", &line)?;
                    s.serialize_field("column", &col)?;
                }
            }
        }
        if let Some(h) = &self.hint {
            s.serialize_field("hint", h)?;
        }
        s.end()
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}[{}]: {}",
            self.severity.as_str(),
            self.code,
            self.message
        )
    }
}

/// Builds JSON pointers, escaping `~` and `/` in keys as RFC 6901 says.
pub(crate) fn pointer_join(base: &str, key: &str) -> String {
    let mut p = String::with_capacity(base.len() + key.len() + 1);
    p.push_str(base);
    p.push('/');
    for c in key.chars() {
        match c {
            '~' => p.push_str("~0"),
            '/' => p.push_str("~1"),
            c => p.push(c),
        }
    }
    p
}

pub(crate) fn pointer_index(base: &str, index: usize) -> String {
    format!("{base}/{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_escape_keys() {
        assert_eq!(pointer_join("", "tasks"), "/tasks");
        assert_eq!(pointer_join("/x", "a/b~c"), "/x/a~1b~0c");
        assert_eq!(pointer_index("/tasks", 3), "/tasks/3");
    }

    #[test]
    fn serializes_flat() {
        let d =
            Diagnostic::at("wrong_type", "/tasks/0/id", "expected a string").with_hint("quote it");
        let v = serde_json::to_value(&d).expect("serialize");
        assert_eq!(v["severity"], "error");
        assert_eq!(v["pointer"], "/tasks/0/id");
        assert_eq!(v["hint"], "quote it");
        let d = Diagnostic::error("json_syntax", Location::LineCol { line: 2, col: 5 }, "x");
        let v = serde_json::to_value(&d).expect("serialize");
        assert_eq!(
            (v["line"].as_u64(), v["column"].as_u64()),
            (Some(2), Some(5))
        );
        assert!(v.get("hint").is_none());
    }
}
