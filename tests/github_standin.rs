//! The GitHub stand-in (tests/support/github_standin.rs) against a plain HTTP client: these
//! tests document what it plays for the forge tests — auth, pagination with `Link`, pull request
//! validation, ETags, every scripted fault, GraphQL draft flips, labels and comments, and the
//! Projects v2 boards (GraphQL only, as on GitHub).

mod support;

use reqwest::StatusCode;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};
use support::github_standin::{DEFAULT_TOKEN, Fault, GitHubStandIn, Matcher};

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .user_agent("whilly-standin-test")
        .build()
        .expect("client")
}

/// A request with the accepted token.
fn req(gh: &GitHubStandIn, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
    let url = if path.starts_with("http") {
        path.to_string()
    } else {
        format!("{}{path}", gh.url())
    };
    client()
        .request(method, url)
        .bearer_auth(gh.token())
        .header("accept", "application/vnd.github+json")
        .header("x-github-api-version", "2022-11-28")
}

async fn get(gh: &GitHubStandIn, path: &str) -> reqwest::Response {
    req(gh, reqwest::Method::GET, path)
        .send()
        .await
        .expect("send")
}

async fn send(
    gh: &GitHubStandIn,
    method: reqwest::Method,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let resp = req(gh, method, path)
        .json(&body)
        .send()
        .await
        .expect("send");
    let status = resp.status();
    let text = resp.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn now_epoch() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A bare repository with `main` (one commit) and `feature` (one more commit on top).
fn bare_repo(dir: &Path) {
    let repo = git2::Repository::init_bare(dir).expect("init bare");
    let sig = git2::Signature::now("t", "t@example.com").expect("sig");
    let commit = |parent: Option<git2::Oid>, content: &str, refname: &str| {
        let blob = repo.blob(content.as_bytes()).expect("blob");
        let mut tb = repo.treebuilder(None).expect("treebuilder");
        tb.insert("file.txt", blob, 0o100644).expect("insert");
        let tree = repo
            .find_tree(tb.write().expect("tree"))
            .expect("find tree");
        let parents: Vec<git2::Commit> = parent
            .map(|p| repo.find_commit(p).expect("parent"))
            .into_iter()
            .collect();
        let parents: Vec<&git2::Commit> = parents.iter().collect();
        repo.commit(Some(refname), &sig, &sig, content, &tree, &parents)
            .expect("commit")
    };
    let main = commit(None, "one", "refs/heads/main");
    commit(Some(main), "two", "refs/heads/feature");
}

#[test]
fn answers_plain_threads_outside_any_runtime() {
    let gh = GitHubStandIn::start();
    let addr = gh.url().trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).expect("connect");
    write!(
        conn,
        "GET /user HTTP/1.1\r\nhost: {addr}\r\nuser-agent: raw\r\nauthorization: token {DEFAULT_TOKEN}\r\nconnection: close\r\n\r\n"
    )
    .expect("write");
    let mut answer = String::new();
    conn.read_to_string(&mut answer).expect("read");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"login\":\"whilly-bot\""), "{answer}");
}

#[tokio::test]
async fn auth_needs_the_one_token_and_a_user_agent() {
    let gh = GitHubStandIn::start();
    gh.set_token("tok-1");
    let url = format!("{}/user", gh.url());

    let none = client().get(&url).send().await.expect("send");
    assert_eq!(none.status(), 401);
    assert!(!header(&none, "x-ratelimit-limit").is_empty());
    let body: Value = none.json().await.expect("json");
    assert_eq!(body["message"], "Bad credentials");
    assert!(body["documentation_url"].is_string());

    let wrong = client()
        .get(&url)
        .bearer_auth("nope")
        .send()
        .await
        .expect("send");
    assert_eq!(wrong.status(), 401);

    for scheme in ["Bearer", "token"] {
        let ok = client()
            .get(&url)
            .header("authorization", format!("{scheme} tok-1"))
            .send()
            .await
            .expect("send");
        assert_eq!(ok.status(), 200, "{scheme}");
        let body: Value = ok.json().await.expect("json");
        assert_eq!(body["login"], "whilly-bot");
    }

    // GitHub refuses requests without a User-Agent (reqwest sends none by default).
    let bare = reqwest::Client::new()
        .get(&url)
        .bearer_auth("tok-1")
        .send()
        .await
        .expect("send");
    assert_eq!(bare.status(), 403);

    let seen = gh.requests();
    assert_eq!(seen.len(), 5, "{}", gh.log());
    assert!(!seen[0].auth_sent && !seen[0].authorized && seen[0].token.is_none());
    assert!(seen[1].auth_sent && !seen[1].authorized);
    assert_eq!(seen[1].token, Some(GitHubStandIn::fingerprint("nope")));
    assert!(seen[2].authorized && seen[3].authorized);
    assert_eq!(seen[2].token, Some(GitHubStandIn::fingerprint("tok-1")));
    assert!(
        !format!("{seen:?}").contains("tok-1"),
        "the token is never recorded"
    );
    assert!(seen[2].counted && !seen[0].counted);
}

