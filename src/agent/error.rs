//! Errors of the agent layer that stop an attempt before it starts.

/// Why a backend could not be built or could not produce a command line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    #[error(
        "agent backend `{backend}`: executable {configured:?} not found ({detail}); install it or set \
         agents.{backend}.bin to its full path"
    )]
    BinaryNotFound {
        backend: String,
        configured: String,
        detail: String,
    },
    #[error("agents.{backend}.command: {message}")]
    BadTemplate { backend: String, message: String },
    #[error(
        "unknown agent backend {0:?} (expected claude, opencode, codex, gemini, command or handoff)"
    )]
    UnknownBackend(String),
    #[error("agent `{backend}` is a human handoff: it has no program to run")]
    NotAProcess { backend: String },
    #[error("agents.{backend}: {message}")]
    Config { backend: String, message: String },
}
