//! A local stand-in for GitHub's REST v3 and GraphQL API, for tests that must never touch the
//! internet.
//!
//! `GitHubStandIn::start()` serves on `http://127.0.0.1:<random>` (`url()`, the api_url; GraphQL
//! at `<url>/graphql`) from its own thread and tokio runtime, so it works from plain `#[test]`
//! fns that spawn the real binary as well as from inside `#[tokio::test]`. Dropping it stops the
//! server and cuts every open connection.
//!
//! What it plays, in GitHub's own shapes (paths, field names, status codes, headers):
//! - `GET /user`, `GET /rate_limit`, `GET /repos/{o}/{r}`, `GET /repos/{o}/{r}/branches/{b}`;
//! - issues: list (state, labels, since, sort, direction, per_page, page), create, get, patch;
//!   pull requests appear in the issue list with a `pull_request` key; issue numbers are shared
//!   with pull requests per repository;
//! - comments: list per issue (since, paginated), create (201), get, patch, delete;
//! - labels: per issue add/replace/remove/clear, per repository list/create/get/delete; adding a
//!   label to an issue creates it on the repository; names compare case-insensitively;
//! - pulls: list (state, head=OWNER:BRANCH, base, paginated), create (201; 422 for a duplicate
//!   open head+base, for a head or base branch missing in the bare repository, for no commits
//!   between base and head), get, patch (title, body, state, base; `draft` is ignored there, as
//!   on GitHub: drafts change through GraphQL), `GET .../pulls/{n}/merge` (204/404);
//! - `POST /graphql`: `markPullRequestReadyForReview`, `convertPullRequestToDraft`, the queries
//!   `rateLimit` and `viewer`, and the Projects v2 subset (see below), matched by field name;
//!   anything else is 200 with `errors`. Every request is first checked against GitHub's
//!   published schema ([`schema`], tests/fixtures/github/schema.graphql): a document or
//!   variables GitHub would refuse get 200 with `errors` and no `data`, as from GitHub.
//!
//! Projects v2 (graphql.rs; boards seeded with `add_project`, inspected with `project_items`):
//! `organization(login:)` / `user(login:)` / `viewer` `{ projectV2(number:) }`, `node(id:)` for
//! a project, item, issue or pull request id, `repository(owner:, name:) { issue(number:) {id}
//! pullRequest(number:) {id} }`; on a project `field(name:)`, `fields(first:)`,
//! `items(first:, after:)` (cursor pagination, `first` required and at most 100, as on GitHub);
//! on an item `content`, `fieldValueByName(name:)`, `fieldValues(first:)`; `node(id:)` of a
//! field answers the field. Without a GraphQL parser the answers carry every field of a node,
//! not only those selected; named fragments and aliases are not played, except aliased
//! top-level mutations (several in one request, run in order). Mutations
//! `addProjectV2ItemById` (idempotent), `updateProjectV2ItemFieldValue` (single-select values
//! only) and `updateProjectV2Field` (replaces the Status options as on GitHub: an option input
//! is `{name, color, description}`, every option gets a new id and every item loses its
//! status). A missing owner, project or node is GitHub's `NOT_FOUND` error, with `null` data at
//! that path.
//!
//! As on GitHub: pagination answers carry a `Link` header whose absolute URLs use the
//! `/repositories/{id}/...` form (served as an alias of `/repos/{o}/{r}/...`); every 200 GET
//! carries an `ETag` and a matching `If-None-Match` gets a bodiless 304 that does not count
//! against the rate limit; every answer carries `x-ratelimit-*` headers (REST and GraphQL have
//! separate budgets); a request without a `User-Agent` is refused with 403
//! (`require_user_agent(false)` turns that off); a body that is not JSON gets 400 "Problems
//! parsing JSON". The accepted token is [`DEFAULT_TOKEN`] until `set_token`, sent as
//! `Authorization: Bearer T` or `token T`; anything else is 401 "Bad credentials".
//!
//! Every request is recorded ([`Recorded`]): the token only as a fingerprint, so assertion
//! messages never print it. Faults are scripted with `fail_next`; [`Matcher::graphql`] picks
//! GraphQL requests by operation or field name.

