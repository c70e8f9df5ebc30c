//! `/events/stream`: the audit trail as Server-Sent Events, each with its sequence number as
//! its id. `Last-Event-ID` (or `?after=`) replays the rows after it from the events table,
//! then the stream goes live; `?plan=` filters.
//!
//! One tail per server reads new rows from the table and broadcasts them to every client, so a
//! hundred followers cost the database one query per change, not a hundred. A client that
//! falls behind (its buffer is bounded) is cut off and reconnects with its last id, so nothing
//! is lost and nobody slows the server or the other clients.

use super::AppCtx;
use crate::store::{Event, EventFilter, Store};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use serde::Deserialize;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;

/// Events read at once, from the table.
const BATCH: i64 = 500;
/// What a client may have unread before it is cut off.
const BUFFER: usize = 2048;
/// What the tail keeps for clients between their wakes; a client further behind is cut off.
const FANOUT: usize = 4096;

/// The live end of the trail, shared by every client of one server.
pub(crate) struct EventHub {
    tx: broadcast::Sender<Arc<Live>>,
}

/// An event as the tail broadcasts it: rendered once, whatever the number of clients.
struct Live {
    id: i64,
    plan_id: Option<String>,
    sse: SseEvent,
}

impl EventHub {
    /// Starts the tail from the newest event; the task ends when the hub is dropped and with
    /// the server (the caller aborts it).
    pub(crate) fn start(store: Arc<dyn Store>) -> (Arc<EventHub>, tokio::task::JoinHandle<()>) {
        let (tx, _) = broadcast::channel(FANOUT);
        let hub = Arc::new(EventHub { tx });
        let task = tokio::spawn(tail(store, Arc::downgrade(&hub)));
        (hub, task)
    }
}

async fn tail(store: Arc<dyn Store>, hub: std::sync::Weak<EventHub>) {
    let mut watch = store.watch_events().await;
    let mut last = store.newest_event_id().await.unwrap_or(0);
    loop {
        let Some(tx) = hub.upgrade().map(|h| h.tx.clone()) else {
            return;
        };
        // Nobody follows: keep up with the table's end without reading the rows.
        if tx.receiver_count() == 0 {
            last = store.newest_event_id().await.unwrap_or(0).max(last);
            watch.changed(Duration::from_secs(5)).await;
            continue;
        }
        let batch = match store.events(&after(last, None)).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("event stream: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let full = batch.len() as i64 >= BATCH;
        for e in batch {
            last = e.id;
            // No receiver left is not an error: the next client replays from the table.
            let _ = tx.send(Arc::new(Live {
                id: e.id,
                sse: sse_of(&e),
                plan_id: e.plan_id,
            }));
        }
        if !full {
            watch.changed(Duration::from_secs(5)).await;
        }
    }
}

fn after(id: i64, plan: Option<&str>) -> EventFilter {
    EventFilter {
        after_id: Some(id),
        plan_id: plan.map(str::to_string),
        limit: Some(BATCH),
        ..EventFilter::default()
    }
}

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
    // Subscribed before the replay reads the table: whatever the tail broadcasts from here on
    // is either in the replay or in this receiver (both, at worst, and then skipped by id).
    let live = ctx.events.tx.subscribe();
    tokio::spawn(feed(ctx.store, live, after, q.plan, tx));
    Sse::new(ReceiverStream::new(rx)).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}

fn sse_of(e: &Event) -> SseEvent {
    SseEvent::default()
        .id(e.id.to_string())
        .event(e.event_type.clone())
        .data(serde_json::to_string(e).unwrap_or_else(|_| "{}".into()))
}

/// Why a client's stream ends.
enum Cut {
    /// Behind by a whole buffer, or gone: a client that is still there reconnects with its
    /// last id and is replayed from the table.
    Behind,
}

fn send(tx: &mpsc::Sender<Result<SseEvent, Infallible>>, e: SseEvent) -> Result<(), Cut> {
    tx.try_send(Ok(e)).map_err(|_| Cut::Behind)
}

async fn feed(
    store: Arc<dyn Store>,
    mut live: broadcast::Receiver<Arc<Live>>,
    after: Option<i64>,
    plan: Option<String>,
    tx: mpsc::Sender<Result<SseEvent, Infallible>>,
) {
    // No id given: from now on (the newest event is history).
    let mut last = match after {
        Some(a) => a,
        None => store.newest_event_id().await.unwrap_or(0),
    };
    let _ = replay_then_follow(&*store, &mut live, &mut last, plan.as_deref(), &tx).await;
}

async fn replay_then_follow(
    store: &dyn Store,
    live: &mut broadcast::Receiver<Arc<Live>>,
    last: &mut i64,
    plan: Option<&str>,
    tx: &mpsc::Sender<Result<SseEvent, Infallible>>,
) -> Result<(), Cut> {
    // The replay: the table, until a batch comes back short.
    loop {
        let batch = match store.events(&after(*last, plan)).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("event stream: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        for e in &batch {
            *last = e.id;
            send(tx, sse_of(e))?;
        }
        if (batch.len() as i64) < BATCH {
            break;
        }
    }
    // Then live, from the tail. With a plan filter, `last` only moves on that plan's events,
    // so the id check skips just what the replay already sent.
    let mut seen = *last;
    loop {
        let next = tokio::select! {
            next = live.recv() => next,
            // Gone while nothing happens: free the slot now, not at the next event.
            () = tx.closed() => return Ok(()),
        };
        match next {
            Ok(e) => {
                if e.id <= seen {
                    continue;
                }
                seen = e.id;
                if plan.is_some_and(|p| e.plan_id.as_deref() != Some(p)) {
                    continue;
                }
                *last = e.id;
                send(tx, e.sse.clone())?;
            }
            Err(broadcast::error::RecvError::Lagged(_)) => return Err(Cut::Behind),
            Err(broadcast::error::RecvError::Closed) => return Ok(()),
        }
    }
}
