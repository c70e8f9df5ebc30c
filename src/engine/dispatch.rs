//! Dispatch that respects the providers' limits: which agents no task may start on right now.
//!
//! An agent backend is blocked while it is paused by a rate or usage limit (an `agent.paused`
//! event, written by whichever worker hit the limit, so every worker on the queue honours it)
//! or while this process runs `[agents.<name>] max_parallel` tasks on it. The claim skips tasks
//! whose agent is blocked unless their plan's `fallback_agents` names one that is not; such a
//! task then runs on that fallback.

use crate::domain::PlanSpec;
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
pub struct Pauses {
    by_agent: HashMap<String, PauseNote>,
    /// Events up to this id have been read.
    cursor: Option<i64>,
    next_refresh: Option<Instant>,
}

impl Pauses {
    /// Records a pause (the later one wins for an agent paused twice).
    pub fn note(&mut self, note: PauseNote) {
        match self.by_agent.get(&note.agent) {
            Some(old) if old.until >= note.until => {}
            _ => {
                self.by_agent.insert(note.agent.clone(), note);
            }
        }
    }

    /// The pauses still running at `now`.
    pub fn active(&self, now: DateTime<Utc>) -> Vec<&PauseNote> {
        let mut v: Vec<&PauseNote> = self.by_agent.values().filter(|p| p.until > now).collect();
        v.sort_by(|a, b| a.agent.cmp(&b.agent));
        v
    }

    /// When the next running pause ends.
    pub fn next_end(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
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
    pub async fn refresh(&mut self, store: &dyn Store) -> StoreResult<()> {
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

/// The agents no task may start on now: paused ones, and those running their `max_parallel`.
pub fn blocked_agents(
    pauses: &Pauses,
    running: &HashMap<String, usize>,
    cfg: &DispatchConfig,
    now: DateTime<Utc>,
) -> Vec<String> {
    let mut out: Vec<String> = pauses
        .active(now)
        .into_iter()
        .map(|p| p.agent.clone())
        .collect();
    for (agent, max) in &cfg.max_parallel {
        if running.get(agent).copied().unwrap_or(0) >= *max && !out.contains(agent) {
            out.push(agent.clone());
        }
    }
    out.sort();
    out
}

/// The plan's `fallback_agents`: agents its tasks may run on when their own is blocked.
pub fn fallback_agents(plan: &PlanSpec) -> Vec<String> {
    plan.extra
        .get("fallback_agents")
        .and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The agent a claimed task runs on: its own unless blocked, else the first fallback that is
/// not (its own when none is free: the claim only hands out tasks one of them can take).
pub fn choose_agent(own: &str, fallbacks: &[String], blocked: &[String]) -> String {
    if !blocked.iter().any(|b| b == own) {
        return own.to_string();
    }
    fallbacks
        .iter()
        .find(|f| !blocked.contains(f))
        .cloned()
        .unwrap_or_else(|| own.to_string())
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
    fn paused_and_full_agents_are_blocked() {
        let now = Utc::now();
        let mut p = Pauses::default();
        p.note(note("claude", now + chrono::Duration::seconds(30)));
        p.note(note("claude", now + chrono::Duration::seconds(5)));
        p.note(note("gemini", now - chrono::Duration::seconds(1)));
        assert_eq!(p.next_end(now), Some(now + chrono::Duration::seconds(30)));
        let cfg = DispatchConfig {
            max_parallel: [("codex".to_string(), 2)].into(),
            ..Default::default()
        };
        let mut running = HashMap::new();
        running.insert("codex".to_string(), 1);
        assert_eq!(blocked_agents(&p, &running, &cfg, now), ["claude"]);
        running.insert("codex".to_string(), 2);
        assert_eq!(blocked_agents(&p, &running, &cfg, now), ["claude", "codex"]);
    }

    #[test]
    fn fallbacks_are_taken_in_order() {
        let blocked = vec!["claude".to_string(), "codex".to_string()];
        let fb = vec!["codex".to_string(), "gemini".to_string()];
        assert_eq!(choose_agent("claude", &fb, &blocked), "gemini");
        assert_eq!(choose_agent("opencode", &fb, &blocked), "opencode");
        assert_eq!(choose_agent("claude", &[], &blocked), "claude");
    }
}
