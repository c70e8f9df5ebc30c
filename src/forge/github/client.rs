//! The GitHub client: REST v3 and GraphQL over reqwest, with GitHub's rate limits honoured
//! ([`super::pace`]), at most one change per second per process, and conditional requests
//! (ETag / If-None-Match) for repeated reads, which GitHub does not count against the limit.

use super::error::GitHubError;
use super::pace::{self, Answer, Pace};
use super::token::TokenSource;
use super::types::{Comment, Issue, NewPull, Opened, PullRequest, Repo};
use crate::config::SecretString;
use crate::forge::answer::{self, Taken};
use crate::forge::refs::RepoRef;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The last change any client of this process sent, for the one-per-second pacing GitHub asks
/// of integrations (its secondary limits punish bursts of writes).
static LAST_MUTATION: tokio::sync::Mutex<Option<Instant>> = tokio::sync::Mutex::const_new(None);

/// GitHub's GraphQL endpoint for a REST base: `<api>/graphql`, except GitHub Enterprise
/// Server, whose REST API is `https://HOST/api/v3` and GraphQL `https://HOST/api/graphql`.
fn graphql_url(api: &str) -> String {
    match api.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api/graphql"),
        None => format!("{api}/graphql"),
    }
}

/// A rate-limit wait under way in this process, said in words with the time it ends: the
/// console shows it while it lasts (a wait may be minutes, and nothing else moves meanwhile).
static WAITING: Mutex<Option<String>> = Mutex::new(None);

/// What this process is waiting for from GitHub, if anything: `GitHub rate limit …: waiting
/// until 14:03:10`.
pub fn rate_limit_wait() -> Option<String> {
    WAITING.lock().ok().and_then(|w| w.clone())
}

/// Shows a wait while it lives (also when the waiting call is dropped half-way).
struct Waiting;

impl Waiting {
    fn show(what: String) -> Waiting {
        if let Ok(mut w) = WAITING.lock() {
            *w = Some(what);
        }
        Waiting
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Ok(mut w) = WAITING.lock() {
            *w = None;
        }
    }
}

/// How a client is set up.
#[derive(Debug, Clone)]
pub struct GitHubOptions {
    /// `https://api.github.com`, or `https://HOST/api/v3` for GitHub Enterprise.
    pub api_url: String,
    pub token: SecretString,
    pub token_source: TokenSource,
    /// Longest rate-limit wait before a call fails instead.
    pub max_wait: Duration,
    /// Least time between two changes sent by this process.
    pub mutation_interval: Duration,
    /// Longest time one request may take, its answer read whole.
    pub timeout: Duration,
}

/// A GitHub client; cheap to clone.
#[derive(Clone)]
pub struct GitHub {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    api: String,
    host: String,
    token: SecretString,
    source: TokenSource,
    max_wait: Duration,
    mutation_interval: Duration,
    /// URL → (ETag, body) of GET answers.
    etags: Mutex<HashMap<String, (String, Value)>>,
}

/// A page of a list and the URL of the next one.
struct Page {
    items: Vec<Value>,
    next: Option<String>,
}

impl GitHub {
    pub fn new(opts: GitHubOptions) -> Result<GitHub, GitHubError> {
        let api = opts.api_url.trim_end_matches('/').to_string();
        let host = reqwest::Url::parse(&api)
            .ok()
            .and_then(|u| u.host_str().map(str::to_string))
            .ok_or_else(|| GitHubError::Network {
                host: api.clone(),
                request: "setting up the client".into(),
                detail: "[github] api_url is not a URL; write e.g. https://api.github.com".into(),
            })?;
        let http = crate::forge::http_client(opts.timeout).map_err(|e| GitHubError::Network {
            host: host.clone(),
            request: "setting up the client".into(),
            detail: e.to_string(),
        })?;
        Ok(GitHub {
            inner: Arc::new(Inner {
                http,
                api,
                host,
                token: opts.token,
                source: opts.token_source,
                max_wait: opts.max_wait,
                mutation_interval: opts.mutation_interval,
                etags: Mutex::new(HashMap::new()),
            }),
        })
    }