#[tokio::test]
async fn issues_paginate_with_absolute_link_headers() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    for i in 0..250 {
        let labels: &[&str] = if i % 2 == 0 { &["whilly"] } else { &[] };
        gh.add_issue("acme/widgets", &format!("issue {i}"), "body", labels);
    }
    let pr = gh.add_pr("acme/widgets", "a pr", "", "feature", "main", true);

    let first = get(&gh, "/repos/acme/widgets/issues?state=open&per_page=100").await;
    let link = header(&first, "link");
    let base = format!("{}/repositories/1/issues", gh.url());
    assert_eq!(
        link,
        format!(
            "<{base}?state=open&per_page=100&page=2>; rel=\"next\", <{base}?state=open&per_page=100&page=3>; rel=\"last\""
        )
    );

    let mut numbers = Vec::new();
    let mut next = Some(format!(
        "{}/repos/acme/widgets/issues?state=open&per_page=100",
        gh.url()
    ));
    let mut pages = Vec::new();
    while let Some(url) = next.take() {
        let resp = get(&gh, &url).await;
        assert_eq!(resp.status(), 200);
        next = header(&resp, "link").split(", ").find_map(|part| {
            part.strip_suffix("; rel=\"next\"")
                .map(|u| u.trim_matches(['<', '>']).to_string())
        });
        let items: Vec<Value> = resp.json().await.expect("json");
        pages.push(items.len());
        numbers.extend(items.iter().map(|i| i["number"].as_u64().expect("number")));
        let first = &items[0];
        for key in [
            "number",
            "node_id",
            "title",
            "body",
            "state",
            "labels",
            "html_url",
            "user",
            "updated_at",
            "created_at",
            "comments",
        ] {
            assert!(first.get(key).is_some(), "issue has {key}");
        }
    }
    // 250 issues and the pull request, newest first, each once.
    assert_eq!(pages, vec![100, 100, 51]);
    assert_eq!(numbers.first(), Some(&pr));
    let mut unique = numbers.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 251);

    // The pull request is in the issue list with a pull_request key, as on GitHub.
    let items: Vec<Value> = get(&gh, "/repos/acme/widgets/issues?per_page=1")
        .await
        .json()
        .await
        .expect("json");
    assert!(items[0]["pull_request"]["url"].is_string());

    // Default per_page is 30; labels filter; the middle page has prev/next/last/first.
    let resp = get(&gh, "/repos/acme/widgets/issues?labels=whilly&page=2").await;
    let link = header(&resp, "link");
    for rel in ["prev", "next", "last", "first"] {
        assert!(link.contains(&format!("rel=\"{rel}\"")), "{link}");
    }
    assert!(
        link.contains("labels=whilly&page=5>; rel=\"last\""),
        "{link}"
    );
    let items: Vec<Value> = resp.json().await.expect("json");
    assert_eq!(items.len(), 30);
    assert!(items.iter().all(|i| i["labels"][0]["name"] == "whilly"));

    // per_page is capped at 100; a closed issue leaves the open list.
    gh.close_issue("acme/widgets", 1);
    let items: Vec<Value> = get(&gh, "/repos/acme/widgets/issues?per_page=500&state=closed")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["state"], "closed");
    let all = gh.requests();
    assert!(
        all.iter()
            .any(|r| r.path == "/repositories/1/issues" && r.route == "/repos/acme/widgets/issues")
    );
}

#[tokio::test]
async fn pull_requests_are_validated_like_github() {
    let dir = tempfile::tempdir().expect("tempdir");
    bare_repo(dir.path());
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", Some(dir.path().to_path_buf()));

    let repo: Value = get(&gh, "/repos/acme/widgets")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(repo["full_name"], "acme/widgets");
    assert_eq!(repo["default_branch"], "main");
    assert_eq!(repo["private"], false);
    assert_eq!(repo["clone_url"], dir.path().display().to_string());
    assert_eq!(get(&gh, "/repos/acme/nope").await.status(), 404);

    let issue = gh.add_issue("acme/widgets", "do it", "", &[]);
    let create = json!({"title": "Do it", "body": "Closes #1", "head": "acme:feature", "base": "main", "draft": true});
    let (status, pr) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/pulls",
        create.clone(),
    )
    .await;
    assert_eq!(status, 201, "{pr}");
    assert_eq!(pr["number"], issue + 1, "numbers are shared with issues");
    assert_eq!(pr["draft"], true);
    assert_eq!(pr["merged"], false);
    assert_eq!(pr["state"], "open");
    assert_eq!(pr["head"]["ref"], "feature");
    assert_eq!(pr["head"]["label"], "acme:feature");
    assert_eq!(pr["head"]["sha"].as_str().map(str::len), Some(40));
    assert_eq!(pr["base"]["ref"], "main");
    assert!(pr["node_id"].as_str().is_some_and(|n| n.starts_with("PR_")));
    for key in ["html_url", "url", "title", "body"] {
        assert!(pr[key].is_string(), "{key}");
    }

    let (status, dup) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/pulls",
        create,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(dup["message"], "Validation Failed");
    assert_eq!(
        dup["errors"][0],
        json!({"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:feature."})
    );

    let missing = json!({"title": "x", "head": "nope", "base": "main"});
    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/pulls",
        missing,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(body["errors"][0]["field"], "head");
    assert_eq!(body["errors"][0]["code"], "invalid");

    let empty = json!({"title": "x", "head": "main", "base": "main"});
    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/pulls",
        empty,
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(
        body["errors"][0]["message"],
        "No commits between main and main"
    );

    let list: Vec<Value> = get(&gh, "/repos/acme/widgets/pulls?head=acme:feature&state=all")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list.len(), 1);
    let none: Vec<Value> = get(&gh, "/repos/acme/widgets/pulls?head=acme:other")
        .await
        .json()
        .await
        .expect("json");
    assert!(none.is_empty());

    let n = pr["number"].as_u64().expect("number");
    let (status, patched) = send(
        &gh,
        reqwest::Method::PATCH,
        &format!("/repos/acme/widgets/pulls/{n}"),
        json!({"title": "Done", "draft": false}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(patched["title"], "Done");
    assert_eq!(patched["draft"], true, "draft is not patchable over REST");

    gh.set_pr_merged("acme/widgets", n);
    let prs = gh.prs("acme/widgets");
    assert_eq!(prs.len(), 1);
    assert_eq!((prs[0].state.as_str(), prs[0].merged), ("closed", true));
    assert_eq!(prs[0].head, "feature");
    assert_eq!(prs[0].base, "main");
    let merged: Value = get(&gh, &format!("/repos/acme/widgets/pulls/{n}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(merged["merged"], true);
    assert_eq!(gh.mutations().len(), 5, "{}", gh.log());
}

#[tokio::test]
async fn etags_answer_304_without_counting() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "t", "b", &[]);
    let path = format!("/repos/acme/widgets/issues/{n}");

    let first = get(&gh, &path).await;
    assert_eq!(first.status(), 200);
    let tag = header(&first, "etag");
    assert!(tag.starts_with("W/\""), "{tag}");
    let remaining: u64 = header(&first, "x-ratelimit-remaining")
        .parse()
        .expect("remaining");

    let again = req(&gh, reqwest::Method::GET, &path)
        .header("if-none-match", &tag)
        .send()
        .await
        .expect("send");
    assert_eq!(again.status(), 304);
    assert_eq!(header(&again, "etag"), tag);
    let after: u64 = header(&again, "x-ratelimit-remaining")
        .parse()
        .expect("remaining");
    assert_eq!(after, remaining, "a 304 does not count");
    assert!(again.bytes().await.expect("body").is_empty());

    gh.edit_issue("acme/widgets", n, "new title", "new body");
    let changed = req(&gh, reqwest::Method::GET, &path)
        .header("if-none-match", &tag)
        .send()
        .await
        .expect("send");
    assert_eq!(changed.status(), 200);
    assert_ne!(header(&changed, "etag"), tag);

    let seen = gh.requests();
    assert_eq!(seen[1].status, 304);
    assert!(!seen[1].counted && seen[0].counted);
    assert_eq!(seen[1].headers.get("if-none-match"), Some(&tag));
}

#[tokio::test]
async fn scripted_faults_carry_githubs_headers() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let repo = "/repos/acme/widgets";

    gh.fail_next(
        Matcher::new("GET", repo),
        Fault::PrimaryRateLimit {
            reset_in: Duration::from_secs(60),
        },
        1,
    );
    let r = get(&gh, repo).await;
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "x-ratelimit-remaining"), "0");
    let reset: i64 = header(&r, "x-ratelimit-reset").parse().expect("reset");
    assert!(
        (now_epoch() + 58..=now_epoch() + 61).contains(&reset),
        "{reset}"
    );
    let body: Value = r.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("API rate limit exceeded for"))
    );
    assert_eq!(get(&gh, repo).await.status(), 200, "once only");

    gh.fail_next(
        Matcher::path(repo),
        Fault::SecondaryRateLimit { retry_after: 7 },
        1,
    );
    let r = get(&gh, repo).await;
    assert_eq!(r.status(), 403);
    assert_eq!(header(&r, "retry-after"), "7");
    assert_ne!(header(&r, "x-ratelimit-remaining"), "0");
    let body: Value = r.json().await.expect("json");
    assert!(
        body["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("You have exceeded a secondary rate limit"))
    );

    gh.fail_next(Matcher::all(), Fault::TooManyRequests { retry_after: 3 }, 2);
    for _ in 0..2 {
        let r = get(&gh, repo).await;
        assert_eq!(r.status(), 429);
        assert_eq!(header(&r, "retry-after"), "3");
    }

    gh.fail_next(Matcher::path("/graphql"), Fault::GraphqlRateLimited, 1);
    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": "query { rateLimit { remaining resetAt } }"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body["errors"][0]["type"], "RATE_LIMITED");

    gh.fail_next(
        Matcher::new("GET", repo),
        Fault::Status(502, "Server Error".into()),
        1,
    );
    let r = get(&gh, repo).await;
    assert_eq!(r.status(), 502);
    assert!(!header(&r, "x-ratelimit-used").is_empty());

    gh.fail_next(Matcher::all(), Fault::Unauthorized, 1);
    assert_eq!(get(&gh, repo).await.status(), 401);

    gh.fail_next(Matcher::all(), Fault::Slow(Duration::from_millis(300)), 1);
    let t = Instant::now();
    assert_eq!(get(&gh, repo).await.status(), 200);
    assert!(t.elapsed() >= Duration::from_millis(300));

    gh.fail_next(Matcher::all(), Fault::Disconnect, 1);
    let dropped = req(&gh, reqwest::Method::GET, repo).send().await;
    assert!(
        dropped.is_err(),
        "the connection drops before any answer: {dropped:?}"
    );
    assert_eq!(get(&gh, repo).await.status(), 200);

    // A matcher for another method or path leaves requests alone.
    gh.fail_next(Matcher::new("POST", repo), Fault::Unauthorized, 1);
    assert_eq!(get(&gh, repo).await.status(), 200);
    gh.clear_faults();

    let faults: Vec<_> = gh.requests().into_iter().filter_map(|r| r.fault).collect();
    assert_eq!(faults.len(), 9, "{}", gh.log());
    assert_eq!(gh.requests().iter().filter(|r| r.status == 0).count(), 1);
}

