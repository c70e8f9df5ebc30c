//! One round of the agent on a task: the prompt (with repairs and operator feedback), the
//! agent in its PTY under its guards and deadline, its result and cost read back.

use super::*;

impl AgentExecutor {
    /// One run of the agent process; `Finished` means it exited 0 with the marker.
    #[allow(clippy::too_many_arguments)]
    #[expect(
        clippy::too_many_lines,
        reason = "one agent round is one PTY session's life; its stages share the session and the metered view"
    )]
    pub(super) async fn agent_round(
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
    pub(super) fn account(
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
}
