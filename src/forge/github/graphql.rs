//! Every GraphQL request Whilly sends to GitHub: its document, one of the constants listed in
//! [`DOCUMENTS`], and the variables built for it here. [`GitHub::graphql`](super::GitHub::graphql)
//! takes only a [`Request`] made by this module, so tests/github_schema.rs can check every
//! document, and the variables Whilly actually builds, against GitHub's published schema: a
//! document or an input GitHub would refuse (an `id` in an option input, say) fails a test
//! rather than `whilly board ensure` on a real board.

use crate::forge::refs::RepoRef;
use serde_json::{Value, json};

/// A GraphQL request: a document of [`DOCUMENTS`] and its variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    query: &'static str,
    variables: Value,
}

impl Request {
    pub fn query(&self) -> &'static str {
        self.query
    }

    pub fn variables(&self) -> &Value {
        &self.variables
    }

    /// The name this document has in [`DOCUMENTS`].
    pub fn name(&self) -> &'static str {
        DOCUMENTS
            .iter()
            .find(|(_, q)| *q == self.query)
            .map_or("?", |(n, _)| n)
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

/// A page of a board's items (100 at most, GitHub's limit), each with its Status.
pub const BOARD_ITEMS: &str = r#"query($id: ID!, $after: String, $field: String!) {
  node(id: $id) { ... on ProjectV2 {
    items(first: 100, after: $after) {
      pageInfo { hasNextPage endCursor }
      nodes {
        id type
        content {
          ... on Issue { number title body state url repository { nameWithOwner } }
          ... on PullRequest { number title body state url repository { nameWithOwner } }
        }
        fieldValueByName(name: $field) { ... on ProjectV2ItemFieldSingleSelectValue { name optionId } }
      }
    }
  } }
}"#;

pub const ISSUE_NODE_ID: &str = "query($owner: String!, $name: String!, $number: Int!) { repository(owner: $owner, name: $name) { issue(number: $number) { id } } }";

pub const ADD_ITEM: &str = "mutation($project: ID!, $content: ID!) { addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } } }";

pub const SET_ITEM_OPTION: &str = "mutation($project: ID!, $item: ID!, $field: ID!, $option: String!) { updateProjectV2ItemFieldValue(input: {projectId: $project, itemId: $item, fieldId: $field, value: {singleSelectOptionId: $option}}) { projectV2Item { id } } }";

pub const SET_FIELD_OPTIONS: &str = "mutation($field: ID!, $options: [ProjectV2SingleSelectFieldOptionInput!]) { updateProjectV2Field(input: {fieldId: $field, singleSelectOptions: $options}) { projectV2Field { ... on ProjectV2SingleSelectField { id name options { id name } } } } }";

pub const MARK_READY: &str = "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft number } } }";

/// Every document Whilly sends, by name.
pub const DOCUMENTS: &[(&str, &str)] = &[
    ("BOARD_OF_ORGANIZATION", BOARD_OF_ORGANIZATION),
    ("BOARD_OF_USER", BOARD_OF_USER),
    ("BOARD_ITEMS", BOARD_ITEMS),
    ("ISSUE_NODE_ID", ISSUE_NODE_ID),
    ("ADD_ITEM", ADD_ITEM),
    ("SET_ITEM_OPTION", SET_ITEM_OPTION),
    ("SET_FIELD_OPTIONS", SET_FIELD_OPTIONS),
    ("MARK_READY", MARK_READY),
];

fn request(query: &'static str, variables: Value) -> Request {
    Request { query, variables }
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

/// Replaces the options of a single-select field with `options`, in that order.
pub fn set_field_options(field_id: &str, options: &[Value]) -> Request {
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
        assert!(BOARD_OF_ORGANIZATION.contains("organization(login: $login)"));
    }
}