#![allow(dead_code)]

#[path = "bad_answers.rs"]
mod bad_answers;
// Not every test binary that includes the stand-in tries bad answers.
#[allow(unused_imports)]
pub use bad_answers::{BadAnswer, Tried, each_fails_clearly, host_of};
#[path = "github_standin/graphql.rs"]
mod graphql;
#[path = "github_standin/model.rs"]
mod model;
#[path = "github_standin/rest.rs"]
mod rest;
#[path = "github_standin/schema.rs"]
pub mod schema;
#[path = "github_standin/serve.rs"]
mod serve;
#[path = "github_standin/wire.rs"]
mod wire;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The token the stand-in accepts until [`GitHubStandIn::set_token`].
pub const DEFAULT_TOKEN: &str = "ghp_standin0000000000000000000000000000";
/// The login `GET /user` answers and that API-created issues, comments and PRs are authored by.
pub const DEFAULT_LOGIN: &str = "whilly-bot";
/// The author of issues and comments seeded without a user.
pub const SEED_AUTHOR: &str = "octocat";
/// The REST and GraphQL budgets per hour, as GitHub gives an authenticated user.
pub const RATE_LIMIT: u64 = 5000;

/// What a scripted fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// This status with `{"message": ..., "documentation_url": ...}`.
    Status(u16, String),
    /// 401 "Bad credentials", whatever the token.
    Unauthorized,
    /// 403 "API rate limit exceeded for user ID 1...", `x-ratelimit-remaining: 0` and
    /// `x-ratelimit-reset` = now + `reset_in` (epoch seconds).
    PrimaryRateLimit { reset_in: Duration },
    /// 403 "You have exceeded a secondary rate limit..." with `retry-after`.
    SecondaryRateLimit { retry_after: u64 },
    /// 429 with `retry-after` and the secondary rate limit message.
    TooManyRequests { retry_after: u64 },
    /// HTTP 200 with `{"errors":[{"type":"RATE_LIMITED",...}]}` and a spent GraphQL budget.
    GraphqlRateLimited,
    /// Answer normally after this delay.
    Slow(Duration),
    /// Close the connection without an answer (recorded with status 0).
    Disconnect,
    /// A broken or hostile server's answer (see [`BadAnswer`]).
    Bad(BadAnswer),
}

/// Which requests a fault applies to: the method (`None` = any) and a prefix of the path. The
/// prefix is tried against the path as sent and against its `/repos/{o}/{r}/...` form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    pub method: Option<String>,
    pub path_prefix: String,
    /// For GraphQL: a name (operation or field) the query text must use as a whole word.
    pub graphql: Option<String>,
}

impl Matcher {
    /// Requests with this method (any case) whose path starts with `path_prefix`.
    pub fn new(method: &str, path_prefix: &str) -> Matcher {
        Matcher {
            method: Some(method.to_ascii_uppercase()),
            path_prefix: path_prefix.to_string(),
            graphql: None,
        }
    }

    /// Requests of any method whose path starts with `path_prefix`.
    pub fn path(path_prefix: &str) -> Matcher {
        Matcher {
            method: None,
            path_prefix: path_prefix.to_string(),
            graphql: None,
        }
    }

    /// `POST /graphql` requests whose query names `name` (an operation or field name, e.g.
    /// `updateProjectV2ItemFieldValue`) as a whole word outside strings and comments.
    pub fn graphql(name: &str) -> Matcher {
        Matcher {
            method: Some("POST".into()),
            path_prefix: "/graphql".into(),
            graphql: Some(name.to_string()),
        }
    }

    /// Every request.
    pub fn all() -> Matcher {
        Matcher::path("/")
    }

