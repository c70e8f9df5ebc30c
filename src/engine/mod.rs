//! The engine: claim → worktree → agent in a PTY → verify → repair → deliver → complete.

pub mod verify;
