//! The accept loop of `--http`: what a stranger on the network can use up is bounded here,
//! because the same process runs the agents. A client gets at most
//! [`Limits::header_timeout`] to send a whole request head (a slowloris client sending a
//! byte every few seconds is dropped, and so is one that connects and says nothing); at most
//! [`Limits::max_connections`] connections are open at once, far below the process's file
//! descriptor budget, and one over that is closed at once; an accept error (the process out
//! of descriptors after all) pauses the loop instead of spinning.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

/// What one listener allows.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 128,
            header_timeout: Duration::from_secs(10),
        }
    }
}

/// Serves `app` on `listener` until `stop` resolves; open connections then get a few seconds
/// to finish.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let mut refused: u64 = 0;
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => break,
            a = listener.accept() => a,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors (EMFILE) or the like: wait for some to be freed rather
                // than spin on an error the next accept would repeat.
                tracing::warn!("http: accept failed: {e}; pausing the listener for a moment");
                tokio::time::sleep(Duration::from_millis(250)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refused += 1;
            if refused.is_power_of_two() {
                tracing::warn!(
                    %peer,
                    "http: {} connections open, the limit; closed this one ({refused} so far)",
                    limits.max_connections
                );
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(app.clone());
        let conn = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = conn.await {
                tracing::debug!(%peer, "http connection: {e}");
            }
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), graceful.shutdown()).await;
}
