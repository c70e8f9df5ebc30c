//! The attempt of a task whose agent is a human: the handoff written, waited for, and its
//! answer taken as the agent's.

use super::*;

impl AgentExecutor {
    /// A human does the task through the handoff runner: files in `.whilly/handoff/<safe-id>/`,
    /// then the answer in `result.json` decides the attempt.
    pub(super) async fn handoff(
        &self,
        cx: &mut Ctx<'_>,
        wt: &Worktree,
        prompt: &str,
        bounced: Option<String>,
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
            bounced: bounced.clone(),
        };
        let dir = match runner.start(&meta, prompt) {
            Ok(d) => d,
            Err(e) => return Step::Outcome(fail(cx, "handoff_error", false, e.to_string())),
        };
        cx.evidence.insert("handoff_dir".into(), json!(dir));
        self.sessions.update(cx.claimed.lease.task_pk, |s| {
            s.state = SessionState::WaitingForHuman;
            s.note = bounced;
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
}
