//! Where pane contents come from: live PTY sessions in the console, plain emulators fed with
//! recorded bytes in tests. The renderer only needs a `vt100::Screen` for a task pk.

use crate::pty::{Emulator, PtySession};
use std::collections::BTreeMap;
use std::sync::Arc;

pub trait PaneScreens {
    /// Runs `f` on the screen of the session for `task_pk`; false when there is none.
    fn with_screen(&self, task_pk: i64, f: &mut dyn FnMut(&vt100::Screen)) -> bool;
}

impl PaneScreens for BTreeMap<i64, Arc<PtySession>> {
    fn with_screen(&self, task_pk: i64, f: &mut dyn FnMut(&vt100::Screen)) -> bool {
        match self.get(&task_pk) {
            Some(pty) => {
                pty.with_screen(|s| f(s));
                true
            }
            None => false,
        }
    }
}

impl PaneScreens for BTreeMap<i64, Emulator> {
    fn with_screen(&self, task_pk: i64, f: &mut dyn FnMut(&vt100::Screen)) -> bool {
        match self.get(&task_pk) {
            Some(emu) => {
                f(emu.screen());
                true
            }
            None => false,
        }
    }
}

/// No screens at all (views without panes, tests).
pub struct NoScreens;

impl PaneScreens for NoScreens {
    fn with_screen(&self, _: i64, _: &mut dyn FnMut(&vt100::Screen)) -> bool {
        false
    }
}
