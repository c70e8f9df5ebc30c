//! The Jira stand-in (tests/support/jira_standin.rs) against a plain HTTP client: these tests
//! document what it plays for the Jira tracker tests — Basic auth, the enhanced search with
//! token pages and field selection, JQL errors, per-workflow transitions, ADF comments, faults.

#[path = "support/jira_standin.rs"]
mod jira_standin;

use jira_standin::{
    DEFAULT_TOKEN, DEFAULT_USER, Fault, JiraStandIn, Matcher, StatusCategory, Transition, Workflow,
    adf_text,
};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use whilly::forge::jira::adf;

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent("whilly-jira-standin-test")
        .build()
        .expect("client")
}

/// A request with the accepted credentials.
fn req(jira: &JiraStandIn, method: Method, path: &str) -> reqwest::RequestBuilder {
    let (user, token) = jira.credentials();
    client()
        .request(method, format!("{}{path}", jira.url()))
        .basic_auth(user, Some(token))
        .header("accept", "application/json")
}

async fn get(jira: &JiraStandIn, path: &str) -> (StatusCode, Value) {
    let resp = req(jira, Method::GET, path).send().await.expect("send");
    read(resp).await
}

async fn send(jira: &JiraStandIn, method: Method, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = req(jira, method, path)
        .json(&body)
        .send()
        .await
        .expect("send");
    read(resp).await
}

async fn read(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn search(jira: &JiraStandIn, body: Value) -> (StatusCode, Value) {
    send(jira, Method::POST, "/rest/api/3/search/jql", body).await
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn keys(page: &Value) -> Vec<String> {
    page["issues"]
        .as_array()
        .expect("issues")
        .iter()
        .map(|i| i["key"].as_str().expect("key").to_string())
        .collect()
}

/// A project ABC with one issue in the "software" workflow.
fn seeded() -> (JiraStandIn, String) {
    let jira = JiraStandIn::start();
    jira.add_project("ABC");
    let key = jira.add_issue(
        "ABC",
        "Add a retry to the uploader",
        adf_text("The uploader gives up on the first 503."),
        "To Do",
        "High",
        &["whilly"],
        "software",
    );
    (jira, key)
}

#[test]
fn answers_plain_threads_outside_any_runtime() {
    let (jira, key) = seeded();
    let addr = jira.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    // base64("whilly-bot@example.com:" + DEFAULT_TOKEN), written out so the test does not
    // lean on the stand-in's own encoder.
    let basic = base64(&format!("{DEFAULT_USER}:{DEFAULT_TOKEN}"));
    write!(
        conn,
        "GET /rest/api/3/issue/{key}?fields=summary HTTP/1.1\r\nhost: {addr}\r\nauthorization: Basic {basic}\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(
        answer.contains("\"summary\":\"Add a retry to the uploader\""),
        "{answer}"
    );
}

/// A plain base64 encoder for the raw request above.
fn base64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let b = s.as_bytes();
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        out.push(A[(n >> 18) as usize & 63] as char);
        out.push(A[(n >> 12) as usize & 63] as char);
        out.push(if c.len() > 1 {
            A[(n >> 6) as usize & 63] as char
        } else {
            '='
        });
        out.push(if c.len() > 2 {
            A[n as usize & 63] as char
        } else {
            '='
        });
    }
    out
}

