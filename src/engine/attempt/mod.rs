//! The real executor: one attempt of one task, from guards to delivery.
//!
//! guards → start (deadline) → worktree → agent in a PTY (or a human, through
//! [`super::handoff_runner`]) → result and cost
//! → verification → repair rounds → commit → merge back, or push and open a pull request
//! ([`super::remote_delivery`]) → outcome. The loop in `worker` settles
//! the outcome in the store; this file never writes task state itself.

use super::control::{AttemptControl, StopLevel, StopReason};
use super::delivery::delivery_json;
use super::executor::{AttemptOutcome, Executor};
use super::fence::StoreFence;
use super::handoff_runner::{HandoffEnd, HandoffRunner};
use super::live_spend::MeteredView;
use super::remote_delivery::{DeliveryKind, FailureNote, NOT_PUBLISHED, PublishRequest};
use super::sessions::{SessionInfo, SessionRegistry, SessionState};
use super::verify::Verification;
use crate::agent::{
    self, Backend, CostSource, ErrorClass, Guards, HandoffDir, HandoffStatus, Invocation,
    PriceTable, Runner,
};
use crate::domain::dispatch::agent_of;
use crate::domain::{PlanSpec, TaskSpec, Usd, safe_id};
use crate::pty::{PtySession, SpawnSpec, TermSize};
use crate::store::{Claimed, Park, PlanRecord, Store};
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
mod stages;

use helpers::{fail, fail_owned, read_tail, tail_chars};

pub(crate) use crate::sandbox::SandboxSettings;
pub(crate) use config::ExecutorConfig;

/// The reason a task goes back with when the system refused its agent's spawn for lack of
/// resources.
pub(crate) const SPAWN_REFUSED: &str = "spawn_refused";

/// The reason a task waits with when a changed file may not land (a secret, a huge file).
pub(crate) const UNSAFE_FILES: &str = "unsafe_files";

pub(crate) struct AgentExecutor {
    cfg: ExecutorConfig,
    store: Arc<dyn Store>,
    workspaces: Arc<Workspaces>,
    sessions: SessionRegistry,
}

impl AgentExecutor {
    pub(crate) fn new(
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
pub(crate) fn plan_instructions(plan: &PlanSpec) -> Vec<String> {
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
            Some(wt) => ws.release(&wt, true).map(|()| true),
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
            note: None,
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

    /// The attempt, stage by stage (see `stages.rs`): each stage either hands the next what it
    /// needs or ends the attempt with its outcome.
    async fn run(&self, cx: &mut Ctx<'_>, mut ctl: AttemptControl) -> AttemptOutcome {
        match self.run_stages(cx, &mut ctl).await {
            Ok(o) | Err(o) => o,
        }
    }

    async fn run_stages(
        &self,
        cx: &mut Ctx<'_>,
        ctl: &mut AttemptControl,
    ) -> Result<AttemptOutcome, AttemptOutcome> {
        let brief = self.brief(cx).await?;
        let deadline_at = self.begin(cx).await?;
        self.finish_if_landed(cx).await?;
        let wt = self.worktree(cx).await?;
        // The operator's checkout as it is before the agent runs: what changes there while the
        // task runs is said (whoever did it: whilly cannot tell the agent from the operator).
        let checkout_before = {
            let ws = self.workspaces.clone();
            tokio::task::spawn_blocking(move || ws.checkout_state().ok())
                .await
                .ok()
                .flatten()
        };
        let snapshot = self
            .work_until_verified(cx, &brief, &wt, ctl, deadline_at)
            .await?;
        if let Some(before) = &checkout_before {
            self.note_checkout_changes(cx, before).await;
        }
        if let Some(snap) = &snapshot {
            self.refuse_unsafe_files(cx, &wt, snap).await?;
        }
        self.sessions.update(cx.claimed.lease.task_pk, |s| {
            s.state = SessionState::Delivering
        });
        Ok(self.deliver(cx, wt, snapshot).await)
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
