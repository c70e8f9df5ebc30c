//! What a PTY session shares with its reader and waiter threads: the emulated screen, the output
//! counters, the run state. A leaf of its own so the session and its threads both depend on it.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::watch;

use super::emulator::Emulator;
use super::process::ExitInfo;
use super::stats::OutputCounters;
use super::tap::Tap;

/// Where the child is in its life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunState {
    /// Set once the child has exited.
    pub exit: Option<ExitInfo>,
    /// Set once the reader has seen the end of the output (or stopped reading).
    pub output_closed: bool,
}

/// State shared with the reader and waiter threads.
pub(crate) struct Shared {
    pub(super) emulator: Mutex<Emulator>,
    pub(crate) counters: OutputCounters,
    pub(super) generation: watch::Sender<u64>,
    pub(crate) run: watch::Sender<RunState>,
    /// A copy of the emulator's input for a remote viewer, only while one watches.
    pub(super) tap: Mutex<Option<Tap>>,
}

impl Shared {
    /// Feeds the emulator (returning its query replies) and, while a viewer watches, the tap,
    /// under the emulator's lock: a snapshot and the bytes after it never overlap or miss.
    pub(crate) fn emulate(&self, bytes: &[u8]) -> Vec<u8> {
        let mut emu = self.lock_emulator();
        let answer = emu.process(bytes);
        if let Some(tap) = self.lock_tap().as_mut() {
            tap.push(bytes);
        }
        answer
    }

    pub(super) fn lock_tap(&self) -> MutexGuard<'_, Option<Tap>> {
        self.tap.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lock_emulator(&self) -> MutexGuard<'_, Emulator> {
        // A panic while holding the lock leaves the emulator usable (vt100 panics are caught
        // inside), so poisoning is not a reason to stop.
        self.emulator.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn bump_generation(&self) {
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }
}