#[tokio::test]
async fn graphql_flips_drafts_and_reports_the_rate_limit() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_pr("acme/widgets", "p", "", "feature", "main", true);
    let node_id = gh.pr("acme/widgets", n).expect("pr").node_id;

    let ready = "mutation($id: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $id}) { pullRequest { isDraft number } } }";
    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": ready, "variables": {"id": node_id}}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        body["data"]["markPullRequestReadyForReview"]["pullRequest"]["isDraft"],
        false
    );
    assert_eq!(
        body["data"]["markPullRequestReadyForReview"]["pullRequest"]["number"],
        n
    );
    assert!(!gh.prs("acme/widgets")[0].draft);

    let draft = "mutation($input: ConvertPullRequestToDraftInput!) { convertPullRequestToDraft(input: $input) { pullRequest { isDraft } } }";
    let (_, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": draft, "variables": {"input": {"pullRequestId": node_id}}}),
    )
    .await;
    assert_eq!(
        body["data"]["convertPullRequestToDraft"]["pullRequest"]["isDraft"],
        true
    );
    assert!(gh.prs("acme/widgets")[0].draft);

    let (_, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": ready, "variables": {"id": "PR_nope"}}),
    )
    .await;
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");

    let (_, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": "query { rateLimit { remaining resetAt } }"}),
    )
    .await;
    let remaining = body["data"]["rateLimit"]["remaining"]
        .as_u64()
        .expect("remaining");
    assert_eq!(remaining, 5000 - 4);
    assert!(
        body["data"]["rateLimit"]["resetAt"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );

    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": "query { enterprise(slug: \"a\") { id } }"}),
    )
    .await;
    assert_eq!(status, 200);
    assert!(body["errors"][0]["message"].is_string());

    // GraphQL mutations are mutations; queries are not.
    let mutations = gh.mutations();
    assert_eq!(mutations.len(), 3, "{}", gh.log());
    assert!(mutations.iter().all(|m| m.path == "/graphql"));
}

