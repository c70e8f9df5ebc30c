//! The operator's decisions on work that waits for a human, recorded the same way whoever
//! makes them (the console's inbox, `whilly handoff complete`): an `operator.decision` event,
//! written before the decision is applied. The executor reads the newest `send_back` one into
//! the next attempt's prompt.

use crate::store::{Event, NewEvent, Store, StoreResult, event_types as et};
use serde_json::json;

/// Who decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    Console,
    Cli,
}

impl Source {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Source::Console => "console",
            Source::Cli => "cli",
        }
    }
}

/// Records one decision. `verb`: `approve`, `reject`, `send_back`, `block`, `human_loop`;
/// `waited_as`: what the task was waiting as (a handoff, HUMAN_LOOP, BLOCKED).
pub(crate) async fn record(
    store: &dyn Store,
    plan_id: &str,
    task_id: &str,
    verb: &str,
    message: &str,
    waited_as: &str,
    source: Source,
) -> StoreResult<Event> {
    store
        .append_event(NewEvent {
            event_type: et::OPERATOR_DECISION.to_string(),
            plan_id: Some(plan_id.to_string()),
            task_id: Some(task_id.to_string()),
            worker_id: None,
            epoch: None,
            payload: json!({
                "decision": verb,
                "message": message,
                "waited_as": waited_as,
                "source": source.as_str(),
            }),
        })
        .await
}
