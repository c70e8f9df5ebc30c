//! `/events/stream`: the audit trail as Server-Sent Events, each with its sequence number as
//! its id. `Last-Event-ID` (or `?after=`) replays the rows after it from the events table,
//! then the stream goes live; `?plan=` filters. A client that falls behind is cut off (its
//! buffer is bounded) and reconnects with its last id, so nothing is lost and nobody slows the
//! server.

use super::AppCtx;
use crate::store::{Event, EventFilter};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use serde::Deserialize;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Events read at once, from the table.
const BATCH: i64 = 500;
/// What a client may have unread before it is cut off.
const BUFFER: usize = 2048;

#[derive(Debug, Deserialize)]
pub(super) struct StreamQuery {
    after: Option<i64>,
    plan: Option<String>,
}

pub(super) async fn events(
    State(ctx): State<AppCtx>,
    headers: HeaderMap,
    Query(q): Query<StreamQuery>,
) -> impl axum::response::IntoResponse {
    let from_header = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let after = from_header.or(q.after);
    let (tx, rx) = mpsc::channel(BUFFER);
    tokio::spawn(feed(ctx, after, q.plan, tx));
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

fn sse_of(e: &Event) -> SseEvent {
    SseEvent::default()
        .id(e.id.to_string())
        .event(e.event_type.clone())
        .data(serde_json::to_string(e).unwrap_or_else(|_| "{}".into()))
}

async fn feed(
    ctx: AppCtx,
    after: Option<i64>,
    plan: Option<String>,
    tx: mpsc::Sender<Result<SseEvent, Infallible>>,
) {
    let store = ctx.store;
    let mut watch = store.watch_events().await;
    // No id given: from now on (the newest event is history).
    let mut last = match after {
        Some(a) => a,
        None => store
            .events(&EventFilter {
                limit: Some(1),
                newest: true,
                ..EventFilter::default()
            })
            .await
            .ok()
            .and_then(|e| e.last().map(|e| e.id))
            .unwrap_or(0),
    };
    loop {
        let batch = match store
            .events(&EventFilter {
                after_id: Some(last),
                plan_id: plan.clone(),
                limit: Some(BATCH),
                ..EventFilter::default()
            })
            .await
        {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("event stream: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let full = batch.len() as i64 >= BATCH;
        for e in &batch {
            last = e.id;
            match tx.try_send(Ok(sse_of(e))) {
                Ok(()) => {}
                // Behind by a whole buffer, or gone: end the stream; a client that is still
                // there reconnects with its last id and is replayed from the table.
                Err(_) => return,
            }
        }
        if full {
            continue;
        }
        if tx.is_closed() {
            return;
        }
        watch.changed(Duration::from_secs(5)).await;
    }
}
