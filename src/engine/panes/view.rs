//! The console's side of remote panes: the terminals of agents running in other processes (on
//! other machines, with Postgres), fed from the queue database into local emulators, read-only
//! unless `[remote] takeover` lets the operator type into them.

use super::codec;
use super::{BATCH, VIEW_POLL, WATCH_REFRESH};
use crate::pty::{Emulator, InputModes, TermSize};
use crate::store::{PaneChunk, Store};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// One remote terminal as this console sees it.
struct Screen {
    /// The newest chunk applied (or the snapshot to start from, less one).
    cursor: i64,
    /// `None` until the first snapshot: bytes without one cannot be drawn.
    emu: Option<Emulator>,
    attempt: i64,
    updated: Option<Instant>,
}

#[derive(Default)]
struct Screens {
    by_task: BTreeMap<i64, Screen>,
}

/// The remote terminals this console watches, kept current by a task of their own.
pub struct RemotePanes {
    screens: Arc<Mutex<Screens>>,
    wanted: watch::Sender<BTreeSet<i64>>,
    changed: Arc<Notify>,
    store: Arc<dyn Store>,
    viewer: String,
    task: JoinHandle<()>,
}

impl RemotePanes {
    /// Starts watching nothing; `viewer` names this console in the watches (its worker id).
    pub fn start(store: Arc<dyn Store>, viewer: String) -> RemotePanes {
        let screens = Arc::new(Mutex::new(Screens::default()));
        let (wanted, wanted_rx) = watch::channel(BTreeSet::new());
        let changed = Arc::new(Notify::new());
        let task = tokio::spawn(follow(
            store.clone(),
            viewer.clone(),
            screens.clone(),
            wanted_rx,
            changed.clone(),
        ));
        RemotePanes {
            screens,
            wanted,
            changed,
            store,
            viewer,
            task,
        }
    }

    /// The tasks whose terminals to show (the others are let go).
    pub fn want(&self, task_pks: BTreeSet<i64>) {
        self.wanted.send_if_modified(|w| {
            if *w == task_pks {
                false
            } else {
                *w = task_pks;
                true
            }
        });
    }

    /// Notified whenever a remote screen changed.
    pub fn changed(&self) -> Arc<Notify> {
        self.changed.clone()
    }

    /// Runs `f` on the remote screen of `task_pk`; false while there is none (yet).
    pub fn with_screen(&self, task_pk: i64, f: &mut dyn FnMut(&vt100::Screen)) -> bool {
        match lock(&self.screens)
            .by_task
            .get(&task_pk)
            .and_then(|s| s.emu.as_ref())
        {
            Some(emu) => {
                f(emu.screen());
                true
            }
            None => false,
        }
    }

    /// Whether the remote screen of `task_pk` has arrived.
    pub fn has_screen(&self, task_pk: i64) -> bool {
        lock(&self.screens)
            .by_task
            .get(&task_pk)
            .is_some_and(|s| s.emu.is_some())
    }

    /// The screen's text (tests, evidence).
    pub fn screen_text(&self, task_pk: i64) -> Option<String> {
        lock(&self.screens)
            .by_task
            .get(&task_pk)
            .and_then(|s| s.emu.as_ref().map(Emulator::screen_text))
    }

    /// The size the remote agent's terminal has.
    pub fn size(&self, task_pk: i64) -> Option<TermSize> {
        lock(&self.screens)
            .by_task
            .get(&task_pk)
            .and_then(|s| s.emu.as_ref().map(Emulator::size))
    }

    /// The input modes the remote program asked for (how to encode keys for it).
    pub fn input_modes(&self, task_pk: i64) -> Option<InputModes> {
        lock(&self.screens)
            .by_task
            .get(&task_pk)
            .and_then(|s| s.emu.as_ref().map(Emulator::input_modes))
    }

    /// Sends keys to the remote agent (its worker applies them only with `[remote] takeover`).
    pub fn send_keys(&self, task_pk: i64, bytes: Vec<u8>) {
        let (store, viewer) = (self.store.clone(), self.viewer.clone());
        tokio::spawn(async move {
            if let Err(e) = store.send_pane_input(task_pk, &viewer, &bytes).await {
                tracing::warn!(task_pk, "remote keys: {e}");
            }
        });
    }
}

impl Drop for RemotePanes {
    /// Stops following and ends the watches now rather than when they expire.
    fn drop(&mut self) {
        self.task.abort();
        let pks: Vec<i64> = self.wanted.borrow().iter().copied().collect();
        if pks.is_empty() {
            return;
        }
        let (store, viewer) = (self.store.clone(), self.viewer.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for pk in pks {
                    let _ = store.unwatch_pane(pk, &viewer).await;
                }
            });
        }
    }
}

