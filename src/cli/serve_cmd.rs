//! `whilly serve`: the queue over HTTP until interrupted; and `--http ADDR` beside a run,
//! the console or a worker.

use super::context::Context;
use super::exit;
use crate::http::{HttpError, HttpOptions, Server, start};
use std::time::Duration;

pub(crate) async fn run(ctx: &Context, addr: Option<&str>) -> anyhow::Result<i32> {
    let server = match bind(ctx, addr, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?
    {
        Ok(s) => s,
        Err(e) => {
            errln!("error: {e}");
            return Ok(match e {
                HttpError::BadAddr(_) | HttpError::NeedsToken(_) => exit::FAILED,
                _ => exit::ENVIRONMENT,
            });
        }
    };
    outln!(
        "serving http://{} ({}); Ctrl-C stops",
        server.addr,
        what(&server)
    );
    server.wait().await?;
    Ok(exit::OK)
}

/// `--http ADDR` of run, tui and worker: the server lives as long as the value.
pub(crate) async fn beside(ctx: &Context, addr: &str) -> anyhow::Result<Server> {
    let server = bind(ctx, Some(addr), std::future::pending()).await??;
    errln!("serving http://{} ({})", server.addr, what(&server));
    tracing::info!("serving http://{}", server.addr);
    Ok(server)
}

fn what(server: &Server) -> &'static str {
    if server.has_token() {
        "a bearer token is required on every route but /health/live"
    } else {
        "loopback only, no token"
    }
}

async fn bind(
    ctx: &Context,
    addr: Option<&str>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<Result<Server, HttpError>> {
    let cfg = ctx.config()?;
    let token = match &cfg.http.token {
        Some(t) => Some(
            t.resolve()
                .map_err(|e| anyhow::anyhow!("[http] token: {e}"))?,
        ),
        None => None,
    };
    let mut opts = match HttpOptions::new(addr.unwrap_or(&cfg.http.addr), token) {
        Ok(o) => o,
        Err(e) => return Ok(Err(e)),
    };
    opts.default_agent = Some(cfg.run.agent.clone());
    opts.limits = crate::http::listener::Limits {
        max_connections: cfg.http.max_connections as usize,
        header_timeout: Duration::from_secs(cfg.http.header_timeout_secs),
    };
    let store = ctx.store().await?;
    Ok(start(
        store,
        &opts,
        Duration::from_secs(cfg.queue.worker_offline_secs),
        stop,
    )
    .await)
}
