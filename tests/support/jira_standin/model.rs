//! What the stand-in holds: projects, issues (numbered per project), their workflows, statuses
//! (global, as in Jira: one id per status name) and comments; the seeding and inspection the
//! tests use, and the JSON Jira would render for each.

use super::wire::{jira_time, percent_decode};
use super::{
    CommentState, DEFAULT_ACCOUNT_ID, DEFAULT_DISPLAY_NAME, DEFAULT_TOKEN, DEFAULT_USER, Fault,
    IssueState, Matcher, Recorded, SEED_AUTHOR, StatusCategory, Workflow,
};
use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

pub struct Model {
    pub base_url: String,
    pub email: String,
    pub token: String,
    pub display_name: String,
    pub account_id: String,
    pub projects: Vec<Project>,
    /// In creation order.
    pub issues: Vec<Issue>,
    pub workflows: BTreeMap<String, Workflow>,
    pub statuses: Vec<StatusDef>,
    pub faults: Vec<(Matcher, Fault, usize)>,
    pub requests: Vec<Recorded>,
    /// Search continuation tokens: token → (the JQL it belongs to, the offset it resumes at).
    pub page_tokens: HashMap<String, (String, usize)>,
    next_id: u64,
    next_seq: u64,
}

pub struct Project {
    pub id: u64,
    pub key: String,
    pub name: String,
    next_number: u64,
}

pub struct StatusDef {
    pub id: String,
    pub name: String,
    pub category: StatusCategory,
}

#[derive(Clone)]
pub struct Person {
    pub account_id: String,
    pub display_name: String,
}

pub struct Issue {
    pub id: u64,
    pub key: String,
    pub project: String,
    pub number: u64,
    pub summary: String,
    pub description: Value,
    pub status: String,
    pub priority: String,
    pub labels: Vec<String>,
    pub issuetype: String,
    pub workflow: String,
    pub reporter: Person,
    pub custom: BTreeMap<String, Value>,
    pub comments: Vec<Comment>,
    pub transitions: Vec<String>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    /// Orders creations and updates made within the same millisecond.
    pub created_seq: u64,
    pub updated_seq: u64,
}

pub struct Comment {
    pub id: u64,
    pub author: Person,
    pub update_author: Person,
    pub body: Value,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
    pub created_seq: u64,
    pub edits: u32,
}

/// Jira's default priorities, highest first, with their ids.
pub const PRIORITIES: [(&str, &str); 5] = [
    ("Highest", "1"),
    ("High", "2"),
    ("Medium", "3"),
    ("Low", "4"),
    ("Lowest", "5"),
];

/// Issue types a query may name without an issue of that type existing.
pub const ISSUE_TYPES: [(&str, &str); 5] = [
    ("Task", "10001"),
    ("Bug", "10002"),
    ("Story", "10003"),
    ("Epic", "10004"),
    ("Subtask", "10005"),
];

/// Every field an issue renders, in Jira's usual order (for `*all`).
pub const FIELD_NAMES: [&str; 12] = [
    "summary",
    "description",
    "status",
    "priority",
    "labels",
    "issuetype",
    "project",
    "reporter",
    "assignee",
    "created",
    "updated",
    "comment",
];

/// A stable, Jira-looking account id for a seeded user's display name.
fn account_id_for(name: &str) -> String {
    format!(
        "557058:{}",
        &hex::encode(Sha256::digest(name.as_bytes()))[..24]
    )
}

impl Person {
    pub fn seeded(display_name: &str) -> Person {
        Person {
            account_id: account_id_for(display_name),
            display_name: display_name.to_string(),
        }
    }
}

/// Which fields an answer shows: `None` for a field list not sent.
pub struct FieldSel {
    all: bool,
    include: Vec<String>,
    exclude: Vec<String>,
}

