//! The worker's side of remote panes: while someone watches one of this process's agents, its
//! terminal goes to the queue database in small chunks. Nothing is published while nobody
//! watches; the agent is never slowed (the PTY tap is bounded and drops to a snapshot).

use super::codec;
use super::{SNAPSHOT_EVERY, TAP_CAP, TICK, WATCH_POLL, WATCH_TTL};
use crate::domain::secrets::{StreamRedactor, redact_bytes};
use crate::engine::sessions::SessionRegistry;
use crate::pty::{PtySession, ScreenSnapshot};
use crate::store::{PaneChunk, PaneWatch, Store};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// More bytes than this between two ticks go as a snapshot instead (it is smaller, and the
/// viewer does not replay a flood).
const CHUNK_MAX: usize = 256 * 1024;

/// What the publisher does for one watched session.
struct Published {
    pty: Arc<PtySession>,
    attempt: i64,
    viewers: BTreeSet<(String, i64)>,
    last_snapshot: Option<i64>,
    snapshot_at: Instant,
    output_since_snapshot: bool,
    /// A write failed or the tap overflowed: the viewer needs a fresh screen.
    resync: bool,
    redactor: StreamRedactor,
}

/// Publishes this process's watched panes until stopped. `takeover` lets viewers type into
/// them (`[remote] takeover`); otherwise their keys are dropped.
pub struct PanePublisher {
    store: Arc<dyn Store>,
    sessions: SessionRegistry,
    takeover: bool,
}

impl PanePublisher {
    pub fn new(store: Arc<dyn Store>, sessions: SessionRegistry, takeover: bool) -> Self {
        PanePublisher {
            store,
            sessions,
            takeover,
        }
    }

    /// Runs until `stop` turns true (or its sender goes); what it published is removed then.
    pub fn spawn(self, stop: watch::Receiver<bool>) -> JoinHandle<()> {
        tokio::spawn(self.run(stop))
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut published: HashMap<i64, Published> = HashMap::new();
        let mut watches: BTreeMap<i64, Vec<PaneWatch>> = BTreeMap::new();
        let mut next_watch_poll = Instant::now();
        let mut sessions_changed = self.sessions.subscribe();
        loop {
            if *stop.borrow() {
                break;
            }
            // With no agent running here and nothing published there is nothing to share:
            // wait for a session instead of ticking (an idle console costs nothing).
            let idle =
                published.is_empty() && self.sessions.snapshot().iter().all(|s| s.pty.is_none());
            tokio::select! {
                _ = tokio::time::sleep(TICK), if !idle => {}
                r = sessions_changed.changed(), if idle => if r.is_err() { break },
                r = stop.changed() => if r.is_err() { break },
            }
            let live: BTreeMap<i64, (Arc<PtySession>, i64)> = self
                .sessions
                .snapshot()
                .into_iter()
                .filter_map(|s| s.pty.map(|p| (s.task_pk, (p, s.attempt))))
                .collect();
            let now = Instant::now();
            if now >= next_watch_poll {
                next_watch_poll = now + WATCH_POLL;
                let pks: Vec<i64> = live.keys().copied().collect();
                match self.store.pane_watches(&pks, WATCH_TTL).await {
                    Ok(ws) => {
                        watches.clear();
                        for w in ws {
                            watches.entry(w.task_pk).or_default().push(w);
                        }
                    }
                    Err(e) => tracing::debug!("remote panes: who watches: {e}"),
                }
            }
            // Sessions that ended, or that nobody watches any more.
            let gone: Vec<i64> = published
                .iter()
                .filter(|(pk, p)| {
                    !live
                        .get(pk)
                        .is_some_and(|(pty, _)| Arc::ptr_eq(pty, &p.pty))
                        || !watches.contains_key(pk)
                })
                .map(|(pk, _)| *pk)
                .collect();
            for pk in gone {
                if let Some(p) = published.remove(&pk) {
                    p.pty.tap_stop();
                }
                self.clear(pk).await;
            }
            for (pk, (pty, attempt)) in &live {
                let Some(ws) = watches.get(pk) else { continue };
                let viewers: BTreeSet<(String, i64)> = ws
                    .iter()
                    .map(|w| (w.viewer.clone(), w.since.timestamp_millis()))
                    .collect();
                match published.get_mut(pk) {
                    None => {
                        let mut p = Published {
                            pty: pty.clone(),
                            attempt: *attempt,
                            viewers,
                            last_snapshot: None,
                            snapshot_at: now,
                            output_since_snapshot: false,
                            resync: false,
                            redactor: StreamRedactor::new(),
                        };
                        let snap = pty.tap_start(TAP_CAP);
                        self.snapshot(*pk, &mut p, snap, now).await;
                        published.insert(*pk, p);
                    }
                    Some(p) => {
                        // A new viewer starts from a screen of its own.
                        if !viewers.is_subset(&p.viewers) {
                            p.resync = true;
                        }
                        p.viewers = viewers;
                        self.tick(*pk, p, now).await;
                    }
                }
            }
            if self.takeover && !published.is_empty() {
                let pks: Vec<i64> = published.keys().copied().collect();
                match self.store.take_pane_input(&pks).await {
                    Ok(keys) => {
                        for k in keys {
                            if let Some(p) = published.get(&k.task_pk)
                                && let Err(e) = p.pty.write_input(&k.data)
                            {
                                tracing::warn!(task_pk = k.task_pk, "remote keys: {e}");
                            }
                        }
                    }
                    Err(e) => tracing::debug!("remote panes: keys: {e}"),
                }
            }
        }
        for (pk, p) in published {
            p.pty.tap_stop();
            self.clear(pk).await;
        }
    }