#[tokio::test]
async fn labels_are_added_removed_and_created_on_the_repo() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "t", "b", &["whilly"]);
    let labels = format!("/repos/acme/widgets/issues/{n}/labels");

    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        &labels,
        json!({"labels": ["whilly:running", "needs review"]}),
    )
    .await;
    assert_eq!(status, 200);
    let names: Vec<&str> = body
        .as_array()
        .expect("array")
        .iter()
        .filter_map(|l| l["name"].as_str())
        .collect();
    assert_eq!(names, ["whilly", "whilly:running", "needs review"]);
    assert!(
        gh.labels("acme/widgets")
            .contains(&"needs review".to_string())
    );

    let (status, body) = send(
        &gh,
        reqwest::Method::DELETE,
        &format!("{labels}/needs%20review"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(body.as_array().map(Vec::len), Some(2));
    let (status, body) = send(
        &gh,
        reqwest::Method::DELETE,
        &format!("{labels}/needs%20review"),
        Value::Null,
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(body["message"], "Label does not exist");

    let (status, _) = send(
        &gh,
        reqwest::Method::PUT,
        &labels,
        json!({"labels": ["whilly:done"]}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        gh.issue("acme/widgets", n).expect("issue").labels,
        ["whilly:done"]
    );

    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/labels",
        json!({"name": "WHILLY", "color": "ff0000"}),
    )
    .await;
    assert_eq!(status, 422);
    assert_eq!(body["errors"][0]["code"], "already_exists");
    let (status, body) = send(
        &gh,
        reqwest::Method::POST,
        "/repos/acme/widgets/labels",
        json!({"name": "fresh", "color": "00ff00"}),
    )
    .await;
    assert_eq!(status, 201);
    assert_eq!(body["color"], "00ff00");
    let all: Vec<Value> = get(&gh, "/repos/acme/widgets/labels")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(all.len(), 5);
}

#[tokio::test]
async fn comments_are_created_and_edited() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "t", "b", &[]);
    gh.add_comment("acme/widgets", n, "alice", "first!");

    let (status, c) = send(
        &gh,
        reqwest::Method::POST,
        &format!("/repos/acme/widgets/issues/{n}/comments"),
        json!({"body": "whilly is on it"}),
    )
    .await;
    assert_eq!(status, 201);
    for key in [
        "id",
        "node_id",
        "body",
        "user",
        "html_url",
        "created_at",
        "updated_at",
    ] {
        assert!(c.get(key).is_some(), "comment has {key}");
    }
    assert_eq!(c["user"]["login"], "whilly-bot");
    let id = c["id"].as_u64().expect("id");

    let (status, edited) = send(
        &gh,
        reqwest::Method::PATCH,
        &format!("/repos/acme/widgets/issues/comments/{id}"),
        json!({"body": "done"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(edited["body"], "done");
    let fetched: Value = get(&gh, &format!("/repos/acme/widgets/issues/comments/{id}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(fetched["body"], "done");

    let comments = gh.comments("acme/widgets", n);
    assert_eq!(comments.len(), 2);
    assert_eq!((comments[0].user.as_str(), comments[0].edits), ("alice", 0));
    assert_eq!((comments[1].body.as_str(), comments[1].edits), ("done", 1));
    let issue: Value = get(&gh, &format!("/repos/acme/widgets/issues/{n}"))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(issue["comments"], 2);

    for i in 0..3 {
        gh.add_comment("acme/widgets", n, "bob", &format!("more {i}"));
    }
    let page = get(
        &gh,
        &format!("/repos/acme/widgets/issues/{n}/comments?per_page=2&page=3"),
    )
    .await;
    assert!(header(&page, "link").contains("rel=\"first\""));
    let items: Vec<Value> = page.json().await.expect("json");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["body"], "more 2");

    let (status, _) = send(
        &gh,
        reqwest::Method::PATCH,
        &format!("/repos/acme/widgets/issues/{n}"),
        json!({"state": "closed", "title": "closed now"}),
    )
    .await;
    assert_eq!(status, 200);
    let state = gh.issue("acme/widgets", n).expect("issue");
    assert_eq!(
        (state.state.as_str(), state.title.as_str()),
        ("closed", "closed now")
    );

    // Every mutation is timed, in arrival order.
    let at: Vec<Instant> = gh.mutations().iter().map(|m| m.at).collect();
    assert_eq!(at.len(), 3);
    assert!(at.windows(2).all(|w| w[0] <= w[1]));
}

// ----- Projects v2 -----

/// A GraphQL request with the accepted token; the whole answer (always HTTP 200 here).
async fn gql(gh: &GitHubStandIn, query: &str, variables: Value) -> Value {
    let (status, body) = send(
        gh,
        reqwest::Method::POST,
        "/graphql",
        json!({"query": query, "variables": variables}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    body
}

const ITEMS_PAGE: &str = r#"
query($login: String!, $number: Int!, $first: Int, $cursor: String) {
  organization(login: $login) {
    projectV2(number: $number) {
      id
      title
      field(name: "Status") { ... on ProjectV2SingleSelectField { id name options { id name } } }
      items(first: $first, after: $cursor) {
        pageInfo { hasNextPage endCursor }
        nodes {
          id
          type
          content { ... on Issue { number title state url repository { nameWithOwner } } }
          fieldValueByName(name: "Status") {
            ... on ProjectV2ItemFieldSingleSelectValue { name optionId }
          }
        }
      }
    }
  }
}"#;

fn is_option_id(id: &Value) -> bool {
    id.as_str()
        .is_some_and(|s| s.len() == 8 && s.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[tokio::test]
async fn projects_page_their_items_with_cursors() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let project = gh.add_project("acme", true, 7, "Roadmap", &["Todo", "In Progress", "Done"]);
    let statuses = [Some("Todo"), Some("Done"), None];
    for i in 0..250u64 {
        let n = gh.add_issue("acme/widgets", &format!("issue {i}"), "", &[]);
        gh.add_project_item("acme", 7, "acme/widgets", n, statuses[(i % 3) as usize]);
    }

    let mut cursor = Value::Null;
    let mut pages = Vec::new();
    let mut seen = Vec::new();
    loop {
        let vars = json!({"login": "acme", "number": 7, "first": 100, "cursor": cursor});
        let body = gql(&gh, ITEMS_PAGE, vars).await;
        assert!(body.get("errors").is_none(), "{body}");
        let p = &body["data"]["organization"]["projectV2"];
        assert_eq!(p["id"], project);
        assert_eq!(p["title"], "Roadmap");
        let options = p["field"]["options"].as_array().expect("options");
        assert_eq!(p["field"]["name"], "Status");
        assert_eq!(options.len(), 3);
        assert!(
            options.iter().all(|o| is_option_id(&o["id"])),
            "{options:?}"
        );
        let nodes = p["items"]["nodes"].as_array().expect("nodes");
        pages.push(nodes.len());
        for node in nodes {
            assert_eq!(node["type"], "ISSUE");
            assert!(
                node["id"]
                    .as_str()
                    .is_some_and(|id| id.starts_with("PVTI_"))
            );
            let c = &node["content"];
            assert_eq!(c["repository"]["nameWithOwner"], "acme/widgets");
            assert_eq!(c["state"], "OPEN");
            let n = c["number"].as_u64().expect("number");
            assert_eq!(c["url"], format!("{}/acme/widgets/issues/{n}", gh.url()));
            let want = statuses[((n - 1) % 3) as usize];
            let value = &node["fieldValueByName"];
            assert_eq!(value["name"].as_str(), want, "{node}");
            if want.is_some() {
                let option = options
                    .iter()
                    .find(|o| o["name"] == value["name"])
                    .expect("option");
                assert_eq!(value["optionId"], option["id"]);
            } else {
                assert!(value.is_null());
            }
            seen.push(n);
        }
        let info = &p["items"]["pageInfo"];
        if !info["hasNextPage"].as_bool().expect("hasNextPage") {
            break;
        }
        cursor = info["endCursor"].clone();
        assert!(cursor.is_string(), "{info}");
    }
    assert_eq!(pages, [100, 100, 50]);
    assert_eq!(
        seen,
        (1..=250).collect::<Vec<_>>(),
        "each item once, in board order"
    );

    // A cursor not handed out is refused as GitHub does.
    let vars = json!({"login": "acme", "number": 7, "first": 10, "cursor": "bm9wZQ"});
    let body = gql(&gh, ITEMS_PAGE, vars).await;
    assert_eq!(
        body["errors"][0]["type"], "INVALID_CURSOR_ARGUMENTS",
        "{body}"
    );

    // Three reads, three points of the GraphQL budget; REST untouched.
    let body = gql(&gh, "query { rateLimit { remaining used } }", Value::Null).await;
    assert_eq!(body["data"]["rateLimit"]["used"], 5);
    let rest = get(&gh, "/rate_limit").await;
    let rest: Value = rest.json().await.expect("json");
    assert_eq!(rest["resources"]["core"]["used"], 0);
    assert!(gh.mutations().is_empty(), "{}", gh.log());
}

#[tokio::test]
async fn projects_refuse_more_than_100_items_or_no_first() {
    let gh = GitHubStandIn::start();
    gh.add_project("acme", true, 1, "Board", &["Todo"]);

    let vars = json!({"login": "acme", "number": 1, "first": 101});
    let body = gql(&gh, ITEMS_PAGE, vars).await;
    assert!(body.get("data").is_none(), "refused before running: {body}");
    assert_eq!(body["errors"][0]["type"], "EXCESSIVE_PAGINATION");
    assert_eq!(
        body["errors"][0]["message"],
        "Requesting 101 records on the `items` connection exceeds the `first` limit of 100 records."
    );

    let body = gql(&gh, ITEMS_PAGE, json!({"login": "acme", "number": 1})).await;
    assert_eq!(
        body["errors"][0]["type"], "MISSING_PAGINATION_BOUNDARIES",
        "{body}"
    );
    assert!(body.get("data").is_none());

    // Exactly 100 is fine, on an empty board too.
    let vars = json!({"login": "acme", "number": 1, "first": 100});
    let body = gql(&gh, ITEMS_PAGE, vars).await;
    let items = &body["data"]["organization"]["projectV2"]["items"];
    assert_eq!(items["nodes"], json!([]), "{body}");
    assert_eq!(
        items["pageInfo"],
        json!({"hasNextPage": false, "hasPreviousPage": false, "startCursor": null, "endCursor": null})
    );
}

#[tokio::test]
async fn projects_are_found_under_the_right_kind_of_owner() {
    let gh = GitHubStandIn::start();
    let org_board = gh.add_project("acme", true, 1, "Org board", &["Todo", "Done"]);
    let user_board = gh.add_project("alice", false, 3, "Alice's", &["Backlog"]);
    let own_board = gh.add_project("whilly-bot", false, 1, "Mine", &["Todo"]);
    let lookup = r#"query($login: String!, $number: Int!) {
      organization(login: $login) { projectV2(number: $number) { id title } }
    }"#;

    let body = gql(&gh, lookup, json!({"login": "acme", "number": 1})).await;
    assert_eq!(body["data"]["organization"]["projectV2"]["id"], org_board);
    assert!(body.get("errors").is_none(), "{body}");

    // A user's login as an organization is NOT_FOUND: a client must try `user` next.
    let body = gql(&gh, lookup, json!({"login": "alice", "number": 3})).await;
    assert_eq!(body["data"]["organization"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    assert_eq!(body["errors"][0]["path"], json!(["organization"]));
    assert_eq!(
        body["errors"][0]["message"],
        "Could not resolve to an Organization with the login of 'alice'."
    );
    let as_user = lookup.replace("organization(", "user(");
    let body = gql(&gh, &as_user, json!({"login": "alice", "number": 3})).await;
    assert_eq!(body["data"]["user"]["projectV2"]["id"], user_board);
    assert_eq!(body["data"]["user"]["projectV2"]["title"], "Alice's");
    let body = gql(&gh, &as_user, json!({"login": "acme", "number": 1})).await;
    assert_eq!(body["data"]["user"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    let body = gql(&gh, lookup, json!({"login": "nobody", "number": 1})).await;
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");

    // Both at once: one answers, the other is null with an error.
    let both = r#"query($login: String!, $number: Int!) {
      organization(login: $login) { projectV2(number: $number) { id } }
      user(login: $login) { projectV2(number: $number) { id } }
    }"#;
    let body = gql(&gh, both, json!({"login": "alice", "number": 3})).await;
    assert_eq!(body["data"]["organization"], Value::Null);
    assert_eq!(body["data"]["user"]["projectV2"]["id"], user_board);
    assert_eq!(body["errors"].as_array().map(Vec::len), Some(1));

    // The owner exists, the number does not.
    let body = gql(&gh, lookup, json!({"login": "acme", "number": 9})).await;
    assert_eq!(body["data"]["organization"]["projectV2"], Value::Null);
    assert_eq!(
        body["errors"][0]["path"],
        json!(["organization", "projectV2"])
    );
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");

    // Literal arguments, the viewer's own boards, fields(first:) and node(id:).
    let body = gql(
        &gh,
        r#"{ viewer { login projectV2(number: 1) { id fields(first: 20) { nodes {
              ... on ProjectV2Field { id name }
              ... on ProjectV2SingleSelectField { id name options { id name } } } } } } }"#,
        Value::Null,
    )
    .await;
    let p = &body["data"]["viewer"]["projectV2"];
    assert_eq!(p["id"], own_board, "{body}");
    let fields = p["fields"]["nodes"].as_array().expect("fields");
    let names: Vec<&str> = fields.iter().filter_map(|f| f["name"].as_str()).collect();
    assert_eq!(names, ["Title", "Status"]);
    assert_eq!(fields[1]["options"][0]["name"], "Todo");
    let body = gql(
        &gh,
        "query($id: ID!) { node(id: $id) { ... on ProjectV2 { title } } }",
        json!({"id": org_board}),
    )
    .await;
    assert_eq!(body["data"]["node"]["title"], "Org board");
    let body = gql(&gh, "{ node(id: \"PVT_nope\") { id } }", Value::Null).await;
    assert_eq!(body["data"]["node"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
}

const ADD_ITEM: &str = "mutation($project: ID!, $content: ID!) {
  addProjectV2ItemById(input: {projectId: $project, contentId: $content}) { item { id } }
}";

const ISSUE_ID: &str = "query($owner: String!, $name: String!, $number: Int!) {
  repository(owner: $owner, name: $name) { issue(number: $number) { id } }
}";

#[tokio::test]
async fn projects_add_items_idempotently() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "do it", "", &[]);
    let project = gh.add_project("acme", true, 1, "Board", &["Todo", "Done"]);

    let body = gql(
        &gh,
        ISSUE_ID,
        json!({"owner": "acme", "name": "widgets", "number": n}),
    )
    .await;
    let issue_id = body["data"]["repository"]["issue"]["id"].clone();
    assert_eq!(
        issue_id.as_str(),
        Some(gh.issue("acme/widgets", n).expect("issue").node_id.as_str()),
        "the same stable node id as REST's node_id"
    );
    let body = gql(
        &gh,
        ISSUE_ID,
        json!({"owner": "acme", "name": "widgets", "number": 99}),
    )
    .await;
    assert_eq!(body["data"]["repository"]["issue"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    let body = gql(
        &gh,
        ISSUE_ID,
        json!({"owner": "acme", "name": "gone", "number": 1}),
    )
    .await;
    assert_eq!(body["data"]["repository"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");

    let vars = json!({"project": project, "content": issue_id});
    let first = gql(&gh, ADD_ITEM, vars.clone()).await;
    let item = first["data"]["addProjectV2ItemById"]["item"]["id"].clone();
    assert!(
        item.as_str().is_some_and(|i| i.starts_with("PVTI_")),
        "{first}"
    );
    // The same issue again, with the input as one variable, then as literals.
    let whole_input = "mutation($input: AddProjectV2ItemByIdInput!) {
      addProjectV2ItemById(input: $input) { item { id } } }";
    let vars = json!({"input": {"projectId": project, "contentId": issue_id}});
    let again = gql(&gh, whole_input, vars).await;
    assert_eq!(
        again["data"]["addProjectV2ItemById"]["item"]["id"], item,
        "{again}"
    );
    let literal = format!(
        "mutation {{ addProjectV2ItemById(input: {{projectId: \"{project}\", contentId: \"{}\"}}) {{ item {{ id }} }} }}",
        issue_id.as_str().unwrap_or_default()
    );
    let again = gql(&gh, &literal, Value::Null).await;
    assert_eq!(
        again["data"]["addProjectV2ItemById"]["item"]["id"], item,
        "{again}"
    );
    let items = gh.project_items("acme", 1);
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].id, item.as_str().unwrap_or_default());
    assert_eq!(items[0].repo.as_deref(), Some("acme/widgets"));
    assert_eq!(items[0].issue, Some(n));
    assert_eq!(items[0].status, None);

    let body = gql(
        &gh,
        ADD_ITEM,
        json!({"project": "PVT_nope", "content": issue_id}),
    )
    .await;
    assert_eq!(body["data"]["addProjectV2ItemById"], Value::Null);
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    let body = gql(
        &gh,
        ADD_ITEM,
        json!({"project": project, "content": "I_nope"}),
    )
    .await;
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    assert_eq!(gh.project_items("acme", 1).len(), 1);

    // Mutations count as mutations, the reads do not.
    assert_eq!(gh.mutations().len(), 5, "{}", gh.log());
}

const SET_STATUS: &str = "mutation($project: ID!, $item: ID!, $field: ID!, $option: String!) {
  updateProjectV2ItemFieldValue(input: {
    projectId: $project, itemId: $item, fieldId: $field, value: {singleSelectOptionId: $option}
  }) { projectV2Item { id fieldValueByName(name: \"Status\") {
    ... on ProjectV2ItemFieldSingleSelectValue { name optionId } } } }
}";

/// The Status field's id and its options by name.
async fn status_field(
    gh: &GitHubStandIn,
    login: &str,
    number: u64,
) -> (Value, Vec<(String, Value)>) {
    let vars = json!({"login": login, "number": number, "first": 1});
    let body = gql(gh, ITEMS_PAGE, vars).await;
    let field = &body["data"]["organization"]["projectV2"]["field"];
    let options = field["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap_or_default().to_string(),
                o["id"].clone(),
            )
        })
        .collect();
    (field["id"].clone(), options)
}

