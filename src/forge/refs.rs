//! Names of things on a forge as an operator types them: a repository (`owner/name`), one issue
//! (`owner/name#42`, `owner/name/42`, its URL) and an issue source for `plan import`
//! (`gh:owner/name[:label]`). Parsing only; nothing here talks to GitHub.

use std::fmt;
use std::str::FromStr;

/// The label `plan import gh:owner/name` selects when none is given.
pub const DEFAULT_READY_LABEL: &str = "whilly:ready";

/// A repository on the forge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepoRef {
    pub owner: String,
    pub name: String,
}

impl RepoRef {
    pub fn new(owner: impl Into<String>, name: impl Into<String>) -> RepoRef {
        RepoRef {
            owner: owner.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for RepoRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    #[error("`{0}` is not a repository; write OWNER/REPO (e.g. octo-org/api)")]
    Repo(String),
    #[error(
        "`{0}` is not an issue; write OWNER/REPO#N, OWNER/REPO/N or the issue's URL (https://github.com/OWNER/REPO/issues/N)"
    )]
    Issue(String),
    #[error("`{0}` is not a GitHub source; write gh:OWNER/REPO or gh:OWNER/REPO:LABEL")]
    Source(String),
    #[error(
        "`{0}` is not a project board; write ghproject:OWNER/NUMBER or ghproject:OWNER/NUMBER:COLUMN"
    )]
    Board(String),
}

/// `ghproject:OWNER/NUMBER[:COLUMN]`: the issues in one column of a Projects (v2) board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoardSource {
    pub owner: String,
    pub number: u64,
    /// The column; `None`: `[github.project.columns] todo`.
    pub column: Option<String>,
}

impl BoardSource {
    pub fn looks_like(arg: &str) -> bool {
        arg.starts_with("ghproject:")
    }
}

impl FromStr for BoardSource {
    type Err = RefError;
    fn from_str(s: &str) -> Result<BoardSource, RefError> {
        let bad = || RefError::Board(s.to_string());
        let rest = s.trim().strip_prefix("ghproject:").ok_or_else(bad)?;
        let (board, column) = match rest.split_once(':') {
            Some((b, c)) if !c.trim().is_empty() => (b, Some(c.trim().to_string())),
            Some(_) => return Err(bad()),
            None => (rest, None),
        };
        let (owner, number) = board.split_once('/').ok_or_else(bad)?;
        if !valid_part(owner) {
            return Err(bad());
        }
        Ok(BoardSource {
            owner: owner.to_string(),
            number: number.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?,
            column,
        })
    }
}

/// GitHub's rules for owner and repository names, loosely: letters, digits, `-`, `_`, `.`; not
/// `.` or `..` (they would become path components somewhere).
fn valid_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s != "."
        && s != ".."
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl FromStr for RepoRef {
    type Err = RefError;
    fn from_str(s: &str) -> Result<RepoRef, RefError> {
        let t = s.trim().trim_end_matches(".git");
        match t.split_once('/') {
            Some((o, n)) if valid_part(o) && valid_part(n) => Ok(RepoRef::new(o, n)),
            _ => Err(RefError::Repo(s.to_string())),
        }
    }
}

/// One issue of a repository.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IssueRef {
    pub repo: RepoRef,
    pub number: u64,
}

impl fmt::Display for IssueRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.repo, self.number)
    }
}

impl FromStr for IssueRef {
    type Err = RefError;
    fn from_str(s: &str) -> Result<IssueRef, RefError> {
        let bad = || RefError::Issue(s.to_string());
        let t = s.trim();
        // A URL: any host (GitHub Enterprise too), path /OWNER/REPO/issues/N (or /pull/N, which
        // GitHub numbers from the same series).
        let t = match t.split_once("://") {
            Some((_, rest)) => {
                let path = rest.split_once('/').map(|(_, p)| p).ok_or_else(bad)?;
                let path = path.split(['?', '#']).next().unwrap_or_default();
                let parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
                match parts.as_slice() {
                    [o, r, "issues" | "pull", n] => format!("{o}/{r}/{n}"),
                    _ => return Err(bad()),
                }
            }
            None => t.to_string(),
        };
        let (repo, number) = match t.split_once('#') {
            Some((repo, n)) => (repo.to_string(), n.to_string()),
            None => {
                let (repo, n) = t.rsplit_once('/').ok_or_else(bad)?;
                (repo.to_string(), n.to_string())
            }
        };
        let repo: RepoRef = repo.parse().map_err(|_| bad())?;
        let number: u64 = number.parse().map_err(|_| bad())?;
        if number == 0 {
            return Err(bad());
        }
        Ok(IssueRef { repo, number })
    }
}