#[tokio::test]
async fn auth_is_basic_email_and_api_token() {
    let jira = JiraStandIn::start();
    let url = format!("{}/rest/api/3/myself", jira.url());

    let none = client().get(&url).send().await.expect("send");
    assert_eq!(none.status(), 401);
    assert_eq!(
        header(&none, "x-seraph-loginreason"),
        "AUTHENTICATED_FAILED"
    );
    let (_, body) = read(none).await;
    assert_eq!(
        body["errorMessages"][0],
        "Client must be authenticated to access this resource."
    );
    assert_eq!(body["errors"], json!({}));

    let wrong = client()
        .get(&url)
        .basic_auth(DEFAULT_USER, Some("not-the-token"))
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 401);
    let bearer = client()
        .get(&url)
        .bearer_auth(DEFAULT_TOKEN)
        .send()
        .await
        .expect("send");
    assert_eq!(bearer.status(), 401, "Jira API tokens go with Basic auth");

    let (status, me) = get(&jira, "/rest/api/3/myself").await;
    assert_eq!(status, 200);
    assert_eq!(me["emailAddress"], DEFAULT_USER);
    assert_eq!(me["displayName"], "Whilly Bot");
    assert!(me["accountId"].as_str().is_some_and(|a| !a.is_empty()));

    jira.set_credentials("dev@acme.test", "tok-2");
    let old = client()
        .get(&url)
        .basic_auth(DEFAULT_USER, Some(DEFAULT_TOKEN))
        .send()
        .await
        .expect("send");
    assert_eq!(old.status(), 401);
    let (status, me) = get(&jira, "/rest/api/3/myself").await;
    assert_eq!(status, 200);
    assert_eq!(me["emailAddress"], "dev@acme.test");

    let seen = jira.requests();
    assert_eq!(seen.len(), 6, "{}", jira.log());
    assert!(!seen[0].auth_sent && !seen[0].authorized && seen[0].user.is_none());
    assert!(seen[1].auth_sent && !seen[1].authorized);
    assert_eq!(seen[1].user.as_deref(), Some(DEFAULT_USER));
    assert!(seen[3].authorized && seen[5].authorized);
    assert_eq!(seen[5].user.as_deref(), Some("dev@acme.test"));
    let dump = format!("{seen:?}");
    assert!(
        !dump.contains("tok-2") && !dump.contains(DEFAULT_TOKEN),
        "tokens are never recorded"
    );
    assert!(jira.mutations().is_empty());
}

#[tokio::test]
async fn search_pages_with_tokens_and_shows_only_named_fields() {
    let jira = JiraStandIn::start();
    jira.add_project("ABC");
    jira.add_project("OTHER");
    for n in 1..=30 {
        jira.add_issue(
            "ABC",
            &format!("Task {n}"),
            Value::Null,
            "To Do",
            "Medium",
            &[],
            "software",
        );
    }
    jira.add_issue(
        "OTHER",
        "elsewhere",
        Value::Null,
        "To Do",
        "Low",
        &[],
        "simple",
    );

    let jql = "project = ABC ORDER BY key ASC";
    let mut pages = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let mut body = json!({"jql": jql, "fields": ["summary", "status"], "maxResults": 10});
        if let Some(t) = &token {
            body["nextPageToken"] = json!(t);
        }
        let (status, page) = search(&jira, body).await;
        assert_eq!(status, 200, "{page}");
        assert!(
            page.get("total").is_none(),
            "the enhanced search has no total"
        );
        pages.push(page.clone());
        match page["nextPageToken"].as_str() {
            Some(t) => {
                assert_eq!(page["isLast"], false);
                token = Some(t.to_string());
            }
            None => {
                assert_eq!(page["isLast"], true);
                break;
            }
        }
        assert!(pages.len() < 10, "the pages never end: {}", jira.log());
    }
    assert_eq!(pages.len(), 3);
    let all: Vec<String> = pages.iter().flat_map(keys).collect();
    let want: Vec<String> = (1..=30).map(|n| format!("ABC-{n}")).collect();
    assert_eq!(all, want);

    let first = &pages[0]["issues"][0];
    let fields = first["fields"].as_object().expect("fields");
    assert_eq!(
        fields.keys().collect::<Vec<_>>(),
        ["summary", "status"],
        "only the named fields: {first}"
    );
    assert_eq!(first["fields"]["summary"], "Task 1");
    assert_eq!(first["fields"]["status"]["name"], "To Do");
    assert_eq!(first["fields"]["status"]["statusCategory"]["key"], "new");
    assert!(first["id"].is_string() && first["self"].is_string());

    // Without `fields` only ids come back.
    let (status, page) = search(&jira, json!({"jql": "project = ABC", "maxResults": 2})).await;
    assert_eq!(status, 200);
    assert_eq!(page["issues"][0].as_object().expect("issue").len(), 1);
    assert!(page["issues"][0]["id"].is_string());

    // maxResults defaults to 50 and is capped at 100.
    for _ in 0..80 {
        jira.add_issue("ABC", "more", Value::Null, "Done", "Low", &[], "software");
    }
    let (_, page) = search(&jira, json!({"jql": "project = ABC"})).await;
    assert_eq!(page["issues"].as_array().expect("issues").len(), 50);
    let (_, page) = search(&jira, json!({"jql": "project = ABC", "maxResults": 500})).await;
    assert_eq!(page["issues"].as_array().expect("issues").len(), 100);
    assert_eq!(page["isLast"], false);

    // A token belongs to its query.
    let (status, body) = search(
        &jira,
        json!({"jql": "project = OTHER", "nextPageToken": token.expect("a token")}),
    )
    .await;
    assert_eq!(status, 400, "{body}");

    // GET works the same, fields as a comma list.
    let (status, page) = get(
        &jira,
        "/rest/api/3/search/jql?jql=project%20%3D%20OTHER&fields=summary,labels",
    )
    .await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(keys(&page), ["OTHER-1"]);
    assert_eq!(
        page["issues"][0]["fields"],
        json!({"summary": "elsewhere", "labels": []})
    );
    assert!(jira.mutations().is_empty(), "a search POST changes nothing");
}

