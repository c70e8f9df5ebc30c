//! Where the real Claude Code CLI is for the tests that run it (see `agent_bin.rs`).

#[path = "agent_bin.rs"]
mod agent_bin;

use std::path::PathBuf;

/// The CLI to run, `None` when skipping was asked for; panics when it is missing otherwise.
pub fn claude_bin() -> Option<PathBuf> {
    agent_bin::agent_bin(agent_bin::CLAUDE)
}
