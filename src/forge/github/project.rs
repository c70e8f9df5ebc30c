//! GitHub Projects (v2) over GraphQL: the board, its Status field and options, its items (read
//! with cursor pagination, 100 a page — the original tool asked for more and every sync of a
//! board past 100 cards failed), adding an issue's card and setting its column, and adding
//! missing columns without dropping the existing ones (options are sent back with their ids, or
//! GitHub recreates them and every card on them loses its status).

use super::client::GitHub;
use super::error::GitHubError;
use super::graphql::{self, Owner};
use crate::forge::refs::RepoRef;
use serde_json::{Value, json};

/// A board, with the field whose options are its columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Board {
    pub id: String,
    pub title: String,
    pub url: String,
    pub field_id: String,
    pub field_name: String,
    /// (option id, column name), in the board's order.
    pub columns: Vec<(String, String)>,
}

impl Board {
    /// The option id of a column, by name (case-insensitive, as people type them).
    pub fn column_id(&self, name: &str) -> Option<&str> {
        self.columns
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(id, _)| id.as_str())
    }

    pub fn column_name(&self, id: &str) -> Option<&str> {
        self.columns
            .iter()
            .find(|(i, _)| i == id)
            .map(|(_, n)| n.as_str())
    }
}

/// One card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Card {
    pub id: String,
    /// `ISSUE`, `PULL_REQUEST`, `DRAFT_ISSUE`, or `REDACTED` (the token cannot see it).
    pub kind: String,
    /// The issue or pull request behind it.
    pub repo: Option<RepoRef>,
    pub number: Option<u64>,
    pub title: String,
    pub url: String,
    pub body: String,
    /// OPEN or CLOSED.
    pub state: String,
    /// The column (Status option name), if set.
    pub column: Option<String>,
}

impl GitHub {
    /// The board `owner/number` (an organisation's, else a user's) with its `field`.
    pub async fn board(&self, owner: &str, number: u64, field: &str) -> Result<Board, GitHubError> {
        let mut last = None;
        for kind in [Owner::Organization, Owner::User] {
            match self
                .graphql(graphql::board(kind, owner, number, field))
                .await
            {
                Ok(data) => {
                    let p = &data[kind.field()]["projectV2"];
                    if p.is_object() {
                        return board_of(p, owner, number, field);
                    }
                }
                Err(e @ (GitHubError::Graphql { .. } | GitHubError::NotFound { .. })) => {
                    last = Some(e)
                }
                Err(e) => return Err(e),
            }
        }
        Err(GitHubError::NotFound {
            what: format!(
                "project board {owner}/{number}{}",
                last.map(|e| format!(" ({e})")).unwrap_or_default()
            ),
            token: self.token_source().clone(),
        })
    }

    /// Every card of the board, page by page.
    pub async fn cards(&self, board: &Board) -> Result<Vec<Card>, GitHubError> {
        let mut cards = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let data = self
                .graphql(graphql::board_items(
                    &board.id,
                    after.as_deref(),
                    &board.field_name,
                ))
                .await?;
            let items = &data["node"]["items"];
            let nodes = items["nodes"]
                .as_array()
                .ok_or_else(|| GitHubError::BadAnswer {
                    what: format!("the items of board {}", board.title),
                    detail: "no items.nodes in the answer".into(),
                })?;
            cards.extend(nodes.iter().map(card_of));
            let next = items["pageInfo"]["endCursor"].as_str().map(str::to_string);
            if items["pageInfo"]["hasNextPage"].as_bool() != Some(true) || next.is_none() {
                return Ok(cards);
            }
            after = next;
        }
    }

    /// The GraphQL node id of an issue (what a card is made from).
    pub async fn issue_node_id(&self, repo: &RepoRef, number: u64) -> Result<String, GitHubError> {
        let data = self.graphql(graphql::issue_node_id(repo, number)).await?;
        data["repository"]["issue"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| GitHubError::NotFound {
                what: format!("issue {repo}#{number}"),
                token: self.token_source().clone(),
            })
    }

    /// Puts the issue on the board (GitHub answers with the existing card when it is there).
    pub async fn add_card(&self, board: &Board, content_id: &str) -> Result<String, GitHubError> {
        let data = self
            .graphql(graphql::add_item(&board.id, content_id))
            .await?;
        data["addProjectV2ItemById"]["item"]["id"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| GitHubError::BadAnswer {
                what: "addProjectV2ItemById".into(),
                detail: "no item id in the answer".into(),
            })
    }

    /// Moves a card to a column.
    pub async fn move_card(
        &self,
        board: &Board,
        card_id: &str,
        option_id: &str,
    ) -> Result<(), GitHubError> {
        self.graphql(graphql::set_item_option(
            &board.id,
            card_id,
            &board.field_id,
            option_id,
        ))
        .await
        .map(|_| ())
    }

    /// Adds the `missing` columns after the existing ones, which keep their ids (and so their
    /// cards). Returns the board as it is now.
    pub async fn add_columns(
        &self,
        board: &Board,
        missing: &[String],
    ) -> Result<Board, GitHubError> {
        let options = column_options(board, missing);
        let data = self
            .graphql(graphql::set_field_options(&board.field_id, &options))
            .await?;
        let field = &data["updateProjectV2Field"]["projectV2Field"];
        Ok(Board {
            columns: options_of(field),
            ..board.clone()
        })
    }
}