impl FieldSel {
    /// From the names a client sent (`*all`, `*navigable`, `-name`, `name`); with none sent,
    /// everything when `default_all`, else nothing.
    pub fn new(requested: &[String], default_all: bool) -> FieldSel {
        if requested.is_empty() {
            return FieldSel {
                all: default_all,
                include: Vec::new(),
                exclude: Vec::new(),
            };
        }
        let mut sel = FieldSel {
            all: false,
            include: Vec::new(),
            exclude: Vec::new(),
        };
        for r in requested {
            let r = r.trim();
            match r {
                "*all" | "*navigable" => sel.all = true,
                _ if r.starts_with('-') => sel.exclude.push(r[1..].to_string()),
                "" => {}
                _ => sel.include.push(r.to_string()),
            }
        }
        sel
    }

    pub fn any(&self) -> bool {
        self.all || !self.include.is_empty()
    }

    fn wants(&self, field: &str) -> bool {
        !self.exclude.iter().any(|e| e == field)
            && (self.all || self.include.iter().any(|i| i == field))
    }
}

/// The names of a `fields` query parameter, possibly repeated, each a comma list.
pub fn fields_param(query: &[(String, String)]) -> Vec<String> {
    query
        .iter()
        .filter(|(k, _)| k == "fields")
        .flat_map(|(_, v)| v.split(',').map(|s| s.trim().to_string()))
        .filter(|s| !s.is_empty())
        .collect()
}

impl Model {
    pub fn new(base_url: String) -> Model {
        let mut m = Model {
            base_url,
            email: DEFAULT_USER.to_string(),
            token: DEFAULT_TOKEN.to_string(),
            display_name: DEFAULT_DISPLAY_NAME.to_string(),
            account_id: DEFAULT_ACCOUNT_ID.to_string(),
            projects: Vec::new(),
            issues: Vec::new(),
            workflows: BTreeMap::new(),
            statuses: Vec::new(),
            faults: Vec::new(),
            requests: Vec::new(),
            page_tokens: HashMap::new(),
            next_id: 10000,
            next_seq: 0,
        };
        m.add_workflow(Workflow::software());
        m.add_workflow(Workflow::simple());
        m
    }

    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    pub fn next_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub fn me(&self) -> Person {
        Person {
            account_id: self.account_id.clone(),
            display_name: self.display_name.clone(),
        }
    }

    pub fn check_credentials(&self, email: &str, token: &str) -> bool {
        email == self.email && token == self.token
    }

    // ----- lookups -----

    pub fn project(&self, key_or_id: &str) -> Option<&Project> {
        self.projects.iter().find(|p| {
            p.key.eq_ignore_ascii_case(key_or_id)
                || p.name.eq_ignore_ascii_case(key_or_id)
                || p.id.to_string() == key_or_id
        })
    }

    /// An issue by key (any case) or id, as Jira's `{issueIdOrKey}` paths take it.
    pub fn issue_index(&self, key_or_id: &str) -> Option<usize> {
        let key_or_id = percent_decode(key_or_id);
        self.issues
            .iter()
            .position(|i| i.key.eq_ignore_ascii_case(&key_or_id) || i.id.to_string() == key_or_id)
    }

    pub fn status_def(&self, name_or_id: &str) -> Option<&StatusDef> {
        self.statuses
            .iter()
            .find(|s| s.name.eq_ignore_ascii_case(name_or_id) || s.id == name_or_id)
    }

    pub fn workflow_of(&self, issue: &Issue) -> &Workflow {
        self.workflows
            .get(&issue.workflow)
            .expect("jira_standin: an issue names a workflow that exists")
    }

    pub fn category_of(&self, status: &str) -> StatusCategory {
        self.status_def(status)
            .map_or(StatusCategory::ToDo, |s| s.category)
    }

    fn seeded(&self, key: &str) -> usize {
        self.issue_index(key)
            .unwrap_or_else(|| panic!("jira_standin: no issue {key}"))
    }

    // ----- seeding (from the test thread) -----

    pub fn add_project(&mut self, key: &str, name: &str) {
        assert!(
            !key.is_empty()
                && key.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                && key
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
            "jira_standin: project key {key:?} is not like ABC"
        );
        assert!(
            self.project(key).is_none(),
            "jira_standin: project {key} added twice"
        );
        let id = self.next_id();
        self.projects.push(Project {
            id,
            key: key.to_string(),
            name: name.to_string(),
            next_number: 1,
        });
    }

