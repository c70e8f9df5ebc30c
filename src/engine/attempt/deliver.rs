//! The end of an attempt: the work landed on the base branch, or pushed and its pull request
//! opened; what the forge is told when it failed; the outcomes of a workspace or spawn refusal.

use super::*;

impl AgentExecutor {
    /// Commit on the task branch (the agent's work as `snapshot` took it, before the checks),
    /// merge back per config, clean the worktree. Work that could not land parks the task as
    /// ready to merge, its worktree and branch kept (see [`crate::engine::landing`]).
    pub(super) async fn deliver(
        &self,
        cx: &mut Ctx<'_>,
        wt: Worktree,
        snapshot: Option<Snapshot>,
    ) -> AttemptOutcome {
        let ws = self.workspaces.clone();
        let message = commit_message(
            &cx.task.id,
            &cx.task.description,
            &cx.claimed.task.plan_id,
            cx.claimed.task.attempts.max(1) as u32,
        );
        let kind = self.cfg.remote.kind_for(cx.task);
        let mode = if kind == DeliveryKind::Merge {
            self.cfg.merge
        } else {
            // Committed on the task branch only; the push below takes it to the remote.
            MergeMode::None
        };
        let fence = self.fence(cx);
        let joined = tokio::task::spawn_blocking(move || {
            let (commit, delivery) =
                ws.commit_and_deliver(&wt, &message, snapshot.as_ref(), mode, &fence)?;
            if delivery == Delivery::LeaseLost || crate::engine::delivery::did_not_land(&delivery) {
                // The task is someone else's now, and so is its worktree; or the work waits
                // there to be merged.
                return Ok((commit, delivery));
            }
            let keep_branch = !matches!(
                delivery,
                Delivery::FastForwarded { .. } | Delivery::Merged { .. } | Delivery::NothingToDo
            );
            ws.release(&wt, !keep_branch)?;
            Ok::<_, crate::workspace::WorkspaceError>((commit, delivery))
        })
        .await;
        match joined {
            Ok(Ok((_, Delivery::LeaseLost))) => {
                tracing::warn!(task = %cx.task.id, "lease lost before delivery; nothing delivered");
                AttemptOutcome::Abandoned
            }
            Ok(Ok((commit, delivery))) if crate::engine::delivery::did_not_land(&delivery) => {
                let detail = crate::engine::delivery::unlanded_detail(&cx.task.id, &delivery);
                tracing::warn!(task = %cx.task.id, "the work did not land: {detail}");
                cx.evidence.insert("commit".into(), json!(commit));
                cx.evidence
                    .insert("delivery".into(), delivery_json(&delivery));
                cx.evidence.insert("detail".into(), json!(detail));
                AttemptOutcome::Parked {
                    cost: cx.spent,
                    park: Park::HumanLoop,
                    reason: crate::engine::delivery::READY_TO_MERGE.into(),
                    evidence: cx.evidence(),
                }
            }
            Ok(Ok((commit, Delivery::LeftForReview { branch }))) if kind != DeliveryKind::Merge => {
                cx.evidence.insert("commit".into(), json!(commit));
                cx.evidence.insert(
                    "delivery".into(),
                    delivery_json(&Delivery::LeftForReview {
                        branch: branch.clone(),
                    }),
                );
                self.publish(cx, kind, &branch).await
            }
            Ok(Ok((commit, delivery))) => {
                crate::failpoint::crash_if("after_delivery");
                cx.evidence.insert("commit".into(), json!(commit));
                cx.evidence
                    .insert("delivery".into(), delivery_json(&delivery));
                AttemptOutcome::Done {
                    cost: cx.spent,
                    evidence: cx.evidence(),
                }
            }
            Ok(Err(e)) => fail(cx, "delivery_failed", e.is_transient(), e.to_string()),
            Err(e) => fail(cx, "delivery_failed", true, e.to_string()),
        }
    }

