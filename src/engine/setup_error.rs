//! Why a run could not be set up (its own file: the configuration helpers and the setup both
//! return it, and neither imports the other for it).

use crate::store::StoreError;

/// Why a run could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SetupError {
    /// Something outside the project is missing: an agent's binary, a usable repository.
    #[error("{0}")]
    Environment(String),
    /// The configuration does not say how to do what was asked.
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Agent(#[from] crate::agent::AgentError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl SetupError {
    /// Environment problems end a command with exit 4, like an unreachable queue.
    pub(crate) fn is_environment(&self) -> bool {
        match self {
            SetupError::Environment(_) => true,
            SetupError::Store(e) => e.is_environment(),
            SetupError::Config(_) | SetupError::Agent(_) => false,
        }
    }
}