/// `gh:owner/name[:label]`: the open issues of a repository that carry a label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueSource {
    pub repo: RepoRef,
    pub label: String,
    /// Taken from a board's column instead of by label (`label` then names the column).
    pub board: Option<(String, u64)>,
}

impl IssueSource {
    /// Whether an import argument names a GitHub source rather than a file.
    pub fn looks_like(arg: &str) -> bool {
        arg.starts_with("gh:")
    }

    /// The plan a source's issues go to: the same source always maps to the same plan.
    pub fn plan_id(&self) -> String {
        if let Some((owner, number)) = &self.board {
            return slug(&format!("ghproject-{owner}-{number}"));
        }
        let mut id = format!("gh-{}-{}", self.repo.owner, self.repo.name);
        if self.label != DEFAULT_READY_LABEL {
            id.push('-');
            id.push_str(&self.label);
        }
        slug(&id)
    }
}

impl fmt::Display for IssueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.board {
            Some((owner, number)) => write!(f, "ghproject:{owner}/{number}:{}", self.label),
            None => write!(f, "gh:{}:{}", self.repo, self.label),
        }
    }
}

impl FromStr for IssueSource {
    type Err = RefError;
    fn from_str(s: &str) -> Result<IssueSource, RefError> {
        let bad = || RefError::Source(s.to_string());
        let rest = s.trim().strip_prefix("gh:").ok_or_else(bad)?;
        // The label may itself hold a colon (`whilly:ready`), the repository never does.
        let (repo, label) = match rest.split_once(':') {
            Some((repo, label)) if !label.trim().is_empty() => (repo, label.trim().to_string()),
            Some(_) => return Err(bad()),
            None => (rest, DEFAULT_READY_LABEL.to_string()),
        };
        Ok(IssueSource {
            repo: repo.parse().map_err(|_| bad())?,
            label,
            board: None,
        })
    }
}

/// A plan id from free text: lowercase letters, digits and `-`, at most 64 characters.
pub fn slug(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_alphanumeric() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches('-');
    out.chars()
        .take(64)
        .collect::<String>()
        .trim_end_matches('-')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_board_source_names_owner_number_and_maybe_a_column() {
        let b: BoardSource = "ghproject:octo-org/7".parse().unwrap();
        assert_eq!(
            (b.owner.as_str(), b.number, b.column),
            ("octo-org", 7, None)
        );
        let b: BoardSource = "ghproject:me/2:Ready to go".parse().unwrap();
        assert_eq!(b.column.as_deref(), Some("Ready to go"));
        for bad in [
            "ghproject:x",
            "ghproject:o/0",
            "ghproject:o/n",
            "ghproject:../1",
            "ghproject:o/1:",
        ] {
            assert!(bad.parse::<BoardSource>().is_err(), "{bad}");
        }
    }

    #[test]
    fn issue_refs_in_every_spelling() {
        let want = IssueRef {
            repo: RepoRef::new("octo-org", "api.rs"),
            number: 42,
        };
        for s in [
            "octo-org/api.rs#42",
            "octo-org/api.rs/42",
            "https://github.com/octo-org/api.rs/issues/42",
            "https://github.com/octo-org/api.rs/issues/42#issuecomment-1",
            "https://ghe.example.com/octo-org/api.rs/pull/42/",
        ] {
            assert_eq!(s.parse::<IssueRef>(), Ok(want.clone()), "{s}");
        }
        for s in [
            "octo-org#42",
            "a/b#x",
            "a/b#0",
            "../b#1",
            "https://github.com/a/b",
            "a/b",
        ] {
            assert!(s.parse::<IssueRef>().is_err(), "{s}");
        }
        assert_eq!(want.to_string(), "octo-org/api.rs#42");
    }

    #[test]
    fn sources_default_the_label_and_keep_colons_in_it() {
        let s: IssueSource = "gh:o/r".parse().unwrap();
        assert_eq!(s.label, DEFAULT_READY_LABEL);
        assert_eq!(s.plan_id(), "gh-o-r");
        let s: IssueSource = "gh:o/r:team:backend".parse().unwrap();
        assert_eq!(s.label, "team:backend");
        assert_eq!(s.plan_id(), "gh-o-r-team-backend");
        assert!("gh:o".parse::<IssueSource>().is_err());
        assert!("gh:o/r:".parse::<IssueSource>().is_err());
        assert!(IssueSource::looks_like("gh:o/r") && !IssueSource::looks_like("plan.json"));
    }

    #[test]
    fn slugs_are_safe_ids() {
        assert_eq!(slug("gh-Octo_Org-API.rs"), "gh-octo-org-api-rs");
        assert_eq!(slug("..//"), "");
    }
}
