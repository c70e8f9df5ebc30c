//! A local stand-in for Jira Cloud's REST API v3, for tests that must never touch the internet.
//!
//! `JiraStandIn::start()` serves on `http://127.0.0.1:<random>` (`url()`, the site URL a client
//! puts `/rest/api/3/...` after) from its own thread and tokio runtime, so it works from plain
//! `#[test]` fns that spawn the real binary as well as from inside `#[tokio::test]`. Dropping it
//! stops the server and cuts every open connection.
//!
//! What it plays, in Jira's own shapes (paths, field names, status codes, error bodies):
//! - Basic auth, `Authorization: Basic base64(email:api_token)`: [`DEFAULT_USER`] and
//!   [`DEFAULT_TOKEN`] until `set_credentials`; anything else is 401 with
//!   `{"errorMessages":["Client must be authenticated..."],"errors":{}}`;
//! - `GET /rest/api/3/myself`, `GET /rest/api/3/project/{key}`;
//! - `POST|GET /rest/api/3/search/jql` (the enhanced search; the old `/search` is 410 as on
//!   Cloud since 2025): a JQL subset (jira_standin/jql.rs: `project`, `key`/`issuekey`, `status`,
//!   `statusCategory`, `labels`, `priority`, `issuetype`, `summary ~`; `= != in, not in, is
//!   [not] EMPTY`; `AND OR NOT ()`; `ORDER BY key|created|updated|priority|status|summary
//!   [ASC|DESC]`). Unbounded queries, syntax errors, unknown fields, values or keys are 400 with
//!   Jira's messages. Pages carry an opaque `nextPageToken` (absent on the last page) and
//!   `isLast`; no `total`. `maxResults` defaults to 50 and is capped at 100. Without `fields`
//!   an issue is only `{"id"}`; with them `id`, `key`, `self` and only the named fields
//!   (`*all`, `*navigable`, `-field` understood). Without ORDER BY the stand-in orders by key
//!   ascending (Jira promises no order then);
//! - `GET /rest/api/3/issue/{key|id}?fields=...` (all fields by default), `PUT` the same to edit
//!   `summary`, `description`, `labels`, `priority`, `customfield_*` (`fields` and
//!   `update.labels` add/remove/set; 204); `status` cannot be edited (400), as on Jira;
//! - workflows ([`Workflow`]): `GET .../transitions` lists those allowed from the current status
//!   with their workflow's ids; `POST .../transitions` `{"transition":{"id"}}` is 204, or 400
//!   when the id is not allowed from the current status. Built in: [`Workflow::software`] and
//!   [`Workflow::simple`], whose ids differ;
//! - comments: `GET .../comment` (`startAt`, `maxResults` default and cap 100, `total`,
//!   `orderBy=created|-created`), `POST` (201), `GET|PUT|DELETE .../comment/{id}`. Bodies must
//!   be ADF docs: an empty doc is 400 "Comment body can not be empty!", a malformed one (an
//!   empty text node, a node without type) 400 INVALID_INPUT, as Jira answers.
//!
//! A body that is not JSON is 400 "Invalid request payload..."; a POST/PUT body sent without
//! `Content-Type: application/json` is 415. Every request is recorded ([`Recorded`]): the user
//! sent, never the token. Faults are scripted with `fail_next`. [`adf_text`] makes a plain ADF
//! doc for seeding descriptions and comments.

#![allow(dead_code)]

// Shared with the GitHub stand-in; a test that loads both stand-ins compiles it twice, one
// copy for each, which is what each stand-in's fault type wants.
#[allow(clippy::duplicate_mod)]
#[path = "bad_answers.rs"]
mod bad_answers;
// Not every test binary that includes the stand-in tries bad answers.
#[allow(unused_imports)]
pub use bad_answers::{BadAnswer, Tried, each_fails_clearly, host_of};
#[path = "jira_standin/jql.rs"]
mod jql;
#[path = "jira_standin/model.rs"]
mod model;
#[path = "jira_standin/rest.rs"]
mod rest;
#[path = "jira_standin/serve.rs"]
mod serve;
#[path = "jira_standin/wire.rs"]
mod wire;

