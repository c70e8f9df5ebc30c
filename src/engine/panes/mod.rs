//! Remote panes: the live terminal of an agent running in another process (another machine,
//! on Postgres) in this console's pane. A worker publishes a watched session's output through
//! the queue database (`sharing.rs`); a console follows it into a local emulator (`view.rs`).
//! Chunks are deflated when it pays (`codec.rs`) and redacted like the attempt logs.

mod codec;
mod sharing;
mod view;

pub use sharing::PanePublisher;
pub use view::RemotePanes;

use std::time::Duration;

/// How often a publisher looks for new output of its watched sessions.
const TICK: Duration = Duration::from_millis(25);
/// How often a publisher asks who watches (a new viewer waits at most this for its screen).
const WATCH_POLL: Duration = Duration::from_millis(400);
/// A watch not refreshed for this long has ended (the console went away).
const WATCH_TTL: Duration = Duration::from_secs(8);
/// How often a console refreshes its watches.
const WATCH_REFRESH: Duration = Duration::from_secs(2);
/// How often a console reads new chunks.
const VIEW_POLL: Duration = Duration::from_millis(30);
/// Chunks read at once.
const BATCH: i64 = 256;
/// A watched session gets a fresh snapshot this often while it prints (older chunks are
/// pruned then, so the table holds one snapshot's worth per watched pane).
const SNAPSHOT_EVERY: Duration = Duration::from_secs(10);
/// The PTY tap's cap between two ticks; past it the tap drops to a snapshot.
const TAP_CAP: usize = 1024 * 1024;
