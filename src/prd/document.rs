//! The PRD itself: written by the agent from the idea and the interview, saved as
//! `docs/PRD-<slug>.md` under the project root without ever replacing a different file.

use super::error::PrdError;
use super::interview::QaPair;
use super::oneshot::OneShot;
use super::prompts;
use crate::domain::Usd;
use sha2::{Digest, Sha256};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// Longest slug; with `PRD-` and `.md` the file name stays well under every limit.
pub(crate) const MAX_SLUG_CHARS: usize = 48;

/// The directory PRDs are written to, relative to the project root.
pub(crate) const PRD_DIR: &str = "docs";

/// A PRD the agent wrote, not yet saved.
#[derive(Debug, Clone, PartialEq)]
pub struct PrdDraft {
    pub title: String,
    pub markdown: String,
    pub cost: Usd,
}

/// Asks the agent for the PRD and cleans its reply (code fence and preamble removed).
pub async fn write_prd(
    agent: &OneShot,
    cwd: &Path,
    idea: &str,
    qa: &[QaPair],
) -> Result<PrdDraft, PrdError> {
    let reply = agent
        .ask("prd-write", &prompts::write_prd(idea, qa), cwd)
        .await?;
    let markdown = clean_markdown(&reply.text);
    if markdown.trim().is_empty() {
        return Err(PrdError::Unparseable {
            what: "a Markdown PRD",
            reply: reply.text,
        });
    }
    let title = title_of(&markdown).unwrap_or_else(|| fallback_title(idea));
    Ok(PrdDraft {
        title,
        markdown,
        cost: reply.cost,
    })
}

/// The document without a fence around all of it and without chatter before its first heading.
pub(crate) fn clean_markdown(reply: &str) -> String {
    let mut text = reply.trim();
    if let Some(rest) = text.strip_prefix("```") {
        // ```markdown … ``` around the whole reply.
        let body = rest.split_once('\n').map_or("", |(_, b)| b);
        text = body.trim_end().strip_suffix("```").unwrap_or(body).trim();
    }
    let start = text
        .lines()
        .scan(0usize, |pos, line| {
            let at = *pos;
            *pos += line.len() + 1;
            Some((at, line))
        })
        .find(|(_, l)| l.starts_with("# "))
        .map_or(0, |(at, _)| at);
    let mut out = text[start.min(text.len())..].trim_end().to_string();
    out.push('\n');
    out
}

/// The text of the first level-one heading.
pub(crate) fn title_of(markdown: &str) -> Option<String> {
    markdown
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .map(|t| t.trim().trim_start_matches("PRD:").trim().to_string())
        .filter(|t| !t.is_empty())
}

fn fallback_title(idea: &str) -> String {
    let first = idea.lines().find(|l| !l.trim().is_empty()).unwrap_or("prd");
    first.trim().chars().take(80).collect()
}

/// A file-name-safe slug of `title`: lower-case ASCII letters, digits and single hyphens, at
/// most [`MAX_SLUG_CHARS`], never empty, never `.`/`..`. A title with nothing ASCII in it (or
/// cut short) gets a short hash, so different titles do not collide.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for c in title.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    let mut out = out.trim_end_matches('-').to_string();
    let cut = out.len() > MAX_SLUG_CHARS;
    if cut {
        out.truncate(MAX_SLUG_CHARS - 9);
        out = out.trim_end_matches('-').to_string();
    }
    if out.is_empty() || cut {
        let digest = Sha256::digest(title.as_bytes());
        if !out.is_empty() {
            out.push('-');
        }
        if out.is_empty() {
            out.push_str("prd-");
        }
        out.push_str(&hex::encode(&digest[..4]));
    }
    out
}

