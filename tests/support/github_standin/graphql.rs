//! `POST /graphql`, without a GraphQL parser: the operation is recognised by the field name in
//! the query text and its arguments are taken from `variables` (or a string literal in the
//! text). Errors are HTTP 200 with an `errors` array, as GitHub answers them.

use super::model::{Model, iso};
use super::wire::Answer;
use serde_json::{Value, json};

/// Whether a query text is a mutation (`mutation ...`, after comments and whitespace).
pub fn is_mutation(query: &str) -> bool {
    query
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ")
        .starts_with("mutation")
}

fn errors(list: Vec<Value>) -> Answer {
    Answer::ok(json!({"errors": list}))
}

fn unsupported(what: &str) -> Answer {
    errors(vec![json!({
        "message": format!("the GitHub stand-in does not support this operation: {what}"),
        "extensions": {"code": "undefinedField"},
    })])
}

pub fn answer(m: &mut Model, body: Option<&Value>) -> Answer {
    let Some(query) = body.and_then(|b| b["query"].as_str()) else {
        return errors(vec![
            json!({"message": "A query attribute must be specified and must be a string."}),
        ]);
    };
    let vars = body.map(|b| b["variables"].clone()).unwrap_or(Value::Null);
    for (field, draft) in [
        ("markPullRequestReadyForReview", false),
        ("convertPullRequestToDraft", true),
    ] {
        if query.contains(field) {
            return set_draft(m, query, &vars, field, draft);
        }
    }
    if is_mutation(query) {
        return unsupported(query);
    }
    let mut data = serde_json::Map::new();
    if query.contains("rateLimit") {
        let b = &m.graphql;
        data.insert(
            "rateLimit".into(),
            json!({
                "limit": b.limit, "cost": 1, "used": b.used, "remaining": b.remaining(),
                "resetAt": chrono::DateTime::from_timestamp(b.reset, 0).map(iso), "nodeCount": 0,
            }),
        );
    }
    if query.contains("viewer") {
        data.insert("viewer".into(), json!({"login": m.login}));
    }
    if data.is_empty() {
        return unsupported(query);
    }
    Answer::ok(json!({"data": data}))
}

fn set_draft(m: &mut Model, query: &str, vars: &Value, field: &str, draft: bool) -> Answer {
    let id = pull_request_id(query, vars).or_else(|| any_pr_node_id(m, vars));
    let not_found = |id: &str| {
        Answer::ok(json!({
            "data": {field: null},
            "errors": [{
                "type": "NOT_FOUND", "path": [field], "locations": [],
                "message": format!("Could not resolve to a node with the global id of '{id}'."),
            }],
        }))
    };
    let Some(id) = id else {
        return not_found("");
    };
    let Some((ri, n)) = m.pr_by_node_id(&id) else {
        return not_found(&id);
    };
    let seq = m.next_seq();
    let r = &mut m.repos[ri];
    let Some(issue) = r.issues.get_mut(&n) else {
        return not_found(&id);
    };
    if let Some(p) = issue.pr.as_mut() {
        p.draft = draft;
    }
    issue.touch(seq);
    let r = &m.repos[ri];
    let i = &r.issues[&n];
    Answer::ok(json!({"data": {field: {
        "clientMutationId": null,
        "pullRequest": {
            "id": i.node_id(r), "number": n, "isDraft": draft, "title": i.title,
            "state": i.state().to_uppercase(),
            "url": format!("{}/{}/pull/{n}", m.base_url, r.full_name()),
        },
    }}}))
}

/// `pullRequestId` from `variables.input`, from `$var` or a string literal in the text, or from
/// a variable holding the whole input (`input: $in`).
fn pull_request_id(query: &str, vars: &Value) -> Option<String> {
    if let Some(s) = vars["input"]["pullRequestId"].as_str() {
        return Some(s.to_string());
    }
    if let Some(v) = argument(query, "pullRequestId") {
        return match v {
            Arg::Literal(s) => Some(s),
            Arg::Var(name) => vars[name.as_str()].as_str().map(str::to_string),
        };
    }
    if let Some(Arg::Var(name)) = argument(query, "input") {
        return vars[name.as_str()]["pullRequestId"]
            .as_str()
            .map(str::to_string);
    }
    None
}

/// The last resort: a variable whose value is some pull request's node id.
fn any_pr_node_id(m: &Model, vars: &Value) -> Option<String> {
    vars.as_object()?
        .values()
        .filter_map(Value::as_str)
        .find(|s| m.is_pr_node_id(s))
        .map(str::to_string)
}

enum Arg {
    Literal(String),
    Var(String),
}

/// The value after `name:` in the query text, when it is a `"literal"` or a `$variable`.
fn argument(query: &str, name: &str) -> Option<Arg> {
    let mut from = 0;
    while let Some(pos) = query[from..].find(name) {
        let after = &query[from + pos + name.len()..];
        from += pos + name.len();
        let Some(rest) = after.trim_start().strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(lit) = rest.strip_prefix('"') {
            return lit.split('"').next().map(|s| Arg::Literal(s.to_string()));
        }
        if let Some(var) = rest.strip_prefix('$') {
            let name: String = var
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return Some(Arg::Var(name));
        }
    }
    None
}
