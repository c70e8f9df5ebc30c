//! What the stand-in holds: repositories, their issues and pull requests (one numbering per
//! repository, as on GitHub), labels and comments, and Projects v2 boards; the seeding and
//! inspection the tests use, and the JSON GitHub's REST API would render for each (the GraphQL
//! shapes are in graphql.rs).

use super::wire::Budget;
use super::{CommentState, Fault, IssueState, Matcher, PrState, ProjectItemState, Recorded};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct Model {
    pub base_url: String,
    pub token: String,
    pub login: String,
    pub require_user_agent: bool,
    pub repos: Vec<Repo>,
    /// By id; ids are global, as on GitHub.
    pub comments: BTreeMap<u64, Comment>,
    pub faults: Vec<(Matcher, Fault, usize)>,
    pub requests: Vec<Recorded>,
    pub core: Budget,
    pub graphql: Budget,
    pub projects: Vec<Project>,
    /// Logins known to be organisations (true) or users (false), by lower-case login, with the
    /// login as spelled when declared. The token's login is a user without being listed.
    pub owners: BTreeMap<String, (String, bool)>,
    next_id: u64,
    next_seq: u64,
}

pub struct Repo {
    pub id: u64,
    pub owner: String,
    pub name: String,
    pub default_branch: String,
    pub bare: Option<PathBuf>,
    pub issues: BTreeMap<u64, Issue>,
    pub labels: Vec<Label>,
    next_number: u64,
}

impl Repo {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }
}

pub struct Label {
    pub id: u64,
    pub name: String,
    pub color: String,
    pub description: Option<String>,
}

pub struct Issue {
    pub id: u64,
    pub number: u64,
    pub title: String,
    pub body: String,
    pub open: bool,
    pub state_reason: Option<String>,
    pub labels: Vec<String>,
    pub user: String,
    pub comments: u64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub closed_at: Option<DateTime<Utc>>,
    /// Orders updates made within the same second.
    pub seq: u64,
    pub pr: Option<Pull>,
}

pub struct Pull {
    pub head_owner: String,
    pub head_ref: String,
    pub base_ref: String,
    pub draft: bool,
    pub merged_at: Option<DateTime<Utc>>,
}

pub struct Comment {
    pub id: u64,
    pub repo_id: u64,
    pub number: u64,
    pub user: String,
    pub body: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub edits: u32,
}

/// A Projects v2 board with its one single-select field "Status" (and the built-in "Title").
pub struct Project {
    pub id: String,
    /// The owner's login as declared.
    pub owner: String,
    pub owner_is_org: bool,
    pub number: u64,
    pub title: String,
    pub status_field_id: String,
    pub title_field_id: String,
    /// The Status field's options, in board order.
    pub options: Vec<StatusOption>,
    /// In board order, which is also the `items` connection's order.
    pub items: Vec<ProjectItem>,
}

pub struct StatusOption {
    /// 8 hex digits, as GitHub's option ids look.
    pub id: String,
    pub name: String,
    /// A `ProjectV2SingleSelectFieldOptionColor` (GRAY, BLUE, ...).
    pub color: String,
    pub description: String,
}

pub struct ProjectItem {
    pub id: String,
    /// `(repository id, issue or PR number)`; `None` for an item the token cannot see
    /// (answered as `type: REDACTED`, `content: null`).
    pub content: Option<(u64, u64)>,
    /// The Status option id; an id no longer among the options reads as no status.
    pub status: Option<String>,
    /// Option names set through `updateProjectV2ItemFieldValue`, in order.
    pub status_changes: Vec<String>,
}

impl Project {
    pub fn option(&self, id: &str) -> Option<&StatusOption> {
        self.options.iter().find(|o| o.id == id)
    }

    /// The name of the item's current status, if it has one that still exists.
    pub fn status_name(&self, item: &ProjectItem) -> Option<&str> {
        item.status
            .as_deref()
            .and_then(|id| self.option(id))
            .map(|o| o.name.as_str())
    }

