//! The REST v3 endpoints: one `match` on method and decoded path segments, each arm answering as
//! GitHub does (status, body shape, validation errors).

use super::model::{Model, Pull, branch_tip, nothing_to_merge};
use super::serve::Incoming;
use super::wire::{
    self, Answer, error, missing_field, not_found, paginate, problems_parsing_json,
    validation_failed,
};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

pub fn route(m: &mut Model, inc: &Incoming) -> Answer {
    let segs: Vec<String> = inc
        .route
        .split('/')
        .filter(|s| !s.is_empty())
        .map(wire::percent_decode)
        .collect();
    let s: Vec<&str> = segs.iter().map(String::as_str).collect();
    match (inc.method.as_str(), s.as_slice()) {
        ("GET", ["user"]) => {
            let mut u = m.user_json(&m.login);
            u["name"] = json!(m.login);
            u["email"] = Value::Null;
            Answer::ok(u)
        }
        ("GET", ["rate_limit"]) => Answer::ok(json!({
            "resources": {"core": m.core.json(), "graphql": m.graphql.json()},
            "rate": m.core.json(),
        })),
        (method, ["repos", owner, name, rest @ ..]) => {
            match m.repo_index(&format!("{owner}/{name}")) {
                Some(ri) => repo_route(m, ri, method, rest, inc),
                None => not_found(),
            }
        }
        _ => not_found(),
    }
}

fn repo_route(m: &mut Model, ri: usize, method: &str, rest: &[&str], inc: &Incoming) -> Answer {
    let body = match &inc.body {
        Err(()) => return problems_parsing_json(),
        Ok(b) => b.clone().unwrap_or(Value::Null),
    };
    let num = |s: &str| s.parse::<u64>().ok();
    match (method, rest) {
        ("GET", []) => Answer::ok(m.repo_json(&m.repos[ri])),
        ("GET", ["branches", branch @ ..]) if !branch.is_empty() => {
            get_branch(m, ri, &branch.join("/"))
        }
        ("GET", ["issues"]) => list_issues(m, ri, inc),
        ("POST", ["issues"]) => create_issue(m, ri, &body),
        ("GET", ["issues", "comments"]) => {
            let r = &m.repos[ri];
            let items = m
                .comments
                .values()
                .filter(|c| c.repo_id == r.id)
                .map(|c| m.comment_json(r, c))
                .collect();
            paginate(items, &inc.query, &link_base(m, ri, "/issues/comments"))
        }
        (_, ["issues", "comments", id]) => match num(id) {
            Some(id) => comment_route(m, ri, method, id, &body),
            None => not_found(),
        },
        ("GET", ["issues", n]) => match num(n).and_then(|n| m.repos[ri].issues.get(&n)) {
            Some(i) => Answer::ok(m.issue_json(&m.repos[ri], i)),
            None => not_found(),
        },
        ("PATCH", ["issues", n]) => match num(n) {
            Some(n) => patch_issue(m, ri, n, &body),
            None => not_found(),
        },
        (_, ["issues", n, "comments"]) => match num(n) {
            Some(n) if m.repos[ri].issues.contains_key(&n) => match method {
                "GET" => list_comments(m, ri, n, inc),
                "POST" => create_comment(m, ri, n, &body),
                _ => not_found(),
            },
            _ => not_found(),
        },
        (_, ["issues", n, "labels", rest @ ..]) => match num(n) {
            Some(n) if m.repos[ri].issues.contains_key(&n) => {
                issue_labels(m, ri, n, method, rest, &body, inc)
            }
            _ => not_found(),
        },
        ("GET", ["labels"]) => {
            let r = &m.repos[ri];
            let items = r.labels.iter().map(|l| m.label_json(r, &l.name)).collect();
            paginate(items, &inc.query, &link_base(m, ri, "/labels"))
        }
        ("POST", ["labels"]) => create_label(m, ri, &body),
        (_, ["labels", name]) => repo_label(m, ri, method, name),
        ("GET", ["pulls"]) => list_pulls(m, ri, inc),
        ("POST", ["pulls"]) => create_pull(m, ri, &body),
        ("GET", ["pulls", n]) => match num(n) {
            Some(n) => get_pull(m, ri, n),
            None => not_found(),
        },
        ("PATCH", ["pulls", n]) => match num(n) {
            Some(n) => patch_pull(m, ri, n, &body),
            None => not_found(),
        },
        ("GET", ["pulls", n, "merge"]) => {
            let merged = num(n)
                .and_then(|n| m.repos[ri].issues.get(&n))
                .and_then(|i| i.pr.as_ref())
                .is_some_and(|p| p.merged_at.is_some());
            if merged {
                Answer::no_content()
            } else {
                not_found()
            }
        }
        _ => not_found(),
    }
}

