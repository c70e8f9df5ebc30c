//! The parts of GitHub's answers Whilly reads; unknown fields are ignored, absent optional ones
//! defaulted, so a richer answer (GitHub Enterprise, a newer API) still parses.

use serde::{Deserialize, Deserializer};

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Repo {
    pub full_name: String,
    pub default_branch: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub clone_url: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Issue {
    pub number: u64,
    #[serde(default)]
    pub node_id: String,
    pub title: String,
    /// GitHub answers `null` for an empty body.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub body: String,
    pub state: String,
    #[serde(default, deserialize_with = "label_names")]
    pub labels: Vec<String>,
    #[serde(default)]
    pub html_url: String,
    #[serde(default)]
    pub updated_at: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Comment {
    pub id: u64,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub body: String,
    #[serde(default)]
    pub html_url: String,
    #[serde(default, rename = "user", deserialize_with = "login")]
    pub user_login: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    #[serde(default)]
    pub node_id: String,
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    #[serde(default)]
    pub draft: bool,
    #[serde(default)]
    pub merged: bool,
    #[serde(default)]
    pub merged_at: Option<String>,
    #[serde(rename = "head", deserialize_with = "branch_ref")]
    pub head_ref: String,
    #[serde(default, rename = "base", deserialize_with = "branch_ref")]
    pub base_ref: String,
}

/// Where a pull request stands, as the console shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrState {
    Draft,
    Open,
    Merged,
    Closed,
}

impl PullRequest {
    pub fn is_open(&self) -> bool {
        self.state == "open"
    }

    pub fn pr_state(&self) -> PrState {
        match (self.state.as_str(), self.draft) {
            ("open", true) => PrState::Draft,
            ("open", false) => PrState::Open,
            _ if self.merged || self.merged_at.is_some() => PrState::Merged,
            _ => PrState::Closed,
        }
    }
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPull {
    pub title: String,
    pub body: String,
    /// The branch with the work (same repository).
    pub head: String,
    pub base: String,
    pub draft: bool,
}

/// A pull request opened, or the one that was open already for the branch.
#[derive(Debug, Clone, PartialEq)]
pub struct Opened {
    pub pull: PullRequest,
    pub created: bool,
}

fn null_as_empty<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

fn label_names<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Label {
        Named { name: String },
        Plain(String),
    }
    let labels = Option::<Vec<Label>>::deserialize(d)?.unwrap_or_default();
    Ok(labels
        .into_iter()
        .map(|l| match l {
            Label::Named { name } | Label::Plain(name) => name,
        })
        .collect())
}

fn login<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    struct User {
        #[serde(default)]
        login: String,
    }
    Ok(Option::<User>::deserialize(d)?
        .map(|u| u.login)
        .unwrap_or_default())
}

fn branch_ref<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    struct Ref {
        #[serde(rename = "ref")]
        name: String,
    }
    Ok(Option::<Ref>::deserialize(d)?
        .map(|r| r.name)
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_parse_with_nulls_and_extra_fields() {
        let i: Issue = serde_json::from_value(json!({
            "number": 3, "title": "t", "body": null, "state": "open",
            "labels": [{"name": "whilly:ready", "color": "ededed"}], "extra": 1
        }))
        .unwrap();
        assert_eq!(i.body, "");
        assert_eq!(i.labels, vec!["whilly:ready"]);
        let p: PullRequest = serde_json::from_value(json!({
            "number": 8, "html_url": "u", "state": "closed", "merged_at": "2026-01-01T00:00:00Z",
            "head": {"ref": "whilly/p/GH-3", "sha": "abc"}, "base": {"ref": "main"}
        }))
        .unwrap();
        assert_eq!(p.head_ref, "whilly/p/GH-3");
        assert_eq!(p.pr_state(), PrState::Merged);
    }
}