    pub fn url(&self, base_url: &str) -> String {
        let kind = if self.owner_is_org { "orgs" } else { "users" };
        format!("{base_url}/{kind}/{}/projects/{}", self.owner, self.number)
    }
}

/// The colours `ProjectV2SingleSelectFieldOptionColor` allows.
pub const OPTION_COLORS: [&str; 8] = [
    "GRAY", "BLUE", "GREEN", "YELLOW", "ORANGE", "RED", "PINK", "PURPLE",
];

pub fn iso(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn iso_opt(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(iso(t)))
}

fn null_if_empty(s: &str) -> Value {
    if s.is_empty() {
        Value::Null
    } else {
        Value::String(s.to_string())
    }
}

/// The tip of `branch` in a bare repository, `None` when it or the branch is missing.
pub fn branch_tip(bare: &Path, branch: &str) -> Option<git2::Oid> {
    let repo = git2::Repository::open(bare).ok()?;
    let reference = repo.find_reference(&format!("refs/heads/{branch}")).ok()?;
    let commit = reference.peel_to_commit().ok()?;
    Some(commit.id())
}

/// Whether `base` already contains every commit of `head` ("No commits between").
pub fn nothing_to_merge(bare: &Path, base: git2::Oid, head: git2::Oid) -> bool {
    base == head
        || git2::Repository::open(bare)
            .ok()
            .and_then(|r| r.graph_descendant_of(base, head).ok())
            .unwrap_or(false)
}