fn option<'a>(options: &'a [(String, Value)], name: &str) -> &'a Value {
    &options.iter().find(|(n, _)| n == name).expect("option").1
}

#[tokio::test]
async fn projects_record_status_changes_and_refuse_unknown_options() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "t", "", &[]);
    let project = gh.add_project("acme", true, 1, "Board", &["Todo", "In Progress", "Done"]);
    let item = gh.add_project_item("acme", 1, "acme/widgets", n, Some("Todo"));
    let (field, options) = status_field(&gh, "acme", 1).await;

    for status in ["In Progress", "Done"] {
        let vars = json!({"project": project, "item": item, "field": field, "option": option(&options, status)});
        let body = gql(&gh, SET_STATUS, vars).await;
        let updated = &body["data"]["updateProjectV2ItemFieldValue"]["projectV2Item"];
        assert_eq!(updated["id"], item, "{body}");
        assert_eq!(updated["fieldValueByName"]["name"], status);
    }
    // Someone moving the card on the board is not an API change.
    gh.move_project_item("acme", 1, &item, Some("Todo"));
    let state = &gh.project_items("acme", 1)[0];
    assert_eq!(state.status.as_deref(), Some("Todo"));
    assert_eq!(state.status_changes, ["In Progress", "Done"]);
    let values = "query($id: ID!) { node(id: $id) { ... on ProjectV2Item { fieldValues(first: 10) {
      nodes { ... on ProjectV2ItemFieldTextValue { text }
              ... on ProjectV2ItemFieldSingleSelectValue { name } } } } } }";
    let body = gql(&gh, values, json!({"id": item})).await;
    let nodes = &body["data"]["node"]["fieldValues"]["nodes"];
    assert_eq!(nodes[0]["text"], "t", "{body}");
    assert_eq!(nodes[1]["name"], "Todo");

    let vars = json!({"project": project, "item": item, "field": field, "option": "0000beef"});
    let body = gql(&gh, SET_STATUS, vars).await;
    assert_eq!(body["data"]["updateProjectV2ItemFieldValue"], Value::Null);
    assert_eq!(
        body["errors"][0]["message"],
        "The single select option Id does not belong to the field"
    );
    let vars = json!({"project": project, "item": "PVTI_nope", "field": field, "option": option(&options, "Done")});
    let body = gql(&gh, SET_STATUS, vars).await;
    assert_eq!(body["errors"][0]["type"], "NOT_FOUND");
    let state = &gh.project_items("acme", 1)[0];
    assert_eq!(
        state.status.as_deref(),
        Some("Todo"),
        "refusals change nothing"
    );
    assert_eq!(state.status_changes.len(), 2);
    assert_eq!(gh.mutations().len(), 4, "{}", gh.log());
}