use axum::Router;
use axum::extract::State;
use axum::response::Response;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The email the stand-in accepts until [`JiraStandIn::set_credentials`].
pub const DEFAULT_USER: &str = "whilly-bot@example.com";
/// The API token the stand-in accepts until [`JiraStandIn::set_credentials`].
pub const DEFAULT_TOKEN: &str = "ATATT3xFfGF0standin00000000000000000000";
/// The account id of the credentials' user (`/myself`, authors of API-created comments).
pub const DEFAULT_ACCOUNT_ID: &str = "712020:5b10ac8d-82e0-5b22-cc7d-4ef5standin";
/// The display name of the credentials' user.
pub const DEFAULT_DISPLAY_NAME: &str = "Whilly Bot";
/// The reporter of seeded issues and the author of comments seeded without one.
pub const SEED_AUTHOR: &str = "Alex Reporter";
/// `maxResults` of a search that names none, and the most a page of search holds.
pub const SEARCH_DEFAULT_MAX: usize = 50;
pub const SEARCH_MAX: usize = 100;

/// What a scripted fault does to a matching request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// This status with `{"errorMessages":[message],"errors":{}}` (e.g. 500, 502, 503).
    Status(u16, String),
    /// 401 as for bad credentials, whatever was sent.
    Unauthorized,
    /// 429 with `Retry-After: retry_after` (seconds) and Jira's rate-limit headers.
    TooManyRequests { retry_after: u64 },
    /// Answer normally after this delay.
    Slow(Duration),
    /// Close the connection without an answer (recorded with status 0).
    Disconnect,
    /// A broken or hostile server's answer (see [`BadAnswer`]).
    Bad(BadAnswer),
}

/// Which requests a fault applies to: the method (`None` = any) and a prefix of the path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matcher {
    pub method: Option<String>,
    pub path_prefix: String,
}

impl Matcher {
    /// Requests with this method (any case) whose path starts with `path_prefix`.
    pub fn new(method: &str, path_prefix: &str) -> Matcher {
        Matcher {
            method: Some(method.to_ascii_uppercase()),
            path_prefix: path_prefix.to_string(),
        }
    }

    /// Requests of any method whose path starts with `path_prefix`.
    pub fn path(path_prefix: &str) -> Matcher {
        Matcher {
            method: None,
            path_prefix: path_prefix.to_string(),
        }
    }

    /// Every request.
    pub fn all() -> Matcher {
        Matcher::path("/")
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path.starts_with(&self.path_prefix)
    }
}

/// One request the stand-in saw.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The path as sent, without the query.
    pub path: String,
    /// The raw query string, without `?` (empty when none).
    pub query: String,
    /// Headers of interest, names lower-case: user-agent, accept, content-type.
    pub headers: BTreeMap<String, String>,
    /// Whether an `Authorization` header was sent at all.
    pub auth_sent: bool,
    /// Whether it carried the credentials accepted at the time.
    pub authorized: bool,
    /// The email of a Basic `Authorization` header (never the token).
    pub user: Option<String>,
    /// The JSON body; `None` when empty or not JSON.
    pub body: Option<Value>,
    /// The status answered (0 for [`Fault::Disconnect`]).
    pub status: u16,
    /// The fault applied, if any.
    pub fault: Option<Fault>,
    /// A change on Jira's side: any method but GET/HEAD, except the search POSTs.
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

/// Jira's three status categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCategory {
    ToDo,
    InProgress,
    Done,
}

impl StatusCategory {
    /// `new`, `indeterminate`, `done`: the `statusCategory.key` Jira sends.
    pub fn key(self) -> &'static str {
        match self {
            StatusCategory::ToDo => "new",
            StatusCategory::InProgress => "indeterminate",
            StatusCategory::Done => "done",
        }
    }

    /// `To Do`, `In Progress`, `Done`: the name JQL's `statusCategory` compares.
    pub fn name(self) -> &'static str {
        match self {
            StatusCategory::ToDo => "To Do",
            StatusCategory::InProgress => "In Progress",
            StatusCategory::Done => "Done",
        }
    }

    /// Jira's ids: 2, 4, 3.
    pub fn id(self) -> u64 {
        match self {
            StatusCategory::ToDo => 2,
            StatusCategory::InProgress => 4,
            StatusCategory::Done => 3,
        }
    }

    fn color(self) -> &'static str {
        match self {
            StatusCategory::ToDo => "blue-gray",
            StatusCategory::InProgress => "yellow",
            StatusCategory::Done => "green",
        }
    }

    pub const ALL: [StatusCategory; 3] = [
        StatusCategory::ToDo,
        StatusCategory::InProgress,
        StatusCategory::Done,
    ];
}

/// One transition of a workflow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The id clients POST; ids are per workflow.
    pub id: String,
    pub name: String,
    /// The statuses it is allowed from; empty = from any status (a global transition, never
    /// offered from its own target status).
    pub from: Vec<String>,
    pub to: String,
}

