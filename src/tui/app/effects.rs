//! Carrying out what the state asks for: store writes, agent kills, stops, the wizard's and the
//! challenge's and the split key's agent calls, inbox details and replays, each answering with a
//! [`Msg`].

use super::Console;
use crate::engine::StopLevel;
use crate::tui::decide;
use crate::tui::model::{Effect, Level};
use crate::tui::msg::Msg;
use crate::tui::wizard::WizardReply;
use crate::tui::wizard::run as wizard_run;

impl Console {
    /// Carries out `effect`; the effects come in four kinds, each with its own method.
    pub(super) fn run_effect(&mut self, effect: Effect) {
        match effect {
            Effect::Notify(notice) => self.notices.push(*notice),
            Effect::KillAttempt(pk) => {
                if let Some(pty) = self.ptys.get(&pk)
                    && let Err(e) = pty.kill()
                {
                    self.state.set_status(format!("kill: {e}"), Level::Warn);
                }
            }
            Effect::ScrollPane { task_pk, delta } => self.scroll_pane(task_pk, delta),
            effect @ (Effect::Quit
            | Effect::FinishAndQuit
            | Effect::Background { .. }
            | Effect::StopAgentsAndQuit) => self.leave(effect),
            effect @ (Effect::ResetTask(..)
            | Effect::SkipTask(..)
            | Effect::SetPaused(..)
            | Effect::Decide(..)
            | Effect::WriteSplit(..)
            | Effect::AddTask(..)) => self.write_queue(effect),
            effect @ (Effect::Wizard(..)
            | Effect::ProposeSplit(..)
            | Effect::CancelSplit
            | Effect::Challenge) => self.call_agent(effect),
            effect @ (Effect::LoadReplay { .. }
            | Effect::ScrollReplay(..)
            | Effect::LoadDiff { .. }
            | Effect::LoadInboxDetail(..)) => self.load(effect),
        }
    }

    /// Leaving the console: at once, after the agents, or leaving them in the background.
    fn leave(&mut self, effect: Effect) {
        match effect {
            Effect::Quit => {
                if self.engine_done || self.state.stopping {
                    self.quit = true;
                } else {
                    // Nothing is running, but the engine still holds the queue: stop it first.
                    self.stop_agents();
                    self.quit_after_engine = true;
                }
            }
            Effect::FinishAndQuit => {
                self.state.takeover = None;
                let _ = self.shutdown.send(StopLevel::Drain);
                self.quit_after_engine = true;
                if self.engine_done {
                    self.quit = true;
                }
            }
            Effect::Background { whole_plan } => {
                if !whole_plan {
                    let _ = self.shutdown.send(StopLevel::Drain);
                }
                self.detach = Some(whole_plan);
                self.quit = true;
            }
            Effect::StopAgentsAndQuit => {
                self.stop_agents();
                self.quit_after_engine = true;
                if self.engine_done {
                    self.quit = true;
                }
            }
            _ => {}
        }
    }

