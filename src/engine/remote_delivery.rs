//! Delivery to a remote: the task branch pushed, and (mode `pr`) a pull request opened or
//! updated for it, with the issue it came from kept in step. One implementation for an
//! attempt's delivery and for `whilly forge --compose TASK`, which finishes a task whose push or
//! pull request failed earlier (the work is never lost: the branch stays, the task waits in
//! HUMAN_LOOP with [`NOT_PUBLISHED`]).

use crate::domain::TaskSpec;
use crate::forge::compose::RunFacts;
use crate::forge::refs::RepoRef;
use crate::store::TaskRecord;
use crate::workspace::{PushAuth, Pushed, WorkspaceError, Workspaces};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// The reason a task waits with when its work is committed on its branch but the push or the
/// pull request failed.
pub(crate) const NOT_PUBLISHED: &str = "not_published";

/// Whether a task waits for its work to be published.
pub(crate) fn waits_to_publish(t: &TaskRecord) -> bool {
    t.status == crate::domain::Status::HumanLoop && t.reason.as_deref() == Some(NOT_PUBLISHED)
}

/// How work leaves the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeliveryKind {
    /// Into the base branch of this clone.
    Merge,
    /// Pushed as a branch.
    Branch,
    /// Pushed, and a pull request opened for it.
    PullRequest,
}

/// Settings of remote delivery.
#[derive(Debug, Clone)]
pub(crate) struct RemoteDelivery {
    /// `None`: merge for local plans, pull requests for plans made from GitHub issues.
    pub mode: Option<DeliveryKind>,
    pub remote: String,
    pub auth: PushAuth,
}

impl Default for RemoteDelivery {
    fn default() -> Self {
        RemoteDelivery {
            mode: None,
            remote: "origin".into(),
            auth: PushAuth::default(),
        }
    }
}

impl RemoteDelivery {
    /// The delivery a task gets.
    pub(crate) fn kind_for(&self, task: &TaskSpec) -> DeliveryKind {
        self.mode.unwrap_or_else(|| {
            if crate::forge::intake::source_of(task).is_some() {
                DeliveryKind::PullRequest
            } else if crate::forge::jira::intake::source_of(task).is_some()
                && self.auth.token.is_some()
            {
                // A Jira issue's work goes to review on GitHub when there is GitHub access.
                DeliveryKind::PullRequest
            } else {
                DeliveryKind::Merge
            }
        })
    }
}

/// What the pull request step needs.
#[derive(Debug, Clone)]
pub(crate) struct PublishRequest {
    pub plan_id: String,
    pub task: TaskSpec,
    pub pushed: Pushed,
    /// The attempt's evidence (checks, usage, log).
    pub evidence: Value,
    pub run: RunFacts,
    /// The repository on the forge, when the caller knows it (else the publisher finds it).
    pub repo: Option<RepoRef>,
}

/// A pull request as the forge answered.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Published {
    pub number: u64,
    pub url: String,
    pub draft: bool,
    /// A new pull request (false: an existing one was updated).
    pub created: bool,
}

impl Published {
    pub(crate) fn to_json(&self) -> Value {
        json!({"number": self.number, "url": self.url, "draft": self.draft, "created": self.created})
    }
}

/// Where a failed task's issue is told about it.
#[derive(Debug, Clone)]
pub(crate) struct FailureNote {
    pub plan_id: String,
    pub task: TaskSpec,
    pub reason: String,
    pub detail: String,
    pub branch: Option<String>,
    pub run: RunFacts,
}

/// The forge side of delivery: pull requests, labels and status comments. Errors are text for
/// the task's detail; the caller keeps the work either way.
#[async_trait]
pub(crate) trait Publisher: Send + Sync {
    /// An attempt on a task from an issue started: label it in progress, say so once.
    async fn started(&self, plan_id: &str, task: &TaskSpec, worker: &str, run: &RunFacts);
    /// Opens (or updates) the pull request of a pushed branch and moves the issue to review.
    async fn publish(&self, req: &PublishRequest) -> Result<Published, String>;
    /// The task failed for good: label the issue failed and say what and where the work is.
    async fn failed(&self, note: &FailureNote);
}

