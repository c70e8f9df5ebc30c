//! An issue as a task: the pure mapping `plan import gh:…` and `whilly forge` share.
//!
//! The issue's body is read the way teams already write issues: `## Acceptance` and `## Test`
//! sections give the criteria and the test steps, `**Depends:** #12, #13` and
//! `**Files:** src/a.rs` lines the dependencies and key files, `priority:*` labels the priority.
//! Everything else of the body stays in the description. The text is someone else's: the task is
//! marked as coming from outside (`extra.source`), which fences it in the prompt, and a body that
//! holds a secret is refused here, before anything is stored.

use super::refs::RepoRef;
use crate::domain::secrets::find_secrets;
use crate::domain::{Priority, TaskSpec};
use serde_json::{Map, Value, json};

/// The reason a task whose issue was closed on GitHub is skipped with.
pub const CLOSED_UPSTREAM: &str = "closed_upstream";

/// What intake needs of an issue, whoever fetched it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct UpstreamIssue {
    pub number: u64,
    pub title: String,
    pub body: String,
    pub labels: Vec<String>,
    pub url: String,
    /// `open` or `closed`.
    pub state: String,
    /// Comments' bodies, oldest first (`whilly forge` folds them in; `plan import` does not).
    pub comments: Vec<String>,
}

impl UpstreamIssue {
    pub fn is_closed(&self) -> bool {
        self.state.eq_ignore_ascii_case("closed")
    }
}

/// Why an issue did not become a task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntakeError {
    #[error(
        "issue #{number} holds what looks like a secret ({kind}) in its {place}; it was not imported: remove the secret from the issue (and revoke it), then import again"
    )]
    Secret {
        number: u64,
        kind: String,
        place: &'static str,
    },
    #[error("issue #{number} has an empty title; give it one that says what to build")]
    NoTitle { number: u64 },
}

/// The task id an issue becomes.
pub fn task_id(number: u64) -> String {
    format!("GH-{number}")
}

/// The issue number of a task id made by [`task_id`].
pub fn issue_number(task_id: &str) -> Option<u64> {
    task_id.strip_prefix("GH-")?.parse().ok()
}

/// The task `issue` becomes. `with_comments` folds the comments into the description (they often
/// carry the decisions the body lacks).
pub fn to_task(
    repo: &RepoRef,
    issue: &UpstreamIssue,
    with_comments: bool,
) -> Result<TaskSpec, IntakeError> {
    let secret = |text: &str, place: &'static str| -> Result<(), IntakeError> {
        match find_secrets(text).first() {
            Some((kind, _)) => Err(IntakeError::Secret {
                number: issue.number,
                kind: kind.to_string(),
                place,
            }),
            None => Ok(()),
        }
    };
    secret(&issue.title, "title")?;
    secret(&issue.body, "body")?;
    if with_comments {
        for c in &issue.comments {
            secret(c, "comments")?;
        }
    }
    let title = issue.title.trim();
    if title.is_empty() {
        return Err(IntakeError::NoTitle {
            number: issue.number,
        });
    }
    let parsed = parse_body(&issue.body);
    let mut description = title.to_string();
    if !parsed.rest.is_empty() {
        description.push_str("\n\n");
        description.push_str(&parsed.rest);
    }
    if with_comments && !issue.comments.is_empty() {
        description.push_str("\n\nFrom the issue's comments:");
        for c in issue
            .comments
            .iter()
            .map(|c| c.trim())
            .filter(|c| !c.is_empty())
        {
            description.push_str("\n- ");
            description.push_str(&c.replace('\n', "\n  "));
        }
    }
    let mut extra = Map::new();
    extra.insert(
        "source".into(),
        json!({
            "type": "github",
            "repo": repo.to_string(),
            "number": issue.number,
            "url": issue.url,
            "state": issue.state.to_ascii_lowercase(),
        }),
    );
    Ok(TaskSpec {
        id: task_id(issue.number),
        priority: priority_of(&issue.labels),
        description,
        dependencies: parsed.depends.iter().map(|n| task_id(*n)).collect(),
        key_files: parsed.files,
        acceptance_criteria: parsed.acceptance,
        test_steps: parsed.tests,
        extra,
        ..TaskSpec::default()
    })
}

