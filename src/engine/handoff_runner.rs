//! The human handoff as a runner of its own: what the executor does instead of running an agent
//! process when a task's agent is `handoff` ([`crate::agent::Runner::Handoff`]).
//!
//! It writes the task's handoff files, waits for `result.json` (a malformed one is reported
//! once per distinct problem, in the log and as a `handoff.malformed` event, and waited out),
//! and ends with the answer, a timeout or a stop. What the answer means for the task (done,
//! failed, parked) is the executor's to say; this file writes no task state.

use super::control::{AttemptControl, StopLevel, StopReason};
use crate::agent::handoff::{self, HandoffError, HandoffMeta};
use crate::agent::{HandoffDir, HandoffPoll, HandoffResult};
use crate::store::{NewEvent, Store, event_types};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a handoff ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum HandoffEnd {
    /// Someone answered; the handoff directory is gone.
    Answered(HandoffResult),
    /// Nobody answered within the handoff timeout (or the task's deadline, when sooner).
    TimedOut,
    /// The attempt was told to stop.
    Stopped(StopReason),
}

/// One handoff's settings and the queue its notices go to.
pub(crate) struct HandoffRunner<'a> {
    pub dir: &'a HandoffDir,
    /// How long a human has to answer.
    pub timeout: Duration,
    /// How often `result.json` is looked for.
    pub poll: Duration,
    pub store: &'a dyn Store,
}

impl HandoffRunner<'_> {
    /// Hands the task over: clears what an earlier attempt of it left, writes `prompt.md` and
    /// `meta.json`; returns the handoff directory.
    pub(crate) fn start(&self, meta: &HandoffMeta, prompt: &str) -> Result<PathBuf, HandoffError> {
        // `start` also sets aside a stale `result.json`, so a directory that cannot be removed
        // here still cannot answer this attempt: worth a line in the log, not the attempt.
        if let Err(e) = self.dir.remove(&meta.plan_id, &meta.task_id) {
            tracing::warn!(task = %meta.task_id, "clearing an earlier handoff: {e}");
        }
        self.dir.start(meta, prompt)
    }

    /// Waits for the answer in `dir` (from [`HandoffRunner::start`]), until the handoff timeout
    /// or `deadline_at`, whichever is sooner, or until the attempt is told to stop. `epoch` is
    /// the attempt's lease epoch, for the malformed-result events.
    pub(crate) async fn wait(
        &self,
        dir: &Path,
        meta: &HandoffMeta,
        epoch: i64,
        ctl: &AttemptControl,
        deadline_at: Option<Instant>,
    ) -> HandoffEnd {
        let give_up = Instant::now() + self.timeout;
        let give_up = deadline_at.map_or(give_up, |d| d.min(give_up));
        let mut last_malformed: Option<String> = None;
        loop {
            // Off the runtime: whatever sits in the directory, a read never stalls the engine.
            let polled = {
                let dir = dir.to_path_buf();
                tokio::task::spawn_blocking(move || handoff::poll_dir(&dir))
                    .await
                    .unwrap_or_else(|e| HandoffPoll::Malformed(format!("reading the answer: {e}")))
            };
            match polled {
                HandoffPoll::Result(r) => {
                    // The answer is taken; a directory left behind is only clutter.
                    if let Err(e) = handoff::remove_dir(dir) {
                        tracing::warn!(task = %meta.task_id, "removing the answered handoff: {e}");
                    }
                    return HandoffEnd::Answered(r);
                }
                HandoffPoll::Malformed(why) => {
                    if last_malformed.as_deref() != Some(why.as_str()) {
                        self.report_malformed(meta, epoch, &why).await;
                        last_malformed = Some(why);
                    }
                }
                HandoffPoll::Waiting => {}
            }
            if Instant::now() >= give_up {
                return HandoffEnd::TimedOut;
            }
            let mut stop_ctl = ctl.clone();
            tokio::select! {
                _ = tokio::time::sleep(self.poll) => {}
                reason = stop_ctl.reached(StopLevel::Graceful) => return HandoffEnd::Stopped(reason),
            }
        }
    }

    /// The task keeps waiting for a fixed file; the operator learns what is wrong with this one.
    async fn report_malformed(&self, meta: &HandoffMeta, epoch: i64, why: &str) {
        tracing::warn!(task = %meta.task_id, "malformed handoff result: {why}");
        let appended = self
            .store
            .append_event(NewEvent {
                event_type: event_types::HANDOFF_MALFORMED.into(),
                plan_id: Some(meta.plan_id.clone()),
                task_id: Some(meta.task_id.clone()),
                epoch: Some(epoch),
                payload: json!({ "problem": why }),
                ..Default::default()
            })
            .await;
        if let Err(e) = appended {
            // The log line above already says it; the event is the console's copy.
            tracing::warn!(task = %meta.task_id, "recording handoff.malformed: {e}");
        }
    }
}
