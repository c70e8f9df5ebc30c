//! The HTTP surface over the queue (read-only): `/health/live`, `/health/ready`, `/health`,
//! `/metrics` (Prometheus text), `/events/stream` (Server-Sent Events of the audit trail) and
//! the status page `/` with its data `/status.json`.
//! It binds to loopback unless told otherwise, and anywhere else only with a bearer token,
//! which every route but `/health/live` then requires.

mod auth;
pub(crate) mod listener;
mod metrics;
pub(crate) mod status;
mod stream;

use crate::config::SecretString;
use crate::store::Store;
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    #[error("`{0}` is not an address to listen on; write HOST:PORT, e.g. 127.0.0.1:8787")]
    BadAddr(String),
    #[error(
        "{0} is not a loopback address: set [http] token (WHILLY_HTTP_TOKEN) so every request must carry it, or listen on 127.0.0.1"
    )]
    NeedsToken(SocketAddr),
    #[error("cannot listen on {addr}: {detail}")]
    Bind { addr: SocketAddr, detail: String },
    #[error("the HTTP server stopped: {0}")]
    Serve(String),
}

/// Where and how to listen.
#[derive(Clone)]
pub(crate) struct HttpOptions {
    pub addr: SocketAddr,
    pub token: Option<SecretString>,
    /// The configured `[run] agent`, named on the status page for tasks that name none.
    pub default_agent: Option<String>,
    /// What one client may use up (`[http] max_connections`, `header_timeout_secs`).
    pub limits: listener::Limits,
}

impl HttpOptions {
    /// `addr` from `[http] addr` or a flag; off loopback a token is required.
    pub(crate) fn new(addr: &str, token: Option<SecretString>) -> Result<HttpOptions, HttpError> {
        let addr: SocketAddr = addr
            .trim()
            .parse()
            .map_err(|_| HttpError::BadAddr(addr.to_string()))?;
        let token = token.filter(|t| !t.expose().trim().is_empty());
        if !addr.ip().is_loopback() && token.is_none() {
            return Err(HttpError::NeedsToken(addr));
        }
        Ok(HttpOptions {
            addr,
            token,
            default_agent: None,
            limits: listener::Limits::default(),
        })
    }
}

#[derive(Clone)]
pub(crate) struct AppCtx {
    pub store: Arc<dyn Store>,
    pub token: Option<SecretString>,
    pub offline_after: Duration,
    /// The live end of the audit trail, shared by every `/events/stream` client.
    pub events: Arc<stream::EventHub>,
    pub default_agent: Option<String>,
}

/// A bound server: its address (the port may have been 0) and the task serving it.
pub(crate) struct Server {
    pub addr: SocketAddr,
    handle: tokio::task::JoinHandle<Result<(), HttpError>>,
    tail: tokio::task::JoinHandle<()>,
    token: bool,
}

impl Server {
    /// Whether requests must carry the bearer token.
    pub(crate) fn has_token(&self) -> bool {
        self.token
    }

    /// Waits for the server to end (it ends only with an error, or when `stop` resolves).
    pub(crate) async fn wait(mut self) -> Result<(), HttpError> {
        (&mut self.handle)
            .await
            .map_err(|e| HttpError::Serve(e.to_string()))?
    }
}

impl Drop for Server {
    /// A server beside a run or worker ends with it.
    fn drop(&mut self) {
        self.handle.abort();
        self.tail.abort();
    }
}