/// The GitHub source of a task made from an issue: (repository, number, URL).
pub fn source_of(task: &TaskSpec) -> Option<(RepoRef, u64, String)> {
    let s = task.extra.get("source")?;
    if s.get("type").and_then(Value::as_str) != Some("github") {
        return None;
    }
    let repo: RepoRef = s.get("repo")?.as_str()?.parse().ok()?;
    let number = s.get("number")?.as_u64()?;
    let url = s
        .get("url")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    Some((repo, number, url))
}

/// `priority:high`, `priority: p1`, `P1`, … — the first label that names a priority.
pub fn priority_of(labels: &[String]) -> Priority {
    labels
        .iter()
        .find_map(|l| {
            let l = l.trim();
            let value = match l.split_once(':') {
                Some((k, v)) if k.trim().eq_ignore_ascii_case("priority") => v.trim(),
                Some(_) => return None,
                None if l.len() == 2 && l.to_ascii_lowercase().starts_with('p') => l,
                None => return None,
            };
            value.parse::<Priority>().ok()
        })
        .unwrap_or_default()
}

/// The parts of an issue body intake gives meaning to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedBody {
    pub acceptance: Vec<String>,
    pub tests: Vec<String>,
    pub depends: Vec<u64>,
    pub files: Vec<String>,
    /// The body without those parts, trimmed.
    pub rest: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Section {
    Other,
    Acceptance,
    Test,
}

fn section_of(heading: &str) -> Section {
    let h = heading.trim().trim_end_matches(':').to_ascii_lowercase();
    if h.starts_with("acceptance") || h == "done when" || h == "definition of done" {
        Section::Acceptance
    } else if h.starts_with("test") || h.starts_with("verification") || h == "how to verify" {
        Section::Test
    } else {
        Section::Other
    }
}

/// A markdown heading's text (`## Acceptance criteria` → `Acceptance criteria`).
fn heading(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let hashes = t.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
        Some(t[hashes..].trim())
    } else {
        None
    }
}

/// An inline field line: `**Depends:** …`, `Depends: …`, `- **Files**: …`.
fn inline_field(line: &str) -> Option<(String, &str)> {
    let t = line.trim().trim_start_matches(['-', '*', ' ']).trim_start();
    let t = t.strip_prefix("**").unwrap_or(t);
    let (key, value) = t.split_once(':')?;
    let key = key
        .trim()
        .trim_end_matches("**")
        .trim()
        .to_ascii_lowercase();
    let value = value.trim_start().trim_start_matches("**").trim();
    match key.as_str() {
        "depends" | "depends on" | "dependencies" | "files" | "key files" => Some((key, value)),
        _ => None,
    }
}

/// A list item's text (`- [ ] x`, `* x`, `1. x`), or `None` for a line that is not one.
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim();
    let rest = if let Some(r) = t.strip_prefix("- ").or_else(|| t.strip_prefix("* ")) {
        r
    } else {
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        t[digits..]
            .strip_prefix(". ")
            .or_else(|| t[digits..].strip_prefix(") "))?
    };
    let rest = rest.trim_start();
    let rest = ["[ ] ", "[x] ", "[X] "]
        .iter()
        .find_map(|p| rest.strip_prefix(p))
        .unwrap_or(rest);
    Some(rest.trim())
}

fn issue_numbers(value: &str) -> Vec<u64> {
    value
        .split([',', ' ', ';'])
        .filter_map(|p| {
            let p = p.trim().trim_matches('`');
            // `#12`, or a link to it: `https://github.com/o/r/issues/12`.
            let n = p
                .strip_prefix('#')
                .or_else(|| p.rsplit_once("/issues/").map(|(_, n)| n))?;
            n.parse().ok()
        })
        .collect()
}

