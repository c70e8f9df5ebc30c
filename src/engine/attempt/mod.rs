//! The real executor: one attempt of one task, from guards to delivery.
//!
//! guards → start (deadline) → worktree → agent in a PTY (or a human, through
//! [`super::handoff_runner`]) → result and cost
//! → verification → repair rounds → commit → merge back, or push and open a pull request
//! ([`super::publish`]) → outcome. The loop in `worker` settles
//! the outcome in the store; this file never writes task state itself.

use super::control::{AttemptControl, StopLevel, StopReason};
use super::delivery::delivery_json;
use super::executor::{AttemptOutcome, Executor};
use super::fence::StoreFence;
use super::handoff_runner::{HandoffEnd, HandoffRunner};
use super::live_spend::MeteredView;
use super::publish::{DeliveryKind, FailureNote, NOT_PUBLISHED, PublishRequest};
use super::sessions::{SessionInfo, SessionRegistry, SessionState};
use super::verify::{Verification, run_checks};
use crate::agent::{
    self, Backend, CostSource, ErrorClass, Guards, HandoffDir, HandoffStatus, Invocation,
    PriceTable, PromptInput, Repair, Runner, build_prompt,
};
use crate::domain::dispatch::agent_of;
use crate::domain::{PlanSpec, TaskSpec, Usd, safe_id};
use crate::pty::{PtySession, SpawnSpec, TermSize};
use crate::store::{Claimed, Park, PlanRecord, Store, StoreError};
use crate::workspace::{Delivery, MergeMode, Snapshot, Workspaces, Worktree, commit_message};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The agent's final result is at the end of its output; only this much of the log is read back.
const RESULT_TAIL_BYTES: u64 = 4 * 1024 * 1024;
/// Where a rate-limited agent's reset time is looked for: the end of its output.
const RATE_LIMIT_TAIL_BYTES: usize = 16 * 1024;

mod agent_round;
mod config;
mod deliver;
mod handoff;
mod helpers;

use helpers::{fail, fail_owned, note_refused_writes, read_tail, record_verification, tail_chars};

pub use crate::sandbox::SandboxSettings;
pub use config::ExecutorConfig;

/// The reason a task goes back with when the system refused its agent's spawn for lack of
/// resources.
pub const SPAWN_REFUSED: &str = "spawn_refused";

/// The reason a task waits with when a changed file may not land (a secret, a huge file).
pub const UNSAFE_FILES: &str = "unsafe_files";

pub struct AgentExecutor {
    cfg: ExecutorConfig,
    store: Arc<dyn Store>,
    workspaces: Arc<Workspaces>,
    sessions: SessionRegistry,
}

impl AgentExecutor {
    pub fn new(
        cfg: ExecutorConfig,
        store: Arc<dyn Store>,
        workspaces: Arc<Workspaces>,
        sessions: SessionRegistry,
    ) -> Self {
        AgentExecutor {
            cfg,
            store,
            workspaces,
            sessions,
        }
    }
}

/// The plan's `agent_instructions` (v3: lists under any key), flattened.
pub fn plan_instructions(plan: &PlanSpec) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(Value::Object(groups)) = plan.extra.get("agent_instructions") {
        for (_, v) in groups {
            if let Value::Array(items) = v {
                out.extend(items.iter().filter_map(|i| i.as_str().map(str::to_string)));
            }
        }
    }
    out
}

struct Ctx<'a> {
    claimed: &'a Claimed,
    plan: &'a PlanRecord,
    task: &'a TaskSpec,
    agent_name: String,
    attempt_dir: PathBuf,
    spent: Usd,
    evidence: serde_json::Map<String, Value>,
    /// When the attempt began: its duration goes into the pull request's run facts.
    began: Instant,
    /// Where this round's output starts in its log. A task released without using up an
    /// attempt (rate limited, stopped) runs again under the same attempt number and appends to
    /// the same log; what an earlier run printed must not be parsed as this one's result.
    log_start: u64,
}

impl Ctx<'_> {
    fn evidence(&self) -> Value {
        Value::Object(self.evidence.clone())
    }
}

