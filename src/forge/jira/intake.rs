//! A Jira issue as a task (pure): `JIRA-ABC-123`, its priority mapped from Jira's, the
//! description flattened from ADF, acceptance criteria from a configured custom field or an
//! "Acceptance" heading, test steps from a "Test" heading, the issue URL kept as its source.
//! The text is someone else's: a secret in it refuses the issue by key, never importing it.

use super::adf;
use super::client::JiraIssue;
use crate::domain::secrets::find_secrets;
use crate::domain::{Priority, TaskSpec};
use crate::forge::refs::slug;
use serde_json::{Map, Value, json};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JiraIntakeError {
    #[error(
        "{key} holds what looks like a secret ({kind}) in its {place}; it was not imported: remove the secret from the issue (and revoke it), then import again"
    )]
    Secret {
        key: String,
        kind: String,
        place: &'static str,
    },
    #[error("{key} has no summary; give it one")]
    NoSummary { key: String },
    #[error(
        "`{0}` is not a Jira source: write jira:ABC-123 or jira:\"JQL\" (e.g. jira:\"project = ABC\")"
    )]
    BadKey(String),
    #[error("Jira answered with an issue key `{0}` that is not ABC-123; it was not imported")]
    OddKey(String),
}

/// `jira:ABC-123` (one issue) or `jira:JQL` (what the query finds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JiraSource {
    Key(String),
    Jql(String),
}

impl JiraSource {
    pub fn looks_like(arg: &str) -> bool {
        arg.starts_with("jira:")
    }

    /// The JQL to search with.
    pub fn jql(&self) -> String {
        match self {
            JiraSource::Key(k) => format!("key = {k}"),
            JiraSource::Jql(q) => q.clone(),
        }
    }

    /// The same source always maps to the same plan: `jira-abc-123`, or `jira-<words>-<hash>`
    /// for a query (two queries alike in their first words still differ).
    pub fn plan_id(&self) -> String {
        match self {
            JiraSource::Key(k) => slug(&format!("jira-{k}")),
            JiraSource::Jql(q) => {
                use sha2::Digest;
                let hash = hex::encode(sha2::Sha256::digest(q.trim().as_bytes()));
                let words: String = slug(q).chars().take(40).collect();
                slug(&format!("jira-{words}-{}", &hash[..8]))
            }
        }
    }
}

impl fmt::Display for JiraSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JiraSource::Key(k) => write!(f, "jira:{k}"),
            JiraSource::Jql(q) => write!(f, "jira:{q}"),
        }
    }
}

impl FromStr for JiraSource {
    type Err = JiraIntakeError;
    fn from_str(s: &str) -> Result<JiraSource, JiraIntakeError> {
        let rest = s
            .trim()
            .strip_prefix("jira:")
            .ok_or_else(|| JiraIntakeError::BadKey(s.to_string()))?
            .trim()
            .trim_matches('"');
        if rest.is_empty() {
            return Err(JiraIntakeError::BadKey(s.to_string()));
        }
        Ok(if is_key(rest) {
            JiraSource::Key(rest.to_string())
        } else {
            JiraSource::Jql(rest.to_string())
        })
    }
}

/// `ABC-123`: a project key (a letter, then letters, digits, `_`) and a number.
pub fn is_key(s: &str) -> bool {
    let Some((project, n)) = s.split_once('-') else {
        return false;
    };
    project
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase())
        && project
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && !n.is_empty()
        && n.chars().all(|c| c.is_ascii_digit())
}

/// The task id of an issue key.
pub fn task_id(key: &str) -> String {
    format!("JIRA-{key}")
}

/// The issue key of a task made from a Jira issue, with its URL.
pub fn source_of(task: &TaskSpec) -> Option<(String, String)> {
    let s = task.extra.get("source")?;
    if s["type"] != "jira" {
        return None;
    }
    let key = s["key"].as_str().filter(|k| is_key(k))?;
    Some((
        key.to_string(),
        s["url"].as_str().unwrap_or_default().to_string(),
    ))
}

fn priority_of(name: Option<&str>) -> Priority {
    match name.map(str::to_ascii_lowercase).as_deref() {
        Some("highest" | "blocker" | "critical") => Priority::Critical,
        Some("high" | "major") => Priority::High,
        Some("low" | "lowest" | "minor" | "trivial") => Priority::Low,
        _ => Priority::Medium,
    }
}

