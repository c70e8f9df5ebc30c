//! What `whilly worker` says while it works: one line on stdout per task it starts and per task
//! it ends (done, failed, parked for a human, released, sent back for a retry), read from the
//! audit trail, so the lines say exactly what the trail holds. `--json`: the events themselves.

use crate::store::{EventFilter, Store, event_types};
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

/// The events that start or end a task's turn on a worker.
const TURN_EVENTS: &[&str] = &[
    event_types::TASK_STARTED,
    event_types::TASK_DONE,
    event_types::TASK_FAILED,
    event_types::TASK_HUMAN_LOOP,
    event_types::TASK_BLOCKED,
    event_types::TASK_SKIPPED,
    event_types::TASK_RETRY,
    event_types::TASK_RELEASED,
];

/// Follows the trail from now on and prints this worker's task lines until `stop` fires, then
/// prints what came last (the end of the last task). Best effort: a trail that does not answer
/// for a moment only delays the lines (the engine rides the outage out on its own).
pub(crate) async fn follow(
    store: Arc<dyn Store>,
    worker_id: String,
    json: bool,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) {
    let newest = store
        .events(&EventFilter {
            limit: Some(1),
            newest: true,
            ..EventFilter::default()
        })
        .await
        .ok()
        .and_then(|e| e.last().map(|e| e.id))
        .unwrap_or(0);
    let mut filter = EventFilter {
        after_id: Some(newest),
        event_types: TURN_EVENTS.iter().map(|t| (*t).to_string()).collect(),
        limit: Some(500),
        ..EventFilter::default()
    };
    let mut last_round = false;
    loop {
        if !last_round {
            tokio::select! {
                () = store.wait_for_work(Duration::from_secs(2)) => {}
                _ = &mut stop => last_round = true,
            }
        }
        let Ok(events) = store.events(&filter).await else {
            if last_round {
                return;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        if let Some(last) = events.last() {
            filter.after_id = Some(last.id);
        }
        let mut out = std::io::stdout().lock();
        for e in events
            .iter()
            .filter(|e| e.worker_id.as_deref() == Some(worker_id.as_str()))
        {
            let line = super::events_cmd::format_event(e, json);
            if writeln!(out, "{line}").is_err() {
                return;
            }
        }
        let _ = out.flush();
        if last_round {
            return;
        }
    }
}
