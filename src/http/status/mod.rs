//! The status page (`/`) and its data (`/status.json`): plans with progress and budget, the
//! running tasks, the inbox, the workers and the last events. Server-rendered, complete
//! without script; a few KB of script keep it live from `/events/stream`.

pub(crate) mod render;
pub(crate) mod snapshot;

use super::AppCtx;
use crate::store::event_types as et;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Events shown.
const RECENT_EVENTS: i64 = 50;

async fn snapshot_now(ctx: &AppCtx) -> Result<snapshot::StatusSnapshot, String> {
    let inputs = snapshot::gather(ctx.store.as_ref(), RECENT_EVENTS)
        .await
        .map_err(|e| e.to_string())?;
    Ok(snapshot::build(
        &inputs,
        chrono::Utc::now(),
        ctx.offline_after,
        ctx.default_agent.as_deref(),
    ))
}

fn unavailable(e: String) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the queue does not answer: {e}\n"),
    )
        .into_response()
}

pub(super) async fn page(State(ctx): State<AppCtx>) -> Response {
    match snapshot_now(&ctx).await {
        Ok(s) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                // Always the queue as it is now, never a cached one.
                (header::CACHE_CONTROL, "no-store"),
            ],
            render::page(&s, et::ALL),
        )
            .into_response(),
        Err(e) => unavailable(e),
    }
}

pub(super) async fn json(State(ctx): State<AppCtx>) -> Response {
    match snapshot_now(&ctx).await {
        Ok(s) => ([(header::CACHE_CONTROL, "no-store")], axum::Json(s)).into_response(),
        Err(e) => unavailable(e),
    }
}

#[cfg(test)]
mod tests;
