//! Ctrl-C and SIGTERM: the first asks for a graceful stop, the second for an immediate one.

use crate::engine::StopLevel;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

/// Installs the handlers and returns the channel the engine watches.
pub(crate) fn shutdown_channel() -> watch::Receiver<StopLevel> {
    let (tx, rx) = watch::channel(StopLevel::Run);
    tokio::spawn(async move {
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("cannot listen for SIGTERM: {e}");
                None
            }
        };
        let mut count = 0;
        loop {
            tokio::select! {
                r = tokio::signal::ctrl_c() => { if r.is_err() { return; } }
                Some(()) = async { match term.as_mut() { Some(t) => t.recv().await, None => std::future::pending().await } } => {}
            }
            count += 1;
            let level = if count == 1 {
                StopLevel::Graceful
            } else {
                StopLevel::Now
            };
            // The stop first: with stderr in a closed pipe the message cannot be written, and
            // the stop must happen anyway.
            let sent = tx.send(level).is_ok();
            if count == 1 {
                errln!(
                    "whilly: stopping: no new tasks; running agents may finish (press Ctrl-C again to kill them)"
                );
            } else {
                errln!("whilly: killing running agents");
            }
            if !sent || level == StopLevel::Now {
                return;
            }
        }
    });
    rx
}
