//! Jira issues in lock-step with their tasks: each task from a Jira issue moves its issue to
//! the status of its state (`[jira.statuses]`), by **target status name** — transition ids
//! differ per workflow — and keeps one Whilly comment on it (ADF), edited in place, with the
//! pull request, the checks and the cost. A move the workflow does not allow is reported once,
//! with the moves it does allow, and not tried again. Runs under [`super::follow::Follower`].

use super::pull_watch::{TaskPull, plan_pulls};
use crate::config::JiraConfig;
use crate::domain::Status;
use crate::forge::compose::last_checks;
use crate::forge::github::PrState;
use crate::forge::intake::CLOSED_UPSTREAM;
use crate::forge::jira::intake::source_of;
use crate::forge::jira::{Jira, JiraError, adf};
use crate::store::{EventFilter, Store, TaskRecord, event_types as et};
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub(crate) struct JiraSync {
    client: Jira,
    cfg: JiraConfig,
    store: Arc<dyn Store>,
    /// Issue key → its status as last read or set.
    status: HashMap<String, String>,
    /// (key, target) moves the workflow refused: said once, not tried again.
    refused: HashSet<(String, String)>,
    /// Issue key → the comment body last written (nothing is sent when it is unchanged).
    commented: HashMap<String, String>,
}

/// The statuses to pass through from `now` to `target`: the lifecycle's steps between them
/// when both are on it (To Do → In Progress → In Review → Done), else just the target.
pub(crate) fn lifecycle_steps(c: &JiraConfig, now: &str, target: &str) -> Vec<String> {
    let s = &c.statuses;
    let life = [&s.todo, &s.in_progress, &s.in_review, &s.done];
    let pos = |x: &str| life.iter().position(|l| l.eq_ignore_ascii_case(x));
    match (pos(now), pos(target)) {
        (Some(a), Some(b)) if a < b => life[a + 1..=b].iter().map(|s| s.to_string()).collect(),
        _ => vec![target.to_string()],
    }
}

/// The Jira status a task's state maps to; `None`: leave the issue as it is.
pub(crate) fn status_for<'c>(
    t: &TaskRecord,
    paused: bool,
    pull: Option<PrState>,
    c: &'c JiraConfig,
) -> Option<&'c str> {
    let s = &c.statuses;
    if paused && !t.status.is_terminal() {
        return None;
    }
    Some(match t.status {
        Status::Pending => &s.todo,
        Status::Claimed | Status::InProgress => &s.in_progress,
        Status::Blocked => &s.blocked,
        Status::HumanLoop => &s.waiting,
        Status::Failed => &s.failed,
        Status::Done => match pull {
            Some(PrState::Draft | PrState::Open) if c.transition_on != "pr_opened" => &s.in_review,
            Some(PrState::Closed) => &s.waiting,
            _ => &s.done,
        },
        // Done or gone upstream already: nothing to move.
        Status::Skipped if t.reason.as_deref() == Some(CLOSED_UPSTREAM) => return None,
        Status::Skipped => &s.cancelled,
    })
}

impl JiraSync {
    pub(crate) fn new(client: Jira, cfg: JiraConfig, store: Arc<dyn Store>) -> JiraSync {
        JiraSync {
            client,
            cfg,
            store,
            status: HashMap::new(),
            refused: HashSet::new(),
            commented: HashMap::new(),
        }
    }

    async fn event(&self, kind: &str, plan_id: &str, task_id: &str, payload: Value) {
        crate::store::record_event(&*self.store, kind, plan_id, Some(task_id), payload).await;
    }

    /// Brings every Jira task of the plan in step; returns what failed.
    pub(crate) async fn sync(
        &mut self,
        plan_id: &str,
    ) -> Result<Vec<String>, crate::store::StoreError> {
        let plan = self.store.get_plan(plan_id).await?;
        let tasks = self.store.list_tasks(plan_id).await?;
        if !tasks.iter().any(|t| source_of(&t.spec).is_some()) {
            return Ok(Vec::new());
        }
        let pulls = plan_pulls(&*self.store, plan_id).await?;
        let mut failed = Vec::new();
        for t in &tasks {
            let Some((key, url)) = source_of(&t.spec) else {
                continue;
            };
            let pull = pulls.get(&t.id);
            let Some(target) =
                status_for(t, plan.paused, pull.map(|p| p.state), &self.cfg).map(str::to_string)
            else {
                continue;
            };
            if let Err(e) = self.bring(plan_id, t, &key, &url, &target).await {
                self.event(
                    et::JIRA_SYNC_FAILED,
                    plan_id,
                    &t.id,
                    json!({"key": key, "error": e.to_string()}),
                )
                .await;
                failed.push(format!("{key}: {e}"));
                continue;
            }
            if matches!(t.status, Status::Done | Status::Failed)
                && let Err(e) = self.comment(plan_id, t, &key, pull, &target).await
            {
                failed.push(format!("{key}: the comment: {e}"));
            }
        }
        Ok(failed)
    }

