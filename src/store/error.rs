use crate::domain::{IllegalTransition, Status};

/// Everything a store can refuse or fail with.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database cannot be reached at all: an environment problem (exit 4).
    #[error("cannot reach the {backend} queue at {location}: {detail}\n  check: {hint}")]
    Unreachable {
        backend: &'static str,
        location: String,
        detail: String,
        hint: String,
    },

    /// The server answers but admits no more connections now (its `max_connections`, or the
    /// role's `CONNECTION LIMIT`): a slot frees up when another process lets one go.
    #[error(
        "the {backend} queue at {location} admits no more connections now: {detail}\n  check: raise max_connections (or the role's CONNECTION LIMIT), or run fewer processes against it"
    )]
    Full {
        backend: &'static str,
        location: String,
        detail: String,
    },

    /// The store kept failing with transient errors for longer than the engine waits.
    #[error(
        "the {backend} queue at {location} did not answer for {waited_secs} s (last error: {last})\n  \
         check that the database is up and reachable; running agents were stopped and their tasks \
         go back to PENDING when their leases expire"
    )]
    Outage {
        backend: &'static str,
        location: String,
        waited_secs: u64,
        last: String,
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
    /// Environment errors end a command with exit 4; the rest with 1.
    pub fn is_environment(&self) -> bool {
        matches!(
            self,
            StoreError::Unreachable { .. } | StoreError::Outage { .. } | StoreError::Full { .. }
        ) || matches!(self, StoreError::Db(e) if matches!(e, sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Tls(_)))
    }
}

impl StoreError {
    /// A fault that may go away by itself: the connection was lost or refused, the server is
    /// restarting or full, the pool had no connection to give, SQLite was busy. The engine
    /// retries these (with backoff) instead of ending; everything else is an answer.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unreachable { .. } | StoreError::Full { .. } => true,
            StoreError::Db(e) => sqlx_transient(e),
            // Every process migrates on open; losing the connection while it checks is a fault.
            StoreError::Migrate(
                sqlx::migrate::MigrateError::Execute(e)
                | sqlx::migrate::MigrateError::ExecuteMigration(e, _),
            ) => sqlx_transient(e),
            _ => false,
        }
    }
}

fn sqlx_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => true,
        // A connection closed under a statement surfaces as a protocol error in some paths.
        sqlx::Error::Protocol(msg) => {
            let m = msg.to_ascii_lowercase();
            m.contains("connection") || m.contains("unexpected eof") || m.contains("closed")
        }
        sqlx::Error::Database(db)
            if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() =>
        {
            // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes; and
            // SQLITE_CANTOPEN (14), what a new connection gets while the process is out of file
            // descriptors: a lasting one still ends in the outage limit, naming the database.
            let code = db.code().and_then(|c| c.parse::<i64>().ok());
            matches!(code.map(|c| c & 0xff), Some(5 | 6 | 14))
        }
        sqlx::Error::Database(db) => match db.code().as_deref() {
            // Postgres: connection exceptions (08…), operator intervention — admin or crash
            // shutdown, cannot connect now (57P01–57P03), too many connections (53300),
            // serialization failure / deadlock (40001 / 40P01) when retries ran out.
            Some(code) if code.starts_with("08") => true,
            Some("57P01" | "57P02" | "57P03" | "53300" | "53400" | "40001" | "40P01") => true,
            _ => false,
        },
        _ => false,
    }
}

pub type StoreResult<T> = Result<T, StoreError>;