/// Lines of a custom field: a string (one per line), a list of strings, or an ADF document.
fn field_lines(v: &Value) -> Vec<String> {
    let lines = match v {
        Value::String(s) => s.lines().map(str::to_string).collect(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| {
                i.as_str()
                    .map(str::to_string)
                    .or_else(|| i["value"].as_str().map(str::to_string))
            })
            .collect(),
        Value::Object(_) => adf::to_text(v).lines().map(str::to_string).collect(),
        _ => Vec::new(),
    };
    lines
        .into_iter()
        .map(|l: String| l.trim().trim_start_matches("- ").trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// The task an issue becomes.
pub fn to_task(
    issue: &JiraIssue,
    acceptance_field: Option<&str>,
) -> Result<TaskSpec, JiraIntakeError> {
    if !is_key(&issue.key) {
        return Err(JiraIntakeError::OddKey(issue.key.clone()));
    }
    let text = adf::to_text(&issue.description);
    let acceptance: Vec<String> = match acceptance_field {
        Some(f) => field_lines(&issue.fields[f]),
        None => Vec::new(),
    };
    let acceptance = if acceptance.is_empty() {
        adf::section(&issue.description, "Acceptance").unwrap_or_default()
    } else {
        acceptance
    };
    for (place, t) in [
        ("summary", issue.summary.clone()),
        ("description", text.clone()),
        ("acceptance criteria", acceptance.join("\n")),
    ] {
        if let Some((kind, _)) = find_secrets(&t).first() {
            return Err(JiraIntakeError::Secret {
                key: issue.key.clone(),
                kind: kind.to_string(),
                place,
            });
        }
    }
    let summary = issue.summary.trim();
    if summary.is_empty() {
        return Err(JiraIntakeError::NoSummary {
            key: issue.key.clone(),
        });
    }
    let mut description = summary.to_string();
    if !text.trim().is_empty() {
        description.push_str("\n\n");
        description.push_str(text.trim());
    }
    let mut extra = Map::new();
    extra.insert(
        "source".into(),
        json!({
            "type": "jira",
            "key": issue.key,
            "url": issue.url,
            "status": issue.status,
        }),
    );
    Ok(TaskSpec {
        id: task_id(&issue.key),
        priority: priority_of(issue.priority.as_deref()),
        description,
        acceptance_criteria: acceptance,
        test_steps: adf::section(&issue.description, "Test").unwrap_or_default(),
        extra,
        ..TaskSpec::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issue(key: &str, desc: Value) -> JiraIssue {
        JiraIssue {
            key: key.into(),
            summary: "Export the weekly report".into(),
            description: desc,
            status: "To Do".into(),
            status_category: "new".into(),
            priority: Some("Highest".into()),
            labels: vec![],
            fields: json!({"customfield_10042": "reports/weekly.txt exists\n- it is not empty"}),
            url: format!("https://x.atlassian.net/browse/{key}"),
        }
    }

    #[test]
    fn an_issue_becomes_a_task_with_its_sections() {
        let desc = adf::from_markdown(
            "The job needs it.\n\n## Acceptance\n- the file exists\n\n## Test\n- test -f out.txt\n",
        );
        let t = to_task(&issue("ABC-12", desc.clone()), None).unwrap();
        assert_eq!(t.id, "JIRA-ABC-12");
        assert_eq!(t.priority, Priority::Critical);
        assert!(
            t.description
                .starts_with("Export the weekly report\n\nThe job needs it.")
        );
        assert_eq!(t.acceptance_criteria, vec!["the file exists"]);
        assert_eq!(t.test_steps, vec!["test -f out.txt"]);
        assert_eq!(source_of(&t).unwrap().0, "ABC-12");
        assert!(crate::agent::prompt::is_untrusted(&t));
        let t = to_task(&issue("ABC-12", desc), Some("customfield_10042")).unwrap();
        assert_eq!(
            t.acceptance_criteria,
            vec!["reports/weekly.txt exists", "it is not empty"]
        );
    }

    #[test]
    fn a_secret_refuses_the_issue_by_key() {
        let token = format!("ghp_{}", "Zx9Q".repeat(9));
        let desc = adf::from_markdown(&format!("deploy with {token}"));
        let err = to_task(&issue("ABC-13", desc), None).unwrap_err();
        assert!(err.to_string().starts_with("ABC-13 holds"), "{err}");
        assert!(!err.to_string().contains(&token));
    }

    #[test]
    fn sources_and_their_plans() {
        assert_eq!(
            "jira:ABC-123".parse::<JiraSource>().unwrap(),
            JiraSource::Key("ABC-123".into())
        );
        let q: JiraSource = "jira:\"project = ABC AND status = 'To Do'\""
            .parse()
            .unwrap();
        assert_eq!(q.jql(), "project = ABC AND status = 'To Do'");
        assert!(
            q.plan_id()
                .starts_with("jira-project-abc-and-status-to-do-")
        );
        let other: JiraSource = "jira:project = ABC AND status = 'Done'".parse().unwrap();
        assert_ne!(q.plan_id(), other.plan_id());
        assert_eq!(JiraSource::Key("ABC-1".into()).plan_id(), "jira-abc-1");
        assert!("jira:".parse::<JiraSource>().is_err());
        assert!(!is_key("../1") && !is_key("abc-1") && is_key("AB_C2-77"));
    }
}