const SET_OPTIONS: &str =
    "mutation($field: ID!, $options: [ProjectV2SingleSelectFieldOptionInput!]!) {
  updateProjectV2Field(input: {fieldId: $field, singleSelectOptions: $options}) {
    projectV2Field { ... on ProjectV2SingleSelectField { id options { id name } } }
  }
}";

#[tokio::test]
async fn projects_replace_every_option_and_clear_every_status_as_github_does() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let a = gh.add_issue("acme/widgets", "a", "", &[]);
    let b = gh.add_issue("acme/widgets", "b", "", &[]);
    gh.add_project("acme", true, 1, "Board", &["Todo", "Done"]);
    gh.add_project_item("acme", 1, "acme/widgets", a, Some("Todo"));
    gh.add_project_item("acme", 1, "acme/widgets", b, Some("Done"));
    let (field, options) = status_field(&gh, "acme", 1).await;
    let statuses = |gh: &GitHubStandIn| -> Vec<Option<String>> {
        gh.project_items("acme", 1)
            .into_iter()
            .map(|i| i.status)
            .collect()
    };

    // GitHub's option input has no `id`: an option cannot be passed back to keep it.
    let list = json!([
        {"id": option(&options, "Todo"), "name": "Todo", "color": "GRAY", "description": ""},
        {"name": "Done", "color": "GREEN", "description": ""},
    ]);
    let body = gql(&gh, SET_OPTIONS, json!({"field": field, "options": list})).await;
    assert!(body.get("data").is_none(), "{body}");
    let message = body["errors"][0]["message"].as_str().unwrap_or_default();
    assert!(message.contains("id"), "{body}");
    assert!(
        message.contains("ProjectV2SingleSelectFieldOptionInput"),
        "{body}"
    );
    assert_eq!(gh.project_options("acme", 1), ["Todo", "Done"]);
    assert_eq!(statuses(&gh), [Some("Todo".into()), Some("Done".into())]);

    // The whole list, a new one in the middle: every option is new, every item loses its status.
    let list = json!([
        {"name": "Todo", "color": "GRAY", "description": ""},
        {"name": "Review", "color": "YELLOW", "description": "waiting for a human"},
        {"name": "Done", "color": "GREEN", "description": ""},
    ]);
    let body = gql(&gh, SET_OPTIONS, json!({"field": field, "options": list})).await;
    let got = &body["data"]["updateProjectV2Field"]["projectV2Field"];
    assert_eq!(got["id"], field, "{body}");
    let after: Vec<(String, Value)> = got["options"]
        .as_array()
        .expect("options")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap_or_default().to_string(),
                o["id"].clone(),
            )
        })
        .collect();
    for name in ["Todo", "Done"] {
        assert!(is_option_id(option(&after, name)));
        assert_ne!(option(&after, name), option(&options, name), "{name}");
    }
    assert_eq!(gh.project_options("acme", 1), ["Todo", "Review", "Done"]);
    assert_eq!(statuses(&gh), [None, None]);
    // The colors and descriptions are the field's now.
    let body = gql(
        &gh,
        "query($id: ID!) { node(id: $id) { ... on ProjectV2SingleSelectField { options { name color description } } } }",
        json!({"id": field}),
    )
    .await;
    assert_eq!(
        body["data"]["node"]["options"][1],
        json!({"id": option(&after, "Review"), "name": "Review", "color": "YELLOW", "description": "waiting for a human"}),
        "{body}"
    );

    // GitHub's input type wants color and description on every option.
    let body = gql(
        &gh,
        SET_OPTIONS,
        json!({"field": field, "options": [{"name": "Todo"}]}),
    )
    .await;
    assert!(body.get("data").is_none(), "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("color")),
        "{body}"
    );
    assert_eq!(gh.project_options("acme", 1), ["Todo", "Review", "Done"]);
}