    /// Pushes the committed task branch and, for a pull request, opens or updates it. Done
    /// only when the work is on the remote (and in a pull request when one is wanted); else
    /// the task waits as [`NOT_PUBLISHED`] with its branch kept, for `whilly forge --compose`.
    pub(super) async fn publish(
        &self,
        cx: &mut Ctx<'_>,
        kind: DeliveryKind,
        branch: &str,
    ) -> AttemptOutcome {
        cx.evidence.insert(
            "duration_ms".into(),
            json!(cx.began.elapsed().as_millis() as u64),
        );
        let plan_id = cx.claimed.task.plan_id.clone();
        let not_published = |cx: &mut Ctx<'_>, detail: String| {
            let detail = agent::redact_secrets(&detail);
            tracing::warn!(task = %cx.task.id, "the work was not published: {detail}");
            cx.evidence.insert("detail".into(), json!(detail));
            AttemptOutcome::Parked {
                cost: cx.spent,
                park: Park::HumanLoop,
                reason: NOT_PUBLISHED.into(),
                evidence: cx.evidence(),
            }
        };
        // The lease is proved under the push's lock, just before it; a stale attempt pushes
        // nothing (see `workspace::push`).
        let fence = std::sync::Arc::new(self.fence(cx));
        let pushed = match crate::engine::remote_delivery::push(
            &self.workspaces,
            &self.cfg.remote,
            branch,
            &plan_id,
            &cx.task.id,
            fence,
        )
        .await
        {
            Ok(p) => p,
            Err(e @ crate::workspace::WorkspaceError::Superseded { .. }) => {
                tracing::warn!(task = %cx.task.id, "{e}");
                return AttemptOutcome::Abandoned;
            }
            Err(e) => {
                let detail = format!(
                    "the work is committed on {branch} but pushing it to {} failed: {e}; fix that, then `whilly forge --compose {}`",
                    self.cfg.remote.remote, cx.task.id
                );
                return not_published(cx, detail);
            }
        };
        cx.evidence.insert(
            "pushed".into(),
            json!({"remote": pushed.remote, "branch": pushed.branch, "commit": pushed.commit}),
        );
        if kind == DeliveryKind::Branch {
            return AttemptOutcome::Done {
                cost: cx.spent,
                evidence: cx.evidence(),
            };
        }
        let Some(publisher) = self.cfg.publisher.clone() else {
            let detail = format!(
                "the work is pushed as {} but no GitHub access is configured for its pull request: set WHILLY_GITHUB_TOKEN (or [github] token), then `whilly forge --compose {}`",
                pushed.branch, cx.task.id
            );
            return not_published(cx, detail);
        };
        let mut record = cx.claimed.task.clone();
        record.cost += cx.spent;
        let evidence = cx.evidence();
        let req = PublishRequest {
            plan_id: plan_id.clone(),
            task: cx.task.clone(),
            run: crate::engine::remote_delivery::run_facts(
                &plan_id,
                &record,
                &evidence,
                &pushed.branch,
            ),
            pushed,
            evidence,
            repo: crate::engine::remote_delivery::target_repo(&cx.plan.spec, cx.task),
        };
        match publisher.publish(&req).await {
            Ok(pr) => {
                cx.evidence.insert("pull_request".into(), pr.to_json());
                AttemptOutcome::Done {
                    cost: cx.spent,
                    evidence: cx.evidence(),
                }
            }
            Err(e) => {
                let detail = format!(
                    "the work is pushed as {} but its pull request could not be opened: {e}; `whilly forge --compose {}` tries again",
                    req.pushed.branch, cx.task.id
                );
                not_published(cx, detail)
            }
        }
    }

    /// Tells the issue a task came from that it failed for good (no retry follows).
    pub(super) async fn tell_forge_of_failure(
        &self,
        cx: &Ctx<'_>,
        outcome: &AttemptOutcome,
        began: Instant,
    ) {
        let Some(p) = &self.cfg.publisher else {
            return;
        };
        if crate::forge::intake::source_of(cx.task).is_none() {
            return;
        }
        let AttemptOutcome::Failed {
            reason,
            retry,
            evidence,
            ..
        } = outcome
        else {
            return;
        };
        let t = &cx.claimed.task;
        if *retry && t.attempts < t.max_attempts {
            return;
        }
        let mut facts = crate::engine::remote_delivery::run_facts(&t.plan_id, t, evidence, "");
        facts.duration_secs = Some(began.elapsed().as_secs());
        let branch = self
            .workspaces
            .find(&t.plan_id, &cx.task.id)
            .ok()
            .flatten()
            .map(|wt| wt.branch);
        let note = FailureNote {
            plan_id: t.plan_id.clone(),
            task: cx.task.clone(),
            reason: reason.clone(),
            detail: evidence["detail"].as_str().unwrap_or_default().to_string(),
            branch,
            run: facts,
        };
        p.failed(&note).await;
    }

    /// A workspace step failed: for lack of resources the task goes back as a refused spawn
    /// does; anything else fails the attempt (retried when transient).
    pub(super) async fn workspace_failed(
        &self,
        cx: &mut Ctx<'_>,
        e: crate::workspace::WorkspaceError,
    ) -> AttemptOutcome {
        if e.lack_of_resources() {
            return self.refused_for_resources(cx, e.to_string()).await;
        }
        fail(cx, "workspace_error", e.is_transient(), e.to_string())
    }

    /// The system refused the agent's spawn for lack of resources (descriptors, processes,
    /// memory): the task did nothing wrong, so it goes back without using an attempt, after a
    /// pause that grows with each refusal; past its own limit (see
    /// [`crate::domain::reap::resource_refusal_ends`]) it fails, so a task never loops forever.
    pub(super) async fn refused_for_resources(
        &self,
        cx: &mut Ctx<'_>,
        detail: String,
    ) -> AttemptOutcome {
        let filter = crate::store::EventFilter {
            plan_id: Some(cx.claimed.task.plan_id.clone()),
            task_id: Some(cx.task.id.clone()),
            ..Default::default()
        };
        let before = match self.store.events(&filter).await {
            Ok(events) => events
                .iter()
                .filter(|e| {
                    e.event_type == crate::store::event_types::TASK_RELEASED
                        && e.payload["reason"] == SPAWN_REFUSED
                })
                .count() as i64,
            Err(e) => {
                tracing::warn!(task = %cx.task.id, "counting earlier refused spawns: {e}");
                0
            }
        };
        let max_attempts = cx.claimed.task.max_attempts;
        if crate::domain::reap::resource_refusal_ends(before, max_attempts) {
            let detail = format!(
                "{detail}; the system refused to start the agent {} times: free file descriptors, processes or memory on this machine, then reset the task",
                before + 1
            );
            return fail(cx, "spawn_failed", false, detail);
        }
        tracing::warn!(
            task = %cx.task.id,
            "the system refused to start the agent ({detail}); the task goes back without using an attempt"
        );
        let pause = Duration::from_secs((before as u64 + 1).min(30));
        tokio::time::sleep(pause).await;
        AttemptOutcome::Released {
            cost: cx.spent,
            reason: SPAWN_REFUSED.into(),
        }
    }
}
