//! What deserves a notice. Pure: audit-trail events and session changes in, notices out.

use crate::store::{Event, event_types as et};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeKind {
    /// A task waits for a human (handoff, HUMAN_LOOP, BLOCKED).
    NeedsHuman,
    BudgetWarning,
    BudgetExhausted,
    /// A task failed for good (no attempts left).
    TaskFailed,
    PlanFinished,
    /// An agent backend hit a rate or usage limit and waits for its reset.
    AgentPaused,
}

impl NoticeKind {
    /// Whether the bell rings: for what needs the operator, not for good news.
    pub fn rings(self) -> bool {
        !matches!(self, NoticeKind::PlanFinished)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub kind: NoticeKind,
    pub title: String,
    pub body: String,
}

impl Notice {
    pub fn new(kind: NoticeKind, plan_id: &str, body: impl Into<String>) -> Notice {
        Notice {
            kind,
            title: format!("whilly: {plan_id}"),
            body: body.into(),
        }
    }
}

/// The notices a batch of new events calls for, in order.
pub(crate) fn notices_for_events(plan_id: &str, events: &[Event]) -> Vec<Notice> {
    events
        .iter()
        .filter_map(|e| {
            let task = e.task_id.as_deref().unwrap_or("?");
            let message = e
                .payload
                .get("message")
                .or_else(|| e.payload.get("detail"))
                .and_then(|v| v.as_str())
                .map(|m| format!(": {m}"))
                .unwrap_or_default();
            let (kind, body) = match e.event_type.as_str() {
                et::TASK_HUMAN_LOOP => (
                    NoticeKind::NeedsHuman,
                    format!("{task} needs a human decision{message}"),
                ),
                et::TASK_BLOCKED => (
                    NoticeKind::NeedsHuman,
                    format!("{task} is blocked{message}"),
                ),
                et::BUDGET_WARNING => (
                    NoticeKind::BudgetWarning,
                    "80 % of the budget is spent".to_string(),
                ),
                et::BUDGET_EXHAUSTED => (
                    NoticeKind::BudgetExhausted,
                    "the budget is exhausted: agents stopped, nothing new starts".to_string(),
                ),
                et::TASK_FAILED => (NoticeKind::TaskFailed, format!("{task} failed")),
                et::AGENT_PAUSED => (
                    NoticeKind::AgentPaused,
                    crate::domain::rate_limit::PauseNote::from_payload(&e.payload)
                        .map(|p| p.label(&chrono::Local))
                        .unwrap_or_else(|| "an agent is paused by a rate limit".into()),
                ),
                _ => return None,
            };
            Some(Notice::new(kind, plan_id, body))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use serde_json::json;

    fn ev(kind: &str, task: Option<&str>, payload: serde_json::Value) -> Event {
        Event {
            id: 1,
            ts: Utc::now(),
            event_type: kind.into(),
            plan_id: Some("p".into()),
            task_id: task.map(str::to_string),
            worker_id: None,
            epoch: None,
            from_status: None,
            to_status: None,
            payload,
        }
    }

    #[test]
    fn events_that_need_the_operator_notify() {
        let events = [
            ev(et::TASK_CLAIMED, Some("A"), json!({})),
            ev(
                et::TASK_HUMAN_LOOP,
                Some("A"),
                json!({"message": "pick a db"}),
            ),
            ev(et::BUDGET_WARNING, None, json!({})),
            ev(et::TASK_DONE, Some("B"), json!({})),
            ev(et::BUDGET_EXHAUSTED, None, json!({})),
            ev(et::TASK_FAILED, Some("C"), json!({})),
            ev(et::TASK_BLOCKED, Some("D"), json!({})),
            ev(
                et::AGENT_PAUSED,
                Some("E"),
                json!({"agent": "claude", "until": "2026-12-06T15:04:00Z", "reason": "usage limit"}),
            ),
        ];
        let got = notices_for_events("p", &events);
        let kinds: Vec<_> = got.iter().map(|n| n.kind).collect();
        assert_eq!(
            kinds,
            [
                NoticeKind::NeedsHuman,
                NoticeKind::BudgetWarning,
                NoticeKind::BudgetExhausted,
                NoticeKind::TaskFailed,
                NoticeKind::NeedsHuman,
                NoticeKind::AgentPaused
            ]
        );
        assert!(
            got[5].body.starts_with("claude paused until "),
            "{}",
            got[5].body
        );
        assert!(got[5].body.ends_with(" (usage limit)"), "{}", got[5].body);
        assert_eq!(got[0].body, "A needs a human decision: pick a db");
        assert_eq!(got[0].title, "whilly: p");
        assert!(!NoticeKind::PlanFinished.rings());
        assert!(NoticeKind::NeedsHuman.rings());
    }
}