/// The `/repositories/{id}/...` form GitHub puts in `Link` headers.
fn link_base(m: &Model, ri: usize, tail: &str) -> String {
    format!("{}/repositories/{}{tail}", m.base_url, m.repos[ri].id)
}

fn param<'a>(inc: &'a Incoming, key: &str) -> Option<&'a str> {
    inc.query
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn since(inc: &Incoming) -> Option<DateTime<Utc>> {
    param(inc, "since")
        .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&Utc))
}

fn get_branch(m: &Model, ri: usize, branch: &str) -> Answer {
    let r = &m.repos[ri];
    let sha = match &r.bare {
        Some(b) => match branch_tip(b, branch) {
            Some(o) => o.to_string(),
            None => return error(404, "Branch not found"),
        },
        None => return error(404, "Branch not found"),
    };
    Answer::ok(json!({
        "name": branch,
        "commit": {"sha": sha, "url": format!("{}/commits/{sha}", m.api(r))},
        "protected": false,
    }))
}

fn list_issues(m: &Model, ri: usize, inc: &Incoming) -> Answer {
    let r = &m.repos[ri];
    let state = param(inc, "state").unwrap_or("open");
    let labels: Vec<&str> = param(inc, "labels")
        .map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .collect()
        })
        .unwrap_or_default();
    let since = since(inc);
    let mut items: Vec<_> = r
        .issues
        .values()
        .filter(|i| match state {
            "all" => true,
            "closed" => !i.open,
            _ => i.open,
        })
        .filter(|i| {
            labels
                .iter()
                .all(|want| i.labels.iter().any(|l| l.eq_ignore_ascii_case(want)))
        })
        .filter(|i| since.is_none_or(|s| i.updated_at >= s))
        .collect();
    match param(inc, "sort").unwrap_or("created") {
        "updated" => items.sort_by_key(|i| (i.updated_at, i.seq)),
        "comments" => items.sort_by_key(|i| (i.comments, i.number)),
        _ => items.sort_by_key(|i| i.number),
    }
    if param(inc, "direction").unwrap_or("desc") != "asc" {
        items.reverse();
    }
    let items = items.into_iter().map(|i| m.issue_json(r, i)).collect();
    paginate(items, &inc.query, &link_base(m, ri, "/issues"))
}

/// A list of label names from `["a", ...]`, `[{"name": "a"}, ...]` or `{"labels": [...]}`.
fn label_list(v: &Value) -> Option<Vec<String>> {
    let list = match v {
        Value::Array(a) => a,
        Value::Object(o) => o.get("labels")?.as_array()?,
        _ => return None,
    };
    list.iter()
        .map(|l| {
            l.as_str()
                .or_else(|| l["name"].as_str())
                .map(str::to_string)
        })
        .collect()
}

fn create_issue(m: &mut Model, ri: usize, body: &Value) -> Answer {
    let Some(title) = body["title"].as_str().filter(|t| !t.is_empty()) else {
        return missing_field("Issue", "title");
    };
    let text = body["body"].as_str().unwrap_or_default();
    let labels = label_list(&body["labels"]).unwrap_or_default();
    let login = m.login.clone();
    let n = m.create_issue(ri, title, text, &labels, &login, None);
    let r = &m.repos[ri];
    Answer::created(m.issue_json(r, &r.issues[&n]))
}

