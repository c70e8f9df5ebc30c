//! [`AppState::update`]: every input of the console's state in one place, keys and replies
//! alike, each answered with the effects the event loop carries out.

use super::model::{Effect, Level};
use super::msg::Msg;
use super::state::AppState;
use crate::notify::notices_for_events;

impl AppState {
    /// Applies `msg` and says what must happen because of it.
    pub fn update(&mut self, msg: Msg) -> Vec<Effect> {
        match msg {
            Msg::Action(action) => self.handle(action),
            Msg::WizardKey(key) => self.wizard_key(key),
            Msg::Note(text, level) => {
                self.set_status(text, level);
                Vec::new()
            }
            Msg::InboxDetail(detail) => {
                self.set_inbox_detail(detail);
                Vec::new()
            }
            Msg::Wizard(reply) => self.wizard_reply(reply),
            Msg::Challenge(result) => {
                self.set_challenge(result);
                Vec::new()
            }
            Msg::Split(task_id, result) => {
                self.set_split(&task_id, result);
                Vec::new()
            }
            Msg::Replay(task_pk, result) => {
                self.set_replay(task_pk, result);
                Vec::new()
            }
            Msg::Diff(task_pk, loaded) => {
                self.set_diff(task_pk, loaded);
                Vec::new()
            }
            Msg::Data(data) => self.take_feed(*data),
            Msg::FeedFailed(e) => {
                self.set_status(format!("queue: {e}"), Level::Warn);
                Vec::new()
            }
            Msg::Finished(summary) => {
                self.set_finished(summary);
                Vec::new()
            }
            Msg::Resumed => {
                self.clear_finished();
                Vec::new()
            }
            Msg::EngineFailed(e) => {
                self.set_engine_error(e);
                Vec::new()
            }
            Msg::Pulls(pulls) => {
                self.pulls.extend(pulls);
                Vec::new()
            }
        }
    }

    /// The queue's news: notices for what happened since the first load, and the open inbox
    /// item's detail reloaded with every look at the handoffs (the human may be working in the
    /// worktree being read: the diff follows).
    fn take_feed(&mut self, d: super::msg::FeedData) -> Vec<Effect> {
        let mut effects = Vec::new();
        if self.seen_history {
            effects.extend(
                notices_for_events(&d.plan.id, &d.events)
                    .into_iter()
                    .map(|n| Effect::Notify(Box::new(n))),
            );
        }
        self.seen_history = true;
        crate::engine::pull_watch::apply_events(&mut self.pulls, &d.events);
        self.note_syncs(&d.events);
        self.apply_feed(d.plan, d.tasks, d.events);
        if let Some(w) = d.workers {
            self.set_workers(w);
        }
        if let Some(h) = d.handoffs {
            self.waiting_handoffs = h;
            if let Some(target) = self.open_inbox_target() {
                effects.push(Effect::LoadInboxDetail(target));
            }
        }
        effects
    }
}

impl AppState {
    /// What the board and Jira syncs and the agents said: each Jira issue's status, whether
    /// the last word of a sync was a failure (a later move clears it), which agents are paused.
    fn note_syncs(&mut self, events: &[crate::store::Event]) {
        use crate::store::event_types as et;
        for e in events {
            match e.event_type.as_str() {
                et::JIRA_TRANSITIONED => {
                    if let (Some(t), Some(to)) = (&e.task_id, e.payload["to"].as_str()) {
                        self.jira_status.insert(t.clone(), to.to_string());
                    }
                    self.sync_trouble = None;
                }
                et::BOARD_CARD_MOVED => {
                    if let (Some(t), Some(to)) = (&e.task_id, e.payload["to"].as_str()) {
                        self.board_column.insert(t.clone(), to.to_string());
                    }
                    self.sync_trouble = None;
                }
                et::BOARD_CARD_ADDED => self.sync_trouble = None,
                et::AGENT_PAUSED => {
                    if let Some(p) = crate::domain::rate_limit::PauseNote::from_payload(&e.payload)
                        && self
                            .paused_agents
                            .get(&p.agent)
                            .is_none_or(|old| old.until < p.until)
                    {
                        self.paused_agents.insert(p.agent.clone(), p);
                    }
                }
                et::BOARD_SYNC_FAILED => {
                    self.sync_trouble = Some(format!(
                        "board out of step: {}",
                        e.payload["error"].as_str().unwrap_or("sync failed")
                    ));
                }
                et::JIRA_SYNC_FAILED => {
                    self.sync_trouble = Some(format!(
                        "Jira out of step: {}",
                        e.payload["error"].as_str().unwrap_or("sync failed")
                    ));
                }
                _ => {}
            }
        }
    }
}