#[async_trait]
impl Executor for AgentExecutor {
    async fn failed_for_good(&self, plan_id: &str, task_id: &str) {
        if self.cfg.keep_failed {
            return;
        }
        let ws = self.workspaces.clone();
        let (plan, task) = (plan_id.to_string(), task_id.to_string());
        let removed = tokio::task::spawn_blocking(move || match ws.find(&plan, &task)? {
            Some(wt) => ws.remove(&wt, true).map(|()| true),
            None => Ok(false),
        })
        .await;
        match removed {
            Ok(Ok(true)) => {
                tracing::info!(task = %task_id, "FAILED: worktree and branch removed (keep_failed = false)")
            }
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!(task = %task_id, "removing the FAILED task's worktree: {e}")
            }
            Err(e) => tracing::warn!(task = %task_id, "removing the FAILED task's worktree: {e}"),
        }
    }

    async fn execute(
        &self,
        claimed: Claimed,
        plan: PlanRecord,
        ctl: AttemptControl,
    ) -> AttemptOutcome {
        let task = claimed.task.spec.clone();
        let agent_name = agent_of(&task, &plan.spec, &self.cfg.default_agent);
        let attempt_dir = self
            .cfg
            .run_dir
            .join(safe_id(&claimed.task.plan_id))
            .join(safe_id(&task.id));
        let mut cx = Ctx {
            claimed: &claimed,
            plan: &plan,
            task: &task,
            agent_name: agent_name.clone(),
            attempt_dir,
            spent: Usd::ZERO,
            evidence: serde_json::Map::new(),
            began: Instant::now(),
            log_start: 0,
        };
        cx.evidence.insert("agent".into(), json!(agent_name));
        cx.evidence
            .insert("attempt".into(), json!(claimed.task.attempts));
        self.sessions.upsert(SessionInfo {
            task_pk: claimed.lease.task_pk,
            plan_id: claimed.task.plan_id.clone(),
            task_id: task.id.clone(),
            agent: agent_name.clone(),
            attempt: claimed.task.attempts,
            started: Instant::now(),
            state: SessionState::Preparing,
            pty: None,
            log_path: None,
        });
        let began = Instant::now();
        let outcome = self.run(&mut cx, ctl).await;
        self.tell_forge_of_failure(&cx, &outcome, began).await;
        let final_state = match &outcome {
            AttemptOutcome::Done { .. } => SessionState::Done,
            _ => SessionState::Failed,
        };
        self.sessions
            .update(claimed.lease.task_pk, |s| s.state = final_state);
        self.sessions.remove(claimed.lease.task_pk);
        outcome
    }
}

