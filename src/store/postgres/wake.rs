//! Wakeups: one LISTEN connection per store feeds a generation counter that waiting workers watch,
//! and another that followers of the audit trail watch (every insert into `events` notifies, by a
//! trigger).
//!
//! A waiter compares the generation it saw when its last claim started with the current one, so
//! a notification that lands between "claim found nothing" and "wait" is not lost.

use sqlx::postgres::{PgListener, PgPool};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::watch;

pub(super) const CHANNEL: &str = "whilly_work";
/// Notified by the `events_notify` trigger (migration 0003) for every statement inserting events.
pub(super) const EVENTS_CHANNEL: &str = "whilly_events";

/// Who is waiting: the tokio task when there is one, else the thread (a `block_on` caller).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Caller {
    Task(tokio::task::Id),
    Thread(std::thread::ThreadId),
}

fn caller() -> Caller {
    match tokio::task::try_id() {
        Some(id) => Caller::Task(id),
        None => Caller::Thread(std::thread::current().id()),
    }
}

/// Entries left by callers that claimed and never waited are dropped past this size.
const MAX_TRACKED_CALLERS: usize = 4096;

pub(super) struct WakeHub {
    generation: watch::Sender<u64>,
    seen_at_claim: Mutex<HashMap<Caller, u64>>,
    events: watch::Sender<u64>,
}

impl Default for WakeHub {
    fn default() -> Self {
        WakeHub {
            generation: watch::Sender::new(0),
            seen_at_claim: Mutex::new(HashMap::new()),
            events: watch::Sender::new(0),
        }
    }
}

impl WakeHub {
    pub(super) fn bump(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }

    pub(super) fn bump_events(&self) {
        self.events.send_modify(|g| *g = g.wrapping_add(1));
    }

    pub(super) fn subscribe_events(&self) -> watch::Receiver<u64> {
        self.events.subscribe()
    }

    pub(super) fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Remembers the generation as a claim starts, for the caller's next `wait`.
    pub(super) fn note_claim_start(&self) {
        let generation = self.generation();
        if let Ok(mut map) = self.seen_at_claim.lock() {
            if map.len() >= MAX_TRACKED_CALLERS {
                map.clear();
            }
            map.insert(caller(), generation);
        }
    }

    /// Resolves on the next wakeup, at once if one came since the caller's last claim began, or
    /// after `max_wait` (the polling fallback). Cancelled (the caller's timer fired first), it
    /// keeps the caller's generation, so its next wait still sees what came meanwhile.
    pub(super) async fn wait(&self, max_wait: Duration) {
        let mut rx = self.generation.subscribe();
        let now = *rx.borrow_and_update();
        let me = caller();
        let seen = self
            .seen_at_claim
            .lock()
            .ok()
            .and_then(|m| m.get(&me).copied());
        if seen.is_some_and(|s| s != now) {
            self.forget(me);
            return;
        }
        if seen.is_none()
            && let Ok(mut map) = self.seen_at_claim.lock()
        {
            // Waiting again without a claim in between: anything after now counts.
            map.insert(me, now);
        }
        let _ = tokio::time::timeout(max_wait, rx.changed()).await;
        self.forget(me);
    }

    fn forget(&self, who: Caller) {
        if let Ok(mut map) = self.seen_at_claim.lock() {
            map.remove(&who);
        }
    }
}

/// Keeps one LISTEN connection alive and turns notifications into wakeups: the first of a burst
/// wakes at once, the rest of the burst (within `debounce`) collapses into one more wakeup.
pub(super) async fn run_listener(
    pool: PgPool,
    hub: std::sync::Arc<WakeHub>,
    debounce: Duration,
    ready: tokio::sync::oneshot::Sender<()>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    loop {
        if *shutdown.borrow() {
            return;
        }
        let listener = async {
            let mut l = PgListener::connect_with(&pool).await?;
            l.listen_all([CHANNEL, EVENTS_CHANNEL]).await?;
            Ok::<_, sqlx::Error>(l)
        };
        let mut listener = tokio::select! {
            _ = shutdown.changed() => return,
            l = listener => match l {
                Ok(l) => l,
                Err(e) => {
                    tracing::debug!("postgres LISTEN connection failed: {e}; retrying in {backoff:?}");
                    tokio::select! {
                        _ = shutdown.changed() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                    continue;
                }
            }
        };
        backoff = Duration::from_millis(50);
        match ready.take() {
            Some(tx) => {
                let _ = tx.send(());
            }
            // Notifications sent while we were disconnected are lost: everyone looks again.
            None => {
                hub.bump();
                hub.bump_events();
            }
        }
        loop {
            let got = tokio::select! {
                _ = shutdown.changed() => return,
                r = listener.try_recv() => r,
            };
            match got {
                Ok(Some(n)) => {
                    let work = route(&hub, &n);
                    if work {
                        hub.bump();
                    }
                    let until = tokio::time::Instant::now() + debounce;
                    let mut lost = false;
                    let mut more_work = false;
                    while let Ok(r) = tokio::time::timeout_at(until, listener.try_recv()).await {
                        match r {
                            Ok(Some(n)) => more_work |= route(&hub, &n),
                            _ => {
                                lost = true;
                                break;
                            }
                        }
                    }
                    if work || more_work {
                        hub.bump();
                    }
                    if lost {
                        break;
                    }
                }
                Ok(None) | Err(_) => break,
            }
        }
        tracing::debug!("postgres LISTEN connection lost; reconnecting");
    }
}

/// Passes an events notification on at once (the watch folds bursts); says whether `n` was
/// about work.
fn route(hub: &WakeHub, n: &sqlx::postgres::PgNotification) -> bool {
    if n.channel() == EVENTS_CHANNEL {
        hub.bump_events();
        false
    } else {
        true
    }
}

/// [`crate::store::EventLog::watch_events`] on Postgres: the events notifications, or with NOTIFY
/// off, the clock.
pub(super) struct PgEventWatch {
    inner: std::sync::Arc<super::Inner>,
    rx: watch::Receiver<u64>,
}

impl PgEventWatch {
    pub(super) fn new(inner: std::sync::Arc<super::Inner>) -> PgEventWatch {
        let rx = inner.hub.subscribe_events();
        PgEventWatch { inner, rx }
    }
}

#[async_trait::async_trait]
impl crate::store::EventWatch for PgEventWatch {
    async fn changed(&mut self, max_wait: Duration) -> bool {
        if !self.inner.notify_enabled() {
            tokio::time::sleep(max_wait).await;
            return false;
        }
        matches!(
            tokio::time::timeout(max_wait, self.rx.changed()).await,
            Ok(Ok(()))
        )
    }
}