    fn matches(&self, method: &str, path: &str, route: &str, graphql_query: Option<&str>) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && (path.starts_with(&self.path_prefix) || route.starts_with(&self.path_prefix))
            && self.graphql.as_deref().is_none_or(|name| {
                route == "/graphql" && graphql_query.is_some_and(|q| graphql::mentions(q, name))
            })
    }
}

/// One request the stand-in saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path as sent, without the query.
    pub path: String,
    /// The path in its `/repos/{owner}/{name}/...` form (equal to `path` unless the request used
    /// a `/repositories/{id}/...` URL from a `Link` header).
    pub route: String,
    /// The raw query string, without `?` (empty when none).
    pub query: String,
    /// Headers of interest, names lower-case: if-none-match, if-modified-since, user-agent,
    /// accept, x-github-api-version, content-type.
    pub headers: BTreeMap<String, String>,
    /// Whether an `Authorization` header was sent at all.
    pub auth_sent: bool,
    /// Whether it carried the token accepted at the time.
    pub authorized: bool,
    /// [`GitHubStandIn::fingerprint`] of the token sent, never the token itself.
    pub token: Option<String>,
    /// The JSON body; `None` when empty or not JSON.
    pub body: Option<Value>,
    /// The status answered (0 for [`Fault::Disconnect`]).
    pub status: u16,
    /// Whether it counted against the rate limit (no for 304, 401, rate-limit faults,
    /// `/rate_limit`).
    pub counted: bool,
    /// The fault applied, if any.
    pub fault: Option<Fault>,
    /// A change on GitHub's side: any method but GET/HEAD, except GraphQL queries (GraphQL
    /// mutations count).
    pub mutation: bool,
    /// When it arrived.
    pub at: Instant,
}

impl Recorded {
    /// One decoded query parameter.
    pub fn param(&self, key: &str) -> Option<String> {
        wire::parse_query(&self.query)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }
}

/// An issue (or a pull request's issue side) as the stand-in holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueState {
    pub number: u64,
    pub node_id: String,
    pub title: String,
    /// Empty when GitHub would answer `null`.
    pub body: String,
    /// "open" or "closed".
    pub state: String,
    pub labels: Vec<String>,
    pub user: String,
    pub comments: u64,
    pub is_pull_request: bool,
}

/// A comment as the stand-in holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentState {
    pub id: u64,
    pub node_id: String,
    pub user: String,
    pub body: String,
    /// How many times it was edited since it was created.
    pub edits: u32,
}

/// A pull request as the stand-in holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrState {
    pub number: u64,
    pub node_id: String,
    pub title: String,
    pub body: String,
    /// The head branch name (without owner).
    pub head: String,
    /// `OWNER:BRANCH`.
    pub head_label: String,
    pub base: String,
    pub draft: bool,
    /// "open" or "closed" (merged ones are closed).
    pub state: String,
    pub merged: bool,
    pub labels: Vec<String>,
}

/// An item of a Projects v2 board as the stand-in holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectItemState {
    /// The item's node id (`PVTI_...`).
    pub id: String,
    /// `owner/name` of its issue's repository; `None` for a redacted item.
    pub repo: Option<String>,
    /// The issue (or pull request) number; `None` for a redacted item.
    pub issue: Option<u64>,
    /// The current Status option's name.
    pub status: Option<String>,
    /// The option names set through `updateProjectV2ItemFieldValue`, oldest first (seeding and
    /// [`GitHubStandIn::move_project_item`] are not in it).
    pub status_changes: Vec<String>,
}

struct Shared {
    model: Mutex<model::Model>,
}