    /// One watched session's tick: its new bytes, or a snapshot when one is due.
    async fn tick(&self, pk: i64, p: &mut Published, now: Instant) {
        let Some(read) = p.pty.tap_take() else {
            p.resync = true;
            let snap = p.pty.tap_start(TAP_CAP);
            self.snapshot(pk, p, snap, now).await;
            return;
        };
        p.output_since_snapshot |= !read.bytes.is_empty();
        let due = p.output_since_snapshot && now.duration_since(p.snapshot_at) >= SNAPSHOT_EVERY;
        if read.overflowed || p.resync || read.bytes.len() > CHUNK_MAX || due {
            let snap = p.pty.tap_start(TAP_CAP);
            self.snapshot(pk, p, snap, now).await;
            return;
        }
        let out = if read.bytes.is_empty() {
            if !p.redactor.holding() {
                return;
            }
            p.redactor.flush()
        } else {
            p.redactor.feed(&read.bytes)
        };
        if out.is_empty() {
            return;
        }
        let size = p.pty.size();
        let (compressed, data) = codec::encode(&out);
        let chunk = PaneChunk {
            id: 0,
            task_pk: pk,
            attempt: p.attempt,
            snapshot: false,
            rows: size.rows,
            cols: size.cols,
            compressed,
            data,
        };
        if let Err(e) = self.store.publish_pane(&chunk).await {
            tracing::debug!(task_pk = pk, "remote panes: publish: {e}");
            p.resync = true;
        }
    }

    /// Publishes the whole screen and drops what came before the previous one (a viewer that
    /// lags further than that resyncs from the newest snapshot).
    async fn snapshot(&self, pk: i64, p: &mut Published, snap: ScreenSnapshot, now: Instant) {
        p.redactor = StreamRedactor::new();
        let (compressed, data) = codec::encode(&redact_bytes(&snap.bytes));
        let chunk = PaneChunk {
            id: 0,
            task_pk: pk,
            attempt: p.attempt,
            snapshot: true,
            rows: snap.size.rows,
            cols: snap.size.cols,
            compressed,
            data,
        };
        match self.store.publish_pane(&chunk).await {
            Ok(id) => {
                if let Some(before) = p.last_snapshot
                    && let Err(e) = self.store.prune_pane(pk, Some(before)).await
                {
                    tracing::debug!(task_pk = pk, "remote panes: prune: {e}");
                }
                p.last_snapshot = Some(id);
                p.snapshot_at = now;
                p.output_since_snapshot = false;
                p.resync = false;
            }
            Err(e) => {
                tracing::debug!(task_pk = pk, "remote panes: snapshot: {e}");
                p.resync = true;
            }
        }
    }

    async fn clear(&self, pk: i64) {
        if let Err(e) = self.store.prune_pane(pk, None).await {
            tracing::debug!(task_pk = pk, "remote panes: clear: {e}");
        }
    }
}