impl Model {
    pub fn new(base_url: String) -> Model {
        Model {
            base_url,
            token: super::DEFAULT_TOKEN.to_string(),
            login: super::DEFAULT_LOGIN.to_string(),
            require_user_agent: true,
            repos: Vec::new(),
            comments: BTreeMap::new(),
            faults: Vec::new(),
            requests: Vec::new(),
            core: Budget::new("core"),
            graphql: Budget::new("graphql"),
            projects: Vec::new(),
            owners: BTreeMap::new(),
            next_id: 1000,
            next_seq: 0,
        }
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// GitHub matches owner and name case-insensitively.
    pub fn repo_index(&self, full_name: &str) -> Option<usize> {
        self.repos
            .iter()
            .position(|r| r.full_name().eq_ignore_ascii_case(full_name))
    }

    pub fn repo_index_by_id(&self, id: u64) -> Option<usize> {
        self.repos.iter().position(|r| r.id == id)
    }

    fn seeded(&self, full_name: &str) -> usize {
        self.repo_index(full_name)
            .unwrap_or_else(|| panic!("github_standin: no repository {full_name} (add_repo first)"))
    }

    fn seeded_issue(&mut self, full_name: &str, number: u64) -> &mut Issue {
        let ri = self.seeded(full_name);
        self.repos[ri]
            .issues
            .get_mut(&number)
            .unwrap_or_else(|| panic!("github_standin: no issue {full_name}#{number}"))
    }

    // ----- seeding (from the test thread) -----

    pub fn add_repo(&mut self, full_name: &str, default_branch: &str, bare: Option<PathBuf>) {
        let (owner, name) = full_name
            .split_once('/')
            .unwrap_or_else(|| panic!("github_standin: repository {full_name} is not owner/name"));
        if self.repo_index(full_name).is_some() {
            panic!("github_standin: repository {full_name} added twice");
        }
        let id = self.repos.len() as u64 + 1;
        self.repos.push(Repo {
            id,
            owner: owner.to_string(),
            name: name.to_string(),
            default_branch: default_branch.to_string(),
            bare,
            issues: BTreeMap::new(),
            labels: Vec::new(),
            next_number: 1,
        });
    }

    pub fn add_issue(&mut self, repo: &str, title: &str, body: &str, labels: &[&str]) -> u64 {
        let ri = self.seeded(repo);
        let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        self.create_issue(ri, title, body, &labels, super::SEED_AUTHOR, None)
    }

    pub fn add_pr(
        &mut self,
        repo: &str,
        title: &str,
        body: &str,
        head: &str,
        base: &str,
        draft: bool,
    ) -> u64 {
        let ri = self.seeded(repo);
        let owner = self.repos[ri].owner.clone();
        let (head_owner, head_ref) = head.split_once(':').unwrap_or((&owner, head));
        let pull = Pull {
            head_owner: head_owner.to_string(),
            head_ref: head_ref.to_string(),
            base_ref: base.to_string(),
            draft,
            merged_at: None,
        };
        let login = self.login.clone();
        self.create_issue(ri, title, body, &[], &login, Some(pull))
    }

    pub fn add_comment(&mut self, repo: &str, number: u64, user: &str, body: &str) -> u64 {
        let ri = self.seeded(repo);
        if !self.repos[ri].issues.contains_key(&number) {
            panic!("github_standin: no issue {repo}#{number}");
        }
        self.create_comment(ri, number, user, body)
    }

    pub fn set_open(&mut self, repo: &str, number: u64, open: bool) {
        let seq = self.next_seq();
        let issue = self.seeded_issue(repo, number);
        issue.set_open(open, seq);
    }

    pub fn edit_issue(&mut self, repo: &str, number: u64, title: &str, body: &str) {
        let seq = self.next_seq();
        let issue = self.seeded_issue(repo, number);
        issue.title = title.to_string();
        issue.body = body.to_string();
        issue.touch(seq);
    }

    pub fn seed_labels(&mut self, repo: &str, number: u64, labels: &[&str]) {
        let ri = self.seeded(repo);
        let labels: Vec<String> = labels.iter().map(|l| l.to_string()).collect();
        if !self.replace_labels(ri, number, &labels) {
            panic!("github_standin: no issue {repo}#{number}");
        }
    }

    pub fn set_pr_merged(&mut self, repo: &str, number: u64) {
        let seq = self.next_seq();
        let issue = self.seeded_issue(repo, number);
        let now = Utc::now();
        let Some(pr) = issue.pr.as_mut() else {
            panic!("github_standin: {repo}#{number} is not a pull request");
        };
        pr.merged_at = Some(now);
        pr.draft = false;
        issue.set_open(false, seq);
    }

    // ----- inspection (from the test thread) -----

    pub fn issue_state(&self, repo: &str, number: u64) -> Option<IssueState> {
        let r = &self.repos[self.repo_index(repo)?];
        let i = r.issues.get(&number)?;
        Some(IssueState {
            number,
            node_id: i.node_id(r),
            title: i.title.clone(),
            body: i.body.clone(),
            state: i.state().to_string(),
            labels: i.labels.clone(),
            user: i.user.clone(),
            comments: i.comments,
            is_pull_request: i.pr.is_some(),
        })
    }

    pub fn issue_states(&self, repo: &str) -> Vec<IssueState> {
        let Some(ri) = self.repo_index(repo) else {
            return Vec::new();
        };
        self.repos[ri]
            .issues
            .keys()
            .filter_map(|n| self.issue_state(repo, *n))
            .collect()
    }

    pub fn comment_states(&self, repo: &str, number: u64) -> Vec<CommentState> {
        let Some(ri) = self.repo_index(repo) else {
            return Vec::new();
        };
        self.issue_comments(ri, number)
            .into_iter()
            .map(|c| CommentState {
                id: c.id,
                node_id: comment_node_id(c.id),
                user: c.user.clone(),
                body: c.body.clone(),
                edits: c.edits,
            })
            .collect()
    }

    pub fn pr_states(&self, repo: &str) -> Vec<PrState> {
        let Some(ri) = self.repo_index(repo) else {
            return Vec::new();
        };
        let r = &self.repos[ri];
        r.issues
            .values()
            .filter_map(|i| {
                let p = i.pr.as_ref()?;
                Some(PrState {
                    number: i.number,
                    node_id: i.node_id(r),
                    title: i.title.clone(),
                    body: i.body.clone(),
                    head: p.head_ref.clone(),
                    head_label: format!("{}:{}", p.head_owner, p.head_ref),
                    base: p.base_ref.clone(),
                    draft: p.draft,
                    state: i.state().to_string(),
                    merged: p.merged_at.is_some(),
                    labels: i.labels.clone(),
                })
            })
            .collect()
    }

    pub fn label_names(&self, repo: &str) -> Vec<String> {
        self.repo_index(repo)
            .map(|ri| {
                self.repos[ri]
                    .labels
                    .iter()
                    .map(|l| l.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    // ----- Projects v2 (seeding and inspection from the test thread) -----

    pub fn add_project(
        &mut self,
        owner: &str,
        owner_is_org: bool,
        number: u64,
        title: &str,
        status_options: &[&str],
    ) -> String {
        let key = owner.to_ascii_lowercase();
        match self.owners.get(&key) {
            Some((_, is_org)) if *is_org != owner_is_org => panic!(
                "github_standin: {owner} was declared an {} before",
                if *is_org { "organization" } else { "user" }
            ),
            _ => {}
        }
        if owner_is_org && key == self.login.to_ascii_lowercase() {
            panic!("github_standin: {owner} is the token's user, not an organization");
        }
        if self.project_index(owner, number).is_some() {
            panic!("github_standin: project {owner}#{number} added twice");
        }
        self.owners
            .entry(key)
            .or_insert_with(|| (owner.to_string(), owner_is_org));
        let owner = self.owners[&owner.to_ascii_lowercase()].0.clone();
        let n = self.next_id();
        let status_field_id = format!("PVTSSF_standin{n}");
        let mut options = Vec::new();
        for name in status_options {
            if options.iter().any(|o: &StatusOption| o.name == *name) {
                panic!("github_standin: option {name} given twice");
            }
            options.push(StatusOption {
                id: self.option_id(&status_field_id, name),
                name: name.to_string(),
                color: "GRAY".into(),
                description: String::new(),
            });
        }
        let id = format!("PVT_standin{n}");
        self.projects.push(Project {
            id: id.clone(),
            owner,
            owner_is_org,
            number,
            title: title.to_string(),
            status_field_id,
            title_field_id: format!("PVTF_standin{n}"),
            options,
            items: Vec::new(),
        });
        id
    }

    /// A fresh option id: 8 hex digits, like GitHub's.
    pub fn option_id(&mut self, field_id: &str, name: &str) -> String {
        let n = self.next_id();
        fake_sha(&format!("{field_id}/{name}/{n}"))[..8].to_string()
    }

    pub fn project_index(&self, owner: &str, number: u64) -> Option<usize> {
        self.projects
            .iter()
            .position(|p| p.number == number && p.owner.eq_ignore_ascii_case(owner))
    }

    fn seeded_project(&self, owner: &str, number: u64) -> usize {
        self.project_index(owner, number).unwrap_or_else(|| {
            panic!("github_standin: no project {owner}#{number} (add_project first)")
        })
    }

    /// Whether `login` is an organisation (`Some(true)`), a user (`Some(false)`) or unknown,
    /// with its spelling as declared.
    pub fn owner_kind(&self, login: &str) -> Option<(String, bool)> {
        if login.eq_ignore_ascii_case(&self.login) {
            return Some((self.login.clone(), false));
        }
        self.owners.get(&login.to_ascii_lowercase()).cloned()
    }

    pub fn new_item_id(&mut self) -> String {
        format!("PVTI_standin{}", self.next_id())
    }

    pub fn add_project_item(
        &mut self,
        owner: &str,
        number: u64,
        repo: &str,
        issue: u64,
        status: Option<&str>,
    ) -> String {
        let pi = self.seeded_project(owner, number);
        let ri = self.seeded(repo);
        let repo_id = self.repos[ri].id;
        if !self.repos[ri].issues.contains_key(&issue) {
            panic!("github_standin: no issue {repo}#{issue}");
        }
        let p = &self.projects[pi];
        if p.items.iter().any(|i| i.content == Some((repo_id, issue))) {
            panic!("github_standin: {repo}#{issue} is on project {owner}#{number} already");
        }
        let status = status.map(|s| self.seeded_option(pi, s));
        let id = self.new_item_id();
        self.projects[pi].items.push(ProjectItem {
            id: id.clone(),
            content: Some((repo_id, issue)),
            status,
            status_changes: Vec::new(),
        });
        id
    }

    pub fn add_redacted_item(&mut self, owner: &str, number: u64) -> String {
        let pi = self.seeded_project(owner, number);
        let id = self.new_item_id();
        self.projects[pi].items.push(ProjectItem {
            id: id.clone(),
            content: None,
            status: None,
            status_changes: Vec::new(),
        });
        id
    }

    /// Moves an item as a person on the board would (not recorded in `status_changes`).
    pub fn move_project_item(
        &mut self,
        owner: &str,
        number: u64,
        item: &str,
        status: Option<&str>,
    ) {
        let pi = self.seeded_project(owner, number);
        let status = status.map(|s| self.seeded_option(pi, s));
        let Some(it) = self.projects[pi].items.iter_mut().find(|i| i.id == item) else {
            panic!("github_standin: no item {item} on project {owner}#{number}");
        };
        it.status = status;
    }

    fn seeded_option(&self, pi: usize, name: &str) -> String {
        let p = &self.projects[pi];
        p.options
            .iter()
            .find(|o| o.name == name)
            .map(|o| o.id.clone())
            .unwrap_or_else(|| {
                panic!(
                    "github_standin: project {}#{} has no Status option {name}",
                    p.owner, p.number
                )
            })
    }

    pub fn project_item_states(&self, owner: &str, number: u64) -> Vec<ProjectItemState> {
        let Some(pi) = self.project_index(owner, number) else {
            return Vec::new();
        };
        let p = &self.projects[pi];
        p.items
            .iter()
            .map(|i| {
                let (repo, issue) = match i.content {
                    Some((repo_id, n)) => (
                        self.repo_index_by_id(repo_id)
                            .map(|ri| self.repos[ri].full_name()),
                        Some(n),
                    ),
                    None => (None, None),
                };
                ProjectItemState {
                    id: i.id.clone(),
                    repo,
                    issue,
                    status: p.status_name(i).map(str::to_string),
                    status_changes: i.status_changes.clone(),
                }
            })
            .collect()
    }

    pub fn project_option_names(&self, owner: &str, number: u64) -> Vec<String> {
        self.project_index(owner, number)
            .map(|pi| {
                self.projects[pi]
                    .options
                    .iter()
                    .map(|o| o.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// An issue or pull request by GraphQL node id: `(repository index, number)`.
    pub fn issue_by_node_id(&self, node_id: &str) -> Option<(usize, u64)> {
        self.repos.iter().enumerate().find_map(|(ri, r)| {
            r.issues
                .values()
                .find(|i| i.node_id(r) == node_id)
                .map(|i| (ri, i.number))
        })
    }

    // ----- changes (from the API and the seeding alike) -----

    pub fn create_issue(
        &mut self,
        ri: usize,
        title: &str,
        body: &str,
        labels: &[String],
        user: &str,
        pr: Option<Pull>,
    ) -> u64 {
        let id = self.next_id();
        let seq = self.next_seq();
        let labels: Vec<String> = labels.iter().map(|l| self.ensure_label(ri, l)).collect();
        let now = Utc::now();
        let repo = &mut self.repos[ri];
        let number = repo.next_number;
        repo.next_number += 1;
        repo.issues.insert(
            number,
            Issue {
                id,
                number,
                title: title.to_string(),
                body: body.to_string(),
                open: true,
                state_reason: None,
                labels: dedup_labels(labels),
                user: user.to_string(),
                comments: 0,
                created_at: now,
                updated_at: now,
                closed_at: None,
                seq,
                pr,
            },
        );
        number
    }

    pub fn create_comment(&mut self, ri: usize, number: u64, user: &str, body: &str) -> u64 {
        let id = self.next_id();
        let seq = self.next_seq();
        let now = Utc::now();
        let repo_id = self.repos[ri].id;
        self.comments.insert(
            id,
            Comment {
                id,
                repo_id,
                number,
                user: user.to_string(),
                body: body.to_string(),
                created_at: now,
                updated_at: now,
                edits: 0,
            },
        );
        if let Some(issue) = self.repos[ri].issues.get_mut(&number) {
            issue.comments += 1;
            issue.touch(seq);
        }
        id
    }

    pub fn issue_comments(&self, ri: usize, number: u64) -> Vec<&Comment> {
        let repo_id = self.repos[ri].id;
        self.comments
            .values()
            .filter(|c| c.repo_id == repo_id && c.number == number)
            .collect()
    }

    /// The repository's label of this name (any case), created with GitHub's grey when new;
    /// its name as the repository spells it.
    pub fn ensure_label(&mut self, ri: usize, name: &str) -> String {
        if let Some(l) = self.repos[ri]
            .labels
            .iter()
            .find(|l| l.name.eq_ignore_ascii_case(name))
        {
            return l.name.clone();
        }
        let id = self.next_id();
        self.repos[ri].labels.push(Label {
            id,
            name: name.to_string(),
            color: "ededed".into(),
            description: None,
        });
        name.to_string()
    }

    /// Adds labels to an issue; false when it does not exist.
    pub fn add_labels(&mut self, ri: usize, number: u64, labels: &[String]) -> bool {
        if !self.repos[ri].issues.contains_key(&number) {
            return false;
        }
        let names: Vec<String> = labels.iter().map(|l| self.ensure_label(ri, l)).collect();
        let seq = self.next_seq();
        if let Some(issue) = self.repos[ri].issues.get_mut(&number) {
            let mut all = issue.labels.clone();
            all.extend(names);
            issue.labels = dedup_labels(all);
            issue.touch(seq);
        }
        true
    }

    /// Replaces an issue's labels; false when it does not exist.
    pub fn replace_labels(&mut self, ri: usize, number: u64, labels: &[String]) -> bool {
        if let Some(issue) = self.repos[ri].issues.get_mut(&number) {
            issue.labels.clear();
        } else {
            return false;
        }
        self.add_labels(ri, number, labels)
    }

    /// Finds a pull request by GraphQL node id.
    pub fn pr_by_node_id(&mut self, node_id: &str) -> Option<(usize, u64)> {
        self.repos.iter().enumerate().find_map(|(ri, r)| {
            r.issues
                .values()
                .find(|i| i.pr.is_some() && i.node_id(r) == node_id)
                .map(|i| (ri, i.number))
        })
    }

    /// Whether `s` is the node id of any pull request.
    pub fn is_pr_node_id(&self, s: &str) -> bool {
        self.repos.iter().any(|r| {
            r.issues
                .values()
                .any(|i| i.pr.is_some() && i.node_id(r) == s)
        })
    }

    pub fn check_token(&self, token: &str) -> bool {
        !token.is_empty() && token == self.token
    }

    // ----- JSON as GitHub renders it -----

    pub fn api(&self, r: &Repo) -> String {
        format!("{}/repos/{}", self.base_url, r.full_name())
    }

    pub fn user_json(&self, login: &str) -> Value {
        json!({
            "login": login,
            "id": login_id(login),
            "node_id": format!("U_standin_{login}"),
            "type": if login.ends_with("[bot]") { "Bot" } else { "User" },
            "site_admin": false,
            "url": format!("{}/users/{login}", self.base_url),
            "html_url": format!("{}/{login}", self.base_url),
        })
    }

    pub fn repo_json(&self, r: &Repo) -> Value {
        let clone_url = match &r.bare {
            Some(p) => p.display().to_string(),
            None => format!("{}/{}.git", self.base_url, r.full_name()),
        };
        json!({
            "id": r.id,
            "node_id": format!("R_standin{}", r.id),
            "name": r.name,
            "full_name": r.full_name(),
            "owner": self.user_json(&r.owner),
            "private": false,
            "html_url": format!("{}/{}", self.base_url, r.full_name()),
            "url": self.api(r),
            "clone_url": clone_url,
            "default_branch": r.default_branch,
            "has_issues": true,
            "archived": false,
            "disabled": false,
            "visibility": "public",
            "permissions": {"admin": false, "maintain": false, "push": true, "triage": true, "pull": true},
        })
    }

    pub fn label_json(&self, r: &Repo, name: &str) -> Value {
        let label = r.labels.iter().find(|l| l.name.eq_ignore_ascii_case(name));
        let (id, color, description) = label.map_or((0, "ededed", None), |l| {
            (l.id, l.color.as_str(), l.description.clone())
        });
        json!({
            "id": id,
            "node_id": format!("LA_standin{id}"),
            "url": format!("{}/labels/{}", self.api(r), super::wire::percent_encode(name)),
            "name": name,
            "color": color,
            "default": false,
            "description": description,
        })
    }

    pub fn labels_json(&self, r: &Repo, names: &[String]) -> Value {
        Value::Array(names.iter().map(|n| self.label_json(r, n)).collect())
    }

    fn association(&self, r: &Repo, login: &str) -> &'static str {
        if login.eq_ignore_ascii_case(&r.owner) {
            "OWNER"
        } else if login == self.login {
            "COLLABORATOR"
        } else {
            "NONE"
        }
    }

    pub fn issue_json(&self, r: &Repo, i: &Issue) -> Value {
        let api = self.api(r);
        let n = i.number;
        let html = format!(
            "{}/{}/{}/{n}",
            self.base_url,
            r.full_name(),
            if i.pr.is_some() { "pull" } else { "issues" }
        );
        let mut v = json!({
            "url": format!("{api}/issues/{n}"),
            "repository_url": api,
            "labels_url": format!("{api}/issues/{n}/labels{{/name}}"),
            "comments_url": format!("{api}/issues/{n}/comments"),
            "events_url": format!("{api}/issues/{n}/events"),
            "html_url": html,
            "id": i.id,
            "node_id": i.node_id(r),
            "number": n,
            "title": i.title,
            "user": self.user_json(&i.user),
            "labels": self.labels_json(r, &i.labels),
            "state": i.state(),
            "state_reason": i.state_reason,
            "locked": false,
            "assignee": null,
            "assignees": [],
            "milestone": null,
            "comments": i.comments,
            "created_at": iso(i.created_at),
            "updated_at": iso(i.updated_at),
            "closed_at": iso_opt(i.closed_at),
            "author_association": self.association(r, &i.user),
            "body": null_if_empty(&i.body),
        });
        if let Some(p) = &i.pr {
            v["draft"] = json!(p.draft);
            v["pull_request"] = json!({
                "url": format!("{api}/pulls/{n}"),
                "html_url": html,
                "diff_url": format!("{html}.diff"),
                "patch_url": format!("{html}.patch"),
                "merged_at": iso_opt(p.merged_at),
            });
        }
        v
    }

    /// A branch end of a pull request: `{label, ref, sha, user, repo}`; the sha is the bare
    /// repository's tip when there is one (so it follows pushes), else a stable made-up one.
    fn pr_end(&self, r: &Repo, owner: &str, branch: &str) -> Value {
        let sha = r
            .bare
            .as_deref()
            .and_then(|b| branch_tip(b, branch))
            .map(|o| o.to_string())
            .unwrap_or_else(|| fake_sha(&format!("{owner}/{}:{branch}", r.name)));
        json!({
            "label": format!("{owner}:{branch}"),
            "ref": branch,
            "sha": sha,
            "user": self.user_json(owner),
            "repo": self.repo_json(r),
        })
    }

    pub fn pr_json(&self, r: &Repo, i: &Issue) -> Value {
        let Some(p) = &i.pr else {
            return Value::Null;
        };
        let api = self.api(r);
        let n = i.number;
        let html = format!("{}/{}/pull/{n}", self.base_url, r.full_name());
        json!({
            "url": format!("{api}/pulls/{n}"),
            "id": i.id,
            "node_id": i.node_id(r),
            "html_url": html,
            "diff_url": format!("{html}.diff"),
            "patch_url": format!("{html}.patch"),
            "issue_url": format!("{api}/issues/{n}"),
            "commits_url": format!("{api}/pulls/{n}/commits"),
            "comments_url": format!("{api}/issues/{n}/comments"),
            "number": n,
            "state": i.state(),
            "locked": false,
            "title": i.title,
            "user": self.user_json(&i.user),
            "body": null_if_empty(&i.body),
            "labels": self.labels_json(r, &i.labels),
            "milestone": null,
            "created_at": iso(i.created_at),
            "updated_at": iso(i.updated_at),
            "closed_at": iso_opt(i.closed_at),
            "merged_at": iso_opt(p.merged_at),
            "merge_commit_sha": null,
            "assignee": null,
            "assignees": [],
            "requested_reviewers": [],
            "draft": p.draft,
            "head": self.pr_end(r, &p.head_owner, &p.head_ref),
            "base": self.pr_end(r, &r.owner, &p.base_ref),
            "author_association": self.association(r, &i.user),
            "merged": p.merged_at.is_some(),
            "mergeable": null,
            "comments": i.comments,
        })
    }

    pub fn comment_json(&self, r: &Repo, c: &Comment) -> Value {
        let api = self.api(r);
        json!({
            "id": c.id,
            "node_id": comment_node_id(c.id),
            "url": format!("{api}/issues/comments/{}", c.id),
            "html_url": format!("{}/{}/issues/{}#issuecomment-{}", self.base_url, r.full_name(), c.number, c.id),
            "issue_url": format!("{api}/issues/{}", c.number),
            "body": c.body,
            "user": self.user_json(&c.user),
            "created_at": iso(c.created_at),
            "updated_at": iso(c.updated_at),
            "author_association": self.association(r, &c.user),
        })
    }
}

impl Issue {
    pub fn state(&self) -> &'static str {
        if self.open { "open" } else { "closed" }
    }

    pub fn node_id(&self, r: &Repo) -> String {
        let kind = if self.pr.is_some() { "PR" } else { "I" };
        format!("{kind}_standin{}n{}", r.id, self.number)
    }

    pub fn touch(&mut self, seq: u64) {
        self.updated_at = Utc::now();
        self.seq = seq;
    }

    pub fn set_open(&mut self, open: bool, seq: u64) {
        if self.open != open {
            self.open = open;
            self.closed_at = if open { None } else { Some(Utc::now()) };
            self.state_reason = if open {
                Some("reopened".into())
            } else {
                Some("completed".into())
            };
        }
        self.touch(seq);
    }
}

pub fn comment_node_id(id: u64) -> String {
    format!("IC_standin{id}")
}

fn dedup_labels(labels: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in labels {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(&l)) {
            out.push(l);
        }
    }
    out
}

fn login_id(login: &str) -> u64 {
    login
        .bytes()
        .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
        % 100_000_000
}

fn fake_sha(seed: &str) -> String {
    use sha2::{Digest, Sha256};
    hex::encode(Sha256::digest(seed.as_bytes()))[..40].to_string()
}
