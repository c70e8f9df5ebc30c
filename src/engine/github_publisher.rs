//! The [`Publisher`] for GitHub: pull requests for pushed task branches, and the issue a task
//! came from kept in step — its labels moved (`ready → in-progress → in-review | failed`) and
//! one status comment, found again by its hidden marker and edited in place. Every call that
//! changes something on GitHub is an event in the audit trail, with its URL.

use super::remote_delivery::{FailureNote, PublishRequest, Published, Publisher};
use crate::forge::compose::{self, Progress, RunFacts};
use crate::forge::github::{GitHub, NewPull};
use crate::forge::intake::source_of;
use crate::forge::refs::RepoRef;
use crate::store::{Store, event_types as et};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::sync::Arc;

/// What the publisher was configured with.
#[derive(Debug, Clone)]
pub(crate) struct GitHubPublishing {
    /// Open pull requests as drafts.
    pub draft: bool,
    /// Mark the draft ready when every required check passed.
    pub ready_when_verified: bool,
    /// The branch PRs go into; `None`: the repository's default branch.
    pub base: Option<String>,
    /// The repository for tasks that do not come from an issue.
    pub repo: Option<RepoRef>,
    pub label_ready: String,
    pub label_in_progress: String,
    pub label_in_review: String,
    pub label_failed: String,
}

pub(crate) struct GitHubPublisher {
    client: GitHub,
    store: Arc<dyn Store>,
    cfg: GitHubPublishing,
}

impl GitHubPublisher {
    pub(crate) fn new(
        client: GitHub,
        store: Arc<dyn Store>,
        cfg: GitHubPublishing,
    ) -> GitHubPublisher {
        GitHubPublisher { client, store, cfg }
    }

    async fn event(&self, kind: &str, plan_id: &str, task_id: &str, payload: Value) {
        crate::store::record_event(&*self.store, kind, plan_id, Some(task_id), payload).await;
    }

    async fn call_failed(&self, plan_id: &str, task_id: &str, call: &str, error: &str) {
        tracing::warn!(task = task_id, "GitHub {call} failed: {error}");
        self.event(
            et::GITHUB_CALL_FAILED,
            plan_id,
            task_id,
            json!({"call": call, "error": error}),
        )
        .await;
    }

    /// Moves the issue to `to`: adds it, takes the other Whilly labels off.
    async fn move_labels(&self, plan_id: &str, task_id: &str, repo: &RepoRef, n: u64, to: &str) {
        let all = [
            &self.cfg.label_ready,
            &self.cfg.label_in_progress,
            &self.cfg.label_in_review,
            &self.cfg.label_failed,
        ];
        let current = match self.client.issue(repo, n).await {
            Ok(issue) => issue.labels,
            Err(e) => {
                self.call_failed(plan_id, task_id, "read issue labels", &e.to_string())
                    .await;
                return;
            }
        };
        let mut added = Vec::new();
        let mut removed = Vec::new();
        if !current.iter().any(|l| l == to) {
            match self.client.add_labels(repo, n, &[to]).await {
                Ok(_) => added.push(to.to_string()),
                Err(e) => {
                    self.call_failed(plan_id, task_id, "add label", &e.to_string())
                        .await
                }
            }
        }
        for label in all.iter().filter(|l| l.as_str() != to) {
            if current.iter().any(|c| c == *label) {
                match self.client.remove_label(repo, n, label).await {
                    Ok(()) => removed.push(label.to_string()),
                    Err(e) => {
                        self.call_failed(plan_id, task_id, "remove label", &e.to_string())
                            .await
                    }
                }
            }
        }
        if !added.is_empty() || !removed.is_empty() {
            self.event(
                et::GITHUB_LABEL_CHANGED,
                plan_id,
                task_id,
                json!({"issue": format!("{repo}#{n}"), "added": added, "removed": removed}),
            )
            .await;
        }
    }

    /// Writes the plan's one status comment on the issue: edits it when it exists.
    async fn status(&self, plan_id: &str, task_id: &str, repo: &RepoRef, n: u64, body: String) {
        let comments = match self.client.comments(repo, n).await {
            Ok(c) => c,
            Err(e) => {
                self.call_failed(plan_id, task_id, "read comments", &e.to_string())
                    .await;
                return;
            }
        };
        let existing = comments
            .iter()
            .find(|c| compose::is_status_comment(&c.body, plan_id));
        let written = match existing {
            Some(c) if c.body == body => return,
            Some(c) => self
                .client
                .update_comment(repo, c.id, &body)
                .await
                .map(|c| (c, false)),
            None => self
                .client
                .create_comment(repo, n, &body)
                .await
                .map(|c| (c, true)),
        };
        match written {
            Ok((c, created)) => {
                self.event(
                    et::GITHUB_COMMENT_UPDATED,
                    plan_id,
                    task_id,
                    json!({"issue": format!("{repo}#{n}"), "url": c.html_url, "created": created}),
                )
                .await
            }
            Err(e) => {
                self.call_failed(plan_id, task_id, "write status comment", &e.to_string())
                    .await
            }
        }
    }