fn file_list(value: &str) -> Vec<String> {
    value
        .split([',', ' '])
        .map(|p| p.trim().trim_matches('`').to_string())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Splits a body into the parts intake reads and the rest. Code fences are kept whole: a `#`
/// line inside one is not a heading.
pub fn parse_body(body: &str) -> ParsedBody {
    let mut out = ParsedBody::default();
    let mut section = Section::Other;
    let mut in_fence = false;
    let mut rest: Vec<&str> = Vec::new();
    for line in body.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && let Some(h) = heading(line) {
            section = section_of(h);
            if section == Section::Other {
                rest.push(line);
            }
            continue;
        }
        if !in_fence && let Some((key, value)) = inline_field(line) {
            if key.starts_with("depend") {
                out.depends.extend(issue_numbers(value));
            } else {
                out.files.extend(file_list(value));
            }
            continue;
        }
        match section {
            Section::Other => rest.push(line),
            Section::Acceptance | Section::Test => {
                let item = if in_fence { None } else { list_item(line) };
                let text = item.unwrap_or(line.trim());
                if text.is_empty() || text.starts_with("```") {
                    continue;
                }
                let list = if section == Section::Acceptance {
                    &mut out.acceptance
                } else {
                    &mut out.tests
                };
                match (item, list.last_mut()) {
                    // A wrapped line continues the item above it.
                    (None, Some(last)) if !in_fence => {
                        last.push(' ');
                        last.push_str(text);
                    }
                    _ => list.push(text.to_string()),
                }
            }
        }
    }
    out.depends.sort_unstable();
    out.depends.dedup();
    out.rest = rest.join("\n").trim().to_string();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "The export endpoint times out on large accounts.\n\n\
**Depends:** #12, #13\n\
**Files:** `src/export.rs`, src/api/mod.rs\n\n\
## Acceptance\n\
- [ ] exports of 100k rows finish in under 5 s\n\
- the response streams\n  as CSV\n\n\
## Test steps\n\
1. cargo test export\n\
2. `curl localhost/export`\n\n\
## Notes\n\
```\n# not a heading\n```\n";

    fn issue(body: &str, labels: &[&str]) -> UpstreamIssue {
        UpstreamIssue {
            number: 42,
            title: "Stream large exports".into(),
            body: body.into(),
            labels: labels.iter().map(|s| s.to_string()).collect(),
            url: "https://github.com/o/r/issues/42".into(),
            state: "open".into(),
            comments: vec![],
        }
    }

    #[test]
    fn sections_and_inline_fields_become_task_fields() {
        let repo = RepoRef::new("o", "r");
        let t = to_task(
            &repo,
            &issue(BODY, &["whilly:ready", "priority:high"]),
            false,
        )
        .unwrap();
        assert_eq!(t.id, "GH-42");
        assert_eq!(t.priority, Priority::High);
        assert_eq!(t.dependencies, vec!["GH-12", "GH-13"]);
        assert_eq!(t.key_files, vec!["src/export.rs", "src/api/mod.rs"]);
        assert_eq!(
            t.acceptance_criteria,
            vec![
                "exports of 100k rows finish in under 5 s",
                "the response streams as CSV"
            ]
        );
        assert_eq!(
            t.test_steps,
            vec!["cargo test export", "`curl localhost/export`"]
        );
        assert!(
            t.description
                .starts_with("Stream large exports\n\nThe export endpoint")
        );
        assert!(t.description.contains("## Notes") && t.description.contains("# not a heading"));
        assert!(!t.description.contains("Depends"));
        assert_eq!(
            source_of(&t),
            Some((repo, 42, "https://github.com/o/r/issues/42".into()))
        );
        assert!(
            crate::agent::prompt::is_untrusted(&t),
            "issue text is fenced"
        );
    }

    #[test]
    fn a_secret_anywhere_refuses_the_issue_naming_it() {
        let repo = RepoRef::new("o", "r");
        let token = format!("ghp_{}", "a1B2".repeat(9));
        let e = to_task(&repo, &issue(&format!("use {token}"), &[]), false).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("#42") && text.contains("body"), "{text}");
        assert!(!text.contains(&token));
        let mut with_comment = issue("fine", &[]);
        with_comment.comments = vec![format!("token: {token}")];
        assert!(
            to_task(&repo, &with_comment, false).is_ok(),
            "comments unread"
        );
        assert!(to_task(&repo, &with_comment, true).is_err());
    }

    #[test]
    fn priorities_from_labels() {
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            priority_of(&l(&["bug", "Priority: Critical"])),
            Priority::Critical
        );
        assert_eq!(priority_of(&l(&["P3"])), Priority::Low);
        assert_eq!(priority_of(&l(&["whilly:ready"])), Priority::Medium);
    }

    #[test]
    fn ids_round_trip() {
        assert_eq!(issue_number(&task_id(7)), Some(7));
        assert_eq!(issue_number("TASK-7"), None);
    }
}