    pub fn token_source(&self) -> &TokenSource {
        &self.inner.source
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.inner.api)
    }

    /// One request, with the rate limits and the pacing of changes; `what` names the thing for
    /// a 404. Returns the JSON body and the next page's URL.
    #[expect(
        clippy::too_many_lines,
        reason = "the request, its retries and the answer policy are one loop; splitting it scatters the retry state"
    )]
    async fn send(
        &self,
        method: Method,
        url: &str,
        body: Option<&Value>,
        what: &str,
    ) -> Result<(Value, Option<String>), GitHubError> {
        let i = &self.inner;
        // A GraphQL query is a POST but changes nothing: only its mutations are paced.
        let mutation = method != Method::GET
            && !(url.ends_with("/graphql")
                && body
                    .and_then(|b| b["query"].as_str())
                    .is_some_and(|q| !q.trim_start().starts_with("mutation")));
        let path = url.strip_prefix(&i.api).unwrap_or(url).to_string();
        let mut secondary_hits = 0;
        let mut attempt = 0;
        loop {
            attempt += 1;
            if mutation {
                let mut last = LAST_MUTATION.lock().await;
                if let Some(at) = *last {
                    let since = at.elapsed();
                    if since < i.mutation_interval {
                        tokio::time::sleep(i.mutation_interval - since).await;
                    }
                }
                *last = Some(Instant::now());
            }
            let mut req = i
                .http
                .request(method.clone(), url)
                .bearer_auth(i.token.expose())
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28");
            let cached = if method == Method::GET {
                i.etags.lock().ok().and_then(|m| m.get(url).cloned())
            } else {
                None
            };
            if let Some((etag, _)) = &cached {
                req = req.header("If-None-Match", etag);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let mut resp = match req.send().await {
                Ok(r) => r,
                Err(e) => match pace::after_network_error(attempt) {
                    Some(wait) => {
                        tracing::warn!(host = %i.host, "GitHub unreachable ({}); retrying in {wait:?}", answer::error_text(&e));
                        tokio::time::sleep(wait).await;
                        continue;
                    }
                    None => {
                        return Err(GitHubError::Network {
                            host: i.host.clone(),
                            request: format!("{method} {path}"),
                            detail: answer::error_text(&e),
                        });
                    }
                },
            };
            let status = resp.status();
            let header = |name: &str| {
                resp.headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            let (retry_after, remaining, reset, etag, link) = (
                header("retry-after"),
                header("x-ratelimit-remaining"),
                header("x-ratelimit-reset"),
                header("etag"),
                header("link"),
            );
            tracing::debug!(%method, %path, status = status.as_u16(), remaining = ?remaining, "GitHub");
            if status == StatusCode::NOT_MODIFIED
                && let Some((_, value)) = cached
            {
                return Ok((value, next_link(link.as_deref())));
            }
            let request = format!("{method} {path}");
            let retry_wait = if mutation {
                None
            } else {
                pace::after_network_error(attempt)
            };
            let (value, not_json) = match answer::take(&mut resp, retry_wait.is_some()).await {
                Taken::Answer {
                    value, not_json, ..
                } => (value, not_json),
                Taken::Retry(why) => {
                    let wait = retry_wait.unwrap_or_default();
                    tracing::warn!(host = %i.host, %request, "GitHub: {why}; retrying in {wait:?}");
                    tokio::time::sleep(wait).await;
                    continue;
                }
                Taken::BrokeOff(detail) => {
                    return Err(GitHubError::Network {
                        host: i.host.clone(),
                        request,
                        detail,
                    });
                }
                Taken::Bad(detail) => {
                    return Err(GitHubError::BadAnswer {
                        what: format!("{what} ({request} at {})", i.host),
                        detail,
                    });
                }
            };
            let message = match &not_json {
                Some(why) => why.clone(),
                None => error_message(&value),
            };
            let graphql_limited = value["errors"]
                .as_array()
                .is_some_and(|errs| errs.iter().any(|e| e["type"] == "RATE_LIMITED"));
            let answer = Answer {
                status: status.as_u16(),
                retry_after: retry_after.as_deref(),
                remaining: remaining.as_deref(),
                reset: reset.as_deref(),
                message: &message,
                graphql_limited,
            };
            let now = chrono::Utc::now().timestamp().max(0) as u64;
            if let Pace::Retry { after, why } = pace::decide(&answer, attempt, now, secondary_hits)
            {
                if why.contains("secondary") {
                    secondary_hits += 1;
                }
                let until =
                    chrono::Local::now() + chrono::Duration::from_std(after).unwrap_or_default();
                let until = until.format("%H:%M:%S").to_string();
                if after > i.max_wait {
                    return Err(GitHubError::RateLimited { until });
                }
                tracing::warn!(%method, %path, "{why}: waiting until {until}");
                let _shown = Waiting::show(format!("{why}: waiting until {until}"));
                tokio::time::sleep(after).await;
                continue;
            }
            return match status.as_u16() {
                200..=299 if !graphql_limited => {
                    if method == Method::GET
                        && let Some(tag) = etag
                        && let Ok(mut m) = i.etags.lock()
                    {
                        m.insert(url.to_string(), (tag, value.clone()));
                    }
                    Ok((value, next_link(link.as_deref())))
                }
                401 => Err(GitHubError::Unauthorized {
                    token: i.source.clone(),
                    message,
                }),
                404 => Err(GitHubError::NotFound {
                    what: what.to_string(),
                    token: i.source.clone(),
                }),
                code => Err(GitHubError::Api {
                    host: i.host.clone(),
                    status: code,
                    method: method.to_string(),
                    path,
                    message,
                }),
            };
        }
    }

    async fn get(&self, path: &str, what: &str) -> Result<Value, GitHubError> {
        Ok(self.send(Method::GET, &self.url(path), None, what).await?.0)
    }

    /// Every page of a list (100 a page), following `Link: rel="next"`.
    async fn get_all(&self, path: &str, what: &str) -> Result<Vec<Value>, GitHubError> {
        let sep = if path.contains('?') { '&' } else { '?' };
        let mut url = Some(self.url(&format!("{path}{sep}per_page=100")));
        let mut out = Vec::new();
        while let Some(u) = url.take() {
            let (value, next) = self.send(Method::GET, &u, None, what).await?;
            let page = Page {
                items: value
                    .as_array()
                    .cloned()
                    .ok_or_else(|| GitHubError::BadAnswer {
                        what: format!(
                            "{what} (GET {} at {})",
                            u.strip_prefix(&self.inner.api).unwrap_or(&u),
                            self.inner.host
                        ),
                        detail: "expected a list".into(),
                    })?,
                next,
            };
            out.extend(page.items);
            url = page.next;
        }
        Ok(out)
    }

    async fn write(
        &self,
        method: Method,
        path: &str,
        body: &Value,
        what: &str,
    ) -> Result<Value, GitHubError> {
        Ok(self
            .send(method, &self.url(path), Some(body), what)
            .await?
            .0)
    }

    /// The account the token belongs to (`GET /user`): the cheapest call that proves GitHub
    /// accepts the token. Returns its login.
    pub async fn viewer(&self) -> Result<String, GitHubError> {
        let v = self.get("/user", "the token's user").await?;
        v["login"]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| GitHubError::BadAnswer {
                what: format!("the token's user (GET /user at {})", self.inner.host),
                detail: "no login".into(),
            })
    }

    pub async fn repo(&self, repo: &RepoRef) -> Result<Repo, GitHubError> {
        let what = format!("repository {repo}");
        let v = self.get(&format!("/repos/{repo}"), &what).await?;
        parse(&what, v)
    }

    pub async fn issue(&self, repo: &RepoRef, n: u64) -> Result<Issue, GitHubError> {
        let what = format!("issue {repo}#{n}");
        let v = self
            .get(&format!("/repos/{repo}/issues/{n}"), &what)
            .await?;
        parse(&what, v)
    }

    /// Issues (never pull requests) in `state` (`open`, `closed`, `all`) with `label`.
    pub async fn issues(
        &self,
        repo: &RepoRef,
        state: &str,
        label: Option<&str>,
    ) -> Result<Vec<Issue>, GitHubError> {
        let mut path = format!("/repos/{repo}/issues?state={state}");
        if let Some(l) = label {
            path.push_str("&labels=");
            path.push_str(&encode(l));
        }
        let what = format!("the issues of {repo}");
        let mut out = Vec::new();
        for v in self.get_all(&path, &what).await? {
            if v.get("pull_request").is_some_and(|p| !p.is_null()) {
                continue;
            }
            out.push(parse::<Issue>(&what, v)?);
        }
        Ok(out)
    }

    pub async fn comments(&self, repo: &RepoRef, n: u64) -> Result<Vec<Comment>, GitHubError> {
        let what = format!("the comments of {repo}#{n}");
        self.get_all(&format!("/repos/{repo}/issues/{n}/comments"), &what)
            .await?
            .into_iter()
            .map(|v| parse(&what, v))
            .collect()
    }

    pub async fn create_comment(
        &self,
        repo: &RepoRef,
        n: u64,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let what = format!("issue {repo}#{n}");
        let v = self
            .write(
                Method::POST,
                &format!("/repos/{repo}/issues/{n}/comments"),
                &json!({ "body": body }),
                &what,
            )
            .await?;
        parse(&what, v)
    }

    pub async fn update_comment(
        &self,
        repo: &RepoRef,
        id: u64,
        body: &str,
    ) -> Result<Comment, GitHubError> {
        let what = format!("comment {id} of {repo}");
        let v = self
            .write(
                Method::PATCH,
                &format!("/repos/{repo}/issues/comments/{id}"),
                &json!({ "body": body }),
                &what,
            )
            .await?;
        parse(&what, v)
    }

    pub async fn add_labels(
        &self,
        repo: &RepoRef,
        n: u64,
        labels: &[&str],
    ) -> Result<(), GitHubError> {
        self.write(
            Method::POST,
            &format!("/repos/{repo}/issues/{n}/labels"),
            &json!({ "labels": labels }),
            &format!("issue {repo}#{n}"),
        )
        .await
        .map(|_| ())
    }

    /// Takes a label off; one that is not there is already off.
    pub async fn remove_label(
        &self,
        repo: &RepoRef,
        n: u64,
        label: &str,
    ) -> Result<(), GitHubError> {
        let url = self.url(&format!(
            "/repos/{repo}/issues/{n}/labels/{}",
            encode(label)
        ));
        match self
            .send(
                Method::DELETE,
                &url,
                None,
                &format!("label {label} of {repo}#{n}"),
            )
            .await
        {
            Ok(_) | Err(GitHubError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The newest pull request (any state) whose head is `owner:branch`.
    pub async fn find_pull(
        &self,
        repo: &RepoRef,
        owner: &str,
        branch: &str,
    ) -> Result<Option<PullRequest>, GitHubError> {
        let what = format!("the pull requests of {repo}");
        let path = format!(
            "/repos/{repo}/pulls?state=all&head={}",
            encode(&format!("{owner}:{branch}"))
        );
        let mut pulls: Vec<PullRequest> = self
            .get_all(&path, &what)
            .await?
            .into_iter()
            .map(|v| parse(&what, v))
            .collect::<Result<_, _>>()?;
        pulls.retain(|p| p.head_ref == branch);
        pulls.sort_by_key(|p| std::cmp::Reverse(p.number));
        Ok(pulls.into_iter().next())
    }

    /// Opens a pull request; when one is open for the branch already (GitHub's 422), that one.
    pub async fn create_pull(&self, repo: &RepoRef, new: &NewPull) -> Result<Opened, GitHubError> {
        let what = format!("repository {repo}");
        let body = json!({
            "title": new.title, "body": new.body, "head": new.head, "base": new.base, "draft": new.draft,
        });
        match self
            .write(Method::POST, &format!("/repos/{repo}/pulls"), &body, &what)
            .await
        {
            Ok(v) => Ok(Opened {
                pull: parse(&what, v)?,
                created: true,
            }),
            Err(GitHubError::Api {
                status: 422,
                message,
                ..
            }) if message.contains("already exists") => {
                match self.find_pull(repo, &repo.owner, &new.head).await? {
                    Some(pull) => Ok(Opened {
                        pull,
                        created: false,
                    }),
                    None => Err(GitHubError::Api {
                        host: self.inner.host.clone(),
                        status: 422,
                        method: "POST".into(),
                        path: format!("/repos/{repo}/pulls"),
                        message,
                    }),
                }
            }
            // The request went out and its answer was lost (a reset mid-body, a timeout, a
            // proxy's page): GitHub may have opened it. Sending it again could open a second
            // one; looking can find the first.
            Err(e)
                if matches!(
                    e,
                    GitHubError::Network { .. } | GitHubError::BadAnswer { .. }
                ) || matches!(e, GitHubError::Api { status, .. } if status >= 500) =>
            {
                match self.find_pull(repo, &repo.owner, &new.head).await {
                    Ok(Some(pull)) if pull.is_open() => Ok(Opened {
                        pull,
                        created: true,
                    }),
                    _ => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    pub async fn update_pull(
        &self,
        repo: &RepoRef,
        n: u64,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, GitHubError> {
        let what = format!("pull request {repo}#{n}");
        let v = self
            .write(
                Method::PATCH,
                &format!("/repos/{repo}/pulls/{n}"),
                &json!({ "title": title, "body": body }),
                &what,
            )
            .await?;
        parse(&what, v)
    }

    /// The pull request now (cheap to poll: an unchanged one answers 304).
    pub async fn pull(&self, repo: &RepoRef, n: u64) -> Result<PullRequest, GitHubError> {
        let what = format!("pull request {repo}#{n}");
        let v = self.get(&format!("/repos/{repo}/pulls/{n}"), &what).await?;
        parse(&what, v)
    }

    /// A GraphQL request (one of [`super::graphql`]'s, so that tests can check each against
    /// GitHub's schema); errors in a 200 answer are errors.
    pub async fn graphql(&self, request: super::graphql::Request) -> Result<Value, GitHubError> {
        let (data, errors) = self.graphql_partial(request).await?;
        if !errors.is_empty() {
            return Err(GitHubError::Graphql {
                messages: errors
                    .iter()
                    .map(|e| e["message"].as_str().unwrap_or("error").to_string())
                    .collect(),
            });
        }
        Ok(data)
    }

    /// A GraphQL request whose errors may concern only some of its fields (several mutations in
    /// one request): its `data` and its `errors`, each with the `path` it concerns. A request
    /// refused as a whole has no `data` and is an error.
    pub async fn graphql_partial(
        &self,
        request: super::graphql::Request,
    ) -> Result<(Value, Vec<Value>), GitHubError> {
        let url = graphql_url(&self.inner.api);
        let (v, _) = self
            .send(
                Method::POST,
                &url,
                Some(&json!({ "query": request.query(), "variables": request.variables() })),
                "the GraphQL API",
            )
            .await?;
        let errors = v["errors"].as_array().cloned().unwrap_or_default();
        if !v["data"].is_object() && errors.is_empty() {
            return Err(GitHubError::BadAnswer {
                what: format!("the GraphQL API (POST /graphql at {})", self.inner.host),
                detail: "neither data nor errors".into(),
            });
        }
        if !v["data"].is_object() && !errors.is_empty() {
            return Err(GitHubError::Graphql {
                messages: errors
                    .iter()
                    .map(|e| e["message"].as_str().unwrap_or("error").to_string())
                    .collect(),
            });
        }
        Ok((v["data"].clone(), errors))
    }

    /// Marks a draft pull request ready for review.
    pub async fn mark_ready(&self, node_id: &str) -> Result<(), GitHubError> {
        self.graphql(super::graphql::mark_ready(node_id))
            .await
            .map(|_| ())
    }
}

/// GitHub's `message`, with the first of its `errors[].message` when there is one.
fn error_message(v: &Value) -> String {
    let mut m = v["message"].as_str().unwrap_or_default().to_string();
    if let Some(first) = v["errors"].as_array().and_then(|e| e.first()) {
        let detail = first["message"]
            .as_str()
            .or_else(|| first["code"].as_str())
            .unwrap_or_default();
        if !detail.is_empty() {
            if !m.is_empty() {
                m.push_str(": ");
            }
            m.push_str(detail);
        }
    }
    if m.is_empty()
        && let Some(s) = v.as_str()
    {
        m = s.chars().take(200).collect();
    }
    m
}

/// The `rel="next"` URL of a `Link` header.
pub fn next_link(link: Option<&str>) -> Option<String> {
    link?.split(',').find_map(|part| {
        let (url, rel) = part.split_once(';')?;
        rel.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

/// A query or path segment, percent-encoded.
fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn parse<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T, GitHubError> {
    serde_json::from_value(v).map_err(|e| GitHubError::BadAnswer {
        what: what.to_string(),
        detail: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_lives_beside_the_rest_api() {
        assert_eq!(
            graphql_url("https://api.github.com"),
            "https://api.github.com/graphql"
        );
        assert_eq!(
            graphql_url("https://ghe.example.com/api/v3"),
            "https://ghe.example.com/api/graphql"
        );
        assert_eq!(
            graphql_url("http://127.0.0.1:4000"),
            "http://127.0.0.1:4000/graphql"
        );
    }

    #[test]
    fn links_and_messages() {
        let link = r#"<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last""#;
        assert_eq!(
            next_link(Some(link)).as_deref(),
            Some("https://api.github.com/repositories/1/issues?page=2")
        );
        assert_eq!(next_link(Some(r#"<x>; rel="prev""#)), None);
        let v = json!({"message": "Validation Failed", "errors": [{"message": "A pull request already exists for o:b."}]});
        assert_eq!(
            error_message(&v),
            "Validation Failed: A pull request already exists for o:b."
        );
        assert_eq!(encode("whilly:ready"), "whilly%3Aready");
    }
}