    /// A change to the queue, made off the UI thread; its result comes back as a note.
    fn write_queue(&mut self, effect: Effect) {
        match effect {
            Effect::ResetTask(id) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let note = match store
                        .reset_task(&plan, &id, "operator reset (console)")
                        .await
                    {
                        Ok(t) => (format!("{} is {} again", t.id, t.status), Level::Info),
                        Err(e) => (format!("reset {id}: {e}"), Level::Warn),
                    };
                    let _ = notes.send(Msg::Note(note.0, note.1));
                });
            }
            Effect::SkipTask(id) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let note = match store.skip_task(&plan, &id, "operator skip (console)").await {
                        Ok(t) => (format!("{} is {}", t.id, t.status), Level::Info),
                        Err(e) => (format!("skip {id}: {e}"), Level::Warn),
                    };
                    let _ = notes.send(Msg::Note(note.0, note.1));
                });
            }
            Effect::SetPaused(paused) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let note = match store.set_plan_paused(&plan, paused).await {
                        Ok(()) if paused => ("plan paused".to_string(), Level::Info),
                        Ok(()) => ("plan resumed".to_string(), Level::Info),
                        Err(e) => (format!("pause: {e}"), Level::Warn),
                    };
                    let _ = notes.send(Msg::Note(note.0, note.1));
                });
            }
            Effect::Decide(targets, decision) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let handoff = self.around.handoff.clone();
                let workspaces = self.around.workspaces.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let mut done = Vec::new();
                    for t in &targets {
                        match decide::apply(&store, &handoff, &workspaces, &plan, t, &decision)
                            .await
                        {
                            Ok(note) => done.push(note),
                            Err(e) => {
                                let _ = notes.send(Msg::Note(e, Level::Warn));
                                return;
                            }
                        }
                    }
                    let _ = notes.send(Msg::Note(done.join("; "), Level::Info));
                });
            }
            Effect::WriteSplit(d) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let note = match crate::prd::decompose::write_to_queue(&*store, &plan, &d).await
                    {
                        Ok(done) => Msg::Note(
                            done.iter()
                                .map(crate::prd::decompose::describe)
                                .collect::<Vec<_>>()
                                .join("; "),
                            Level::Info,
                        ),
                        Err((_, e)) => Msg::Note(format!("split: {e}"), Level::Warn),
                    };
                    let _ = notes.send(note);
                });
            }
            Effect::AddTask(spec) => {
                let store = self.store.clone();
                let plan = self.plan_id.clone();
                let notes = self.msg_tx.clone();
                tokio::spawn(async move {
                    let new = crate::domain::PlanSpec {
                        id: plan.clone(),
                        tasks: vec![*spec],
                        ..Default::default()
                    };
                    let note = match crate::prd::merge_and_import(
                        store.as_ref(),
                        &plan,
                        &new,
                        crate::prd::Collisions::Rename,
                    )
                    .await
                    {
                        Ok((outcome, _)) => Msg::Note(
                            format!("added {} to {plan}", outcome.added.join(", ")),
                            Level::Info,
                        ),
                        Err(e) => Msg::Note(format!("adding the task: {e}"), Level::Warn),
                    };
                    let _ = notes.send(note);
                });
            }
            _ => {}
        }
    }

    /// The read-only agent's calls (the wizard's steps, a split, the challenge); each answers
    /// with its message.
    fn call_agent(&mut self, effect: Effect) {
        match effect {
            Effect::Wizard(step) => {
                let tx = self.msg_tx.clone();
                match &self.around.wizard {
                    Ok(cx) => {
                        let cx = cx.clone();
                        if let Some(old) = self.wizard_task.take() {
                            old.abort();
                        }
                        self.wizard_task = Some(tokio::spawn(async move {
                            let _ = tx.send(Msg::Wizard(wizard_run::run(&cx, *step).await));
                        }));
                    }
                    Err(why) => {
                        let _ = tx.send(Msg::Wizard(WizardReply::Failed {
                            message: why.clone(),
                            raw: None,
                        }));
                    }
                }
            }
            Effect::ProposeSplit(task_id) => {
                let tx = self.msg_tx.clone();
                if let Some(old) = self.split_task.take() {
                    old.abort();
                }
                match &self.around.wizard {
                    Ok(cx) => {
                        let cx = cx.clone();
                        self.split_task = Some(tokio::spawn(async move {
                            let result = wizard_run::split(&cx, &task_id).await;
                            let _ = tx.send(Msg::Split(task_id, result.map(Box::new)));
                        }));
                    }
                    Err(why) => {
                        let _ = tx.send(Msg::Split(task_id, Err(why.clone())));
                    }
                }
            }
            Effect::CancelSplit => {
                if let Some(t) = self.split_task.take() {
                    // Dropping the call kills the agent.
                    t.abort();
                }
            }
            Effect::Challenge => {
                let tx = self.msg_tx.clone();
                match &self.around.wizard {
                    Ok(cx) => {
                        let cx = cx.clone();
                        tokio::spawn(async move {
                            let _ = tx.send(Msg::Challenge(wizard_run::challenge(&cx).await));
                        });
                    }
                    Err(why) => {
                        let _ = tx.send(Msg::Challenge(Err(why.clone())));
                    }
                }
            }
            _ => {}
        }
    }

    /// What a view shows that is read from disk: a replayed log, a diff, an inbox item.
    fn load(&mut self, effect: Effect) {
        match effect {
            Effect::LoadReplay { task_pk, task_id } => {
                self.replay_screen = None;
                self.replay_len = None;
                self.load_replay(task_pk, task_id);
            }
            Effect::ScrollReplay(delta) => {
                if let Some(emu) = self.replay_screen.as_mut() {
                    let cur = emu.scrollback_offset() as i64;
                    emu.set_scrollback_offset((cur + i64::from(delta)).max(0) as usize);
                }
            }
            Effect::LoadDiff { task_pk, task_id } => {
                let landed = crate::tui::attempts::landed_commit(&self.state.task_events(&task_id));
                let workspaces = self.around.workspaces.clone();
                let plan = self.plan_id.clone();
                let tx = self.msg_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let loaded = workspaces
                        .task_diff(&plan, &task_id, landed.as_deref(), decide::MAX_DIFF_BYTES)
                        .map_err(|e| format!("{task_id}: {e}"));
                    if tx.send(Msg::Diff(task_pk, loaded)).is_err() {
                        tracing::debug!(task_pk, "diff loaded after the console closed");
                    }
                });
            }
            Effect::LoadInboxDetail(target) => {
                let task = self
                    .state
                    .tasks
                    .iter()
                    .find(|t| t.pk == target.task_pk)
                    .cloned();
                let events = task
                    .as_ref()
                    .map(|t| self.state.task_events(&t.id))
                    .unwrap_or_default();
                let said = crate::tui::attempts::last_words(&events);
                let bounced = crate::engine::trail::bounced(&events);
                let workspaces = self.around.workspaces.clone();
                let handoff = self.around.handoff.clone();
                let tx = self.msg_tx.clone();
                tokio::task::spawn_blocking(move || {
                    let d = decide::load_detail(
                        &workspaces,
                        &handoff,
                        &target,
                        task.as_ref(),
                        said,
                        bounced,
                    );
                    let _ = tx.send(Msg::InboxDetail(d));
                });
            }
            _ => {}
        }
    }
}
