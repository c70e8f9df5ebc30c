use crate::domain::{IllegalTransition, Status};

/// Everything a store can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached at all: an environment problem (exit 2).
    #[error("cannot reach the {backend} queue at {location}: {detail}\n  check: {hint}")]
    Unreachable {
        backend: &'static str,
        location: String,
        detail: String,
        hint: String,
    },

    #[error("{kind} {id:?} not found")]
    NotFound { kind: &'static str, id: String },

    /// The presented (task, epoch) is no longer the task's lease: nothing was changed.
    #[error("stale lease for task {task_pk} epoch {epoch}: the task was reclaimed or moved on")]
    Stale { task_pk: i64, epoch: i64 },

    #[error("task {task_id}: {source}")]
    Illegal {
        task_id: String,
        source: IllegalTransition,
    },

    #[error("task {task_id} is {status}: {message}")]
    Refused {
        task_id: String,
        status: Status,
        message: String,
    },

    #[error("invalid input: {0}")]
    Invalid(String),

    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),

    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),

    #[error("stored data is corrupt: {0}")]
    Corrupt(String),

    #[error("I/O error on {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl StoreError {
    /// Environment errors end a command with exit 2; the rest with 1.
    pub fn is_environment(&self) -> bool {
        matches!(self, StoreError::Unreachable { .. })
            || matches!(self, StoreError::Db(e) if matches!(e, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_)))
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