    async fn bring(
        &mut self,
        plan_id: &str,
        t: &TaskRecord,
        key: &str,
        url: &str,
        target: &str,
    ) -> Result<(), JiraError> {
        let now = match self.status.get(key) {
            Some(s) => s.clone(),
            None => {
                let s = self.client.issue(key, &[]).await?.status;
                self.status.insert(key.to_string(), s.clone());
                s
            }
        };
        if now.eq_ignore_ascii_case(target)
            || self
                .refused
                .contains(&(key.to_string(), target.to_string()))
        {
            return Ok(());
        }
        // Workflows often allow only the next step (To Do → In Progress → In Review → Done),
        // and a fast task may skip a state between two syncs: walk the lifecycle's steps in
        // order, taking the furthest one each status allows.
        let path = lifecycle_steps(&self.cfg, &now, target);
        let mut at = now.clone();
        let mut done_upto = 0;
        while done_upto < path.len() {
            let allowed = self.client.transitions(key).await?;
            let pick = path[done_upto..]
                .iter()
                .enumerate()
                .rev()
                .find_map(|(i, step)| {
                    allowed
                        .iter()
                        .find(|tr| tr.to.eq_ignore_ascii_case(step))
                        .map(|tr| (done_upto + i, tr.clone()))
                });
            let Some((i, tr)) = pick else {
                let names: Vec<String> = allowed.iter().map(|a| a.to.clone()).collect();
                tracing::warn!(
                    "{key}: the workflow does not allow {at} → {target} (it allows: {}); set [jira.statuses] to statuses this workflow has",
                    names.join(", ")
                );
                self.refused.insert((key.to_string(), target.to_string()));
                self.event(
                    et::JIRA_TRANSITION_REFUSED,
                    plan_id,
                    &t.id,
                    json!({"key": key, "from": at, "to": target, "allowed": names, "url": url}),
                )
                .await;
                return Ok(());
            };
            self.client.transition(key, &tr.id).await?;
            self.status.insert(key.to_string(), tr.to.clone());
            self.event(
                et::JIRA_TRANSITIONED,
                plan_id,
                &t.id,
                json!({"key": key, "from": at, "to": tr.to, "url": url}),
            )
            .await;
            at = tr.to.clone();
            done_upto = i + 1;
        }
        Ok(())
    }

    /// The one Whilly comment on the issue: found by its first line, edited in place.
    async fn comment(
        &mut self,
        plan_id: &str,
        t: &TaskRecord,
        key: &str,
        pull: Option<&TaskPull>,
        status: &str,
    ) -> Result<(), JiraError> {
        let evidence = self.evidence_of(plan_id, &t.id).await;
        let body = comment_text(plan_id, t, pull, status, &evidence);
        if self.commented.get(key) == Some(&body) {
            return Ok(());
        }
        let head = comment_head(&t.id);
        let existing = self
            .client
            .comments(key)
            .await?
            .into_iter()
            .find(|c| c.text.contains(&head));
        let doc = adf::from_markdown(&body);
        let created = match &existing {
            Some(c) if c.text.trim() == adf::to_text(&doc).trim() => {
                self.commented.insert(key.to_string(), body);
                return Ok(());
            }
            Some(c) => {
                self.client.update_comment(key, &c.id, &doc).await?;
                false
            }
            None => {
                self.client.add_comment(key, &doc).await?;
                true
            }
        };
        self.commented.insert(key.to_string(), body);
        self.event(
            et::JIRA_COMMENT_UPDATED,
            plan_id,
            &t.id,
            json!({"key": key, "url": self.client.browse_url(key), "created": created}),
        )
        .await;
        Ok(())
    }

    /// The evidence of the task's newest ended attempt (its DONE or FAILED event).
    async fn evidence_of(&self, plan_id: &str, task_id: &str) -> Value {
        let events = self
            .store
            .events(&EventFilter {
                plan_id: Some(plan_id.to_string()),
                task_id: Some(task_id.to_string()),
                ..EventFilter::default()
            })
            .await
            .unwrap_or_default();
        events
            .into_iter()
            .rev()
            .find(|e| e.payload.get("verification").is_some())
            .map(|e| e.payload)
            .unwrap_or(Value::Null)
    }
}