/// A named set of statuses (the first is the initial one) and the transitions between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workflow {
    pub name: String,
    pub statuses: Vec<(String, StatusCategory)>,
    pub transitions: Vec<Transition>,
}

fn transition(id: &str, name: &str, from: &[&str], to: &str) -> Transition {
    Transition {
        id: id.to_string(),
        name: name.to_string(),
        from: from.iter().map(|s| s.to_string()).collect(),
        to: to.to_string(),
    }
}

impl Workflow {
    /// "software": To Do → In Progress → In Review → Done; Failed, Blocked, Cancelled and
    /// Waiting for Customer from In Progress and In Review; Blocked and Waiting for Customer
    /// back to In Progress; back to To Do from any status. Ids 11..91.
    /// Categories: Failed, Blocked, Waiting for Customer are in progress; Cancelled is done.
    pub fn software() -> Workflow {
        let working = ["In Progress", "In Review"];
        Workflow {
            name: "software".into(),
            statuses: vec![
                ("To Do".into(), StatusCategory::ToDo),
                ("In Progress".into(), StatusCategory::InProgress),
                ("In Review".into(), StatusCategory::InProgress),
                ("Done".into(), StatusCategory::Done),
                ("Failed".into(), StatusCategory::InProgress),
                ("Blocked".into(), StatusCategory::InProgress),
                ("Cancelled".into(), StatusCategory::Done),
                ("Waiting for Customer".into(), StatusCategory::InProgress),
            ],
            transitions: vec![
                transition("11", "Start Progress", &["To Do"], "In Progress"),
                transition("21", "Request Review", &["In Progress"], "In Review"),
                transition("31", "Done", &["In Review"], "Done"),
                transition("41", "Fail", &working, "Failed"),
                transition("51", "Block", &working, "Blocked"),
                transition("61", "Cancel", &working, "Cancelled"),
                transition("71", "Wait for Customer", &working, "Waiting for Customer"),
                transition(
                    "81",
                    "Resume",
                    &["Blocked", "Waiting for Customer"],
                    "In Progress",
                ),
                transition("91", "Back to To Do", &[], "To Do"),
            ],
        }
    }

    /// "simple": To Do → In Progress → Done only. Ids 2 and 3.
    pub fn simple() -> Workflow {
        Workflow {
            name: "simple".into(),
            statuses: vec![
                ("To Do".into(), StatusCategory::ToDo),
                ("In Progress".into(), StatusCategory::InProgress),
                ("Done".into(), StatusCategory::Done),
            ],
            transitions: vec![
                transition("2", "Start", &["To Do"], "In Progress"),
                transition("3", "Finish", &["In Progress"], "Done"),
            ],
        }
    }

    /// Whether the workflow has this status (names compare case-insensitively, as in Jira).
    pub fn has_status(&self, status: &str) -> bool {
        self.status(status).is_some()
    }

    /// The status as the workflow spells it, with its category.
    pub fn status(&self, status: &str) -> Option<(&str, StatusCategory)> {
        self.statuses
            .iter()
            .find(|(s, _)| s.eq_ignore_ascii_case(status))
            .map(|(s, c)| (s.as_str(), *c))
    }

    /// The transitions offered from `status`, in the workflow's order.
    pub fn allowed_from(&self, status: &str) -> Vec<&Transition> {
        self.transitions
            .iter()
            .filter(|t| {
                if t.from.is_empty() {
                    !t.to.eq_ignore_ascii_case(status)
                } else {
                    t.from.iter().any(|f| f.eq_ignore_ascii_case(status))
                }
            })
            .collect()
    }
}

/// An issue as the stand-in holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct IssueState {
    pub id: String,
    pub key: String,
    pub project: String,
    pub summary: String,
    /// ADF, or `Value::Null` for none.
    pub description: Value,
    pub status: String,
    pub status_category: StatusCategory,
    pub priority: String,
    pub labels: Vec<String>,
    pub issuetype: String,
    pub workflow: String,
    /// Fields set with `set_field` or `PUT` that are not one of the above (`customfield_*`).
    pub fields: BTreeMap<String, Value>,
    pub comments: Vec<CommentState>,
    /// The target statuses of the transitions made through the API, in order.
    pub transitions: Vec<String>,
}

/// A comment as the stand-in holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentState {
    pub id: String,
    /// The author's display name.
    pub author: String,
    pub author_account_id: String,
    /// ADF.
    pub body: Value,
    /// How many times it was edited since it was created.
    pub edits: u32,
}