/// GitHub validates a request against its schema before it runs any of it; so does the
/// stand-in, with GitHub's published schema, so a document GitHub would refuse fails the tests
/// that send it.
#[tokio::test]
async fn graphql_requests_github_s_schema_refuses_are_refused() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    gh.add_project("acme", true, 1, "Board", &["Todo"]);
    for (query, variables, why) in [
        (
            "query { viewer { login nickname } }",
            json!({}),
            "a field the type does not have",
        ),
        (
            "query($login: String!) { organization(login: $login) { projectV2 { id } } }",
            json!({"login": "acme"}),
            "a required argument left out",
        ),
        (
            "query($login: String!, $n: Int!) { organization(login: $login) { projectV2(number: $n) { id } } }",
            json!({"login": "acme", "n": "one"}),
            "a variable of the wrong type",
        ),
        (
            "query($login: String!, $n: Int!) { organization(login: $login) { projectV2(number: $n) { id } } }",
            json!({"login": "acme"}),
            "a required variable not sent",
        ),
        (
            "query { node(id: \"x\") { ... on Issue { state } ... on PullRequest { state } } }",
            json!({}),
            "one name for two types (IssueState, PullRequestState)",
        ),
        (
            "mutation { updateProjectV2Field(input: {fieldId: \"F\", singleSelectOptions: [{id: \"a\", name: \"T\", color: GRAY, description: \"\"}]}) { clientMutationId } }",
            json!({}),
            "an input field GitHub does not have, in the text",
        ),
    ] {
        let body = gql(&gh, query, variables).await;
        assert!(body.get("data").is_none(), "{why}: {body}");
        assert!(
            body["errors"][0]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{why}: {body}"
        );
    }
    assert!(gh.mutations().iter().all(|r| r.status == 200));
    assert_eq!(gh.project_options("acme", 1), ["Todo"]);

    // What is valid is answered.
    let body = gql(
        &gh,
        "query($login: String!, $n: Int!) { organization(login: $login) { projectV2(number: $n) { title } } }",
        json!({"login": "acme", "n": 1}),
    )
    .await;
    assert_eq!(
        body["data"]["organization"]["projectV2"]["title"], "Board",
        "{body}"
    );
}

