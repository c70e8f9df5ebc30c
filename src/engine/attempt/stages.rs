//! The stages of an attempt before delivery, each ending the attempt (`Err(outcome)`) or handing
//! the next stage what it needs: the brief (guards before anything is spent), the start in the
//! queue, an unrecorded landing, the worktree, the agent's rounds with their checks, the files
//! that may not land.

use super::helpers::{fail, note_refused_writes, record_verification};
use super::{AgentExecutor, Ctx, Step, plan_instructions};
use crate::agent::{self, PromptInput, Repair, Runner, build_prompt};
use crate::engine::control::AttemptControl;
use crate::engine::delivery::delivery_json;
use crate::engine::executor::AttemptOutcome;
use crate::engine::sessions::SessionState;
use crate::engine::verify::run_checks;
use crate::store::{Park, StoreError};
use crate::workspace::{Delivery, Snapshot, Worktree};
use serde_json::json;
use std::time::{Duration, Instant};

type Staged<T> = Result<T, AttemptOutcome>;

/// What the agent is asked and what is checked after it: known before anything is spent.
pub(super) struct Brief {
    runner: Runner,
    instructions: Vec<String>,
    feedback: Option<String>,
    prompt: String,
    checks: Vec<crate::domain::VerificationCommand>,
}

impl AgentExecutor {
    /// The agent, the checks and the prompt, with the guards over them: an unknown agent, a
    /// check that cannot run or a refused prompt or command ends the attempt before it starts.
    pub(super) async fn brief(&self, cx: &mut Ctx<'_>) -> Staged<Brief> {
        let Some(runner) = self.cfg.agents.get(&cx.agent_name).cloned() else {
            return Err(fail(
                cx,
                "unknown_agent",
                false,
                format!(
                    "task names agent {:?}, which is not configured; add [agents.{}] to whilly.toml or use one of: {}",
                    cx.agent_name,
                    cx.agent_name,
                    self.cfg
                        .agents
                        .keys()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        };
        let instructions = plan_instructions(&cx.plan.spec);
        let task_checks = crate::engine::checks::task_checks(
            cx.task,
            &cx.plan.spec,
            self.workspaces.repo_root(),
            self.cfg.checks,
            &crate::engine::checks::on_path,
        );
        // A check that cannot run cannot pass: fail before the agent spends anything.
        if !task_checks.missing.is_empty() {
            let missing: Vec<_> = task_checks
                .missing
                .iter()
                .map(|m| (cx.task.id.clone(), m.clone()))
                .collect();
            return Err(fail(
                cx,
                "check_unavailable",
                false,
                crate::engine::checks::describe_missing(&missing).join("; "),
            ));
        }
        let checks = task_checks.checks;
        let feedback = self.operator_feedback(cx).await;
        let prompt = {
            let mut input = PromptInput::new(&cx.claimed.task.plan_id, cx.task);
            input.plan_instructions = &instructions;
            input.operator_feedback = feedback.as_deref();
            build_prompt(&input)
        };
        if let Err(reason) = self.cfg.guards.check_before_run(cx.task, &prompt) {
            return Err(fail(cx, reason.code(), false, reason.to_string()));
        }
        for c in &checks {
            if let Err(reason) = agent::guards::check_command(&c.command) {
                return Err(fail(cx, reason.code(), false, reason.to_string()));
            }
        }
        Ok(Brief {
            runner,
            instructions,
            feedback,
            prompt,
            checks,
        })
    }

    /// Marks the attempt started in the queue (with the database's deadline) and tells the
    /// tracker; the attempt's own deadline, if it has one.
    pub(super) async fn begin(&self, cx: &mut Ctx<'_>) -> Staged<Option<Instant>> {
        let deadline = cx
            .task
            .timeout_secs
            .map(Duration::from_secs)
            .or(self.cfg.default_task_timeout);
        // The database deadline is the backstop for a worker that stopped watching its task; it
        // lies past our own timer (plus the time to stop the agent) so the reaper never takes a
        // task this process is still ending.
        let db_deadline = deadline.map(|d| d + Duration::from_secs(30));
        let start = || self.store.start(cx.claimed.lease, db_deadline);
        match crate::engine::outage::retry_transient(6, start).await {
            Ok(()) => {}
            Err(StoreError::Stale { .. }) => return Err(AttemptOutcome::Abandoned),
            // Nothing was spent: give the task back without counting the attempt.
            Err(e) if e.is_transient() => {
                return Err(AttemptOutcome::Released {
                    cost: cx.spent,
                    reason: "store_error".into(),
                });
            }
            Err(e) => return Err(fail(cx, "store_error", true, e.to_string())),
        }
        let deadline_at = deadline.map(|d| Instant::now() + d);
        if let Some(p) = &self.cfg.publisher
            && crate::forge::intake::source_of(cx.task).is_some()
        {
            let facts = crate::engine::remote_delivery::run_facts(
                &cx.claimed.task.plan_id,
                &cx.claimed.task,
                &cx.evidence(),
                "",
            );
            p.started(
                &cx.claimed.task.plan_id,
                cx.task,
                cx.claimed.task.worker_id.as_deref().unwrap_or_default(),
                &facts,
            )
            .await;
        }
        Ok(deadline_at)
    }

    /// An earlier attempt may have landed this task's work and lost its lease (or the store)
    /// before the queue recorded it: then the task is finished, and nothing runs again.
    pub(super) async fn finish_if_landed(&self, cx: &mut Ctx<'_>) -> Staged<()> {
        let landed = {
            let ws = self.workspaces.clone();
            let fence = self.fence(cx);
            let (plan_id, task_id) = (cx.claimed.task.plan_id.clone(), cx.task.id.clone());
            tokio::task::spawn_blocking(move || ws.unrecorded_landing(&plan_id, &task_id, &fence))
                .await
        };
        match landed {
            Ok(Ok(None)) => Ok(()),
            Ok(Ok(Some(l))) => {
                tracing::warn!(
                    task = %cx.task.id,
                    commit = %l.commit,
                    "the task's work already landed (attempt at epoch {}) but was never recorded; finishing it without running again",
                    l.epoch
                );
                let d = Delivery::AlreadyLanded {
                    base_branch: l.base_branch,
                    commit: l.commit,
                    epoch: l.epoch,
                };
                cx.evidence.insert("delivery".into(), delivery_json(&d));
                Err(AttemptOutcome::Done {
                    cost: cx.spent,
                    evidence: cx.evidence(),
                })
            }
            Ok(Err(e)) => Err(self.workspace_failed(cx, e).await),
            Err(e) => Err(fail(cx, "workspace_error", true, e.to_string())),
        }
    }

    /// The task's worktree, from the base branch as it is now, so a dependent task sees the
    /// merged work of the tasks it depends on; the run's starting commit is the fallback (a
    /// detached HEAD, say). Where the work goes to review (delivery `branch` or `pr`), a
    /// dependency delivered but not merged is where the task starts instead (stacked: see
    /// [`crate::engine::stack`]); in merge mode never, as landing would carry the dependency's
    /// unreviewed work onto the base with it.
    pub(super) async fn worktree(&self, cx: &mut Ctx<'_>) -> Staged<Worktree> {
        let ws = self.workspaces.clone();
        let (plan_id, task_id, base) = (
            cx.claimed.task.plan_id.clone(),
            cx.task.id.clone(),
            self.cfg.base_commit.clone(),
        );
        let stacks = self.cfg.remote.kind_for(cx.task)
            != crate::engine::remote_delivery::DeliveryKind::Merge
            && !cx.task.dependencies.is_empty();
        let delivered = if stacks {
            match crate::engine::stack::delivered_deps(&*self.store, &plan_id, cx.task).await {
                Ok(d) => d,
                Err(e) => return Err(fail(cx, "workspace_error", true, e.to_string())),
            }
        } else {
            Vec::new()
        };
        let deps: Vec<crate::workspace::DeliveredDep> =
            delivered.iter().map(|d| d.dep.clone()).collect();
        let (remote, auth) = (self.cfg.remote.remote.clone(), self.cfg.remote.auth.clone());
        let prepare = move || {
            let base = ws.base_commit().unwrap_or(base);
            let start = ws.stack_start(&base, &deps, &remote, &auth)?;
            ws.prepare(&plan_id, &task_id, &start.commit)
                .map(|wt| (wt, start.stacked_on))
        };
        let (wt, stacked_on) = match tokio::task::spawn_blocking(prepare).await {
            Ok(Ok(prepared)) => prepared,
            Ok(Err(e)) => return Err(self.workspace_failed(cx, e).await),
            Err(e) => return Err(fail(cx, "workspace_error", true, e.to_string())),
        };
        cx.evidence.insert("worktree".into(), json!(wt.path));
        cx.evidence.insert("branch".into(), json!(wt.branch));
        if !stacked_on.is_empty() {
            cx.evidence.insert(
                "stacked_on".into(),
                crate::engine::stack::evidence(&delivered, &stacked_on),
            );
        }
        Ok(wt)
    }

    /// The agent's rounds: run it (or wait for the human), take what it left, run the checks;
    /// a failed required check starts a repair round while rounds remain. What the last round
    /// left, once every check passed.
    pub(super) async fn work_until_verified(
        &self,
        cx: &mut Ctx<'_>,
        brief: &Brief,
        wt: &Worktree,
        ctl: &mut AttemptControl,
        deadline_at: Option<Instant>,
    ) -> Staged<Option<Snapshot>> {
        let repair_max = brief
            .checks
            .iter()
            .filter(|c| c.required)
            .map(|c| c.repair_max_attempts)
            .max()
            .unwrap_or(0);
        let mut repair: Option<Repair> = None;
        // What the last round's failed check was, for a human whose approved answer bounced.
        let mut bounced: Option<String> = None;
        let mut round = 0u32;
        loop {
            let prompt = match &repair {
                Some(r) => {
                    let mut input = PromptInput::new(&cx.claimed.task.plan_id, cx.task);
                    input.plan_instructions = &brief.instructions;
                    input.operator_feedback = brief.feedback.as_deref();
                    input.repair = Some(r);
                    build_prompt(&input)
                }
                None => brief.prompt.clone(),
            };
            let step = match &brief.runner {
                Runner::Handoff => {
                    self.handoff(cx, wt, &prompt, bounced.take(), ctl, deadline_at)
                        .await
                }
                Runner::Process(backend) => {
                    self.agent_round(cx, backend.as_ref(), wt, &prompt, round, ctl, deadline_at)
                        .await
                }
            };
            if self.cfg.sandbox.is_some() {
                note_refused_writes(cx, &wt.path);
            }
            if let Step::Outcome(o) = step {
                return Err(o);
            }
            let snap = self.what_was_left(cx, brief, wt).await?;
            self.sessions.update(cx.claimed.lease.task_pk, |s| {
                s.state = SessionState::Verifying
            });
            let mut check_env = self.cfg.verification_env.clone();
            if let Some(s) = &self.cfg.sandbox {
                let (policy, tmpdir) = s.policy(Some(&wt.path), "check", &check_env);
                check_env.push((crate::sandbox::ENV.to_string(), policy.to_env()));
                if let Some(t) = tmpdir {
                    check_env.push(("TMPDIR".into(), t.display().to_string()));
                }
            }
            let verification = run_checks(
                &brief.checks,
                &wt.path,
                &check_env,
                self.cfg.verification_timeout,
            )
            .await;
            record_verification(cx, round, &verification);
            if verification.passed() {
                return Ok(Some(snap));
            }
            if round >= repair_max {
                return Err(fail(
                    cx,
                    "verification_failed",
                    false,
                    verification.failure_report(),
                ));
            }
            round += 1;
            let first = verification.failures().first().map(|c| (*c).clone());
            bounced = first.as_ref().map(|c| {
                crate::engine::trail::CheckFailure::of(
                    &c.name,
                    c.exit_code.map(i64::from),
                    c.timed_out,
                    &c.output,
                    8,
                )
                .text("your answer was approved, but the ")
            });
            repair = first.map(|c| Repair {
                attempt: round + 1,
                command_name: c.name,
                command: c.command,
                exit_code: c.exit_code,
                output: c.output,
            });
        }
    }

    /// What the agent left, taken before any check can add to it: that is what lands. Files
    /// beyond the key files are said; an agent that changed nothing, with no check to show the
    /// work is there, fails.
    async fn what_was_left(
        &self,
        cx: &mut Ctx<'_>,
        brief: &Brief,
        wt: &Worktree,
    ) -> Staged<Snapshot> {
        let snap = {
            let (ws, w) = (self.workspaces.clone(), wt.clone());
            match tokio::task::spawn_blocking(move || ws.snapshot(&w)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return Err(self.workspace_failed(cx, e).await),
                Err(e) => return Err(fail(cx, "workspace_error", true, e.to_string())),
            }
        };
        cx.evidence
            .insert("no_changes".into(), json!(!snap.changed));
        // Key files are advisory: what the agent wrote beyond them lands too, but is said.
        let outside = if cx.task.key_files.is_empty() {
            Vec::new()
        } else {
            crate::domain::checks::outside_key_files(&snap.files, &cx.task.key_files)
        };
        if !outside.is_empty() {
            tracing::info!(
                task = %cx.task.id,
                "the agent changed files outside its key_files: {}",
                outside.join(", ")
            );
        }
        cx.evidence
            .insert("outside_key_files".into(), json!(outside));
        // A human may rightly change nothing (the work was elsewhere); an agent may not.
        if !snap.changed && brief.checks.is_empty() && !brief.runner.is_handoff() {
            return Err(fail(
                cx,
                "no_changes",
                false,
                "the agent printed the completion marker but changed nothing, and the task has no checks that could show the work is there: add verification_commands or test_steps that are commands".into(),
            ));
        }
        Ok(snap)
    }

    /// Nothing is committed that holds a secret or is past the size limit: the task waits for
    /// the operator, its worktree kept, the files named (never a secret's value).
    pub(super) async fn refuse_unsafe_files(
        &self,
        cx: &mut Ctx<'_>,
        wt: &Worktree,
        snap: &Snapshot,
    ) -> Staged<()> {
        let (ws, w, s, limits) = (
            self.workspaces.clone(),
            wt.clone(),
            snap.clone(),
            self.cfg.landing,
        );
        let found = match tokio::task::spawn_blocking(move || ws.unsafe_files(&w, &s, limits)).await
        {
            Ok(Ok(found)) => found,
            Ok(Err(e)) => return Err(self.workspace_failed(cx, e).await),
            Err(e) => return Err(fail(cx, "workspace_error", true, e.to_string())),
        };
        if found.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = found.iter().map(|u| u.describe()).collect();
        tracing::warn!(task = %cx.task.id, "not committed: {}", lines.join("; "));
        cx.evidence.insert("unsafe_files".into(), json!(found));
        cx.evidence.insert(
            "detail".into(),
            json!(format!(
                "nothing was committed: {}; the work is in {}: fix it there and send the task back (b), or reject it (x)",
                lines.join("; "),
                wt.path.display()
            )),
        );
        Err(AttemptOutcome::Parked {
            cost: cx.spent,
            park: Park::HumanLoop,
            reason: super::UNSAFE_FILES.into(),
            evidence: cx.evidence(),
        })
    }
}