fn patch_issue(m: &mut Model, ri: usize, n: u64, body: &Value) -> Answer {
    if !m.repos[ri].issues.contains_key(&n) {
        return not_found();
    }
    let open = match body.get("state").and_then(Value::as_str) {
        None => None,
        Some("open") => Some(true),
        Some("closed") => Some(false),
        Some(_) => {
            return validation_failed(vec![
                json!({"resource": "Issue", "code": "invalid", "field": "state"}),
            ]);
        }
    };
    if let Some(labels) = body.get("labels").and_then(label_list) {
        m.replace_labels(ri, n, &labels);
    }
    let seq = m.next_seq();
    if let Some(i) = m.repos[ri].issues.get_mut(&n) {
        if let Some(t) = body.get("title").and_then(Value::as_str) {
            i.title = t.to_string();
        }
        match body.get("body") {
            Some(Value::String(b)) => i.body = b.clone(),
            Some(Value::Null) => i.body.clear(),
            _ => {}
        }
        if let Some(open) = open {
            i.set_open(open, seq);
        }
        if let Some(reason) = body.get("state_reason").and_then(Value::as_str) {
            i.state_reason = Some(reason.to_string());
        }
        i.touch(seq);
    }
    let r = &m.repos[ri];
    Answer::ok(m.issue_json(r, &r.issues[&n]))
}

fn list_comments(m: &Model, ri: usize, n: u64, inc: &Incoming) -> Answer {
    let r = &m.repos[ri];
    let since = since(inc);
    let items = m
        .issue_comments(ri, n)
        .into_iter()
        .filter(|c| since.is_none_or(|s| c.updated_at >= s))
        .map(|c| m.comment_json(r, c))
        .collect();
    paginate(
        items,
        &inc.query,
        &link_base(m, ri, &format!("/issues/{n}/comments")),
    )
}

fn create_comment(m: &mut Model, ri: usize, n: u64, body: &Value) -> Answer {
    let Some(text) = body["body"].as_str().filter(|t| !t.is_empty()) else {
        return missing_field("IssueComment", "body");
    };
    let login = m.login.clone();
    let id = m.create_comment(ri, n, &login, text);
    Answer::created(m.comment_json(&m.repos[ri], &m.comments[&id]))
}

fn comment_route(m: &mut Model, ri: usize, method: &str, id: u64, body: &Value) -> Answer {
    let repo_id = m.repos[ri].id;
    if m.comments.get(&id).is_none_or(|c| c.repo_id != repo_id) {
        return not_found();
    }
    match method {
        "GET" => {}
        "PATCH" => {
            let Some(text) = body["body"].as_str().filter(|t| !t.is_empty()) else {
                return missing_field("IssueComment", "body");
            };
            if let Some(c) = m.comments.get_mut(&id) {
                c.body = text.to_string();
                c.updated_at = Utc::now();
                c.edits += 1;
            }
        }
        "DELETE" => {
            if let Some(c) = m.comments.remove(&id)
                && let Some(i) = m.repos[ri].issues.get_mut(&c.number)
            {
                i.comments = i.comments.saturating_sub(1);
            }
            return Answer::no_content();
        }
        _ => return not_found(),
    }
    Answer::ok(m.comment_json(&m.repos[ri], &m.comments[&id]))
}

fn issue_labels(
    m: &mut Model,
    ri: usize,
    n: u64,
    method: &str,
    rest: &[&str],
    body: &Value,
    inc: &Incoming,
) -> Answer {
    let invalid = || {
        validation_failed(vec![
            json!({"resource": "Label", "code": "invalid", "field": "labels"}),
        ])
    };
    match (method, rest) {
        ("GET", []) => {
            let r = &m.repos[ri];
            let items = r.issues[&n]
                .labels
                .iter()
                .map(|l| m.label_json(r, l))
                .collect();
            return paginate(
                items,
                &inc.query,
                &link_base(m, ri, &format!("/issues/{n}/labels")),
            );
        }
        ("POST", []) => match label_list(body) {
            Some(labels) => {
                m.add_labels(ri, n, &labels);
            }
            None => return invalid(),
        },
        ("PUT", []) => match label_list(body) {
            Some(labels) => {
                m.replace_labels(ri, n, &labels);
            }
            None => return invalid(),
        },
        ("DELETE", []) => {
            m.replace_labels(ri, n, &[]);
            return Answer::no_content();
        }
        ("DELETE", [name]) => {
            let seq = m.next_seq();
            let Some(i) = m.repos[ri].issues.get_mut(&n) else {
                return not_found();
            };
            let before = i.labels.len();
            i.labels.retain(|l| !l.eq_ignore_ascii_case(name));
            if i.labels.len() == before {
                return error(404, "Label does not exist");
            }
            i.touch(seq);
        }
        _ => return not_found(),
    }
    let r = &m.repos[ri];
    Answer::ok(m.labels_json(r, &r.issues[&n].labels))
}