    fn repo_for(&self, req: &PublishRequest) -> Option<RepoRef> {
        req.repo
            .clone()
            .or_else(|| source_of(&req.task).map(|(r, _, _)| r))
            .or_else(|| self.cfg.repo.clone())
    }
}

#[async_trait]
impl Publisher for GitHubPublisher {
    async fn started(
        &self,
        plan_id: &str,
        task: &crate::domain::TaskSpec,
        worker: &str,
        run: &RunFacts,
    ) {
        let Some((repo, n, _)) = source_of(task) else {
            return;
        };
        self.move_labels(
            plan_id,
            &task.id,
            &repo,
            n,
            &self.cfg.label_in_progress.clone(),
        )
        .await;
        let body = compose::status_comment(
            &task.id,
            &Progress::Started {
                worker: worker.to_string(),
            },
            run,
        );
        self.status(plan_id, &task.id, &repo, n, body).await;
    }

    async fn publish(&self, req: &PublishRequest) -> Result<Published, String> {
        let Some(repo) = self.repo_for(req) else {
            return Err(
                "no GitHub repository is known for this task: set [github] repo = \"OWNER/NAME\", or name it in the plan's repo_targets (repo_full_name) (the remote's URL does not name one)"
                    .into(),
            );
        };
        // A task stacked on one dependency's unmerged work goes on top of that branch.
        let base = match super::stack::pull_base(&req.evidence).or_else(|| self.cfg.base.clone()) {
            Some(b) => b,
            None => {
                self.client
                    .repo(&repo)
                    .await
                    .map_err(|e| e.to_string())?
                    .default_branch
            }
        };
        let issue = source_of(&req.task).map(|(_, n, _)| n);
        let title = compose::pr_title(&req.task);
        let body = compose::pr_body(&req.task, issue, &req.evidence, &req.run);
        let branch = req.pushed.branch.clone();
        let existing = self
            .client
            .find_pull(&repo, &repo.owner, &branch)
            .await
            .map_err(|e| e.to_string())?
            .filter(|p| p.is_open());
        let (pr, created) = match existing {
            Some(p) => (
                self.client
                    .update_pull(&repo, p.number, &title, &body)
                    .await
                    .map_err(|e| e.to_string())?,
                false,
            ),
            None => {
                let opened = self
                    .client
                    .create_pull(
                        &repo,
                        &NewPull {
                            title: title.clone(),
                            body: body.clone(),
                            head: branch.clone(),
                            base: base.clone(),
                            draft: self.cfg.draft,
                        },
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                if opened.created {
                    (opened.pull, true)
                } else {
                    // Opened meanwhile (another worker, or a lost answer): update that one.
                    let p = opened.pull;
                    (
                        self.client
                            .update_pull(&repo, p.number, &title, &body)
                            .await
                            .map_err(|e| e.to_string())?,
                        false,
                    )
                }
            }
        };
        let kind = if created {
            et::GITHUB_PR_OPENED
        } else {
            et::GITHUB_PR_UPDATED
        };
        self.event(
            kind,
            &req.plan_id,
            &req.task.id,
            json!({"url": pr.html_url, "number": pr.number, "draft": pr.draft, "branch": branch, "base": base, "repo": repo.to_string()}),
        )
        .await;
        let mut draft = pr.draft;
        let verified = compose::verified(&req.evidence);
        if draft && self.cfg.ready_when_verified && verified {
            match self.client.mark_ready(&pr.node_id).await {
                Ok(()) => {
                    draft = false;
                    self.event(
                        et::GITHUB_PR_READY,
                        &req.plan_id,
                        &req.task.id,
                        json!({"url": pr.html_url, "number": pr.number, "repo": repo.to_string()}),
                    )
                    .await;
                }
                Err(e) => {
                    self.call_failed(&req.plan_id, &req.task.id, "mark ready", &e.to_string())
                        .await
                }
            }
        }
        if let Some(n) = issue {
            self.move_labels(
                &req.plan_id,
                &req.task.id,
                &repo,
                n,
                &self.cfg.label_in_review.clone(),
            )
            .await;
            let body = compose::status_comment(
                &req.task.id,
                &Progress::InReview {
                    pr_url: pr.html_url.clone(),
                    draft,
                    verified,
                },
                &req.run,
            );
            self.status(&req.plan_id, &req.task.id, &repo, n, body)
                .await;
        }
        Ok(Published {
            number: pr.number,
            url: pr.html_url,
            draft,
            created,
        })
    }

    async fn failed(&self, note: &FailureNote) {
        let Some((repo, n, _)) = source_of(&note.task) else {
            return;
        };
        self.move_labels(
            &note.plan_id,
            &note.task.id,
            &repo,
            n,
            &self.cfg.label_failed.clone(),
        )
        .await;
        let body = compose::status_comment(
            &note.task.id,
            &Progress::Failed {
                reason: note.reason.clone(),
                detail: note.detail.clone(),
                branch: note.branch.clone(),
            },
            &note.run,
        );
        self.status(&note.plan_id, &note.task.id, &repo, n, body)
            .await;
    }
}