fn comment_head(task_id: &str) -> String {
    format!("Whilly status for {task_id}")
}

/// The comment, as markdown (sent as ADF).
fn comment_text(
    plan_id: &str,
    t: &TaskRecord,
    pull: Option<&TaskPull>,
    status: &str,
    evidence: &Value,
) -> String {
    let mut b = format!("**{}** (plan {plan_id}): {status}\n\n", comment_head(&t.id));
    if let Some(p) = pull {
        b.push_str(&format!("Pull request: {}\n\n", p.url));
    }
    let checks = last_checks(evidence);
    if !checks.is_empty() {
        b.push_str("Checks:\n");
        for c in &checks {
            b.push_str(&format!(
                "- {} `{}`: {}\n",
                c.name,
                c.command,
                if c.passed { "passed" } else { "failed" }
            ));
        }
        b.push('\n');
    }
    if let Some(r) = &t.reason {
        b.push_str(&format!("Reason: {r}\n\n"));
    }
    b.push_str(&format!("Cost: {} · attempts: {}\n", t.cost, t.attempts));
    b
}

#[async_trait::async_trait]
impl super::follow::PlanSync for JiraSync {
    fn name(&self) -> &'static str {
        "jira"
    }

    fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    async fn sync_plan(&mut self, plan_id: &str) -> Result<Vec<String>, String> {
        self.sync(plan_id).await.map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(status: Status, reason: Option<&str>) -> TaskRecord {
        TaskRecord {
            pk: 1,
            plan_id: "p".into(),
            id: "JIRA-A-1".into(),
            status,
            priority: crate::domain::Priority::Medium,
            pending_deps: 0,
            epoch: 0,
            attempts: 1,
            max_attempts: 3,
            worker_id: None,
            lease_expires_at: None,
            deadline_at: None,
            cost: crate::domain::Usd::ZERO,
            reserved: crate::domain::Usd::ZERO,
            reason: reason.map(str::to_string),
            spec: crate::domain::TaskSpec::default(),
            updated_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn the_lifecycle_is_walked_in_order() {
        let c = JiraConfig::default();
        assert_eq!(
            lifecycle_steps(&c, "To Do", "Done"),
            vec!["In Progress", "In Review", "Done"]
        );
        assert_eq!(
            lifecycle_steps(&c, "In Progress", "In Review"),
            vec!["In Review"]
        );
        assert_eq!(
            lifecycle_steps(&c, "In Review", "In Progress"),
            vec!["In Progress"]
        );
        assert_eq!(lifecycle_steps(&c, "To Do", "Failed"), vec!["Failed"]);
    }

    #[test]
    fn each_state_has_its_jira_status() {
        let c = JiraConfig::default();
        let s = |st, r, pull| status_for(&task(st, r), false, pull, &c).map(str::to_string);
        assert_eq!(s(Status::Pending, None, None).as_deref(), Some("To Do"));
        assert_eq!(
            s(Status::InProgress, None, None).as_deref(),
            Some("In Progress")
        );
        assert_eq!(
            s(Status::Done, None, Some(PrState::Draft)).as_deref(),
            Some("In Review")
        );
        assert_eq!(
            s(Status::Done, None, Some(PrState::Merged)).as_deref(),
            Some("Done")
        );
        assert_eq!(s(Status::Done, None, None).as_deref(), Some("Done"));
        assert_eq!(s(Status::Failed, None, None).as_deref(), Some("Failed"));
        assert_eq!(s(Status::Skipped, Some("closed_upstream"), None), None);
        assert_eq!(
            s(Status::Skipped, Some("decision_gate_failed"), None).as_deref(),
            Some("Cancelled")
        );
        assert_eq!(
            s(Status::HumanLoop, None, None).as_deref(),
            Some("Waiting for Customer")
        );
        let on_pr = JiraConfig {
            transition_on: "pr_opened".into(),
            ..JiraConfig::default()
        };
        assert_eq!(
            status_for(
                &task(Status::Done, None),
                false,
                Some(PrState::Draft),
                &on_pr
            ),
            Some("Done")
        );
        assert_eq!(
            status_for(&task(Status::Pending, None), true, None, &c),
            None
        );
    }
}
