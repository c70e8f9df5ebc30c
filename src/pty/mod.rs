//! Agents in pseudo-terminals: spawning a child in its own PTY and process group, logging its raw
//! output, emulating its screen (vt100, behind [`Emulator`]), answering the terminal queries the
//! emulator does not, encoding keys, resizing and killing whole process groups.
//!
//! Knows nothing of ratatui or the store: a pane renders [`PtySession::with_screen`] with
//! tui-term and wakes on [`PtySession::subscribe`]; evidence reads [`PtySession::screen_text`].
//!
//! Threads per session: a reader (PTY → log, optional display filter, emulator, query replies), a writer (queue → PTY) and
//! a waiter (exit status; kills the group's leftovers and reaps when the session is dropped).

mod emulator;
mod error;
mod filter;
mod io_threads;
pub(crate) mod keys;
mod process;
pub(crate) mod queries;
mod reflow;
mod session;
mod shared;
mod spec;
mod stats;
mod tap;

pub use emulator::Emulator;
pub use error::PtyError;
pub use filter::{LineFilter, MAX_HELD_LINE};
pub use keys::{
    InputModes, MouseEncoding, MouseMode, encode_focus, encode_key, encode_mouse, encode_paste,
};
pub use process::{ExitInfo, group_alive, group_members, process_group_of, signal_group};
pub use session::{PtySession, env_pairs};
pub use shared::RunState;
pub use spec::{DEFAULT_SCROLLBACK, SpawnSpec, TermSize};
pub use stats::OutputStats;
pub use tap::{ScreenSnapshot, TapRead};