/// Binds and serves until `stop` resolves.
pub(crate) async fn start(
    store: Arc<dyn Store>,
    opts: &HttpOptions,
    offline_after: Duration,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<Server, HttpError> {
    let (events, tail) = stream::EventHub::start(store.clone());
    let ctx = AppCtx {
        store,
        token: opts.token.clone(),
        offline_after,
        events,
        default_agent: opts.default_agent.clone(),
    };
    let listener = tokio::net::TcpListener::bind(opts.addr)
        .await
        .map_err(|e| HttpError::Bind {
            addr: opts.addr,
            detail: e.to_string(),
        })?;
    let addr = listener.local_addr().map_err(|e| HttpError::Bind {
        addr: opts.addr,
        detail: e.to_string(),
    })?;
    let guarded = Router::new()
        .route("/health/ready", get(ready))
        .route("/health", get(health))
        .route("/metrics", get(metrics::metrics))
        .route("/events/stream", get(stream::events))
        .route("/", get(status::page))
        .route("/status.json", get(status::json))
        .layer(middleware::from_fn_with_state(ctx.clone(), require_token));
    let app = Router::new()
        .route("/health/live", get(live))
        .merge(guarded)
        .with_state(ctx);
    let limits = opts.limits;
    let handle = tokio::spawn(async move {
        listener::serve(listener, app, limits, stop).await;
        Ok(())
    });
    Ok(Server {
        addr,
        handle,
        tail,
        token: opts.token.is_some(),
    })
}

/// With a token configured, every guarded route wants `Authorization: Bearer TOKEN`, or the
/// token as the password of HTTP Basic (what a browser sends once asked: see [`auth`]).
async fn require_token(State(ctx): State<AppCtx>, req: Request, next: Next) -> Response {
    if let Some(want) = &ctx.token {
        let given = auth::presented_token(req.headers()).unwrap_or_default();
        if !constant_time_eq(given.as_bytes(), want.expose().as_bytes()) {
            return (
                StatusCode::UNAUTHORIZED,
                [
                    (header::WWW_AUTHENTICATE, "Bearer"),
                    (header::WWW_AUTHENTICATE, auth::BASIC_CHALLENGE),
                ],
                "a bearer token is required: Authorization: Bearer <[http] token>\n",
            )
                .into_response();
        }
    }
    next.run(req).await
}

/// Compares without leaking where the first difference is.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn live() -> &'static str {
    "ok\n"
}

/// Ready when the database answers within a second.
async fn ready(State(ctx): State<AppCtx>) -> Response {
    match tokio::time::timeout(Duration::from_secs(1), ctx.store.list_workers()).await {
        Ok(Ok(_)) => (StatusCode::OK, "ready\n").into_response(),
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the queue does not answer: {e}\n"),
        )
            .into_response(),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            "the queue did not answer within 1 s\n",
        )
            .into_response(),
    }
}

async fn health(State(ctx): State<AppCtx>) -> Response {
    let info = ctx.store.info();
    let now = chrono::Utc::now();
    let (workers, plans) = match (ctx.store.list_workers().await, ctx.store.list_plans().await) {
        (Ok(w), Ok(p)) => (w, p),
        (Err(e), _) | (_, Err(e)) => {
            return (
                StatusCode::SERVICE_UNAVAILABLE,
                axum::Json(serde_json::json!({"status": "unavailable", "error": e.to_string()})),
            )
                .into_response();
        }
    };
    let online = workers
        .iter()
        .filter(|w| w.online(now, ctx.offline_after))
        .count();
    axum::Json(serde_json::json!({
        "status": "ok",
        "version": env!("CARGO_PKG_VERSION"),
        "backend": info.backend.to_string(),
        "workers_online": online,
        "plans": plans.iter().map(|p| serde_json::json!({
            "id": p.plan.id,
            "paused": p.plan.paused,
            "total": p.counts.total,
            "done": p.counts.get(crate::domain::Status::Done),
        })).collect::<Vec<_>>(),
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_loopback_needs_a_token() {
        assert!(HttpOptions::new("127.0.0.1:0", None).is_ok());
        assert!(HttpOptions::new("[::1]:0", None).is_ok());
        let e = HttpOptions::new("0.0.0.0:8787", None)
            .err()
            .map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("[http] token")));
        assert!(HttpOptions::new("0.0.0.0:8787", Some(SecretString::new("t"))).is_ok());
        assert!(HttpOptions::new("0.0.0.0:8787", Some(SecretString::new(" "))).is_err());
        assert!(matches!(
            HttpOptions::new("localhost", None),
            Err(HttpError::BadAddr(_))
        ));
        assert!(constant_time_eq(b"abc", b"abc") && !constant_time_eq(b"abc", b"abd"));
    }
}