impl AgentExecutor {
    /// The operator's comment when they last sent this task back from the inbox, if any. A
    /// store error only costs the comment, never the attempt.
    async fn operator_feedback(&self, cx: &Ctx<'_>) -> Option<String> {
        let filter = crate::store::EventFilter {
            plan_id: Some(cx.claimed.task.plan_id.clone()),
            task_id: Some(cx.task.id.clone()),
            ..Default::default()
        };
        let events = match self.store.events(&filter).await {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(task = %cx.task.id, "reading operator feedback: {e}");
                return None;
            }
        };
        events
            .iter()
            .rev()
            .find(|e| {
                e.event_type == crate::store::event_types::OPERATOR_DECISION
                    && e.payload["decision"] == "send_back"
            })
            .and_then(|e| e.payload["message"].as_str().map(str::to_string))
    }

    async fn run(&self, cx: &mut Ctx<'_>, mut ctl: AttemptControl) -> AttemptOutcome {
        let Some(runner) = self.cfg.agents.get(&cx.agent_name).cloned() else {
            return fail(
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
            );
        };

        // Guards before anything is spent: the prompt and every command we would run.
        let instructions = plan_instructions(&cx.plan.spec);
        let task_checks = super::checks::task_checks(
            cx.task,
            &cx.plan.spec,
            self.workspaces.repo_root(),
            self.cfg.checks,
            &super::checks::on_path,
        );
        // A check that cannot run cannot pass: fail before the agent spends anything.
        if !task_checks.missing.is_empty() {
            let missing: Vec<_> = task_checks
                .missing
                .iter()
                .map(|m| (cx.task.id.clone(), m.clone()))
                .collect();
            return fail(
                cx,
                "check_unavailable",
                false,
                super::checks::describe_missing(&missing).join("; "),
            );
        }
        let checks = task_checks.checks;
        let feedback = self.operator_feedback(cx).await;
        let base_prompt = {
            let mut input = PromptInput::new(&cx.claimed.task.plan_id, cx.task);
            input.plan_instructions = &instructions;
            input.operator_feedback = feedback.as_deref();
            build_prompt(&input)
        };
        if let Err(reason) = self.cfg.guards.check_before_run(cx.task, &base_prompt) {
            return fail(cx, reason.code(), false, reason.to_string());
        }
        for c in &checks {
            if let Err(reason) = agent::guards::check_command(&c.command) {
                return fail(cx, reason.code(), false, reason.to_string());
            }
        }

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
        match super::outage::retry_transient(6, start).await {
            Ok(()) => {}
            Err(StoreError::Stale { .. }) => return AttemptOutcome::Abandoned,
            // Nothing was spent: give the task back without counting the attempt.
            Err(e) if e.is_transient() => {
                return AttemptOutcome::Released {
                    cost: cx.spent,
                    reason: "store_error".into(),
                };
            }
            Err(e) => return fail(cx, "store_error", true, e.to_string()),
        }
        let deadline_at = deadline.map(|d| Instant::now() + d);
        if let Some(p) = &self.cfg.publisher
            && crate::forge::intake::source_of(cx.task).is_some()
        {
            let facts = super::publish::run_facts(
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

        // An earlier attempt may have landed this task's work and lost its lease (or the store)
        // before the queue recorded it: then the task is finished, and nothing runs again.
        let landed = {
            let ws = self.workspaces.clone();
            let fence = self.fence(cx);
            let (plan_id, task_id) = (cx.claimed.task.plan_id.clone(), cx.task.id.clone());
            tokio::task::spawn_blocking(move || ws.unrecorded_landing(&plan_id, &task_id, &fence))
                .await
        };
        match landed {
            Ok(Ok(None)) => {}
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
                return AttemptOutcome::Done {
                    cost: cx.spent,
                    evidence: cx.evidence(),
                };
            }
            Ok(Err(e)) => return self.workspace_failed(cx, e).await,
            Err(e) => return fail(cx, "workspace_error", true, e.to_string()),
        }

        // The worktree.
        let wt = {
            let ws = self.workspaces.clone();
            let (plan_id, task_id, base) = (
                cx.claimed.task.plan_id.clone(),
                cx.task.id.clone(),
                self.cfg.base_commit.clone(),
            );
            // Each task starts from the base branch as it is now, so a dependent task sees the
            // merged work of the tasks it depends on; the run's starting commit is the fallback
            // (e.g. a detached HEAD).
            let prepare = move || {
                let base = ws.base_commit().unwrap_or(base);
                ws.prepare(&plan_id, &task_id, &base)
            };
            match tokio::task::spawn_blocking(prepare).await {
                Ok(Ok(wt)) => wt,
                Ok(Err(e)) => {
                    return self.workspace_failed(cx, e).await;
                }
                Err(e) => return fail(cx, "workspace_error", true, e.to_string()),
            }
        };
        cx.evidence.insert("worktree".into(), json!(wt.path));
        cx.evidence.insert("branch".into(), json!(wt.branch));
        // The operator's checkout as it is before the agent runs: what changes there while the
        // task runs is said (whoever did it: whilly cannot tell the agent from the operator).
        let checkout_before = {
            let ws = self.workspaces.clone();
            tokio::task::spawn_blocking(move || ws.checkout_state().ok())
                .await
                .ok()
                .flatten()
        };

        let repair_max = checks
            .iter()
            .filter(|c| c.required)
            .map(|c| c.repair_max_attempts)
            .max()
            .unwrap_or(0);
        let mut repair: Option<Repair> = None;
        let mut round = 0u32;
        let mut snapshot: Option<Snapshot>;
        loop {
            let prompt = if let Some(r) = &repair {
                let mut input = PromptInput::new(&cx.claimed.task.plan_id, cx.task);
                input.plan_instructions = &instructions;
                input.operator_feedback = feedback.as_deref();
                input.repair = Some(r);
                build_prompt(&input)
            } else {
                base_prompt.clone()
            };
            let step = match &runner {
                Runner::Handoff => self.handoff(cx, &wt, &prompt, &mut ctl, deadline_at).await,
                Runner::Process(backend) => {
                    self.agent_round(
                        cx,
                        backend.as_ref(),
                        &wt,
                        &prompt,
                        round,
                        &mut ctl,
                        deadline_at,
                    )
                    .await
                }
            };
            if self.cfg.sandbox.is_some() {
                note_refused_writes(cx, &wt.path);
            }
            match step {
                Step::Outcome(o) => return o,
                Step::Finished => {}
            }

            // What the agent left, taken before any check can add to it: that is what lands.
            let snap = {
                let (ws, w) = (self.workspaces.clone(), wt.clone());
                match tokio::task::spawn_blocking(move || ws.snapshot(&w)).await {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        return self.workspace_failed(cx, e).await;
                    }
                    Err(e) => return fail(cx, "workspace_error", true, e.to_string()),
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
            if !snap.changed && checks.is_empty() && !runner.is_handoff() {
                return fail(
                    cx,
                    "no_changes",
                    false,
                    "the agent printed the completion marker but changed nothing, and the task has no checks that could show the work is there: add verification_commands or test_steps that are commands".into(),
                );
            }
            snapshot = Some(snap);

            // Evidence: the checks, in the worktree.
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
            let verification =
                run_checks(&checks, &wt.path, &check_env, self.cfg.verification_timeout).await;
            record_verification(cx, round, &verification);
            if verification.passed() {
                break;
            }
            if round >= repair_max {
                return fail(
                    cx,
                    "verification_failed",
                    false,
                    verification.failure_report(),
                );
            }
            round += 1;
            let first = verification.failures().first().map(|c| (*c).clone());
            repair = first.map(|c| Repair {
                attempt: round + 1,
                command_name: c.name,
                command: c.command,
                exit_code: c.exit_code,
                output: c.output,
            });
        }

        if let Some(before) = &checkout_before {
            self.note_checkout_changes(cx, before).await;
        }
        // Nothing is committed that holds a secret or is past the size limit: the task waits
        // for the operator, its worktree kept, the files named (never a secret's value).
        if let Some(snap) = &snapshot {
            let (ws, w, s, limits) = (
                self.workspaces.clone(),
                wt.clone(),
                snap.clone(),
                self.cfg.landing,
            );
            let found =
                match tokio::task::spawn_blocking(move || ws.unsafe_files(&w, &s, limits)).await {
                    Ok(Ok(found)) => found,
                    Ok(Err(e)) => return self.workspace_failed(cx, e).await,
                    Err(e) => return fail(cx, "workspace_error", true, e.to_string()),
                };
            if !found.is_empty() {
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
                return AttemptOutcome::Parked {
                    cost: cx.spent,
                    park: Park::HumanLoop,
                    reason: UNSAFE_FILES.into(),
                    evidence: cx.evidence(),
                };
            }
        }
        self.sessions.update(cx.claimed.lease.task_pk, |s| {
            s.state = SessionState::Delivering
        });
        self.deliver(cx, wt, snapshot).await
    }

    /// Files of the operator's checkout that changed (status or content) since `before`: kept
    /// in the attempt's evidence and logged; they are not the agent's to land.
    async fn note_checkout_changes(
        &self,
        cx: &mut Ctx<'_>,
        before: &std::collections::BTreeMap<String, (u32, u64)>,
    ) {
        let ws = self.workspaces.clone();
        let Ok(Some(after)) = tokio::task::spawn_blocking(move || ws.checkout_state().ok()).await
        else {
            return;
        };
        let mut changed: Vec<&String> = after
            .iter()
            .filter(|(p, s)| before.get(*p) != Some(*s))
            .map(|(p, _)| p)
            .collect();
        // A file that was dirty before and is clean now changed too (reverted, committed).
        changed.extend(before.keys().filter(|p| !after.contains_key(*p)));
        changed.sort();
        changed.dedup();
        if changed.is_empty() {
            return;
        }
        let root = self.workspaces.repo_root().display().to_string();
        tracing::warn!(
            task = %cx.task.id,
            "changed in {root} while the task ran: {}",
            changed.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        );
        cx.evidence.insert(
            "checkout_changed".into(),
            json!({
                "checkout": root,
                "files": changed,
                "note": "changed in your checkout while the task ran (by the agent or by you: whilly cannot tell); nothing of it lands with the task",
            }),
        );
    }

    fn fence(&self, cx: &Ctx<'_>) -> StoreFence {
        StoreFence::new(
            self.store.clone(),
            cx.claimed.lease,
            self.cfg.lease,
            cx.plan,
            &cx.task.id,
        )
    }
}

enum Step {
    /// The work is finished and may be verified.
    Finished,
    Outcome(AttemptOutcome),
}

enum Ended {
    Exited(crate::pty::ExitInfo),
    TimedOut,
    Stopped(StopReason),
}