#[tokio::test]
async fn jql_subset_filters_and_orders() {
    let jira = JiraStandIn::start();
    jira.add_project("ABC");
    let a1 = jira.add_issue(
        "ABC",
        "one",
        Value::Null,
        "To Do",
        "Low",
        &["whilly"],
        "software",
    );
    let a2 = jira.add_issue(
        "ABC",
        "two",
        Value::Null,
        "In Progress",
        "High",
        &["whilly", "ui"],
        "software",
    );
    let a3 = jira.add_issue("ABC", "three", Value::Null, "Done", "Medium", &[], "simple");
    let a4 = jira.add_issue(
        "ABC",
        "four",
        Value::Null,
        "In Review",
        "Highest",
        &["ui"],
        "software",
    );

    let cases: &[(&str, &[&str])] = &[
        ("project = ABC", &[&a1, &a2, &a3, &a4]),
        ("key = ABC-2", &[&a2]),
        ("key in (ABC-1, \"ABC-3\")", &[&a1, &a3]),
        ("project = ABC AND status = \"To Do\"", &[&a1]),
        (
            "project = abc and status in ('In Progress', \"In Review\")",
            &[&a2, &a4],
        ),
        ("project = ABC AND labels = whilly", &[&a1, &a2]),
        ("project = ABC AND statusCategory != Done", &[&a1, &a2, &a4]),
        (
            "project = ABC AND statusCategory = \"In Progress\"",
            &[&a2, &a4],
        ),
        // As on Jira, `!=` never matches an empty field.
        ("project = ABC AND labels != ui", &[&a1]),
        ("project = ABC AND labels is EMPTY", &[&a3]),
        (
            "project = ABC AND (labels = ui OR status = Done)",
            &[&a2, &a3, &a4],
        ),
        ("project = ABC AND NOT status = Done", &[&a1, &a2, &a4]),
        ("project = ABC AND summary ~ thr", &[&a3]),
        ("project = ABC ORDER BY key DESC", &[&a4, &a3, &a2, &a1]),
        ("project = ABC ORDER BY created ASC", &[&a1, &a2, &a3, &a4]),
        ("project = ABC ORDER BY priority ASC", &[&a4, &a2, &a3, &a1]),
    ];
    for (jql, want) in cases {
        let (status, page) = search(&jira, json!({"jql": jql, "fields": ["summary"]})).await;
        assert_eq!(status, 200, "{jql}: {page}");
        assert_eq!(keys(&page), *want, "{jql}");
    }

    let bad: &[(&str, &str)] = &[
        (
            "project = ",
            "Error in the JQL Query: Expecting either a value, list or function but got the end of the query. (line 1, character 11)",
        ),
        (
            "project = ABC AND",
            "Error in the JQL Query: Expecting a field name but got the end of the query. (line 1, character 18)",
        ),
        (
            "project = ABC status = Done",
            "Error in the JQL Query: Expecting either 'OR' or 'AND' but got 'status'. (line 1, character 15)",
        ),
        (
            "key in (ABC-1",
            "Error in the JQL Query: Expecting ')' but got the end of the query. (line 1, character 14)",
        ),
        (
            "flavour = vanilla",
            "Field 'flavour' does not exist or you do not have permission to view it.",
        ),
        (
            "project = NOPE",
            "The value 'NOPE' does not exist for the field 'project'.",
        ),
        (
            "status = Shipped",
            "The value 'Shipped' does not exist for the field 'status'.",
        ),
        (
            "key = ABC-99",
            "An issue with key 'ABC-99' does not exist for field 'key'.",
        ),
        (
            "labels ~ ui",
            "The operator '~' is not supported by the 'labels' field.",
        ),
        (
            "ORDER BY key",
            "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.",
        ),
        (
            "",
            "Unbounded JQL queries are not allowed here. Please add a search restriction to your query.",
        ),
    ];
    for (jql, message) in bad {
        let (status, body) = search(&jira, json!({"jql": jql})).await;
        assert_eq!(status, 400, "{jql}: {body}");
        assert_eq!(body["errorMessages"], json!([message]), "{jql}");
        assert_eq!(body["errors"], json!({}));
    }
    // Every unknown value is listed.
    let (_, body) = search(&jira, json!({"jql": "project = NOPE AND status = Gone"})).await;
    assert_eq!(body["errorMessages"].as_array().expect("messages").len(), 2);

    // The old endpoint is gone, as on Cloud.
    let (status, _) = search_old(&jira).await;
    assert_eq!(status, 410);
}