    pub fn add_workflow(&mut self, workflow: Workflow) {
        assert!(
            !workflow.statuses.is_empty(),
            "jira_standin: workflow {} has no statuses",
            workflow.name
        );
        for (name, category) in &workflow.statuses {
            if self.status_def(name).is_none() {
                let id = (10000 + self.statuses.len()).to_string();
                self.statuses.push(StatusDef {
                    id,
                    name: name.clone(),
                    category: *category,
                });
            }
        }
        for t in &workflow.transitions {
            for s in t.from.iter().chain(std::iter::once(&t.to)) {
                assert!(
                    workflow.has_status(s),
                    "jira_standin: transition {} of workflow {} names status {s} it lacks",
                    t.id,
                    workflow.name
                );
            }
        }
        self.workflows.insert(workflow.name.clone(), workflow);
    }

    #[allow(clippy::too_many_arguments)]
    pub fn add_issue(
        &mut self,
        project: &str,
        summary: &str,
        description: Value,
        status: &str,
        priority: &str,
        labels: &[&str],
        workflow: &str,
    ) -> String {
        let wf = self
            .workflows
            .get(workflow)
            .unwrap_or_else(|| panic!("jira_standin: no workflow {workflow}"));
        let status = wf
            .status(status)
            .unwrap_or_else(|| panic!("jira_standin: workflow {workflow} has no status {status}"))
            .0
            .to_string();
        let id = self.next_id();
        let seq = self.next_seq();
        let p = self
            .projects
            .iter_mut()
            .find(|p| p.key == project)
            .unwrap_or_else(|| panic!("jira_standin: no project {project} (add_project first)"));
        let number = p.next_number;
        p.next_number += 1;
        let key = format!("{}-{number}", p.key);
        let now = Utc::now();
        self.issues.push(Issue {
            id,
            key: key.clone(),
            project: project.to_string(),
            number,
            summary: summary.to_string(),
            description,
            status,
            priority: priority.to_string(),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            issuetype: "Task".into(),
            workflow: workflow.to_string(),
            reporter: Person::seeded(SEED_AUTHOR),
            custom: BTreeMap::new(),
            comments: Vec::new(),
            transitions: Vec::new(),
            created: now,
            updated: now,
            created_seq: seq,
            updated_seq: seq,
        });
        key
    }

    pub fn seed_status(&mut self, key: &str, status: &str) {
        let ii = self.seeded(key);
        let name = self
            .workflow_of(&self.issues[ii])
            .status(status)
            .unwrap_or_else(|| panic!("jira_standin: {key}'s workflow has no status {status}"))
            .0
            .to_string();
        self.issues[ii].status = name;
        self.touch(ii);
    }

