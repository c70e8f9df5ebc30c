//! Every GraphQL document Whilly sends to GitHub, and the variables its own builders make for
//! it, checked against GitHub's published schema (tests/fixtures/github/schema.graphql) with
//! apollo-compiler: what GitHub would refuse fails here, not on a user's board. The stand-in
//! (tests/support/github_standin/) answers Whilly's requests in the other tests; this is the
//! check that does not depend on it having been written right.

#[path = "support/github_standin/schema.rs"]
mod schema;

use serde_json::json;
use whilly::forge::github::Board;
use whilly::forge::github::graphql::{self, OptionInput, Owner, Request};
use whilly::forge::github::project;
use whilly::forge::refs::RepoRef;

fn board() -> Board {
    Board {
        id: "PVT_kwDOAB".into(),
        title: "Board".into(),
        url: "https://github.com/orgs/acme/projects/1".into(),
        field_id: "PVTSSF_lADOAB".into(),
        field_name: "Status".into(),
        columns: vec![
            ("f75ad846".into(), "Todo".into()),
            ("47fc9ee4".into(), "In Progress".into()),
            ("98236657".into(), "Done".into()),
        ],
    }
}

/// One request of each kind, made by the builders Whilly sends them with.
fn requests() -> Vec<Request> {
    let b = board();
    let current: Vec<OptionInput> = b
        .columns
        .iter()
        .map(|(_, name)| OptionInput {
            name: name.clone(),
            color: "GREEN".into(),
            description: "as the board has it".into(),
        })
        .collect();
    let missing = ["In Review".to_string(), "Blocked".to_string()];
    let card_ids: Vec<String> = (0..graphql::SET_ITEM_OPTIONS_MAX)
        .map(|k| format!("PVTI_lADOAB{k}"))
        .collect();
    let many_cards: Vec<(&str, &str)> = card_ids.iter().map(|c| (c.as_str(), "98236657")).collect();
    // What `board ensure` sends: the options it read, then the missing ones.
    let options = project::options_adding(&current, &missing);
    assert_eq!(options.len(), 5);
    vec![
        graphql::board(Owner::Organization, "acme", 1, "Status"),
        graphql::board(Owner::User, "octocat", 7, "Status"),
        graphql::board_items(&b.id, None, &b.field_name),
        graphql::board_items(&b.id, Some("Y3Vyc29yOnYyOpLPAAA"), &b.field_name),
        graphql::issue_node_id(&RepoRef::new("acme", "widgets"), 42),
        graphql::add_item(&b.id, "I_kwDOAB"),
        graphql::set_item_option(&b.id, "PVTI_lADOAB", &b.field_id, "47fc9ee4"),
        graphql::set_item_options(&b.id, &b.field_id, &[("PVTI_lADOAB", "47fc9ee4")]),
        graphql::set_item_options(&b.id, &b.field_id, &many_cards),
        graphql::field_options(&b.field_id),
        graphql::set_field_options(&b.field_id, &options),
        graphql::mark_ready("PR_kwDOAB"),
    ]
}

#[test]
fn every_document_whilly_sends_is_valid_against_github_s_schema() {
    let mut refused = Vec::new();
    for (name, query) in graphql::documents() {
        if let Err(errors) = schema::document(&query) {
            for e in errors {
                refused.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "GitHub would refuse:\n{}",
        refused.join("\n")
    );
}

#[test]
fn the_variables_whilly_builds_fit_each_document_s_variable_types() {
    let requests = requests();
    for (name, _) in graphql::documents() {
        assert!(
            requests.iter().any(|r| r.name() == name),
            "{name} has no request here: add one made by its builder"
        );
    }
    let mut refused = Vec::new();
    for r in &requests {
        if let Err(errors) = schema::check(r.query(), None, r.variables()) {
            for e in errors {
                refused.push(format!("{}: {e}\n  variables: {}", r.name(), r.variables()));
            }
        }
        // GitHub ignores a variable the operation does not declare: a misspelt name would go
        // unnoticed there.
        let declared = schema::declared_variables(r.query(), None);
        for key in r.variables().as_object().into_iter().flat_map(|o| o.keys()) {
            if !declared.contains(key) {
                refused.push(format!("{}: ${key} is sent but not declared", r.name()));
            }
        }
    }
    assert!(
        refused.is_empty(),
        "GitHub would refuse:\n{}",
        refused.join("\n")
    );
}

#[test]
fn the_check_refuses_what_github_refuses() {
    // An unknown field, a missing argument, an input field GitHub does not have.
    assert!(schema::document("query { viewer { login nickname } }").is_err());
    assert!(schema::document("query { repository(owner: \"a\") { id } }").is_err());
    let id = schema::check(
        graphql::SET_FIELD_OPTIONS,
        None,
        &json!({"field": "F", "options": [
            {"id": "f75ad846", "name": "Todo", "color": "GRAY", "description": ""}
        ]}),
    )
    .expect_err("an option input with an id");
    assert!(id[0].message.contains("id"), "{}", id[0]);
    let color = schema::check(
        graphql::SET_FIELD_OPTIONS,
        None,
        &json!({"field": "F", "options": [{"name": "Todo", "color": "GREY", "description": ""}]}),
    )
    .expect_err("a color GitHub does not have");
    assert!(color[0].message.contains("GREY"), "{}", color[0]);
    let missing = schema::check(graphql::SET_FIELD_OPTIONS, None, &json!({"options": []}))
        .expect_err("the field id is required");
    assert!(missing[0].message.contains("field"), "{}", missing[0]);
    assert!(
        schema::check(
            graphql::SET_FIELD_OPTIONS,
            None,
            &json!({"field": "F", "options": [{"name": "Todo", "color": "GRAY", "description": ""}]}),
        )
        .is_ok()
    );
}
