//! Running a task with an agent, minus the process itself.
//!
//! The engine asks a [`Backend`] for the argv/env of one attempt, hands that to the `pty` module,
//! and gives the raw PTY bytes back to the backend to get an [`AgentResult`]. Everything here is
//! pure or touches only small files (the handoff directory), so it is tested directly:
//!
//! - [`backend`]: the interface, settings and the factory; [`process_backend`]: the one backend,
//!   parameterised by a [`process_backend::Cli`] per agent CLI, each in its own file holding only
//!   its argv and output parser ([`claude`], [`opencode`], [`codex`], [`gemini`], [`command`]);
//!   [`handoff`]: the files through which a human does a task instead.
//! - [`result`]: [`AgentResult`], usage, prices, ANSI stripping and the completion marker.
//! - [`classify`]: error classes and the retry backoff.
//! - [`prompt`]: the task prompt with its nonce envelope; [`guards`]: injection, secret and
//!   shell deny-list checks, and [`guards::redact_secrets`].
//! - [`transcript`]: each CLI's JSON lines rendered as readable text for a pane (the PTY
//!   display filter); [`live_usage`]: the usage they carry priced while the agent runs (one
//!   meter, a [`live_usage::LineReader`] per CLI).
//! - [`binary`]: finding an agent's executable on PATH with an actionable error.

pub mod backend;
pub(crate) mod binary;
pub(crate) mod classify;
pub mod claude;
pub mod codex;
pub(crate) mod command;
pub(crate) mod error;
pub mod gemini;
pub mod guards;
pub mod handoff;
pub mod jsonscan;
pub(crate) mod live_usage;
pub mod opencode;
pub(crate) mod process_backend;
pub(crate) mod prompt;
pub mod result;
pub(crate) mod runner;
pub(crate) mod shellwords;
pub mod transcript;

pub use backend::{
    AgentCommand, AgentSettings, Backend, BackendKind, Invocation, OutputMode, PermissionMode,
};
pub use binary::resolve_binary;
pub use classify::{DEFAULT_BACKOFF_SECS, ErrorClass, backoff, classify_outcome, classify_text};
pub use error::AgentError;
pub use guards::{BlockReason, Guards, redact_secrets};
pub use handoff::{HandoffDir, HandoffPoll, HandoffResult, HandoffStatus};
pub use live_usage::{SessionLog, UsageMeter};
pub use prompt::{PromptInput, Repair, build_prompt};
pub use result::{AgentResult, COMPLETION_MARKER, CostSource, ModelPrice, PriceTable, Usage};
pub use runner::{Runner, build_backend, build_runner};
pub use transcript::{TranscriptFilter, render_stream_line};

/// A real CLI's output kept under `tests/fixtures/agents/`, for the parsers' tests.
#[cfg(test)]
pub(crate) fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/agents/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}