    pub fn seed_field(&mut self, key: &str, field: &str, value: Value) {
        let ii = self.seeded(key);
        if field == "status" {
            let name = value.as_str().unwrap_or_default().to_string();
            self.seed_status(key, &name);
            return;
        }
        let name_of = |v: &Value| {
            v.as_str()
                .or_else(|| v["name"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let issue = &mut self.issues[ii];
        match field {
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
            "priority" => issue.priority = name_of(&value),
            "issuetype" => issue.issuetype = name_of(&value),
            _ => {
                issue.custom.insert(field.to_string(), value);
            }
        }
        self.touch(ii);
    }

    pub fn seed_comment(&mut self, key: &str, author: &str, body: Value) -> String {
        let ii = self.seeded(key);
        self.create_comment(ii, Person::seeded(author), body)
    }

    pub fn delete_issue(&mut self, key: &str) {
        let ii = self.seeded(key);
        self.issues.remove(ii);
    }

    // ----- changes (from requests and seeding alike) -----

    pub fn touch(&mut self, ii: usize) {
        let seq = self.next_seq();
        let issue = &mut self.issues[ii];
        issue.updated = Utc::now();
        issue.updated_seq = seq;
    }

    pub fn create_comment(&mut self, ii: usize, author: Person, body: Value) -> String {
        let id = self.next_id();
        let seq = self.next_seq();
        let now = Utc::now();
        self.issues[ii].comments.push(Comment {
            id,
            update_author: author.clone(),
            author,
            body,
            created: now,
            updated: now,
            created_seq: seq,
            edits: 0,
        });
        self.touch(ii);
        id.to_string()
    }

    // ----- inspection -----

    pub fn issue_state(&self, key: &str) -> Option<IssueState> {
        let issue = &self.issues[self.issue_index(key)?];
        Some(IssueState {
            id: issue.id.to_string(),
            key: issue.key.clone(),
            project: issue.project.clone(),
            summary: issue.summary.clone(),
            description: issue.description.clone(),
            status: issue.status.clone(),
            status_category: self.category_of(&issue.status),
            priority: issue.priority.clone(),
            labels: issue.labels.clone(),
            issuetype: issue.issuetype.clone(),
            workflow: issue.workflow.clone(),
            fields: issue.custom.clone(),
            comments: issue
                .comments
                .iter()
                .map(|c| CommentState {
                    id: c.id.to_string(),
                    author: c.author.display_name.clone(),
                    author_account_id: c.author.account_id.clone(),
                    body: c.body.clone(),
                    edits: c.edits,
                })
                .collect(),
            transitions: issue.transitions.clone(),
        })
    }

    pub fn issue_states(&self, project: &str) -> Vec<IssueState> {
        let mut issues: Vec<&Issue> = self
            .issues
            .iter()
            .filter(|i| i.project.eq_ignore_ascii_case(project))
            .collect();
        issues.sort_by_key(|i| i.number);
        issues
            .iter()
            .filter_map(|i| self.issue_state(&i.key))
            .collect()
    }

    // ----- JSON -----

    pub fn api(&self, rest: &str) -> String {
        format!("{}/rest/api/3/{rest}", self.base_url)
    }

    pub fn person_json(&self, p: &Person) -> Value {
        let mut v = json!({
            "self": self.api(&format!("user?accountId={}", p.account_id)),
            "accountId": p.account_id,
            "avatarUrls": {
                "48x48": format!("{}/avatar/{}/48", self.base_url, p.account_id),
                "24x24": format!("{}/avatar/{}/24", self.base_url, p.account_id),
                "16x16": format!("{}/avatar/{}/16", self.base_url, p.account_id),
                "32x32": format!("{}/avatar/{}/32", self.base_url, p.account_id),
            },
            "displayName": p.display_name,
            "active": true,
            "timeZone": "Etc/UTC",
            "accountType": "atlassian",
        });
        if p.account_id == self.account_id {
            v["emailAddress"] = json!(self.email);
        }
        v
    }

    pub fn myself_json(&self) -> Value {
        let mut v = self.person_json(&self.me());
        v["locale"] = json!("en_US");
        v["groups"] = json!({"size": 1, "items": []});
        v["applicationRoles"] = json!({"size": 1, "items": []});
        v["expand"] = json!("groups,applicationRoles");
        v
    }

    pub fn project_json(&self, p: &Project) -> Value {
        json!({
            "self": self.api(&format!("project/{}", p.id)),
            "id": p.id.to_string(),
            "key": p.key,
            "name": p.name,
            "projectTypeKey": "software",
            "simplified": false,
        })
    }

    pub fn category_json(&self, c: StatusCategory) -> Value {
        json!({
            "self": self.api(&format!("statuscategory/{}", c.id())),
            "id": c.id(),
            "key": c.key(),
            "colorName": c.color(),
            "name": c.name(),
        })
    }

    pub fn status_json(&self, name: &str) -> Value {
        let (id, name, category) = match self.status_def(name) {
            Some(s) => (s.id.clone(), s.name.clone(), s.category),
            None => ("0".to_string(), name.to_string(), StatusCategory::ToDo),
        };
        json!({
            "self": self.api(&format!("status/{id}")),
            "description": "",
            "iconUrl": format!("{}/images/icons/statuses/generic.png", self.base_url),
            "name": name,
            "id": id,
            "statusCategory": self.category_json(category),
        })
    }

    fn priority_json(&self, name: &str) -> Value {
        let id = PRIORITIES
            .iter()
            .find(|(p, _)| p.eq_ignore_ascii_case(name))
            .map_or("10000", |(_, id)| id);
        json!({
            "self": self.api(&format!("priority/{id}")),
            "iconUrl": format!("{}/images/icons/priorities/{}.svg", self.base_url, name.to_lowercase()),
            "name": name,
            "id": id,
        })
    }

    fn issuetype_json(&self, name: &str) -> Value {
        let id = ISSUE_TYPES
            .iter()
            .find(|(t, _)| t.eq_ignore_ascii_case(name))
            .map_or("10000", |(_, id)| id);
        json!({
            "self": self.api(&format!("issuetype/{id}")),
            "id": id,
            "description": "",
            "name": name,
            "subtask": false,
            "hierarchyLevel": 0,
        })
    }

    pub fn comment_json(&self, issue: &Issue, c: &Comment) -> Value {
        json!({
            "self": self.api(&format!("issue/{}/comment/{}", issue.id, c.id)),
            "id": c.id.to_string(),
            "author": self.person_json(&c.author),
            "body": c.body,
            "updateAuthor": self.person_json(&c.update_author),
            "created": jira_time(c.created),
            "updated": jira_time(c.updated),
            "jsdPublic": true,
        })
    }

    fn field_json(&self, issue: &Issue, field: &str) -> Option<Value> {
        Some(match field {
            "summary" => json!(issue.summary),
            "description" => issue.description.clone(),
            "status" => self.status_json(&issue.status),
            "priority" => self.priority_json(&issue.priority),
            "labels" => json!(issue.labels),
            "issuetype" => self.issuetype_json(&issue.issuetype),
            "project" => self
                .project(&issue.project)
                .map_or(Value::Null, |p| self.project_json(p)),
            "reporter" => self.person_json(&issue.reporter),
            "assignee" => Value::Null,
            "created" => json!(jira_time(issue.created)),
            "updated" => json!(jira_time(issue.updated)),
            "comment" => {
                let comments: Vec<Value> = issue
                    .comments
                    .iter()
                    .map(|c| self.comment_json(issue, c))
                    .collect();
                json!({
                    "comments": comments,
                    "self": self.api(&format!("issue/{}/comment", issue.id)),
                    "maxResults": comments.len(),
                    "total": comments.len(),
                    "startAt": 0,
                })
            }
            _ => return issue.custom.get(field).cloned(),
        })
    }

    /// An issue with the fields `sel` picks; only `{"id"}` when it picks none (the enhanced
    /// search's answer without `fields`), unless `always_key`.
    pub fn issue_json(&self, issue: &Issue, sel: &FieldSel, always_key: bool) -> Value {
        if !sel.any() && !always_key {
            return json!({"id": issue.id.to_string()});
        }
        let mut fields = Map::new();
        let names = FIELD_NAMES
            .iter()
            .map(|s| s.to_string())
            .chain(issue.custom.keys().cloned())
            .chain(sel.include.iter().cloned());
        for name in names {
            if fields.contains_key(&name) || !sel.wants(&name) {
                continue;
            }
            if let Some(v) = self.field_json(issue, &name) {
                fields.insert(name, v);
            }
        }
        json!({
            "expand": "renderedFields,names,schema,operations,editmeta,changelog,versionedRepresentations",
            "id": issue.id.to_string(),
            "self": self.api(&format!("issue/{}", issue.id)),
            "key": issue.key,
            "fields": fields,
        })
    }

    pub fn transition_json(&self, t: &super::Transition) -> Value {
        json!({
            "id": t.id,
            "name": t.name,
            "to": self.status_json(&t.to),
            "hasScreen": false,
            "isGlobal": t.from.is_empty(),
            "isInitial": false,
            "isAvailable": true,
            "isConditional": false,
            "isLooped": false,
        })
    }
}
