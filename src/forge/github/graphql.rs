//! Every GraphQL request Whilly sends to GitHub: its document, one of the constants listed in
//! [`DOCUMENTS`] or one made by [`set_item_options_document`], and the variables built for it
//! here. [`GitHub::graphql`](super::GitHub::graphql) takes only a [`Request`] made by this
//! module, so tests/github_schema.rs can check every document ([`documents`]), and the variables
//! Whilly actually builds, against GitHub's published schema: a document or an input GitHub
//! would refuse (an `id` in an option input, say) fails a test rather than `whilly board ensure`
//! on a real board.

use crate::forge::refs::RepoRef;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::borrow::Cow;

/// A GraphQL request: a document of [`documents`] and its variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    name: &'static str,
    query: Cow<'static, str>,
    variables: Value,
}

impl Request {
    pub fn query(&self) -> &str {
        &self.query
    }

    pub fn variables(&self) -> &Value {
        &self.variables
    }

    /// The name of its document in [`documents`].
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// Who owns a board: GitHub asks for an organisation's and a user's in different fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Organization,
    User,
}

impl Owner {
    /// The query's top-level field.
    pub fn field(self) -> &'static str {
        match self {
            Owner::Organization => "organization",
            Owner::User => "user",
        }
    }
}

/// A single-select option as GitHub takes it (`ProjectV2SingleSelectFieldOptionInput`): a name,
/// a color and a description, and nothing else. There is no way to name an existing option, so a
/// list of these replaces a field's options: each gets a new id and every card loses its value
/// of the field (see [`GitHub::add_columns_keeping_cards`](super::GitHub::add_columns_keeping_cards)).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct OptionInput {
    pub name: String,
    /// A `ProjectV2SingleSelectFieldOptionColor`: GRAY, BLUE, GREEN, YELLOW, ORANGE, RED, PINK
    /// or PURPLE.
    pub color: String,
    pub description: String,
}

/// What a board query asks about the board: its Status field (by name) and that field's options.
macro_rules! board_query {
    ($owner:literal) => {
        concat!(
            "query($login: String!, $number: Int!, $field: String!) { ",
            $owner,
            "(login: $login) { projectV2(number: $number) { id title url field(name: $field) { ... on ProjectV2SingleSelectField { id name options { id name } } } } } }"
        )
    };
}

pub const BOARD_OF_ORGANIZATION: &str = board_query!("organization");
pub const BOARD_OF_USER: &str = board_query!("user");

/// A page of a board's items (100 at most, GitHub's limit), each with its Status. `closed`, not
/// `state`: an issue's `state` (IssueState) and a pull request's (PullRequestState) are of
/// different types, and one selection may not ask for both under one name.
pub const BOARD_ITEMS: &str = r#"query($id: ID!, $after: String, $field: String!) {
  node(id: $id) { ... on ProjectV2 {
    items(first: 100, after: $after) {
      pageInfo { hasNextPage endCursor }
      nodes {
        id type
        content {
          ... on Issue { number title body closed url repository { nameWithOwner } }
          ... on PullRequest { number title body closed url repository { nameWithOwner } }
        }
        fieldValueByName(name: $field) { ... on ProjectV2ItemFieldSingleSelectValue { name optionId } }
      }
    }
  } }
}"#;

pub const ISSUE_NODE_ID: &str = "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { issue(number: $number) { id } } }";

pub const ADD_ITEM: &str = "mutation($project: ID!, $content: ID!) { addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } } }";

pub const SET_ITEM_OPTION: &str = "mutation($project: ID!, $item: ID!, $field: ID!, $option: String!) { updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, fieldId: $field, value: {singleSelectOptionId: $option}}) { projectV2Item { id } } }";

/// A single-select field's options as they are now, with what replacing them must keep.
pub const FIELD_OPTIONS: &str = "query($field: ID!) { node(id: $field) { ... on ProjectV2SingleSelectField { id name options { id name color description } } } }";

