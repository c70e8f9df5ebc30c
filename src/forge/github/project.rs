//! GitHub Projects (v2) over GraphQL: the board, its Status field and options, its items (read
//! with cursor pagination, 100 a page — the original tool asked for more and every sync of a
//! board past 100 cards failed), adding an issue's card and setting its column, and adding
//! missing columns without dropping the existing ones. GitHub takes a field's options only as a
//! whole new list of `{name, color, description}` (an option input has no `id`): every option
//! gets a new id and every card loses its column, so adding columns puts each card back in the
//! column of the same name ([`GitHub::add_columns_keeping_cards`]).

use super::client::GitHub;
use super::error::GitHubError;
use super::graphql::{self, OptionInput, Owner};
use crate::forge::refs::RepoRef;
use serde_json::Value;

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

impl Card {
    /// How to name the card to a person: its issue or pull request, else its id.
    pub fn label(&self) -> String {
        match (&self.repo, self.number) {
            (Some(repo), Some(n)) => format!("{repo}#{n}"),
            _ => format!("card {}", self.id),
        }
    }
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
    /// OPEN or CLOSED (a merged pull request is CLOSED); empty when the token cannot see it.
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

    /// The options of the board's column field as they are on GitHub now, with the colors and
    /// descriptions that sending them back must keep.
    pub async fn column_options(&self, board: &Board) -> Result<Vec<OptionInput>, GitHubError> {
        let data = self
            .graphql(graphql::field_options(&board.field_id))
            .await?;
        let options = data["node"]["options"]
            .as_array()
            .ok_or_else(|| GitHubError::BadAnswer {
                what: format!("the {} field of board {}", board.field_name, board.title),
                detail: "no options in the answer".into(),
            })?;
        Ok(options
            .iter()
            .filter_map(|o| {
                Some(OptionInput {
                    name: o["name"].as_str()?.to_string(),
                    color: o["color"].as_str().unwrap_or("GRAY").to_string(),
                    description: o["description"].as_str().unwrap_or_default().to_string(),
                })
            })
            .collect())
    }

    /// Adds the `missing` columns after the existing ones, and puts every card back in its
    /// column: GitHub replaces the whole option list (each option gets a new id, every card
    /// loses its column), so the cards' columns are read first and set again by name after.
    /// The existing columns keep their names, order, colors and descriptions. A column of
    /// `missing` that the board has by now is not added again.
    ///
    /// A card that cannot be put back is an error naming it, after the others were.
    pub async fn add_columns_keeping_cards(
        &self,
        board: &Board,
        missing: &[String],
    ) -> Result<ColumnsAdded, GitHubError> {
        let current = self.column_options(board).await?;
        let options = options_adding(&current, missing);
        let added: Vec<String> = options[current.len()..]
            .iter()
            .map(|o| o.name.clone())
            .collect();
        if added.is_empty() {
            return Ok(ColumnsAdded {
                board: board.clone(),
                added,
                cards_reset: 0,
            });
        }
        let cards = self.cards(board).await?;
        let data = self
            .graphql(graphql::set_field_options(&board.field_id, &options))
            .await?;
        let columns = options_of(&data["updateProjectV2Field"]["projectV2Field"]);
        if columns.len() != options.len() {
            return Err(GitHubError::BadAnswer {
                what: format!("updateProjectV2Field on board {}", board.title),
                detail: format!(
                    "{} option(s) sent, {} in the answer",
                    options.len(),
                    columns.len()
                ),
            });
        }
        let updated = Board {
            columns,
            ..board.clone()
        };
        let (cards_reset, lost) = self.put_back(&updated, &cards).await;
        if !lost.is_empty() {
            return Err(GitHubError::CardsNotReset {
                board: board.title.clone(),
                added: added.join(", "),
                reset: cards_reset,
                lost,
            });
        }
        Ok(ColumnsAdded {
            board: updated,
            added,
            cards_reset,
        })
    }

