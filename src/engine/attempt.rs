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

pub use crate::sandbox::SandboxSettings;

/// The reason a task goes back with when the system refused its agent's spawn for lack of
/// resources.
pub const SPAWN_REFUSED: &str = "spawn_refused";

/// The reason a task waits with when a changed file may not land (a secret, a huge file).
pub const UNSAFE_FILES: &str = "unsafe_files";

pub struct ExecutorConfig {
    pub repo_root: PathBuf,
    /// `.whilly/runs/<run id>`: logs and prompts of this run's attempts.
    pub run_dir: PathBuf,
    /// The agent for tasks and plans that name none.
    pub default_agent: String,
    /// Every agent tasks may name, built (binaries resolved) before the run starts: a program,
    /// or the human handoff.
    pub agents: BTreeMap<String, Runner>,
    pub prices: PriceTable,
    pub guards: Guards,
    pub verification_timeout: Duration,
    /// Whether test steps and the repository's own checks run (see [`super::checks`]).
    pub checks: super::checks::CheckPolicy,
    /// Variables the verification commands see (from this process's environment).
    pub verification_env: Vec<(String, String)>,
    /// What may never be committed: secrets, files over the size limit.
    pub landing: crate::domain::landing_lint::LandingLimits,
    /// Where agents and checks may write (`[sandbox]`): `None` when the sandbox is off.
    pub sandbox: Option<SandboxSettings>,
    /// A task that ended FAILED keeps its worktree and branch for inspection
    /// (`[worktrees] keep_failed`); otherwise both are removed.
    pub keep_failed: bool,
    pub pty_size: TermSize,
    pub scrollback: usize,
    /// The most bytes an attempt's log keeps, head and tail (`[logging] attempt_log_max_mb`).
    pub attempt_log_max: u64,
    /// How long an agent may take to finish up after a graceful stop.
    pub grace: Duration,
    pub handoff: HandoffDir,
    pub handoff_timeout: Duration,
    pub handoff_poll: Duration,
    pub merge: MergeMode,
    /// The commit tasks start from when the base branch's head cannot be read.
    pub base_commit: String,
    pub default_task_timeout: Option<Duration>,
    /// The engine's lease length: what the delivery fence's heartbeat extends the lease by.
    pub lease: Duration,
    /// Pushing to a remote, and which tasks are delivered how.
    pub remote: super::publish::RemoteDelivery,
    /// Pull requests, labels and status comments on the forge; `None`: no forge configured
    /// (tasks that need one wait as not published, their branch kept).
    pub publisher: Option<Arc<dyn super::publish::Publisher>>,
}

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

    /// One run of the agent process; `Finished` means it exited 0 with the marker.
    #[allow(clippy::too_many_arguments)]
    async fn agent_round(
        &self,
        cx: &mut Ctx<'_>,
        backend: &dyn Backend,
        wt: &Worktree,
        prompt: &str,
        round: u32,
        ctl: &mut AttemptControl,
        deadline_at: Option<Instant>,
    ) -> Step {
        let stem = if round == 0 {
            format!("{}", cx.claimed.task.attempts)
        } else {
            format!("{}.repair{round}", cx.claimed.task.attempts)
        };
        let prompt_file = cx.attempt_dir.join(format!("{stem}.prompt.md"));
        let log_path = cx.attempt_dir.join(format!("{stem}.log"));
        cx.log_start = std::fs::metadata(&log_path).map_or(0, |m| m.len());
        if let Err(e) = crate::fsutil::atomic_write(&prompt_file, prompt.as_bytes()) {
            return Step::Outcome(fail(
                cx,
                "io_error",
                true,
                format!("cannot write {}: {e}", prompt_file.display()),
            ));
        }
        let inv = Invocation {
            prompt,
            prompt_file: &prompt_file,
            workdir: &wt.path,
            task_id: &cx.task.id,
        };
        let command = match backend.command(&inv) {
            Ok(c) => c,
            Err(e) => return Step::Outcome(fail(cx, "agent_error", false, e.to_string())),
        };
        let spawn_size = self.sessions.spawn_size().unwrap_or(self.cfg.pty_size);
        let mut spec = SpawnSpec::new(command.argv())
            .cwd(&command.cwd)
            .size(spawn_size.rows, spawn_size.cols);
        spec = spec
            .log_path(&log_path)
            .log_limit(self.cfg.attempt_log_max)
            .scrollback(self.cfg.scrollback);
        for (k, v) in &command.env {
            spec = spec.env(k, v);
        }
        if let Some(view) = backend.display_filter() {
            spec = spec.display_filter(Box::new(MeteredView::new(
                view,
                backend.usage_meter(&self.cfg.prices),
                backend.session_log(),
                ctl.clone(),
                cx.spent,
            )));
        }
        spec = spec
            .env("WHILLY_TASK_ID", &cx.task.id)
            .env("WHILLY_PLAN_ID", &cx.claimed.task.plan_id);
        if let Some(s) = &self.cfg.sandbox {
            let (policy, tmpdir) = s.policy(Some(&wt.path), backend.kind().as_str(), &command.env);
            spec = spec.env(crate::sandbox::ENV, policy.to_env());
            if let Some(t) = tmpdir {
                spec = spec.env("TMPDIR", t.display().to_string());
            }
        }
        let session = match PtySession::spawn(spec) {
            Ok(s) => Arc::new(s),
            Err(e) if e.lack_of_resources() => {
                return Step::Outcome(self.refused_for_resources(cx, e.to_string()).await);
            }
            Err(e) => {
                let retry = matches!(&e, crate::pty::PtyError::Spawn { .. });
                return Step::Outcome(fail(cx, "spawn_failed", retry, e.to_string()));
            }
        };
        // Whoever prepares this worktree next waits while this group still works in it.
        self.workspaces.note_agent(wt, session.pid());
        cx.evidence.insert("log".into(), json!(log_path));
        self.sessions.update(cx.claimed.lease.task_pk, |s| {
            s.state = SessionState::Running;
            s.pty = Some(session.clone());
            s.log_path = Some(log_path.clone());
        });

        // Wait for the agent, the task's deadline, or a stop.
        let timeout = async {
            match deadline_at {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        let mut stop_ctl = ctl.clone();
        let ended = tokio::select! {
            exit = session.wait() => Ended::Exited(exit),
            _ = timeout => Ended::TimedOut,
            reason = stop_ctl.reached(StopLevel::Graceful) => Ended::Stopped(reason),
        };
        let exit = match ended {
            Ended::Exited(exit) => exit,
            Ended::TimedOut => {
                if let Err(e) = session.terminate(Duration::from_secs(5)).await {
                    tracing::warn!(task = %cx.task.id, "stopping the agent after its timeout: {e}");
                }
                self.account(cx, backend, &log_path, ctl);
                return Step::Outcome(fail(
                    cx,
                    "task_timeout",
                    true,
                    "the task ran past its timeout; the agent was stopped".into(),
                ));
            }
            Ended::Stopped(reason) => {
                // Graceful: the agent may finish within the grace period; otherwise it is stopped.
                let finished = if ctl.level() < StopLevel::Now && reason == StopReason::Shutdown {
                    let mut now_ctl = ctl.clone();
                    tokio::select! {
                        exit = session.wait() => Some(exit),
                        _ = tokio::time::sleep(self.cfg.grace) => None,
                        _ = now_ctl.reached(StopLevel::Now) => None,
                    }
                } else {
                    None
                };
                match finished {
                    Some(exit) => exit,
                    None => {
                        // The grace period was the agent's chance to finish: kill the group now.
                        if let Err(e) = session.kill() {
                            tracing::warn!(task = %cx.task.id, "killing the agent: {e}");
                        }
                        if tokio::time::timeout(Duration::from_secs(5), session.wait())
                            .await
                            .is_err()
                        {
                            tracing::warn!(task = %cx.task.id, "the agent has not exited 5 s after SIGKILL");
                        }
                        self.account(cx, backend, &log_path, ctl);
                        let reason = ctl.reason().unwrap_or(reason);
                        return Step::Outcome(match reason {
                            StopReason::LeaseLost => AttemptOutcome::Abandoned,
                            StopReason::TaskBudget => {
                                let detail = match cx.task.budget_usd {
                                    Some(b) => format!(
                                        "the task's budget_usd ({b}) is spent: {} by this attempt; the agent was stopped",
                                        cx.spent
                                    ),
                                    None => "the task's budget_usd is spent".to_string(),
                                };
                                fail(cx, "task_budget_exceeded", false, detail)
                            }
                            other => AttemptOutcome::Released {
                                cost: cx.spent,
                                reason: other.as_str().to_string(),
                            },
                        });
                    }
                }
            }
        };
        cx.evidence.insert("exit".into(), json!(exit.to_string()));
        let (result, raw) = self.account(cx, backend, &log_path, ctl);
        cx.evidence
            .insert("num_turns".into(), json!(result.num_turns));
        cx.evidence.insert("usage".into(), json!(result.usage));
        cx.evidence
            .insert("marker_found".into(), json!(result.marker_found));
        cx.evidence.insert(
            "result".into(),
            json!(agent::redact_secrets(&tail_chars(&result.text, 2000))),
        );
        // `Other` is an ordinary failed attempt (below); the named classes decide retry or not.
        if let Some(class) = backend
            .classify(exit.code, &result, &raw)
            .filter(|c| *c != ErrorClass::Other)
        {
            if class == ErrorClass::RateLimited {
                // Not the task's fault: it goes back, and the backend waits for its reset.
                let tail = &raw[raw.len().saturating_sub(RATE_LIMIT_TAIL_BYTES)..];
                let message = agent::redact_secrets(&format!(
                    "{}\n{}",
                    result.text,
                    agent::result::clean_output(tail)
                ));
                cx.evidence.insert(
                    "detail".into(),
                    json!(format!(
                        "rate_limited ({exit}): {}",
                        tail_chars(&message, 500)
                    )),
                );
                return Step::Outcome(AttemptOutcome::RateLimited {
                    cost: cx.spent,
                    agent: cx.agent_name.clone(),
                    message,
                    evidence: cx.evidence(),
                });
            }
            let retry = class.is_retryable();
            let detail = format!(
                "{} ({}): {}",
                class.as_str(),
                exit,
                tail_chars(&agent::redact_secrets(&result.text), 500)
            );
            let reason = if class == ErrorClass::Auth {
                "auth_error".to_string()
            } else {
                class.as_str().to_string()
            };
            return Step::Outcome(fail_owned(cx, reason, retry, detail));
        }
        if !exit.success() {
            return Step::Outcome(fail(
                cx,
                "agent_failed",
                true,
                format!("the agent ended with {exit}"),
            ));
        }
        if !result.marker_found {
            return Step::Outcome(fail(
                cx,
                "marker_missing",
                true,
                "the agent finished without printing <promise>COMPLETE</promise> in its final answer".into(),
            ));
        }
        Step::Finished
    }

    /// Reads the attempt's result from its log and adds its cost to the attempt's spend.
    fn account(
        &self,
        cx: &mut Ctx<'_>,
        backend: &dyn Backend,
        log: &Path,
        ctl: &AttemptControl,
    ) -> (agent::AgentResult, Vec<u8>) {
        let raw = read_tail(log, cx.log_start, RESULT_TAIL_BYTES).unwrap_or_default();
        let result = backend.parse_result(&raw, &self.cfg.prices);
        // What the live meter saw this round; it stands when the agent was stopped before
        // reporting an exact cost, and never replaces one it did report.
        let live = ctl.spent() - cx.spent;
        cx.spent += match result.cost_source {
            CostSource::Reported => result.cost,
            CostSource::Priced | CostSource::Unknown => result.cost.max(live),
        };
        ctl.set_spent(cx.spent);
        cx.evidence
            .insert("attempt_cost_usd".into(), json!(cx.spent.as_f64()));
        (result, raw)
    }

    /// A human does the task through the handoff runner: files in `.whilly/handoff/<safe-id>/`,
    /// then the answer in `result.json` decides the attempt.
    async fn handoff(
        &self,
        cx: &mut Ctx<'_>,
        wt: &Worktree,
        prompt: &str,
        ctl: &mut AttemptControl,
        deadline_at: Option<Instant>,
    ) -> Step {
        let runner = HandoffRunner {
            dir: &self.cfg.handoff,
            timeout: self.cfg.handoff_timeout,
            poll: self.cfg.handoff_poll,
            store: self.store.as_ref(),
        };
        let meta = agent::handoff::HandoffMeta {
            task_id: cx.task.id.clone(),
            plan_id: cx.claimed.task.plan_id.clone(),
            cwd: wt.path.clone(),
            started_at: chrono::Utc::now(),
            timeout_s: Some(self.cfg.handoff_timeout.as_secs()),
            attempt: cx.claimed.task.attempts.max(1) as u32,
        };
        let dir = match runner.start(&meta, prompt) {
            Ok(d) => d,
            Err(e) => return Step::Outcome(fail(cx, "handoff_error", false, e.to_string())),
        };
        cx.evidence.insert("handoff_dir".into(), json!(dir));
        self.sessions.update(cx.claimed.lease.task_pk, |s| {
            s.state = SessionState::WaitingForHuman
        });
        let r = match runner
            .wait(&dir, &meta, cx.claimed.lease.epoch, ctl, deadline_at)
            .await
        {
            HandoffEnd::Answered(r) => r,
            HandoffEnd::TimedOut => {
                return Step::Outcome(fail(
                    cx,
                    "handoff_timeout",
                    false,
                    "nobody answered the handoff in time".into(),
                ));
            }
            HandoffEnd::Stopped(StopReason::LeaseLost) => {
                return Step::Outcome(AttemptOutcome::Abandoned);
            }
            HandoffEnd::Stopped(other) => {
                return Step::Outcome(AttemptOutcome::Released {
                    cost: cx.spent,
                    reason: other.as_str().into(),
                });
            }
        };
        cx.spent += r.cost;
        ctl.set_spent(cx.spent);
        cx.evidence
            .insert("handoff_status".into(), json!(r.status.as_str()));
        cx.evidence.insert("message".into(), json!(r.message));
        cx.evidence
            .insert("attempt_cost_usd".into(), json!(cx.spent.as_f64()));
        match r.status {
            HandoffStatus::Complete => Step::Finished,
            HandoffStatus::Failed => {
                Step::Outcome(fail_owned(cx, "handoff_failed".into(), false, r.message))
            }
            HandoffStatus::Partial => {
                Step::Outcome(fail_owned(cx, "handoff_partial".into(), true, r.message))
            }
            HandoffStatus::Blocked => Step::Outcome(AttemptOutcome::Parked {
                cost: cx.spent,
                park: Park::Blocked,
                reason: "handoff_blocked".into(),
                evidence: cx.evidence(),
            }),
            HandoffStatus::HumanLoop => Step::Outcome(AttemptOutcome::Parked {
                cost: cx.spent,
                park: Park::HumanLoop,
                reason: "human_loop".into(),
                evidence: cx.evidence(),
            }),
        }
    }

    /// Commit on the task branch (the agent's work as `snapshot` took it, before the checks),
    /// merge back per config, clean the worktree. Work that could not land parks the task as
    /// ready to merge, its worktree and branch kept (see [`super::landing`]).
    async fn deliver(
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
            if delivery == Delivery::LeaseLost || super::delivery::did_not_land(&delivery) {
                // The task is someone else's now, and so is its worktree; or the work waits
                // there to be merged.
                return Ok((commit, delivery));
            }
            let keep_branch = !matches!(
                delivery,
                Delivery::FastForwarded { .. } | Delivery::Merged { .. } | Delivery::NothingToDo
            );
            ws.remove(&wt, !keep_branch)?;
            Ok::<_, crate::workspace::WorkspaceError>((commit, delivery))
        })
        .await;
        match joined {
            Ok(Ok((_, Delivery::LeaseLost))) => {
                tracing::warn!(task = %cx.task.id, "lease lost before delivery; nothing delivered");
                AttemptOutcome::Abandoned
            }
            Ok(Ok((commit, delivery))) if super::delivery::did_not_land(&delivery) => {
                let detail = super::delivery::unlanded_detail(&cx.task.id, &delivery);
                tracing::warn!(task = %cx.task.id, "the work did not land: {detail}");
                cx.evidence.insert("commit".into(), json!(commit));
                cx.evidence
                    .insert("delivery".into(), delivery_json(&delivery));
                cx.evidence.insert("detail".into(), json!(detail));
                AttemptOutcome::Parked {
                    cost: cx.spent,
                    park: Park::HumanLoop,
                    reason: super::delivery::READY_TO_MERGE.into(),
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
    async fn publish(&self, cx: &mut Ctx<'_>, kind: DeliveryKind, branch: &str) -> AttemptOutcome {
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
        let pushed = match super::publish::push(
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
            run: super::publish::run_facts(&plan_id, &record, &evidence, &pushed.branch),
            pushed,
            evidence,
            repo: None,
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
    async fn tell_forge_of_failure(&self, cx: &Ctx<'_>, outcome: &AttemptOutcome, began: Instant) {
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
        let mut facts = super::publish::run_facts(&t.plan_id, t, evidence, "");
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
    async fn workspace_failed(
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
    async fn refused_for_resources(&self, cx: &mut Ctx<'_>, detail: String) -> AttemptOutcome {
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

fn fail(cx: &mut Ctx<'_>, reason: &str, retry: bool, detail: String) -> AttemptOutcome {
    fail_owned(cx, reason.to_string(), retry, detail)
}

fn fail_owned(cx: &mut Ctx<'_>, reason: String, retry: bool, detail: String) -> AttemptOutcome {
    cx.evidence
        .insert("detail".into(), json!(agent::redact_secrets(&detail)));
    AttemptOutcome::Failed {
        cost: cx.spent,
        reason,
        retry,
        evidence: cx.evidence(),
    }
}

fn record_verification(cx: &mut Ctx<'_>, round: u32, v: &Verification) {
    let entry = json!({ "round": round, "passed": v.passed(), "checks": v.checks.iter().map(|c| json!({
        "name": c.name, "command": c.command, "required": c.required, "passed": c.passed,
        "exit_code": c.exit_code, "timed_out": c.timed_out, "duration_ms": c.duration_ms,
        "output": agent::redact_secrets(&tail_chars(&c.output, 2000)),
    })).collect::<Vec<_>>() });
    match cx.evidence.get_mut("verification") {
        Some(Value::Array(rounds)) => rounds.push(entry),
        _ => {
            cx.evidence.insert("verification".into(), json!([entry]));
        }
    }
}

/// The paths the sandbox refused in this round, as the agent reported them in its output
/// ("Permission denied", "Read-only file system", EACCES): kept in the attempt's evidence as
/// `sandbox_refused`, so the record says which write outside the worktree was stopped.
fn note_refused_writes(cx: &mut Ctx<'_>, worktree: &Path) {
    let Some(log) = cx
        .evidence
        .get("log")
        .and_then(|v| v.as_str())
        .map(PathBuf::from)
    else {
        return;
    };
    let raw = read_tail(&log, cx.log_start, 256 * 1024).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw);
    let mut refused: Vec<String> = cx
        .evidence
        .get("sandbox_refused")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    for path in crate::domain::sandbox_report::refused_paths(&text) {
        // A relative path is the agent's, from its worktree (`../../README.md`).
        let full = crate::domain::sandbox_report::resolve(worktree, &path);
        let shown = full.display().to_string();
        if !full.starts_with(worktree) && !refused.contains(&shown) {
            refused.push(shown);
        }
    }
    if !refused.is_empty() {
        cx.evidence.insert("sandbox_refused".into(), json!(refused));
    }
}

fn tail_chars(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        s.chars().skip(n - max).collect()
    }
}

/// The last `max` bytes of a file (the whole file when smaller).
fn read_tail(path: &Path, start: u64, max: u64) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let from = start.max(len.saturating_sub(max)).min(len);
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}