/// The options of the board's field once the `missing` columns are added after its own.
pub fn column_options(board: &Board, missing: &[String]) -> Vec<Value> {
    let mut options: Vec<Value> = board
        .columns
        .iter()
        .map(|(id, name)| json!({ "id": id, "name": name, "color": "GRAY", "description": "" }))
        .collect();
    options.extend(missing.iter().map(
        |name| json!({ "name": name, "color": "GRAY", "description": "Whilly keeps tasks here" }),
    ));
    options
}

fn board_of(p: &Value, owner: &str, number: u64, field: &str) -> Result<Board, GitHubError> {
    let f = &p["field"];
    let Some(field_id) = f["id"].as_str() else {
        return Err(GitHubError::BadAnswer {
            what: format!("project board {owner}/{number}"),
            detail: format!(
                "it has no single-select field {field:?}: set [github.project] status_field to the board's column field"
            ),
        });
    };
    Ok(Board {
        id: p["id"].as_str().unwrap_or_default().to_string(),
        title: p["title"].as_str().unwrap_or_default().to_string(),
        url: p["url"].as_str().unwrap_or_default().to_string(),
        field_id: field_id.to_string(),
        field_name: f["name"].as_str().unwrap_or(field).to_string(),
        columns: options_of(f),
    })
}

fn options_of(field: &Value) -> Vec<(String, String)> {
    field["options"]
        .as_array()
        .map(|o| {
            o.iter()
                .filter_map(|o| {
                    Some((
                        o["id"].as_str()?.to_string(),
                        o["name"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn card_of(n: &Value) -> Card {
    let c = &n["content"];
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    Card {
        id: text(&n["id"]),
        kind: text(&n["type"]),
        repo: c["repository"]["nameWithOwner"]
            .as_str()
            .and_then(|r| r.parse().ok()),
        number: c["number"].as_u64(),
        title: text(&c["title"]),
        url: text(&c["url"]),
        body: text(&c["body"]),
        state: text(&c["state"]),
        column: n["fieldValueByName"]["name"].as_str().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_is_read_from_github_s_shape_and_a_redacted_one_has_no_content() {
        let n = json!({
            "id": "PVTI_1", "type": "ISSUE",
            "content": {"number": 4, "title": "T", "body": "B", "state": "OPEN", "url": "u",
                        "repository": {"nameWithOwner": "o/r"}},
            "fieldValueByName": {"name": "Todo", "optionId": "a1"}
        });
        let c = card_of(&n);
        assert_eq!(c.repo, Some(RepoRef::new("o", "r")));
        assert_eq!(c.number, Some(4));
        assert_eq!(c.column.as_deref(), Some("Todo"));
        let r = card_of(
            &json!({"id": "PVTI_2", "type": "REDACTED", "content": null, "fieldValueByName": null}),
        );
        assert_eq!((r.repo, r.number, r.column), (None, None, None));
    }

    #[test]
    fn columns_are_found_by_name_whatever_the_case() {
        let b = Board {
            id: "P".into(),
            title: "t".into(),
            url: String::new(),
            field_id: "F".into(),
            field_name: "Status".into(),
            columns: vec![("a".into(), "In Progress".into())],
        };
        assert_eq!(b.column_id("in progress"), Some("a"));
        assert_eq!(b.column_name("a"), Some("In Progress"));
        assert_eq!(b.column_id("Done"), None);
    }
}
