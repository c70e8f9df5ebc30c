//! The REST v3 endpoints: one `match` on method and decoded path segments, each arm answering as
//! Jira does (status, body shape, error messages).

use super::jql;
use super::model::{FieldSel, Model, fields_param};
use super::serve::Incoming;
use super::wire::{
    self, Answer, check_adf, error, field_error, invalid_payload, issue_not_found, not_found,
};
use super::{SEARCH_DEFAULT_MAX, SEARCH_MAX};
use serde_json::{Value, json};

pub fn route(m: &mut Model, inc: &Incoming) -> Answer {
    let segs: Vec<String> = inc
        .path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(wire::percent_decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    let Some(rest) = s.strip_prefix(&["rest", "api", "3"]) else {
        return not_found();
    };
    let body = match &inc.body {
        Err(()) => return invalid_payload(),
        Ok(b) => b.clone().unwrap_or(Value::Null),
    };
    match (inc.method.as_str(), rest) {
        ("GET", ["myself"]) => Answer::ok(m.myself_json()),
        ("GET", ["project", key]) => match m.project(key) {
            Some(p) => Answer::ok(m.project_json(p)),
            None => error(
                404,
                &[&format!("No project could be found with key '{key}'.")],
            ),
        },
        ("GET" | "POST", ["search"]) => error(
            410,
            &[
                "The requested API has been removed. Please migrate to the /rest/api/3/search/jql API. A full migration guideline is available at https://developer.atlassian.com/changelog/#CHANGE-2046",
            ],
        ),
        ("POST", ["search", "jql"]) => {
            if !body.is_object() {
                return invalid_payload();
            }
            let fields = match &body["fields"] {
                Value::Null => Vec::new(),
                Value::Array(a) => a
                    .iter()
                    .filter_map(|f| f.as_str().map(str::to_string))
                    .collect(),
                _ => return invalid_payload(),
            };
            let max = match &body["maxResults"] {
                Value::Null => None,
                v => match v.as_i64() {
                    Some(n) => Some(n),
                    None => return invalid_payload(),
                },
            };
            search(
                m,
                body["jql"].as_str().unwrap_or_default(),
                &fields,
                max,
                body["nextPageToken"].as_str(),
            )
        }
        ("GET", ["search", "jql"]) => {
            let get = |k: &str| {
                inc.query
                    .iter()
                    .find(|(q, _)| q == k)
                    .map(|(_, v)| v.as_str())
            };
            let max = match get("maxResults") {
                None => None,
                Some(v) => match v.parse::<i64>() {
                    Ok(n) => Some(n),
                    Err(_) => return invalid_payload(),
                },
            };
            search(
                m,
                get("jql").unwrap_or_default(),
                &fields_param(&inc.query),
                max,
                get("nextPageToken"),
            )
        }
        (method, ["issue", key, tail @ ..]) => match m.issue_index(key) {
            Some(ii) => issue_route(m, ii, method, tail, &body, inc),
            None => issue_not_found(),
        },
        _ => not_found(),
    }
}

fn search(
    m: &mut Model,
    jql_text: &str,
    fields: &[String],
    max: Option<i64>,
    token: Option<&str>,
) -> Answer {
    let query = match jql::parse(jql_text) {
        Ok(q) => q,
        Err(e) => return error(400, &[&e]),
    };
    let Some(filter) = &query.filter else {
        return error(
            400,
            &[
                "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.",
            ],
        );
    };
    let errors = jql::check(&query, m);
    if !errors.is_empty() {
        let refs: Vec<&str> = errors.iter().map(String::as_str).collect();
        return error(400, &refs);
    }
    let start = match token {
        None | Some("") => 0,
        Some(t) => match m.page_tokens.get(t) {
            Some((jql_of, offset)) if jql_of == jql_text => *offset,
            _ => {
                return error(
                    400,
                    &["The provided next page token is invalid or expired."],
                );
            }
        },
    };
    let max = max
        .filter(|n| *n > 0)
        .map_or(SEARCH_DEFAULT_MAX, |n| (n as usize).min(SEARCH_MAX));
    let mut hits: Vec<usize> = (0..m.issues.len())
        .filter(|&i| jql::matches(filter, &m.issues[i], m))
        .collect();
    hits.sort_by(|&a, &b| jql::compare(&query.order, &m.issues[a], &m.issues[b], m));
    let sel = FieldSel::new(fields, false);
    let issues: Vec<Value> = hits
        .iter()
        .skip(start)
        .take(max)
        .map(|&i| m.issue_json(&m.issues[i], &sel, false))
        .collect();
    let end = start + issues.len();
    let mut page = json!({"issues": issues});
    if end < hits.len() {
        let seq = m.next_seq();
        let token = wire::base64_encode(format!("standin-page:{seq}:{end}").as_bytes());
        m.page_tokens
            .insert(token.clone(), (jql_text.to_string(), end));
        page["nextPageToken"] = json!(token);
        page["isLast"] = json!(false);
    } else {
        page["isLast"] = json!(true);
    }
    Answer::ok(page)
}

fn issue_route(
    m: &mut Model,
    ii: usize,
    method: &str,
    tail: &[&str],
    body: &Value,
    inc: &Incoming,
) -> Answer {
    match (method, tail) {
        ("GET", []) => {
            let sel = FieldSel::new(&fields_param(&inc.query), true);
            Answer::ok(m.issue_json(&m.issues[ii], &sel, true))
        }
        ("PUT", []) => edit_issue(m, ii, body),
        ("GET", ["transitions"]) => {
            let issue = &m.issues[ii];
            let wf = m.workflow_of(issue);
            let transitions: Vec<Value> = wf
                .allowed_from(&issue.status)
                .into_iter()
                .filter(|t| {
                    inc.query
                        .iter()
                        .find(|(k, _)| k == "transitionId")
                        .is_none_or(|(_, id)| *id == t.id)
                })
                .map(|t| m.transition_json(t))
                .collect();
            Answer::ok(json!({
                "expand": "transitions",
                "transitions": transitions,
            }))
        }
        ("POST", ["transitions"]) => {
            let id = match &body["transition"]["id"] {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => {
                    return error(400, &["Missing 'transition' identifier"]);
                }
            };
            let issue = &m.issues[ii];
            let target = m
                .workflow_of(issue)
                .allowed_from(&issue.status)
                .into_iter()
                .find(|t| t.id == id)
                .map(|t| t.to.clone());
            match target {
                Some(to) => {
                    m.issues[ii].status = to.clone();
                    m.issues[ii].transitions.push(to);
                    m.touch(ii);
                    Answer::no_content()
                }
                None => error(
                    400,
                    &[&format!(
                        "Transition id '{id}' is not valid for this issue."
                    )],
                ),
            }
        }
        ("GET", ["comment"]) => list_comments(m, ii, inc),
        ("POST", ["comment"]) => {
            if let Err(a) = check_comment_body(body) {
                return a;
            }
            let me = m.me();
            let id = m.create_comment(ii, me, body["body"].clone());
            let issue = &m.issues[ii];
            let c = issue
                .comments
                .iter()
                .find(|c| c.id.to_string() == id)
                .expect("the comment just created");
            Answer::created(m.comment_json(issue, c))
        }
        (_, ["comment", id]) => {
            let Some(ci) = m.issues[ii]
                .comments
                .iter()
                .position(|c| c.id.to_string() == *id)
            else {
                return error(404, &[&format!("Can not find a comment for the id: {id}.")]);
            };
            match method {
                "GET" => Answer::ok(m.comment_json(&m.issues[ii], &m.issues[ii].comments[ci])),
                "PUT" => {
                    if let Err(a) = check_comment_body(body) {
                        return a;
                    }
                    let me = m.me();
                    let c = &mut m.issues[ii].comments[ci];
                    c.body = body["body"].clone();
                    c.update_author = me;
                    c.updated = chrono::Utc::now();
                    c.edits += 1;
                    m.touch(ii);
                    Answer::ok(m.comment_json(&m.issues[ii], &m.issues[ii].comments[ci]))
                }
                "DELETE" => {
                    m.issues[ii].comments.remove(ci);
                    m.touch(ii);
                    Answer::no_content()
                }
                _ => Answer::empty(405),
            }
        }
        _ => not_found(),
    }
}

fn list_comments(m: &Model, ii: usize, inc: &Incoming) -> Answer {
    let get = |k: &str| {
        inc.query
            .iter()
            .find(|(q, _)| q == k)
            .map(|(_, v)| v.as_str())
    };
    let start = get("startAt")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(0);
    let max = get("maxResults")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(100)
        .min(100);
    let issue = &m.issues[ii];
    let mut order: Vec<usize> = (0..issue.comments.len()).collect();
    order.sort_by_key(|&i| issue.comments[i].created_seq);
    if get("orderBy").is_some_and(|o| o.starts_with('-')) {
        order.reverse();
    }
    let comments: Vec<Value> = order
        .iter()
        .skip(start)
        .take(max)
        .map(|&i| m.comment_json(issue, &issue.comments[i]))
        .collect();
    Answer::ok(json!({
        "startAt": start,
        "maxResults": max,
        "total": issue.comments.len(),
        "comments": comments,
    }))
}

/// A comment's `{"body": ADF}` as Jira checks it.
fn check_comment_body(body: &Value) -> Result<(), Answer> {
    let doc = &body["body"];
    if doc.is_null()
        || doc["content"].as_array().is_some_and(|c| c.is_empty())
        || doc.as_str().is_some_and(|s| s.trim().is_empty())
    {
        return Err(field_error(
            400,
            "comment",
            "Comment body can not be empty!",
        ));
    }
    check_adf(doc).map_err(|_| error(400, &["INVALID_INPUT"]))
}

/// `PUT /issue/{key}`: `fields` sets, `update.labels` adds, removes or sets.
fn edit_issue(m: &mut Model, ii: usize, body: &Value) -> Answer {
    if !body.is_object() {
        return invalid_payload();
    }
    let cannot = |f: &str| {
        field_error(
            400,
            f,
            &format!("Field '{f}' cannot be set. It is not on the appropriate screen, or unknown."),
        )
    };
    let mut changes: Vec<(String, Value)> = Vec::new();
    if let Some(fields) = body["fields"].as_object() {
        for (name, value) in fields {
            match name.as_str() {
                "summary" => match value.as_str() {
                    Some(s) if !s.trim().is_empty() => {}
                    _ => {
                        return field_error(
                            400,
                            "summary",
                            "You must specify a summary of the issue.",
                        );
                    }
                },
                "description" => {
                    if !value.is_null() && check_adf(value).is_err() {
                        return error(400, &["INVALID_INPUT"]);
                    }
                }
                "labels" => {
                    if !value.as_array().is_some_and(|a| {
                        a.iter()
                            .all(|l| l.as_str().is_some_and(|l| !l.contains(' ')))
                    }) {
                        return field_error(400, "labels", "The label must not contain spaces.");
                    }
                }
                "priority" => {
                    if value["name"].as_str().is_none() && value["id"].as_str().is_none() {
                        return field_error(
                            400,
                            "priority",
                            "Specify the Priority (name or id) in the string format",
                        );
                    }
                }
                n if n.starts_with("customfield_") => {}
                n => return cannot(n),
            }
            changes.push((name.clone(), value.clone()));
        }
    }
    let mut labels = m.issues[ii].labels.clone();
    let mut labels_changed = false;
    if let Some(update) = body["update"].as_object() {
        for (name, ops) in update {
            if name != "labels" {
                return cannot(name);
            }
            for op in ops.as_array().map(Vec::as_slice).unwrap_or_default() {
                if let Some(l) = op["add"].as_str() {
                    if !labels.iter().any(|x| x == l) {
                        labels.push(l.to_string());
                    }
                } else if let Some(l) = op["remove"].as_str() {
                    labels.retain(|x| x != l);
                } else if let Some(set) = op["set"].as_array() {
                    labels = set
                        .iter()
                        .filter_map(|l| l.as_str().map(str::to_string))
                        .collect();
                } else {
                    return invalid_payload();
                }
                labels_changed = true;
            }
        }
    }
    let issue = &mut m.issues[ii];
    for (name, value) in changes {
        match name.as_str() {
            "summary" => issue.summary = value.as_str().unwrap_or_default().to_string(),
            "description" => issue.description = value,
            "labels" => {
                issue.labels = value
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|l| l.as_str().map(str::to_string))
                            .collect()
                    })
                    .unwrap_or_default()
            }
            "priority" => {
                let by_id = value["id"].as_str().and_then(|id| {
                    super::model::PRIORITIES
                        .iter()
                        .find(|(_, pid)| *pid == id)
                        .map(|(p, _)| p.to_string())
                });
                issue.priority = value["name"]
                    .as_str()
                    .map(str::to_string)
                    .or(by_id)
                    .unwrap_or_default();
            }
            _ => {
                issue.custom.insert(name, value);
            }
        }
    }
    if labels_changed {
        issue.labels = labels;
    }
    m.touch(ii);
    Answer::no_content()
}