/// Writes `markdown` to `<root>/docs/PRD-<slug>.md` atomically. An existing file with the same
/// content is reused; a different one is never replaced: the next free `-2`, `-3`, … is taken.
pub fn save_prd(root: &Path, slug_text: &str, markdown: &str) -> Result<PathBuf, PrdError> {
    // The slug may come from a caller; re-slugging keeps it a plain file-name component.
    let safe = slug(slug_text);
    let dir = root.join(PRD_DIR);
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| PrdError::Io { path, source }
    };
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    for n in 1..=999u32 {
        let name = if n == 1 {
            format!("PRD-{safe}.md")
        } else {
            format!("PRD-{safe}-{n}.md")
        };
        let path = dir.join(name);
        match std::fs::read(&path) {
            Ok(existing) if existing == markdown.as_bytes() => return Ok(path),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(PrdError::Io { path, source: e }),
        }
        let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(io(&dir))?;
        tmp.write_all(markdown.as_bytes()).map_err(io(&path))?;
        tmp.as_file().sync_all().map_err(io(&path))?;
        // No-clobber: another writer that got there first makes us take the next number.
        match tmp.persist_noclobber(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(PrdError::Io {
                    path,
                    source: e.error,
                });
            }
        }
    }
    Err(PrdError::Io {
        path: dir.join(format!("PRD-{safe}.md")),
        source: std::io::Error::other("999 PRD files with this name exist already"),
    })
}

/// Reads a PRD back (after the operator edited it).
pub(crate) fn read_prd(path: &Path) -> Result<String, PrdError> {
    std::fs::read_to_string(path).map_err(|source| PrdError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// The slug of a saved PRD file (`docs/PRD-foo-2.md` → `foo-2`), else of its stem.
pub(crate) fn slug_of_file(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    slug(stem.strip_prefix("PRD-").unwrap_or(&stem))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_plain_bounded_components() {
        assert_eq!(slug("Team Calendar Sync!"), "team-calendar-sync");
        assert_eq!(slug("  --A/B..C--  "), "a-b-c");
        for nasty in ["../../etc/passwd", "..", ".", "/", "", "Календарь", "a\0b"] {
            let s = slug(nasty);
            assert!(!s.is_empty() && s != "." && s != "..", "{nasty:?} -> {s}");
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{s}"
            );
        }
        assert_ne!(slug("Календарь"), slug("Дневник"));
        assert!(slug("Календарь").starts_with("prd-"));
        let long = slug(&"word ".repeat(40));
        assert!(long.len() <= MAX_SLUG_CHARS, "{long}");
        assert_ne!(long, slug(&"word ".repeat(41)));
        assert_eq!(slug(&slug("Some Title")), slug("Some Title"));
    }

    #[test]
    fn markdown_is_cleaned_of_fences_and_chatter() {
        let fenced = "```markdown\n# Sync\n\n## Problem\nx\n```";
        assert_eq!(clean_markdown(fenced), "# Sync\n\n## Problem\nx\n");
        let chatty = "Sure! Here is the PRD:\n\n# PRD: Calendar sync\n\nbody\n";
        let md = clean_markdown(chatty);
        assert!(md.starts_with("# PRD: Calendar sync"), "{md}");
        assert_eq!(title_of(&md).as_deref(), Some("Calendar sync"));
        assert_eq!(clean_markdown("no heading at all"), "no heading at all\n");
    }

    #[test]
    fn save_never_replaces_a_different_file() {
        let root = tempfile::tempdir().unwrap();
        let a = save_prd(root.path(), "sync", "# A\n").unwrap();
        assert!(a.ends_with("docs/PRD-sync.md"));
        assert_eq!(save_prd(root.path(), "sync", "# A\n").unwrap(), a);
        let b = save_prd(root.path(), "sync", "# B\n").unwrap();
        assert!(b.ends_with("docs/PRD-sync-2.md"));
        let c = save_prd(root.path(), "sync", "# C\n").unwrap();
        assert!(c.ends_with("docs/PRD-sync-3.md"));
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "# A\n");
        assert_eq!(std::fs::read_to_string(&b).unwrap(), "# B\n");
        let evil = save_prd(root.path(), "../../x", "# E\n").unwrap();
        assert_eq!(evil.parent().unwrap(), root.path().join("docs"));
        assert_eq!(slug_of_file(&b), "sync-2");
        // Only the PRDs are left in docs/: no temporary files.
        assert_eq!(
            std::fs::read_dir(root.path().join("docs")).unwrap().count(),
            4
        );
    }
}