impl Shared {
    /// The state, even after a handler panicked while holding it.
    fn lock(&self) -> MutexGuard<'_, model::Model> {
        self.model.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct GitHubStandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl GitHubStandIn {
    pub fn start() -> GitHubStandIn {
        // Bound here, not in the server thread, so the port is known (and connections queue in
        // the backlog) before the runtime is up.
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let shared = Arc::new(Shared {
            model: Mutex::new(model::Model::new(format!("http://{addr}"))),
        });
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let app_state = shared.clone();
        let thread = std::thread::Builder::new()
            .name("github-standin".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("stand-in runtime");
                rt.block_on(async move {
                    let listener =
                        tokio::net::TcpListener::from_std(listener).expect("tokio listener");
                    let app = Router::new().fallback(handle).with_state(app_state);
                    // Dropping the serve future on stop, then the runtime, cuts idle keep-alive
                    // connections and requests stuck in a `Slow` fault alike.
                    tokio::select! {
                        r = axum::serve(listener, app) => {
                            if let Err(e) = r {
                                eprintln!("github_standin: server error: {e}");
                            }
                        }
                        _ = stop_rx => {}
                    }
                });
                drop(rt);
            })
            .expect("spawn stand-in thread");
        GitHubStandIn {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, the api_url.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `<url>/graphql`.
    pub fn graphql_url(&self) -> String {
        format!("{}/graphql", self.url())
    }

    /// The first 12 hex digits of the token's SHA-256, as [`Recorded::token`] holds it.
    pub fn fingerprint(token: &str) -> String {
        wire::fingerprint(token)
    }

    /// The one token accepted from now on.
    pub fn set_token(&self, token: &str) {
        self.shared.lock().token = token.to_string();
    }

    /// The token accepted now.
    pub fn token(&self) -> String {
        self.shared.lock().token.clone()
    }

    /// The login of the token's user (`GET /user`, authors of API-created things).
    pub fn set_login(&self, login: &str) {
        self.shared.lock().login = login.to_string();
    }

    /// Whether a request without `User-Agent` is refused with 403, as GitHub does (default on).
    pub fn require_user_agent(&self, on: bool) {
        self.shared.lock().require_user_agent = on;
    }

    /// A repository `owner/name`. With a bare repository, pull requests are checked against its
    /// branches and `clone_url` is its path.
    pub fn add_repo(&self, full_name: &str, default_branch: &str, bare_repo: Option<PathBuf>) {
        self.shared
            .lock()
            .add_repo(full_name, default_branch, bare_repo);
    }

    /// An open issue by [`SEED_AUTHOR`]; its number.
    pub fn add_issue(&self, repo: &str, title: &str, body: &str, labels: &[&str]) -> u64 {
        self.shared.lock().add_issue(repo, title, body, labels)
    }

    /// An open pull request by the token's user, as if created earlier; its number. Not checked
    /// against the bare repository.
    pub fn add_pr(
        &self,
        repo: &str,
        title: &str,
        body: &str,
        head: &str,
        base: &str,
        draft: bool,
    ) -> u64 {
        self.shared
            .lock()
            .add_pr(repo, title, body, head, base, draft)
    }

    /// A comment on issue or PR `number`; its id.
    pub fn add_comment(&self, repo: &str, number: u64, user: &str, body: &str) -> u64 {
        self.shared.lock().add_comment(repo, number, user, body)
    }

    pub fn close_issue(&self, repo: &str, number: u64) {
        self.shared.lock().set_open(repo, number, false);
    }

    pub fn reopen_issue(&self, repo: &str, number: u64) {
        self.shared.lock().set_open(repo, number, true);
    }

    pub fn edit_issue(&self, repo: &str, number: u64, title: &str, body: &str) {
        self.shared.lock().edit_issue(repo, number, title, body);
    }

    /// Replaces issue `number`'s labels (creating missing ones on the repository).
    pub fn set_labels(&self, repo: &str, number: u64, labels: &[&str]) {
        self.shared.lock().seed_labels(repo, number, labels);
    }

    /// Marks PR `number` merged (and closed).
    pub fn set_pr_merged(&self, repo: &str, number: u64) {
        self.shared.lock().set_pr_merged(repo, number);
    }

    pub fn issue(&self, repo: &str, number: u64) -> Option<IssueState> {
        self.shared.lock().issue_state(repo, number)
    }

    /// Every issue and PR of the repository, by number.
    pub fn issues(&self, repo: &str) -> Vec<IssueState> {
        self.shared.lock().issue_states(repo)
    }

    /// The comments of issue or PR `number`, oldest first.
    pub fn comments(&self, repo: &str, number: u64) -> Vec<CommentState> {
        self.shared.lock().comment_states(repo, number)
    }

    /// Every pull request of the repository, by number.
    pub fn prs(&self, repo: &str) -> Vec<PrState> {
        self.shared.lock().pr_states(repo)
    }

    pub fn pr(&self, repo: &str, number: u64) -> Option<PrState> {
        self.prs(repo).into_iter().find(|p| p.number == number)
    }

    /// The repository's label names.
    pub fn labels(&self, repo: &str) -> Vec<String> {
        self.shared.lock().label_names(repo)
    }

    /// A Projects v2 board `number` of `owner` (an organisation when `owner_is_org`, else a
    /// user; one owner is always the same kind) with a single-select field "Status" whose
    /// options are `status_options`, in order; its node id.
    pub fn add_project(
        &self,
        owner: &str,
        owner_is_org: bool,
        number: u64,
        title: &str,
        status_options: &[&str],
    ) -> String {
        self.shared
            .lock()
            .add_project(owner, owner_is_org, number, title, status_options)
    }

    /// Puts issue (or pull request) `issue_number` of `repo` on the board, with that Status
    /// option (by name) or none; the item's node id.
    pub fn add_project_item(
        &self,
        owner: &str,
        number: u64,
        repo: &str,
        issue_number: u64,
        status: Option<&str>,
    ) -> String {
        self.shared
            .lock()
            .add_project_item(owner, number, repo, issue_number, status)
    }

    /// An item the token cannot see (`type: REDACTED`, `content: null`); its node id.
    pub fn add_redacted_item(&self, owner: &str, number: u64) -> String {
        self.shared.lock().add_redacted_item(owner, number)
    }

    /// Sets an item's Status as someone moving the card on the board would (not an API
    /// change, so not in `status_changes`).
    pub fn move_project_item(&self, owner: &str, number: u64, item_id: &str, status: Option<&str>) {
        self.shared
            .lock()
            .move_project_item(owner, number, item_id, status);
    }

    /// The board's items in board order (empty for an unknown board).
    pub fn project_items(&self, owner: &str, number: u64) -> Vec<ProjectItemState> {
        self.shared.lock().project_item_states(owner, number)
    }

    /// The names of the board's Status options, in order.
    pub fn project_options(&self, owner: &str, number: u64) -> Vec<String> {
        self.shared.lock().project_option_names(owner, number)
    }

    /// Applies `fault` to the next `times` requests `matcher` matches. Faults are tried in the
    /// order they were scripted; the first with times left applies.
    pub fn fail_next(&self, matcher: Matcher, fault: Fault, times: usize) {
        self.shared.lock().faults.push((matcher, fault, times));
    }

    /// Forgets every scripted fault not yet used.
    pub fn clear_faults(&self) {
        self.shared.lock().faults.clear();
    }

    /// Every request seen so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.lock().requests.clone()
    }

    /// The requests that change something ([`Recorded::mutation`]).
    pub fn mutations(&self) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| r.mutation).collect()
    }

    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// One line per request (`METHOD path?query -> status`), for assertion messages.
    pub fn log(&self) -> String {
        self.requests()
            .iter()
            .map(|r| {
                let q = if r.query.is_empty() {
                    String::new()
                } else {
                    format!("?{}", r.query)
                };
                let fault = r
                    .fault
                    .as_ref()
                    .map(|f| format!(" [{f:?}]"))
                    .unwrap_or_default();
                format!("{} {}{q} -> {}{fault}", r.method, r.path, r.status)
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for GitHubStandIn {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn handle(State(shared): State<Arc<Shared>>, req: axum::extract::Request) -> Response {
    serve::handle(&shared, req).await
}