async fn search_old(jira: &JiraStandIn) -> (StatusCode, Value) {
    get(jira, "/rest/api/3/search?jql=project%3DABC").await
}

#[tokio::test]
async fn issue_json_has_jira_shapes_and_field_selection() {
    let (jira, key) = seeded();
    jira.set_field(&key, "customfield_10016", json!(5));
    let (status, issue) = get(&jira, &format!("/rest/api/3/issue/{key}")).await;
    assert_eq!(status, 200);
    assert_eq!(issue["key"], key);
    assert!(
        issue["id"]
            .as_str()
            .is_some_and(|id| id.parse::<u64>().is_ok())
    );
    assert_eq!(
        issue["self"],
        format!(
            "{}/rest/api/3/issue/{}",
            jira.url(),
            issue["id"].as_str().expect("id")
        )
    );
    let f = &issue["fields"];
    assert_eq!(f["summary"], "Add a retry to the uploader");
    assert_eq!(f["description"]["type"], "doc");
    assert_eq!(f["description"]["version"], 1);
    assert_eq!(f["status"]["name"], "To Do");
    assert_eq!(f["status"]["statusCategory"]["key"], "new");
    assert_eq!(f["priority"]["name"], "High");
    assert_eq!(f["labels"], json!(["whilly"]));
    assert_eq!(f["issuetype"]["name"], "Task");
    assert_eq!(f["project"]["key"], "ABC");
    assert_eq!(f["customfield_10016"], 5);
    let created = f["created"].as_str().expect("created");
    assert!(
        chrono::DateTime::parse_from_str(created, "%Y-%m-%dT%H:%M:%S%.3f%z").is_ok(),
        "{created}"
    );

    let (_, issue) = get(
        &jira,
        &format!("/rest/api/3/issue/{key}?fields=summary,customfield_10016"),
    )
    .await;
    assert_eq!(
        issue["fields"],
        json!({"summary": "Add a retry to the uploader", "customfield_10016": 5})
    );
    let (_, issue) = get(
        &jira,
        &format!("/rest/api/3/issue/{key}?fields=*all,-description,-comment"),
    )
    .await;
    assert!(issue["fields"].get("description").is_none());
    assert!(issue["fields"].get("summary").is_some());

    // By id too, and 404 in Jira's words when missing.
    let id = jira.issue(&key).expect("issue").id;
    let (status, _) = get(&jira, &format!("/rest/api/3/issue/{id}?fields=summary")).await;
    assert_eq!(status, 200);
    let (status, body) = get(&jira, "/rest/api/3/issue/ABC-404").await;
    assert_eq!(status, 404);
    assert_eq!(
        body["errorMessages"][0],
        "Issue does not exist or you do not have permission to see it."
    );

    // Edits: fields and update.labels; status cannot be edited.
    let (status, _) = send(
        &jira,
        Method::PUT,
        &format!("/rest/api/3/issue/{key}"),
        json!({"fields": {"summary": "Retry uploads"}, "update": {"labels": [{"add": "whilly-done"}, {"remove": "whilly"}]}}),
    )
    .await;
    assert_eq!(status, 204);
    let state = jira.issue(&key).expect("issue");
    assert_eq!(state.summary, "Retry uploads");
    assert_eq!(state.labels, ["whilly-done"]);
    let (status, body) = send(
        &jira,
        Method::PUT,
        &format!("/rest/api/3/issue/{key}"),
        json!({"fields": {"status": {"name": "Done"}}}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(body["errors"]["status"].is_string(), "{body}");
}

#[tokio::test]
async fn transitions_follow_each_issues_workflow() {
    let jira = JiraStandIn::start();
    jira.add_project("ABC");
    let soft = jira.add_issue("ABC", "s", Value::Null, "To Do", "Medium", &[], "software");
    let simple = jira.add_issue("ABC", "p", Value::Null, "To Do", "Medium", &[], "simple");

    let offered = async |key: &str| -> Vec<(String, String)> {
        let (status, body) = get(&jira, &format!("/rest/api/3/issue/{key}/transitions")).await;
        assert_eq!(status, 200, "{body}");
        body["transitions"]
            .as_array()
            .expect("transitions")
            .iter()
            .map(|t| {
                (
                    t["id"].as_str().expect("id").to_string(),
                    t["to"]["name"].as_str().expect("to").to_string(),
                )
            })
            .collect()
    };
    let id_to = |list: &[(String, String)], to: &str| {
        list.iter()
            .find(|(_, n)| n == to)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no transition to {to} in {list:?}"))
    };
    let post = async |key: &str, id: &str| {
        send(
            &jira,
            Method::POST,
            &format!("/rest/api/3/issue/{key}/transitions"),
            json!({"transition": {"id": id}}),
        )
        .await
    };

    let soft_start = id_to(&offered(&soft).await, "In Progress");
    let simple_start = id_to(&offered(&simple).await, "In Progress");
    assert_ne!(soft_start, simple_start, "ids differ between workflows");

    // The software workflow's id means nothing to the simple one.
    let (status, body) = post(&simple, &soft_start).await;
    assert_eq!(status, 400);
    assert_eq!(
        body["errorMessages"][0],
        format!("Transition id '{soft_start}' is not valid for this issue.")
    );
    assert_eq!(jira.issue(&simple).expect("issue").status, "To Do");

    let (status, _) = post(&soft, &soft_start).await;
    assert_eq!(status, 204);
    let from_progress = offered(&soft).await;
    let targets: Vec<&str> = from_progress.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        targets,
        [
            "In Review",
            "Failed",
            "Blocked",
            "Cancelled",
            "Waiting for Customer",
            "To Do"
        ]
    );
    assert_eq!(
        post(&soft, &id_to(&from_progress, "In Review")).await.0,
        204
    );
    let from_review = offered(&soft).await;
    assert_eq!(post(&soft, &id_to(&from_review, "Done")).await.0, 204);
    assert_eq!(
        post(&soft, &id_to(&offered(&soft).await, "To Do")).await.0,
        204
    );
    assert_eq!(
        jira.transitions_made(&soft),
        ["In Progress", "In Review", "Done", "To Do"]
    );

    // Simple: no Failed or In Review at all, and Done only from In Progress.
    assert_eq!(post(&simple, &simple_start).await.0, 204);
    let simple_offered = offered(&simple).await;
    assert_eq!(simple_offered.len(), 1, "{simple_offered:?}");
    assert_eq!(simple_offered[0].1, "Done");
    assert_eq!(jira.transitions_made(&simple), ["In Progress"]);
    let state = jira.issue(&simple).expect("issue");
    assert_eq!(state.status_category, StatusCategory::InProgress);

    // A workflow of the test's own.
    jira.add_workflow(Workflow {
        name: "triage".into(),
        statuses: vec![
            ("Open".into(), StatusCategory::ToDo),
            ("Closed".into(), StatusCategory::Done),
        ],
        transitions: vec![Transition {
            id: "701".into(),
            name: "Close".into(),
            from: vec!["Open".into()],
            to: "Closed".into(),
        }],
    });
    let t = jira.add_issue("ABC", "t", Value::Null, "Open", "Low", &[], "triage");
    assert_eq!(post(&t, "701").await.0, 204);
    assert_eq!(jira.issue(&t).expect("issue").status, "Closed");
    let (status, body) = search(
        &jira,
        json!({"jql": "project = ABC AND status = Closed", "fields": ["status"]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(keys(&body), [t.as_str()]);

    // Seeding moves status without a recorded transition.
    jira.set_status(&soft, "Blocked");
    assert_eq!(jira.transitions_made(&soft).len(), 4);
    assert_eq!(
        offered(&soft)
            .await
            .iter()
            .map(|(_, n)| n.as_str())
            .collect::<Vec<_>>(),
        ["In Progress", "To Do"]
    );
    let muts = jira.mutations();
    assert!(
        muts.iter().all(|r| r.path.ends_with("/transitions")),
        "{}",
        jira.log()
    );
    assert_eq!(muts.len(), 7);
}

#[tokio::test]
async fn comments_are_adf_created_edited_and_paginated() {
    let (jira, key) = seeded();
    jira.add_comment(&key, "Dana Dev", adf_text("Seen this twice this week."));
    let body = json!({"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [
            {"type": "text", "text": "Whilly is "},
            {"type": "text", "text": "working", "marks": [{"type": "strong"}]}
        ]}
    ]});
    let path = format!("/rest/api/3/issue/{key}/comment");
    let (status, created) = send(&jira, Method::POST, &path, json!({"body": body})).await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    assert_eq!(created["author"]["displayName"], "Whilly Bot");
    assert_eq!(created["body"], body);
    assert!(created["created"].is_string() && created["updated"].is_string());

    let edited_body = adf_text("Whilly finished in 2m 5s.");
    let (status, edited) = send(
        &jira,
        Method::PUT,
        &format!("{path}/{id}"),
        json!({"body": edited_body}),
    )
    .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["id"], id);
    assert_eq!(edited["body"], edited_body);
    let comments = jira.comments(&key);
    assert_eq!(comments.len(), 2);
    assert_eq!(comments[0].author, "Dana Dev");
    assert_eq!(comments[0].edits, 0);
    assert_eq!(comments[1].id, id);
    assert_eq!(comments[1].edits, 1);
    assert_eq!(comments[1].text(), "Whilly finished in 2m 5s.");
    assert_eq!(jira.issue(&key).expect("issue").comments, comments);

    // Paginated by startAt/maxResults with a total; -created reverses.
    for n in 0..3 {
        jira.add_comment(&key, "Dana Dev", adf_text(&format!("note {n}")));
    }
    let (_, page) = get(&jira, &format!("{path}?startAt=1&maxResults=2")).await;
    assert_eq!(page["total"], 5);
    assert_eq!(page["startAt"], 1);
    assert_eq!(page["maxResults"], 2);
    let ids: Vec<&str> = page["comments"]
        .as_array()
        .expect("comments")
        .iter()
        .map(|c| c["id"].as_str().expect("id"))
        .collect();
    assert_eq!(ids[0], id);
    let (_, page) = get(&jira, &format!("{path}?orderBy=-created&maxResults=1")).await;
    assert_eq!(page["comments"][0]["body"], adf_text("note 2"));

    // What Jira refuses: an empty doc, an empty text node, no body, not JSON at all.
    let empty = json!({"type": "doc", "version": 1, "content": []});
    let (status, body) = send(&jira, Method::POST, &path, json!({"body": empty})).await;
    assert_eq!(status, 400);
    assert_eq!(body["errors"]["comment"], "Comment body can not be empty!");
    let empty_text = json!({"type": "doc", "version": 1, "content": [
        {"type": "paragraph", "content": [{"type": "text", "text": ""}]}
    ]});
    let (status, body) = send(&jira, Method::POST, &path, json!({"body": empty_text})).await;
    assert_eq!(status, 400);
    assert_eq!(body["errorMessages"], json!(["INVALID_INPUT"]));
    let (status, _) = send(&jira, Method::POST, &path, json!({"text": "hi"})).await;
    assert_eq!(status, 400);
    let garbled = req(&jira, Method::POST, &path)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("send");
    assert_eq!(garbled.status(), 400);
    let plain = req(&jira, Method::POST, &path)
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .expect("send");
    assert_eq!(plain.status(), 415);
    let (status, body) = send(
        &jira,
        Method::PUT,
        &format!("{path}/999"),
        json!({"body": adf_text("x")}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(jira.comments(&key).len(), 5);

    // What Whilly's markdown builder makes is ADF the stand-in (and Jira) takes, and reads back.
    let md = "## Whilly finished\n\nDone in **2m 5s**.\n\n- PR: https://github.com/acme/w/pull/9\n- Branch: `whilly/abc-1`";
    let (status, made) = send(
        &jira,
        Method::POST,
        &path,
        json!({"body": adf::from_markdown(md)}),
    )
    .await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(adf::to_text(&made["body"]), md);
}

#[tokio::test]
async fn scripted_faults() {
    let (jira, key) = seeded();
    let path = format!("/rest/api/3/issue/{key}");

    jira.fail_next(
        Matcher::new("POST", "/rest/api/3/search"),
        Fault::TooManyRequests { retry_after: 7 },
        2,
    );
    for _ in 0..2 {
        let r = req(&jira, Method::POST, "/rest/api/3/search/jql")
            .json(&json!({"jql": "project = ABC"}))
            .send()
            .await
            .expect("send");
        assert_eq!(r.status(), 429);
        assert_eq!(header(&r, "retry-after"), "7");
        assert_eq!(header(&r, "x-ratelimit-remaining"), "0");
        let (_, body) = read(r).await;
        assert!(body["errorMessages"].is_array());
    }
    assert_eq!(
        search(&jira, json!({"jql": "project = ABC"})).await.0,
        200,
        "twice only"
    );

    jira.fail_next(
        Matcher::path(&path),
        Fault::Status(503, "Service Unavailable".into()),
        1,
    );
    let (status, body) = get(&jira, &path).await;
    assert_eq!(status, 503);
    assert_eq!(body["errorMessages"][0], "Service Unavailable");

    jira.fail_next(Matcher::all(), Fault::Unauthorized, 1);
    assert_eq!(get(&jira, &path).await.0, 401);

    jira.fail_next(Matcher::all(), Fault::Slow(Duration::from_millis(300)), 1);
    let t = Instant::now();
    assert_eq!(get(&jira, &path).await.0, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));

    jira.fail_next(Matcher::all(), Fault::Disconnect, 1);
    let dropped = req(&jira, Method::GET, &path).send().await;
    assert!(
        dropped.is_err(),
        "the connection drops before any answer: {dropped:?}"
    );
    assert_eq!(get(&jira, &path).await.0, 200);

    // A matcher for another method leaves requests alone.
    jira.fail_next(Matcher::new("PUT", &path), Fault::Unauthorized, 1);
    assert_eq!(get(&jira, &path).await.0, 200);
    jira.clear_faults();

    let faults: Vec<_> = jira
        .requests()
        .into_iter()
        .filter_map(|r| r.fault)
        .collect();
    assert_eq!(faults.len(), 6, "{}", jira.log());
    assert!(jira.log().contains("TooManyRequests"));
    jira.clear_requests();
    assert!(jira.requests().is_empty());
}