impl CommentState {
    /// The body's text nodes in order, blocks on their own lines (a crude reading, for asserts).
    pub fn text(&self) -> String {
        wire::adf_plain(&self.body)
    }
}

/// An ADF doc of one paragraph per line of `text` (empty lines dropped), for seeding.
pub fn adf_text(text: &str) -> Value {
    let content: Vec<Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::json!({"type": "paragraph", "content": [{"type": "text", "text": l}]}))
        .collect();
    serde_json::json!({"type": "doc", "version": 1, "content": content})
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

pub struct JiraStandIn {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl JiraStandIn {
    /// A stand-in with the built-in workflows and no projects.
    pub fn start() -> JiraStandIn {
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
            .name("jira-standin".into())
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
                                eprintln!("jira_standin: server error: {e}");
                            }
                        }
                        _ = stop_rx => {}
                    }
                });
                drop(rt);
            })
            .expect("spawn stand-in thread");
        JiraStandIn {
            addr,
            shared,
            stop: Some(stop_tx),
            thread: Some(thread),
        }
    }

    /// `http://127.0.0.1:PORT`, the site URL (`https://your-domain.atlassian.net` on Cloud).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The one email and API token accepted from now on.
    pub fn set_credentials(&self, email: &str, token: &str) {
        let mut m = self.shared.lock();
        m.email = email.to_string();
        m.token = token.to_string();
    }

    /// The email and token accepted now.
    pub fn credentials(&self) -> (String, String) {
        let m = self.shared.lock();
        (m.email.clone(), m.token.clone())
    }

    /// The display name of the credentials' user (`/myself`, API-created comments).
    pub fn set_display_name(&self, name: &str) {
        self.shared.lock().display_name = name.to_string();
    }

    /// A project `KEY` (named after its key).
    pub fn add_project(&self, key: &str) {
        self.shared.lock().add_project(key, key);
    }

    /// A project `KEY` with a display name.
    pub fn add_project_named(&self, key: &str, name: &str) {
        self.shared.lock().add_project(key, name);
    }

    /// A workflow issues can name in `add_issue`; replaces one of the same name.
    pub fn add_workflow(&self, workflow: Workflow) {
        self.shared.lock().add_workflow(workflow);
    }

    /// A Task in `project` reported by [`SEED_AUTHOR`]; its key (`KEY-N`, numbered per project
    /// from 1). `description` is ADF or `Value::Null`; `status` must be in `workflow`
    /// ("software", "simple" or one added with `add_workflow`).
    #[allow(clippy::too_many_arguments)]
    pub fn add_issue(
        &self,
        project: &str,
        summary: &str,
        description: Value,
        status: &str,
        priority: &str,
        labels: &[&str],
        workflow: &str,
    ) -> String {
        self.shared.lock().add_issue(
            project,
            summary,
            description,
            status,
            priority,
            labels,
            workflow,
        )
    }

    /// Moves an issue to a status of its workflow directly (not recorded as a transition).
    pub fn set_status(&self, key: &str, status: &str) {
        self.shared.lock().seed_status(key, status);
    }

    /// Sets a field as an edit on Jira's side would: `summary` (string), `description` (ADF),
    /// `labels` (array of strings), `priority` (`{"name"}` or a string), `issuetype` (same),
    /// `status` (a name, as `set_status`); anything else (`customfield_10010`) as given.
    pub fn set_field(&self, key: &str, field: &str, value: Value) {
        self.shared.lock().seed_field(key, field, value);
    }

    /// A comment on `key` by a user of that display name; its id.
    pub fn add_comment(&self, key: &str, author: &str, body: Value) -> String {
        self.shared.lock().seed_comment(key, author, body)
    }

    /// Removes an issue (later requests for it are 404).
    pub fn delete_issue(&self, key: &str) {
        self.shared.lock().delete_issue(key);
    }

    pub fn issue(&self, key: &str) -> Option<IssueState> {
        self.shared.lock().issue_state(key)
    }

    /// Every issue of the project, by key.
    pub fn issues(&self, project: &str) -> Vec<IssueState> {
        self.shared.lock().issue_states(project)
    }

    /// The comments of `key`, oldest first (empty when there is no such issue).
    pub fn comments(&self, key: &str) -> Vec<CommentState> {
        self.issue(key).map(|i| i.comments).unwrap_or_default()
    }

    /// The target status names of the transitions made through the API on `key`, in order.
    pub fn transitions_made(&self, key: &str) -> Vec<String> {
        self.issue(key).map(|i| i.transitions).unwrap_or_default()
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

impl Drop for JiraStandIn {
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