    /// Sets each card back in the column it was in (by name), many cards to a request: how
    /// many were, and a line for each that was not.
    async fn put_back(&self, board: &Board, cards: &[Card]) -> (usize, Vec<String>) {
        let mut lost = Vec::new();
        let mut wanted: Vec<(&Card, &str, &str)> = Vec::new();
        for card in cards {
            let Some(column) = card.column.as_deref() else {
                continue;
            };
            match board.column_id(column) {
                Some(option) => wanted.push((card, column, option)),
                None => lost.push(format!("{} → {column} (no such column now)", card.label())),
            }
        }
        let mut reset = 0;
        for batch in wanted.chunks(graphql::SET_ITEM_OPTIONS_MAX) {
            let pairs: Vec<(&str, &str)> = batch
                .iter()
                .map(|(card, _, option)| (card.id.as_str(), *option))
                .collect();
            let request = graphql::set_item_options(&board.id, &board.field_id, &pairs);
            match self.graphql_partial(request).await {
                Ok((data, errors)) => {
                    for (k, (card, column, _)) in batch.iter().enumerate() {
                        let alias = format!("card{k}");
                        if data[&alias]["projectV2Item"]["id"].is_string() {
                            reset += 1;
                            continue;
                        }
                        let why: Vec<&str> = errors
                            .iter()
                            .filter(|e| e["path"][0].as_str() == Some(alias.as_str()))
                            .filter_map(|e| e["message"].as_str())
                            .collect();
                        let why = if why.is_empty() {
                            "no answer for it".to_string()
                        } else {
                            why.join("; ")
                        };
                        lost.push(format!("{} → {column} ({why})", card.label()));
                    }
                }
                Err(e) => lost.extend(
                    batch
                        .iter()
                        .map(|(card, column, _)| format!("{} → {column} ({e})", card.label())),
                ),
            }
        }
        (reset, lost)
    }

    /// [`add_columns_keeping_cards`](Self::add_columns_keeping_cards), for a caller that needs
    /// only the board as it is now.
    pub async fn add_columns(
        &self,
        board: &Board,
        missing: &[String],
    ) -> Result<Board, GitHubError> {
        self.add_columns_keeping_cards(board, missing)
            .await
            .map(|a| a.board)
    }
}

/// What [`GitHub::add_columns_keeping_cards`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnsAdded {
    /// The board as it is now (its columns have new option ids).
    pub board: Board,
    /// The columns added, in the board's order.
    pub added: Vec<String>,
    /// The cards put back in their column after GitHub cleared it.
    pub cards_reset: usize,
}

/// What Whilly sends to add the `missing` columns (those not already on the board, any case,
/// each once) after the `current` ones: the whole list, the current options unchanged, the new
/// ones gray.
pub fn options_adding(current: &[OptionInput], missing: &[String]) -> Vec<OptionInput> {
    let mut options = current.to_vec();
    for name in missing {
        if !options.iter().any(|o| o.name.eq_ignore_ascii_case(name)) {
            options.push(OptionInput {
                name: name.clone(),
                color: "GRAY".into(),
                description: "Whilly keeps tasks here".into(),
            });
        }
    }
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
        state: match c["closed"].as_bool() {
            Some(true) => "CLOSED".into(),
            Some(false) => "OPEN".into(),
            None => String::new(),
        },
        column: n["fieldValueByName"]["name"].as_str().map(str::to_string),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_card_is_read_from_github_s_shape_and_a_redacted_one_has_no_content() {
        let n = json!({
            "id": "PVTI_1", "type": "ISSUE",
            "content": {"number": 4, "title": "T", "body": "B", "closed": false, "url": "u",
                        "repository": {"nameWithOwner": "o/r"}},
            "fieldValueByName": {"name": "Todo", "optionId": "a1"}
        });
        let c = card_of(&n);
        assert_eq!(c.repo, Some(RepoRef::new("o", "r")));
        assert_eq!(c.number, Some(4));
        assert_eq!(c.column.as_deref(), Some("Todo"));
        assert_eq!(c.state, "OPEN");
        assert_eq!(c.label(), "o/r#4");
        let r = card_of(
            &json!({"id": "PVTI_2", "type": "REDACTED", "content": null, "fieldValueByName": null}),
        );
        assert_eq!(r.label(), "card PVTI_2");
        assert_eq!((r.repo, r.number, r.column), (None, None, None));
    }

    #[test]
    fn added_columns_come_after_the_board_s_own_which_are_sent_back_unchanged() {
        let option = |name: &str, color: &str, description: &str| OptionInput {
            name: name.into(),
            color: color.into(),
            description: description.into(),
        };
        let current = [option("Todo", "BLUE", "to do"), option("Done", "GREEN", "")];
        let missing = ["done".to_string(), "In Review".into(), "In Review".into()];
        assert_eq!(
            options_adding(&current, &missing),
            [
                option("Todo", "BLUE", "to do"),
                option("Done", "GREEN", ""),
                option("In Review", "GRAY", "Whilly keeps tasks here"),
            ]
        );
        assert_eq!(options_adding(&current, &[]), current);
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
