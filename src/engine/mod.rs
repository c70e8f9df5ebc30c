//! The engine: claim → worktree → agent in a PTY → verify → repair → deliver → complete.

pub mod budget;
pub mod outcome;
pub mod verify;
