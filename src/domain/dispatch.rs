//! Which agent a task runs on: its own (the task's, else its plan's, else the worker's default),
//! or, when that one may not take work now (paused by a rate limit, or running its
//! `max_parallel` tasks across the queue), the first of its plan's `fallback_agents` that may.
//! Pure: the queue applies it inside the claim, the engine and the status page to name agents.

use super::{PlanSpec, TaskSpec};
use std::collections::BTreeMap;

/// The agent a task names: its own, else its plan's, else `default`.
pub(crate) fn agent_of(task: &TaskSpec, plan: &PlanSpec, default: &str) -> String {
    task.agent
        .clone()
        .or_else(|| plan.agent.clone())
        .unwrap_or_else(|| default.to_string())
}

/// The plan's `fallback_agents`: agents its tasks may run on when their own is blocked.
pub(crate) fn fallback_agents(plan: &PlanSpec) -> Vec<String> {
    plan.extra
        .get("fallback_agents")
        .map(fallbacks_from_json)
        .unwrap_or_default()
}

/// The string items of a `fallback_agents` value (anything else names no agent).
pub(crate) fn fallbacks_from_json(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The agent a claimed task runs on: its own unless blocked, else the first fallback that is
/// not (its own when none is free: the claim only hands out tasks one of them can take).
pub(crate) fn choose_agent(own: &str, fallbacks: &[String], blocked: &[String]) -> String {
    if !blocked.iter().any(|b| b == own) {
        return own.to_string();
    }
    fallbacks
        .iter()
        .find(|f| !blocked.contains(f))
        .cloned()
        .unwrap_or_else(|| own.to_string())
}

/// `blocked` plus every agent running as many tasks as its limit allows (`running`: live
/// leases per agent across the queue, as the claim counted them), sorted, each once.
pub(crate) fn with_full_agents(
    blocked: &[String],
    running: &[(String, i64)],
    limits: &BTreeMap<String, i64>,
) -> Vec<String> {
    let mut out: Vec<String> = blocked.to_vec();
    for (agent, max) in limits {
        let n: i64 = running
            .iter()
            .filter(|(a, _)| a == agent)
            .map(|(_, n)| n)
            .sum();
        if n >= *max {
            out.push(agent.clone());
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fallbacks_are_taken_in_order() {
        let blocked = v(&["claude", "codex"]);
        let fb = v(&["codex", "gemini"]);
        assert_eq!(choose_agent("claude", &fb, &blocked), "gemini");
        assert_eq!(choose_agent("opencode", &fb, &blocked), "opencode");
        assert_eq!(choose_agent("claude", &[], &blocked), "claude");
    }

    #[test]
    fn agents_at_their_limit_are_blocked() {
        let limits: BTreeMap<String, i64> = [("codex".into(), 2), ("gemini".into(), 1)].into();
        let mut running: Vec<(String, i64)> = vec![("codex".into(), 1)];
        assert_eq!(
            with_full_agents(&v(&["claude"]), &running, &limits),
            ["claude"]
        );
        running = vec![("codex".into(), 2), ("gemini".into(), 1)];
        assert_eq!(
            with_full_agents(&v(&["codex"]), &running, &limits),
            ["codex", "gemini"]
        );
    }

    #[test]
    fn only_string_fallbacks_count() {
        let j = serde_json::json!(["codex", 3, null, "gemini"]);
        assert_eq!(fallbacks_from_json(&j), ["codex", "gemini"]);
        assert!(fallbacks_from_json(&serde_json::json!("codex")).is_empty());
    }
}