/// The GitHub repository a plan's `repo_targets` names for `task`: its own target, else the
/// plan's only one; `None` when there is none, or it is on another provider.
pub(crate) fn target_repo(plan: &crate::domain::PlanSpec, task: &TaskSpec) -> Option<RepoRef> {
    let target = match &task.repo_target_id {
        Some(id) => plan.repo_targets.iter().find(|t| &t.id == id)?,
        None => match plan.repo_targets.as_slice() {
            [one] => one,
            _ => return None,
        },
    };
    if target
        .provider
        .as_deref()
        .is_some_and(|p| !p.eq_ignore_ascii_case("github"))
    {
        return None;
    }
    target.repo.as_deref()?.trim().parse().ok()
}

/// Pushes the branch, off the async runtime (git2 blocks).
pub(crate) async fn push(
    ws: &Arc<Workspaces>,
    delivery: &RemoteDelivery,
    branch: &str,
    plan_id: &str,
    task_id: &str,
    fence: Arc<dyn crate::workspace::DeliveryFence>,
) -> Result<Pushed, WorkspaceError> {
    let (ws, remote, branch, plan, task, auth) = (
        ws.clone(),
        delivery.remote.clone(),
        branch.to_string(),
        plan_id.to_string(),
        task_id.to_string(),
        delivery.auth.clone(),
    );
    tokio::task::spawn_blocking(move || {
        ws.push_branch(&remote, &branch, &plan, &task, fence.as_ref(), &auth)
    })
    .await
    .map_err(|e| WorkspaceError::Git {
        context: "pushing stopped unexpectedly".into(),
        source: git2::Error::from_str(&e.to_string()),
    })?
}