pub const SET_FIELD_OPTIONS: &str = "mutation($field: ID!, $options: [ProjectV2SingleSelectFieldOptionInput!]) { updateProjectV2Field(input: {fieldId: $field, singleSelectOptions: $options}) { projectV2Field { ... on ProjectV2SingleSelectField { id name options { id name } } } } }";

pub const MARK_READY: &str = "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft number } } }";

/// Cards set back in their column by one request at most ([`set_item_options`]): GitHub runs
/// the mutations of a request one after the other, and 25 keeps a request well within its limits
/// while a board of hundreds of cards takes seconds, not one request a second per card.
pub const SET_ITEM_OPTIONS_MAX: usize = 25;

/// The document of [`set_item_options`] for `n` cards: `updateProjectV2ItemFieldValue` `n` times,
/// aliased `card0`, `card1`, ..., each with its `$itemK` and `$optionK`.
pub fn set_item_options_document(n: usize) -> String {
    let mut vars = String::from("$project: ID!, $field: ID!");
    let mut fields = String::new();
    for k in 0..n {
        vars.push_str(&format!(", $item{k}: ID!, $option{k}: String!"));
        fields.push_str(&format!(
            " card{k}: updateProjectV2ItemFieldValue(input: {{projectId: $project, itemId: $item{k}, fieldId: $field, value: {{singleSelectOptionId: $option{k}}}}}) {{ projectV2Item {{ id }} }}"
        ));
    }
    format!("mutation({vars}) {{{fields} }}")
}

/// Every document Whilly can send, by name: [`DOCUMENTS`], and [`set_item_options_document`]
/// for one card and for the most.
pub fn documents() -> Vec<(&'static str, Cow<'static, str>)> {
    let mut all: Vec<(&'static str, Cow<'static, str>)> = DOCUMENTS
        .iter()
        .map(|(name, q)| (*name, Cow::Borrowed(*q)))
        .collect();
    for n in [1, SET_ITEM_OPTIONS_MAX] {
        all.push(("SET_ITEM_OPTIONS", set_item_options_document(n).into()));
    }
    all
}

/// Every constant document Whilly sends, by name.
pub const DOCUMENTS: &[(&str, &str)] = &[
    ("BOARD_OF_ORGANIZATION", BOARD_OF_ORGANIZATION),
    ("BOARD_OF_USER", BOARD_OF_USER),
    ("BOARD_ITEMS", BOARD_ITEMS),
    ("ISSUE_NODE_ID", ISSUE_NODE_ID),
    ("ADD_ITEM", ADD_ITEM),
    ("SET_ITEM_OPTION", SET_ITEM_OPTION),
    ("FIELD_OPTIONS", FIELD_OPTIONS),
    ("SET_FIELD_OPTIONS", SET_FIELD_OPTIONS),
    ("MARK_READY", MARK_READY),
];

fn request(query: &'static str, variables: Value) -> Request {
    let name = DOCUMENTS
        .iter()
        .find(|(_, q)| *q == query)
        .map_or("?", |(n, _)| n);
    Request {
        name,
        query: Cow::Borrowed(query),
        variables,
    }
}

/// Board `number` of `login` with its single-select field `field`.
pub fn board(owner: Owner, login: &str, number: u64, field: &str) -> Request {
    let query = match owner {
        Owner::Organization => BOARD_OF_ORGANIZATION,
        Owner::User => BOARD_OF_USER,
    };
    request(
        query,
        json!({ "login": login, "number": number, "field": field }),
    )
}

/// The page of the board's items after cursor `after` (the first page for `None`), with each
/// one's value of field `field`.
pub fn board_items(project_id: &str, after: Option<&str>, field: &str) -> Request {
    request(
        BOARD_ITEMS,
        json!({ "id": project_id, "after": after, "field": field }),
    )
}