#[tokio::test]
async fn projects_show_redacted_items_with_null_content() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "visible", "", &[]);
    gh.add_project("acme", true, 1, "Board", &["Todo"]);
    gh.add_project_item("acme", 1, "acme/widgets", n, Some("Todo"));
    let hidden = gh.add_redacted_item("acme", 1);

    let body = gql(
        &gh,
        ITEMS_PAGE,
        json!({"login": "acme", "number": 1, "first": 10}),
    )
    .await;
    let nodes = body["data"]["organization"]["projectV2"]["items"]["nodes"]
        .as_array()
        .expect("nodes")
        .clone();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[0]["type"], "ISSUE");
    assert_eq!(nodes[1]["id"], hidden);
    assert_eq!(nodes[1]["type"], "REDACTED");
    assert_eq!(nodes[1]["content"], Value::Null);
    assert_eq!(nodes[1]["fieldValueByName"], Value::Null);
    let items = gh.project_items("acme", 1);
    assert_eq!((items[1].repo.as_deref(), items[1].issue), (None, None));

    // The edges form of the connection, with a cursor per edge.
    let edges = r#"query { organization(login: "acme") { projectV2(number: 1) {
      items(first: 1) { edges { cursor node { id type } } pageInfo { endCursor } } } } }"#;
    let body = gql(&gh, edges, Value::Null).await;
    let items = &body["data"]["organization"]["projectV2"]["items"];
    assert_eq!(items["edges"][0]["node"]["type"], "ISSUE", "{body}");
    assert_eq!(items["edges"][0]["cursor"], items["pageInfo"]["endCursor"]);
}

#[tokio::test]
async fn projects_faults_pick_graphql_operations_by_name() {
    let gh = GitHubStandIn::start();
    gh.add_repo("acme/widgets", "main", None);
    let n = gh.add_issue("acme/widgets", "t", "", &[]);
    let project = gh.add_project("acme", true, 1, "Board", &["Todo", "Done"]);
    let item = gh.add_project_item("acme", 1, "acme/widgets", n, None);
    let (field, options) = status_field(&gh, "acme", 1).await;
    gh.fail_next(
        Matcher::graphql("updateProjectV2ItemFieldValue"),
        Fault::GraphqlRateLimited,
        1,
    );

    // A read does not match the mutation's matcher.
    let body = gql(
        &gh,
        ITEMS_PAGE,
        json!({"login": "acme", "number": 1, "first": 5}),
    )
    .await;
    assert!(
        body["data"]["organization"]["projectV2"]["id"].is_string(),
        "{body}"
    );

    let vars = json!({"project": project, "item": item, "field": field, "option": option(&options, "Done")});
    let resp = req(&gh, reqwest::Method::POST, "/graphql")
        .json(&json!({"query": SET_STATUS, "variables": vars}))
        .send()
        .await
        .expect("send");
    assert_eq!(
        resp.status(),
        200,
        "GitHub answers a GraphQL rate limit with 200"
    );
    assert_eq!(header(&resp, "x-ratelimit-remaining"), "0");
    assert_eq!(header(&resp, "x-ratelimit-resource"), "graphql");
    let body: Value = resp.json().await.expect("json");
    assert_eq!(body["errors"][0]["type"], "RATE_LIMITED");
    assert!(body.get("data").is_none());
    assert_eq!(
        gh.project_items("acme", 1)[0].status,
        None,
        "nothing changed"
    );

    // Once only: the retry goes through.
    let body = gql(&gh, SET_STATUS, vars.clone()).await;
    assert!(body["data"]["updateProjectV2ItemFieldValue"]["projectV2Item"]["id"].is_string());
    assert_eq!(gh.project_items("acme", 1)[0].status_changes, ["Done"]);

    // A name in a comment is not a match.
    gh.fail_next(
        Matcher::graphql("organization"),
        Fault::Status(502, "Server Error".into()),
        1,
    );
    let body = gql(
        &gh,
        "# organization\nquery { rateLimit { remaining } }",
        Value::Null,
    )
    .await;
    assert!(body["data"]["rateLimit"]["remaining"].is_u64(), "{body}");
    let resp = req(&gh, reqwest::Method::POST, "/graphql")
        .json(
            &json!({"query": ITEMS_PAGE, "variables": {"login": "acme", "number": 1, "first": 1}}),
        )
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), 502);

    let faulted: Vec<_> = gh
        .requests()
        .into_iter()
        .filter(|r| r.fault.is_some())
        .collect();
    assert_eq!(faulted.len(), 2, "{}", gh.log());
    assert!(faulted[0].mutation && !faulted[1].mutation);
}
