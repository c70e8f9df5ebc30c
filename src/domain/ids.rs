//! Task and plan ids: what is accepted, and how an id becomes a safe path component.
//!
//! The original let task ids flow into file paths (`.whilly_worktrees/<id>`), a path traversal.
//! Here an id is validated on the way in and, separately, never used as a path component as is:
//! [`safe_id`] derives a name that cannot escape a directory whatever the input.

use sha2::{Digest, Sha256};

/// Why an id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("id is empty")]
    Empty,
    #[error("id is {0} characters long; at most 200 are allowed")]
    TooLong(usize),
    #[error("id {0:?} has characters outside A-Z a-z 0-9 . _ : / -")]
    BadChars(String),
    #[error("id {0:?} has a '..' segment; ids are never allowed to look like path traversal")]
    DotDot(String),
    #[error("id {0:?} starts with '/'; ids are never allowed to look like absolute paths")]
    LeadingSlash(String),
}

/// Checks an id against `^[A-Za-z0-9._:/-]+$`, refusing `..` segments and a leading `/` too.
pub fn validate_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > 200 {
        return Err(IdError::TooLong(id.len()));
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
    {
        return Err(IdError::BadChars(id.to_string()));
    }
    if id.starts_with('/') {
        return Err(IdError::LeadingSlash(id.to_string()));
    }
    if id.split('/').any(|seg| seg == "..") {
        return Err(IdError::DotDot(id.to_string()));
    }
    Ok(())
}

/// A file-system-safe name derived from any id: `[A-Za-z0-9_-]` only, at most 64 characters,
/// never `.`/`..`, plus a short hash of the original whenever anything had to change, so two ids
/// that sanitise alike (`a/b`, `a:b`) still get different names.
pub fn safe_id(id: &str) -> String {
    let mut out: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let changed = out != id || out.is_empty() || out.len() > 48;
    if out.len() > 48 {
        out.truncate(48);
    }
    if changed {
        let digest = Sha256::digest(id.as_bytes());
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&hex::encode(&digest[..4]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_original_ids() {
        for id in ["TASK-001", "GH-12", "JIRA-ABC-1", "TASK-001a", "a.b:c/d_e"] {
            assert_eq!(validate_id(id), Ok(()), "{id}");
        }
    }

    #[test]
    fn refuses_traversal_and_bad_chars() {
        assert!(matches!(validate_id("../../etc"), Err(IdError::DotDot(_))));
        assert!(matches!(validate_id("a/../b"), Err(IdError::DotDot(_))));
        assert!(matches!(
            validate_id("/etc/passwd"),
            Err(IdError::LeadingSlash(_))
        ));
        assert!(matches!(validate_id("a b"), Err(IdError::BadChars(_))));
        assert!(matches!(validate_id("ünï"), Err(IdError::BadChars(_))));
        assert!(matches!(validate_id(""), Err(IdError::Empty)));
        // `..foo` is not a traversal segment and matches the regex.
        assert_eq!(validate_id("..foo"), Ok(()));
    }

    #[test]
    fn safe_id_is_a_plain_component() {
        for id in [
            "../../etc",
            "..",
            ".",
            "/",
            "a/b",
            "a:b",
            "",
            &"x".repeat(300),
        ] {
            let s = safe_id(id);
            assert!(!s.is_empty());
            assert!(s.len() <= 64, "{s}");
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
                "{s}"
            );
        }
        assert_eq!(safe_id("TASK-001"), "TASK-001");
        assert_ne!(safe_id("a/b"), safe_id("a:b"));
    }
}
