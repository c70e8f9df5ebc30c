//! What must never land, judged per changed file before anything is committed: a secret in its
//! text (named by kind and line, never by value) or a size past the limit. Pure: the caller
//! reads the blobs.

use super::secrets::{SecretKind, find_secrets};
use serde::Serialize;

/// Why one changed file may not land.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum UnsafeFile {
    /// A secret of `kind` at `line` (1-based).
    Secret {
        path: String,
        line: usize,
        kind: String,
    },
    /// Larger than `[delivery] max_file_mb`.
    TooLarge {
        path: String,
        bytes: u64,
        limit: u64,
    },
}

impl UnsafeFile {
    /// One line for the task's detail and the inbox: the place and the kind, never the value.
    pub fn describe(&self) -> String {
        match self {
            UnsafeFile::Secret { path, line, kind } => {
                format!("{path}:{line} holds what looks like a secret ({kind})")
            }
            UnsafeFile::TooLarge { path, bytes, limit } => format!(
                "{path} is {} MB, over [delivery] max_file_mb = {}",
                mb(*bytes),
                mb(*limit)
            ),
        }
    }
}

fn mb(bytes: u64) -> String {
    let v = bytes as f64 / 1_048_576.0;
    if v >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// What the lint looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandingLimits {
    /// Look for secrets in the text of changed files (`[guards] secret_lint`).
    pub secret_lint: bool,
    /// Files larger than this may not land; 0: no limit.
    pub max_file_bytes: u64,
}

/// The problems of one changed file of `size` bytes whose content is `bytes` (read only when
/// the size allows; `None` when it was not read).
pub(crate) fn judge_file(
    path: &str,
    size: u64,
    bytes: Option<&[u8]>,
    limits: LandingLimits,
) -> Vec<UnsafeFile> {
    if limits.max_file_bytes > 0 && size > limits.max_file_bytes {
        return vec![UnsafeFile::TooLarge {
            path: path.to_string(),
            bytes: size,
            limit: limits.max_file_bytes,
        }];
    }
    let Some(bytes) = bytes.filter(|_| limits.secret_lint) else {
        return Vec::new();
    };
    // Binary files are skipped: a secret the lint can find is text.
    if bytes.iter().take(8000).any(|&b| b == 0) {
        return Vec::new();
    }
    let text = String::from_utf8_lossy(bytes);
    let mut out: Vec<UnsafeFile> = Vec::new();
    for (kind, range) in find_secrets(&text) {
        let line = text[..range.start].matches('\n').count() + 1;
        let kind = kind_name(kind);
        let seen = out.iter().any(|u| {
            matches!(u, UnsafeFile::Secret { line: l, kind: k, .. } if *l == line && *k == kind)
        });
        if !seen {
            out.push(UnsafeFile::Secret {
                path: path.to_string(),
                line,
                kind,
            });
        }
    }
    out
}

fn kind_name(kind: SecretKind) -> String {
    kind.as_str().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: LandingLimits = LandingLimits {
        secret_lint: true,
        max_file_bytes: 10 * 1_048_576,
    };

    #[test]
    fn a_secret_is_named_by_file_line_and_kind_never_by_value() {
        let key = "AKIA".to_string() + "IOSFODNN7EXAMPLQ";
        let text = format!("[default]\nregion = eu\naws_access_key_id = {key}\n");
        let found = judge_file("creds.ini", text.len() as u64, Some(text.as_bytes()), ON);
        assert_eq!(found.len(), 1, "{found:?}");
        let d = found[0].describe();
        assert!(d.starts_with("creds.ini:3 "), "{d}");
        assert!(d.contains("aws_access_key"), "{d}");
        assert!(!d.contains(&key) && !format!("{found:?}").contains(&key));
    }

    #[test]
    fn large_files_are_refused_before_their_text_is_read() {
        let found = judge_file("blob.bin", 200 * 1_048_576, None, ON);
        assert_eq!(
            found[0].describe(),
            "blob.bin is 200 MB, over [delivery] max_file_mb = 10"
        );
        let off = LandingLimits {
            max_file_bytes: 0,
            ..ON
        };
        assert!(judge_file("blob.bin", 200 * 1_048_576, None, off).is_empty());
    }

    #[test]
    fn clean_text_binary_files_and_a_lint_turned_off_pass() {
        let text = b"fn main() { println!(\"hello\"); }\n";
        assert!(judge_file("a.rs", 34, Some(text), ON).is_empty());
        let key = format!("ghp_{}", "a".repeat(36));
        let mut binary = vec![0u8, 1, 2];
        binary.extend(key.as_bytes());
        assert!(judge_file("x.bin", binary.len() as u64, Some(&binary), ON).is_empty());
        let off = LandingLimits {
            secret_lint: false,
            ..ON
        };
        assert!(judge_file("t.txt", key.len() as u64, Some(key.as_bytes()), off).is_empty());
        assert!(!judge_file("t.txt", key.len() as u64, Some(key.as_bytes()), ON).is_empty());
    }
}