/// Run facts from an attempt's evidence, for the PR body and the status comment.
pub(crate) fn run_facts(plan_id: &str, t: &TaskRecord, evidence: &Value, branch: &str) -> RunFacts {
    let usage = &evidence["usage"];
    RunFacts {
        plan_id: plan_id.to_string(),
        agent: evidence["agent"].as_str().unwrap_or("agent").to_string(),
        model: evidence["model"].as_str().map(str::to_string),
        attempts: t.attempts,
        input_tokens: usage["input_tokens"].as_u64().unwrap_or(0),
        output_tokens: usage["output_tokens"].as_u64().unwrap_or(0),
        cost: t.cost.to_string(),
        duration_secs: evidence["duration_ms"].as_u64().map(|ms| ms / 1000),
        log: evidence["log"].as_str().map(str::to_string),
        branch: branch.to_string(),
        commit: evidence["commit"].as_str().map(str::to_string),
    }
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum ComposeError {
    #[error("{task} is not waiting to be published (it is {status}{})", reason.as_deref().map(|r| format!(", {r}")).unwrap_or_default())]
    NotWaiting {
        task: String,
        status: crate::domain::Status,
        reason: Option<String>,
    },
    #[error("{task}: pushing {branch} failed: {detail}")]
    Push {
        task: String,
        branch: String,
        detail: String,
    },
    #[error("{task}: the pull request could not be opened: {detail}")]
    Publish { task: String, detail: String },
    #[error("{task}: no GitHub access is configured: set WHILLY_GITHUB_TOKEN (or [github] token)")]
    NoForge { task: String },
    #[error("{0}")]
    Store(#[from] crate::store::StoreError),
}

/// What `whilly forge --compose` did.
#[derive(Debug, Clone)]
pub(crate) struct Composed {
    pub pushed: Pushed,
    pub pull: Option<Published>,
}

/// Finishes a task that waits as [`NOT_PUBLISHED`]: pushes its branch (again: a push that
/// reached the remote before is not repeated), opens or updates its pull request, and approves
/// it DONE with the publication as evidence. Nothing changes when a step fails.
pub(crate) async fn compose_parked(
    store: &Arc<dyn crate::store::Store>,
    ws: &Arc<Workspaces>,
    delivery: &RemoteDelivery,
    publisher: Option<&Arc<dyn Publisher>>,
    plan_id: &str,
    task_id: &str,
) -> Result<Composed, ComposeError> {
    use crate::store::{EventFilter, event_types as et};
    let task = store.get_task(plan_id, task_id).await?;
    if !waits_to_publish(&task) {
        return Err(ComposeError::NotWaiting {
            task: task.id.clone(),
            status: task.status,
            reason: task.reason.clone(),
        });
    }
    let events = store
        .events(&EventFilter {
            plan_id: Some(plan_id.to_string()),
            task_id: Some(task_id.to_string()),
            ..Default::default()
        })
        .await?;
    let evidence = events
        .iter()
        .rev()
        .find(|e| e.event_type == et::TASK_HUMAN_LOOP)
        .map(|e| e.payload.clone())
        .unwrap_or(Value::Null);
    let branch = crate::workspace::branch_name(plan_id, task_id);
    let plan = store.get_plan(plan_id).await?;
    // Pushed only while the task still waits to be published as its attempt left it.
    let fence = Arc::new(super::fence::ParkedFence::waiting_as(
        store.clone(),
        &plan,
        &task,
        NOT_PUBLISHED,
    ));
    let pushed = push(ws, delivery, &branch, plan_id, task_id, fence)
        .await
        .map_err(|e| ComposeError::Push {
            task: task_id.to_string(),
            branch: branch.clone(),
            detail: e.to_string(),
        })?;
    let pull = if delivery.kind_for(&task.spec) == DeliveryKind::PullRequest {
        let Some(p) = publisher else {
            return Err(ComposeError::NoForge {
                task: task_id.to_string(),
            });
        };
        let req = PublishRequest {
            plan_id: plan_id.to_string(),
            task: task.spec.clone(),
            run: run_facts(plan_id, &task, &evidence, &pushed.branch),
            pushed: pushed.clone(),
            evidence: evidence.clone(),
            repo: target_repo(&plan.spec, &task.spec),
        };
        Some(
            p.publish(&req)
                .await
                .map_err(|detail| ComposeError::Publish {
                    task: task_id.to_string(),
                    detail,
                })?,
        )
    } else {
        None
    };
    super::decision::record(
        store.as_ref(),
        plan_id,
        task_id,
        "compose",
        "",
        NOT_PUBLISHED,
        super::decision::Source::Cli,
    )
    .await?;
    let payload = json!({
        "by": "cli",
        "pushed": {"remote": pushed.remote, "branch": pushed.branch, "commit": pushed.commit},
        "pull_request": pull.as_ref().map(Published::to_json),
    });
    store.approve_task(plan_id, task_id, payload).await?;
    Ok(Composed { pushed, pull })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plans_repo_target_names_the_pull_requests_repository() {
        let target = |id: &str, provider: &str, repo: &str| crate::domain::RepoTarget {
            id: id.into(),
            provider: Some(provider.into()),
            repo: Some(repo.into()),
            clone_url: None,
            default_branch: None,
            extra: Default::default(),
        };
        let plan = crate::domain::PlanSpec {
            repo_targets: vec![
                target("api", "github", "octo/api"),
                target("lab", "gitlab", "octo/lab"),
            ],
            ..Default::default()
        };
        let mut t = TaskSpec::default();
        // Two targets and none chosen: not a guess.
        assert_eq!(target_repo(&plan, &t), None);
        t.repo_target_id = Some("api".into());
        assert_eq!(target_repo(&plan, &t), Some(RepoRef::new("octo", "api")));
        t.repo_target_id = Some("lab".into());
        assert_eq!(target_repo(&plan, &t), None, "not a GitHub repository");
        let mut one = plan.clone();
        one.repo_targets.truncate(1);
        t.repo_target_id = None;
        assert_eq!(target_repo(&one, &t), Some(RepoRef::new("octo", "api")));
    }

    #[test]
    fn issues_default_to_pull_requests_and_local_plans_to_merge() {
        let d = RemoteDelivery::default();
        let local = TaskSpec::default();
        let mut from_issue = TaskSpec::default();
        from_issue.extra.insert(
            "source".into(),
            json!({"type": "github", "repo": "o/r", "number": 3, "url": ""}),
        );
        assert_eq!(d.kind_for(&local), DeliveryKind::Merge);
        assert_eq!(d.kind_for(&from_issue), DeliveryKind::PullRequest);
        let d = RemoteDelivery {
            mode: Some(DeliveryKind::Branch),
            ..RemoteDelivery::default()
        };
        assert_eq!(d.kind_for(&from_issue), DeliveryKind::Branch);
    }
}
