//! Dispatch that respects the providers' limits: which agents no task may start on right now.
//!
//! An agent backend is blocked while it is paused by a rate or usage limit (an `agent.paused`
//! event, written by whichever worker hit the limit, so every worker on the queue honours it)
//! or while the queue's live leases on it reach `[agents.<name>] max_parallel` (counted by the
//! claim, across every worker). The claim skips tasks whose agent is blocked unless their
//! plan's `fallback_agents` names one that is not; such a task then runs on that fallback
//! (`domain::dispatch`).

use crate::domain::rate_limit::PauseNote;
use crate::store::{Event, EventFilter, Store, StoreResult, event_types as et};
use chrono::{DateTime, Utc};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How often the pauses other workers recorded are looked for while claiming.
const REFRESH_EVERY: Duration = Duration::from_secs(2);

/// The engine's dispatch settings.
#[derive(Debug, Clone, Default)]
pub struct DispatchConfig {
    /// The agent of tasks and plans that name none.
    pub default_agent: String,
    /// `[agents.<name>] max_parallel`.
    pub max_parallel: BTreeMap<String, usize>,
    /// The pause when a rate-limited agent does not say when its limit resets.
    pub cooldown: Duration,
}

/// The backends paused by rate limits, as the audit trail says.
#[derive(Debug, Default)]
pub(crate) struct Pauses {
    by_agent: HashMap<String, PauseNote>,
    /// Events up to this id have been read.
    cursor: Option<i64>,
    next_refresh: Option<Instant>,
}

impl Pauses {
    /// Records a pause (the later one wins for an agent paused twice).
    pub(crate) fn note(&mut self, note: PauseNote) {
        match self.by_agent.get(&note.agent) {
            Some(old) if old.until >= note.until => {}
            _ => {
                self.by_agent.insert(note.agent.clone(), note);
            }
        }
    }

    /// The pauses still running at `now`.
    pub(crate) fn active(&self, now: DateTime<Utc>) -> Vec<&PauseNote> {
        let mut v: Vec<&PauseNote> = self.by_agent.values().filter(|p| p.until > now).collect();
        v.sort_by(|a, b| a.agent.cmp(&b.agent));
        v
    }

    /// When the next running pause ends.
    pub(crate) fn next_end(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.active(now).iter().map(|p| p.until).min()
    }

    fn absorb(&mut self, events: &[Event]) {
        for e in events {
            self.cursor = Some(self.cursor.map_or(e.id, |c| c.max(e.id)));
            if e.event_type == et::AGENT_PAUSED
                && let Some(note) = PauseNote::from_payload(&e.payload)
            {
                self.note(note);
            }
        }
    }

    /// Reads the pauses recorded since the last look (all recent ones the first time), at most
    /// every [`REFRESH_EVERY`]. The cursor follows the newest event of any kind, so later looks
    /// read only the events written since.
    pub(crate) async fn refresh(&mut self, store: &dyn Store) -> StoreResult<()> {
        if self.next_refresh.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        self.next_refresh = Some(Instant::now() + REFRESH_EVERY);
        let newest = store
            .events(&EventFilter {
                after_id: self.cursor,
                limit: Some(1),
                newest: true,
                ..Default::default()
            })
            .await?;
        let paused = store
            .events(&EventFilter {
                after_id: self.cursor,
                event_types: vec![et::AGENT_PAUSED.to_string()],
                // The first look: the recent past is enough (a pause lasts a week at most).
                limit: self.cursor.is_none().then_some(200),
                newest: self.cursor.is_none(),
                ..Default::default()
            })
            .await?;
        self.absorb(&paused);
        self.absorb(&newest);
        Ok(())
    }
}

/// The agents no task may start on now because a rate limit paused them. Agents running their
/// `max_parallel` are added by the claim itself, which counts the queue's live leases.
pub(crate) fn paused_agents(pauses: &Pauses, now: DateTime<Utc>) -> Vec<String> {
    pauses
        .active(now)
        .into_iter()
        .map(|p| p.agent.clone())
        .collect()
}

/// `[agents.<name>] max_parallel` as the claim takes it.
pub(crate) fn agent_limits(cfg: &DispatchConfig) -> BTreeMap<String, i64> {
    cfg.max_parallel
        .iter()
        .map(|(a, n)| (a.clone(), i64::try_from(*n).unwrap_or(i64::MAX)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(agent: &str, until: DateTime<Utc>) -> PauseNote {
        PauseNote {
            agent: agent.into(),
            until,
            reason: "usage limit".into(),
        }
    }

    #[test]
    fn the_latest_pause_of_an_agent_wins_until_it_ends() {
        let now = Utc::now();
        let mut p = Pauses::default();
        p.note(note("claude", now + chrono::Duration::seconds(30)));
        p.note(note("claude", now + chrono::Duration::seconds(5)));
        p.note(note("gemini", now - chrono::Duration::seconds(1)));
        assert_eq!(p.next_end(now), Some(now + chrono::Duration::seconds(30)));
        assert_eq!(paused_agents(&p, now), ["claude"]);
        assert!(paused_agents(&p, now + chrono::Duration::seconds(31)).is_empty());
    }
}