fn lock(m: &Mutex<Screens>) -> MutexGuard<'_, Screens> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn follow(
    store: Arc<dyn Store>,
    viewer: String,
    screens: Arc<Mutex<Screens>>,
    mut wanted: watch::Receiver<BTreeSet<i64>>,
    changed: Arc<Notify>,
) {
    let mut next_refresh = Instant::now();
    // Full batches in a row: this console is behind, and jumps to the newest snapshot.
    let mut behind = 0u32;
    loop {
        let want: BTreeSet<i64> = wanted.borrow_and_update().clone();
        let now = Instant::now();
        // New watches start from the newest snapshot; screens no longer wanted go.
        let (added, dropped) = {
            let s = lock(&screens);
            let added: Vec<i64> = want
                .iter()
                .filter(|pk| !s.by_task.contains_key(pk))
                .copied()
                .collect();
            let dropped: Vec<i64> = s
                .by_task
                .keys()
                .filter(|pk| !want.contains(pk))
                .copied()
                .collect();
            (added, dropped)
        };
        for pk in &dropped {
            lock(&screens).by_task.remove(pk);
            let _ = store.unwatch_pane(*pk, &viewer).await;
        }
        for pk in &added {
            let _ = store.watch_pane(*pk, &viewer).await;
            let cursor = start_cursor(&*store, *pk).await;
            lock(&screens).by_task.insert(
                *pk,
                Screen {
                    cursor,
                    emu: None,
                    attempt: 0,
                    updated: None,
                },
            );
        }
        if !dropped.is_empty() {
            changed.notify_one();
        }
        if now >= next_refresh {
            next_refresh = now + WATCH_REFRESH;
            for pk in &want {
                if let Err(e) = store.watch_pane(*pk, &viewer).await {
                    tracing::debug!(task_pk = pk, "remote panes: watch: {e}");
                }
            }
        }
        let cursors: Vec<(i64, i64)> = lock(&screens)
            .by_task
            .iter()
            .map(|(pk, s)| (*pk, s.cursor))
            .collect();
        let mut full = false;
        if !cursors.is_empty() {
            match store.pane_chunks(&cursors, BATCH).await {
                Ok(chunks) => {
                    full = chunks.len() as i64 >= BATCH;
                    if !chunks.is_empty() {
                        apply(&mut lock(&screens), chunks);
                        changed.notify_one();
                    }
                }
                Err(e) => tracing::debug!("remote panes: read: {e}"),
            }
        }
        behind = if full { behind + 1 } else { 0 };
        if behind >= 2 {
            behind = 0;
            for (pk, _) in &cursors {
                let cursor = start_cursor(&*store, *pk).await;
                if let Some(s) = lock(&screens).by_task.get_mut(pk)
                    && cursor > s.cursor
                {
                    s.cursor = cursor;
                }
            }
        }
        if full {
            continue;
        }
        // Watching nothing: wait to be asked, not every poll (an idle console costs nothing).
        let watching = !want.is_empty();
        tokio::select! {
            _ = tokio::time::sleep(VIEW_POLL), if watching => {}
            r = wanted.changed() => if r.is_err() { return },
        }
    }
}

/// Just before the newest snapshot (0 when there is none yet: the first one is awaited).
async fn start_cursor(store: &dyn Store, pk: i64) -> i64 {
    match store.latest_pane_snapshot(pk).await {
        Ok(Some(id)) => id - 1,
        _ => 0,
    }
}

/// Feeds chunks (in id order) to their screens: a snapshot starts a fresh emulator of its
/// size; bytes go to the screen they follow; bytes with no snapshot before them are skipped.
fn apply(screens: &mut Screens, chunks: Vec<PaneChunk>) {
    for c in chunks {
        let Some(s) = screens.by_task.get_mut(&c.task_pk) else {
            continue;
        };
        s.cursor = s.cursor.max(c.id);
        let bytes = match codec::decode(c.compressed, &c.data) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(task_pk = c.task_pk, "{e}");
                continue;
            }
        };
        if c.snapshot {
            let mut emu = Emulator::new(TermSize::new(c.rows, c.cols), 0);
            emu.process(&bytes);
            s.emu = Some(emu);
            s.attempt = c.attempt;
        } else if let Some(emu) = s.emu.as_mut().filter(|_| s.attempt == c.attempt) {
            // Replies to the terminal's queries are the publisher's emulator's to send.
            emu.process(&bytes);
        }
        s.updated = Some(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: i64, snapshot: bool, bytes: &[u8]) -> PaneChunk {
        let (compressed, data) = codec::encode(bytes);
        PaneChunk {
            id,
            task_pk: 7,
            attempt: 1,
            snapshot,
            rows: 5,
            cols: 20,
            compressed,
            data,
        }
    }

    #[test]
    fn bytes_follow_their_snapshot_and_nothing_draws_before_one() {
        let mut s = Screens::default();
        s.by_task.insert(
            7,
            Screen {
                cursor: 0,
                emu: None,
                attempt: 0,
                updated: None,
            },
        );
        apply(&mut s, vec![chunk(3, false, b"lost")]);
        assert!(s.by_task[&7].emu.is_none());
        assert_eq!(s.by_task[&7].cursor, 3);
        let mut local = Emulator::new(TermSize::new(5, 20), 0);
        local.process(b"\x1b[1mhello\x1b[m\r\nworld");
        let snap = local.screen().state_formatted();
        apply(
            &mut s,
            vec![chunk(4, true, &snap), chunk(5, false, b" and more")],
        );
        let text = s.by_task[&7].emu.as_ref().map(Emulator::screen_text);
        assert_eq!(text.as_deref(), Some("hello\nworld and more"));
        let emu = s.by_task[&7].emu.as_ref().expect("emu");
        assert!(emu.screen().cell(0, 0).is_some_and(|c| c.bold()));
        assert_eq!(s.by_task[&7].cursor, 5);
    }
}