fn create_label(m: &mut Model, ri: usize, body: &Value) -> Answer {
    let Some(name) = body["name"].as_str().filter(|n| !n.is_empty()) else {
        return missing_field("Label", "name");
    };
    if m.repos[ri]
        .labels
        .iter()
        .any(|l| l.name.eq_ignore_ascii_case(name))
    {
        return validation_failed(vec![
            json!({"resource": "Label", "code": "already_exists", "field": "name"}),
        ]);
    }
    let name = m.ensure_label(ri, name);
    if let Some(l) = m.repos[ri].labels.iter_mut().find(|l| l.name == name) {
        if let Some(c) = body["color"].as_str() {
            l.color = c.trim_start_matches('#').to_string();
        }
        l.description = body["description"].as_str().map(str::to_string);
    }
    Answer::created(m.label_json(&m.repos[ri], &name))
}

fn repo_label(m: &mut Model, ri: usize, method: &str, name: &str) -> Answer {
    let r = &mut m.repos[ri];
    let Some(pos) = r
        .labels
        .iter()
        .position(|l| l.name.eq_ignore_ascii_case(name))
    else {
        return not_found();
    };
    match method {
        "GET" => {
            let name = r.labels[pos].name.clone();
            Answer::ok(m.label_json(&m.repos[ri], &name))
        }
        "DELETE" => {
            let label = r.labels.remove(pos);
            for i in r.issues.values_mut() {
                i.labels.retain(|l| l != &label.name);
            }
            Answer::no_content()
        }
        _ => not_found(),
    }
}

fn list_pulls(m: &Model, ri: usize, inc: &Incoming) -> Answer {
    let r = &m.repos[ri];
    let state = param(inc, "state").unwrap_or("open");
    // As on GitHub, `head` filters only in its `OWNER:BRANCH` form; a bare branch name is
    // ignored (and so lists every pull request).
    let head = param(inc, "head").and_then(|h| h.split_once(':'));
    let base = param(inc, "base");
    let mut items: Vec<_> = r
        .issues
        .values()
        .filter(|i| {
            let Some(p) = &i.pr else { return false };
            let state_ok = match state {
                "all" => true,
                "closed" => !i.open,
                _ => i.open,
            };
            let head_ok =
                head.is_none_or(|(o, b)| p.head_owner.eq_ignore_ascii_case(o) && p.head_ref == b);
            state_ok && head_ok && base.is_none_or(|b| p.base_ref == b)
        })
        .collect();
    match param(inc, "sort").unwrap_or("created") {
        "updated" => items.sort_by_key(|i| (i.updated_at, i.seq)),
        _ => items.sort_by_key(|i| i.number),
    }
    if param(inc, "direction").unwrap_or("desc") != "asc" {
        items.reverse();
    }
    let items = items.into_iter().map(|i| m.pr_json(r, i)).collect();
    paginate(items, &inc.query, &link_base(m, ri, "/pulls"))
}

fn invalid_field(field: &str) -> Answer {
    validation_failed(vec![
        json!({"resource": "PullRequest", "field": field, "code": "invalid"}),
    ])
}

fn custom(message: String) -> Answer {
    validation_failed(vec![
        json!({"resource": "PullRequest", "code": "custom", "message": message}),
    ])
}