pub fn issue_node_id(repo: &RepoRef, number: u64) -> Request {
    request(
        ISSUE_NODE_ID,
        json!({ "owner": repo.owner, "name": repo.name, "number": number }),
    )
}

/// Puts an issue or pull request (its node id) on the board.
pub fn add_item(project_id: &str, content_id: &str) -> Request {
    request(
        ADD_ITEM,
        json!({ "project": project_id, "content": content_id }),
    )
}

/// Sets a card's single-select `field` to `option_id`.
pub fn set_item_option(
    project_id: &str,
    item_id: &str,
    field_id: &str,
    option_id: &str,
) -> Request {
    request(
        SET_ITEM_OPTION,
        json!({ "project": project_id, "item": item_id, "field": field_id, "option": option_id }),
    )
}

/// Sets each card `(item id, option id)` of `cards` (at most [`SET_ITEM_OPTIONS_MAX`]) to its
/// option of the single-select `field`, in one request; the answer has `cardK` for the K-th.
pub fn set_item_options(project_id: &str, field_id: &str, cards: &[(&str, &str)]) -> Request {
    let mut variables = Map::new();
    variables.insert("project".into(), json!(project_id));
    variables.insert("field".into(), json!(field_id));
    for (k, (item, option)) in cards.iter().enumerate() {
        variables.insert(format!("item{k}"), json!(item));
        variables.insert(format!("option{k}"), json!(option));
    }
    Request {
        name: "SET_ITEM_OPTIONS",
        query: Cow::Owned(set_item_options_document(cards.len())),
        variables: Value::Object(variables),
    }
}

/// A single-select field's options, with their colors and descriptions.
pub fn field_options(field_id: &str) -> Request {
    request(FIELD_OPTIONS, json!({ "field": field_id }))
}

/// Replaces the options of a single-select field with `options`, in that order.
pub fn set_field_options(field_id: &str, options: &[OptionInput]) -> Request {
    request(
        SET_FIELD_OPTIONS,
        json!({ "field": field_id, "options": options }),
    )
}

/// Marks a draft pull request (its node id) ready for review.
pub fn mark_ready(pull_id: &str) -> Request {
    request(MARK_READY, json!({ "id": pull_id }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_document_is_listed_once_under_one_name() {
        for (k, (name, q)) in DOCUMENTS.iter().enumerate() {
            assert!(
                !DOCUMENTS[..k].iter().any(|(n, d)| n == name || d == q),
                "{name} is listed twice"
            );
        }
        assert_eq!(board(Owner::User, "u", 1, "Status").name(), "BOARD_OF_USER");
        assert_eq!(mark_ready("PR_1").name(), "MARK_READY");
        assert!(BOARD_OF_ORGANIZATION.contains("organization(login: $login)"));
    }

    #[test]
    fn cards_are_set_back_many_to_a_request_each_under_its_own_alias() {
        let r = set_item_options("P", "F", &[("I1", "a"), ("I2", "b")]);
        assert_eq!(r.name(), "SET_ITEM_OPTIONS");
        assert_eq!(
            r.variables(),
            &json!({"project": "P", "field": "F", "item0": "I1", "option0": "a", "item1": "I2", "option1": "b"})
        );
        assert!(r.query().contains(
            "card1: updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item1, fieldId: $field, value: {singleSelectOptionId: $option1}})"
        ));
        assert!(r.query().starts_with(
            "mutation($project: ID!, $field: ID!, $item0: ID!, $option0: String!, $item1: ID!"
        ));
    }

    #[test]
    fn an_option_is_sent_as_a_name_a_color_and_a_description() {
        let o = OptionInput {
            name: "Todo".into(),
            color: "GRAY".into(),
            description: String::new(),
        };
        assert_eq!(
            set_field_options("F", &[o]).variables(),
            &json!({"field": "F", "options": [{"name": "Todo", "color": "GRAY", "description": ""}]})
        );
    }
}
