//! `whilly serve`: the queue over HTTP until interrupted.

use super::context::Context;
use super::exit;
use crate::http::{HttpOptions, start};
use std::time::Duration;

pub async fn run(ctx: &Context, addr: Option<&str>) -> anyhow::Result<i32> {
    let cfg = ctx.config()?;
    let token = match &cfg.http.token {
        Some(t) => Some(
            t.resolve()
                .map_err(|e| anyhow::anyhow!("[http] token: {e}"))?,
        ),
        None => None,
    };
    let opts = match HttpOptions::new(addr.unwrap_or(&cfg.http.addr), token) {
        Ok(o) => o,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::FAILED);
        }
    };
    let store = ctx.store().await?;
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let server = match start(
        store,
        &opts,
        Duration::from_secs(cfg.queue.worker_offline_secs),
        stop,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            errln!("error: {e}");
            return Ok(exit::ENVIRONMENT);
        }
    };
    outln!(
        "serving http://{} ({}); Ctrl-C stops",
        server.addr,
        if opts.token.is_some() {
            "a bearer token is required on every route but /health/live"
        } else {
            "loopback only, no token"
        }
    );
    server.wait().await?;
    Ok(exit::OK)
}