fn create_pull(m: &mut Model, ri: usize, body: &Value) -> Answer {
    let Some(title) = body["title"].as_str().filter(|t| !t.is_empty()) else {
        return missing_field("PullRequest", "title");
    };
    let Some(head) = body["head"].as_str().filter(|t| !t.is_empty()) else {
        return missing_field("PullRequest", "head");
    };
    let Some(base) = body["base"].as_str().filter(|t| !t.is_empty()) else {
        return missing_field("PullRequest", "base");
    };
    let r = &m.repos[ri];
    let (head_owner, head_ref) = head.split_once(':').unwrap_or((&r.owner, head));
    // The stand-in has no forks: a head in another owner's repository cannot exist.
    if !head_owner.eq_ignore_ascii_case(&r.owner) {
        return invalid_field("head");
    }
    let head_owner = r.owner.clone();
    let mut tips = None;
    if let Some(bare) = &r.bare {
        let Some(head_tip) = branch_tip(bare, head_ref) else {
            return invalid_field("head");
        };
        let Some(base_tip) = branch_tip(bare, base) else {
            return invalid_field("base");
        };
        tips = Some((bare.clone(), base_tip, head_tip));
    }
    let duplicate = r.issues.values().any(|i| {
        i.open
            && i.pr.as_ref().is_some_and(|p| {
                p.head_owner.eq_ignore_ascii_case(&head_owner)
                    && p.head_ref == head_ref
                    && p.base_ref == base
            })
    });
    if duplicate {
        return custom(format!(
            "A pull request already exists for {head_owner}:{head_ref}."
        ));
    }
    if let Some((bare, base_tip, head_tip)) = tips
        && nothing_to_merge(&bare, base_tip, head_tip)
    {
        return custom(format!("No commits between {base} and {head_ref}"));
    }
    let pull = Pull {
        head_owner,
        head_ref: head_ref.to_string(),
        base_ref: base.to_string(),
        draft: body["draft"].as_bool().unwrap_or(false),
        merged_at: None,
    };
    let text = body["body"].as_str().unwrap_or_default().to_string();
    let login = m.login.clone();
    let n = m.create_issue(ri, title, &text, &[], &login, Some(pull));
    let r = &m.repos[ri];
    Answer::created(m.pr_json(r, &r.issues[&n]))
}

fn get_pull(m: &Model, ri: usize, n: u64) -> Answer {
    let r = &m.repos[ri];
    match r.issues.get(&n).filter(|i| i.pr.is_some()) {
        Some(i) => Answer::ok(m.pr_json(r, i)),
        None => not_found(),
    }
}

fn patch_pull(m: &mut Model, ri: usize, n: u64, body: &Value) -> Answer {
    let r = &m.repos[ri];
    let Some(issue) = r.issues.get(&n).filter(|i| i.pr.is_some()) else {
        return not_found();
    };
    let merged = issue.pr.as_ref().is_some_and(|p| p.merged_at.is_some());
    let open = match body.get("state").and_then(Value::as_str) {
        None => None,
        Some("open") if merged => {
            return custom("state cannot be changed. The pull request has been merged.".into());
        }
        Some("open") => Some(true),
        Some("closed") => Some(false),
        Some(_) => return invalid_field("state"),
    };
    let base = body.get("base").and_then(Value::as_str);
    if let (Some(base), Some(bare)) = (base, &r.bare)
        && branch_tip(bare, base).is_none()
    {
        return invalid_field("base");
    }
    // `draft` is not patchable on GitHub (only through GraphQL): ignored here too.
    let seq = m.next_seq();
    if let Some(i) = m.repos[ri].issues.get_mut(&n) {
        if let Some(t) = body.get("title").and_then(Value::as_str) {
            i.title = t.to_string();
        }
        match body.get("body") {
            Some(Value::String(b)) => i.body = b.clone(),
            Some(Value::Null) => i.body.clear(),
            _ => {}
        }
        if let (Some(base), Some(p)) = (base, i.pr.as_mut()) {
            p.base_ref = base.to_string();
        }
        if let Some(open) = open {
            i.set_open(open, seq);
        }
        i.touch(seq);
    }
    let r = &m.repos[ri];
    Answer::ok(m.pr_json(r, &r.issues[&n]))
}
