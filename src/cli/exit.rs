//! Process exit codes, shared by every command.

use crate::store::StoreError;

pub const OK: i32 = 0;
/// Invalid input or failed work.
pub const FAILED: i32 = 1;
/// Environment error: database unreachable, missing binary.
pub const ENVIRONMENT: i32 = 2;
pub const INTERRUPTED: i32 = 130;

/// Marks an error as an environment problem (exit 2) when it is not a `StoreError`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EnvironmentError(pub String);

/// The user pressed Ctrl-C.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// The exit code an error that reached `main` should end the process with.
pub fn code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if cause.downcast_ref::<Interrupted>().is_some() {
            return INTERRUPTED;
        }
        if cause.downcast_ref::<EnvironmentError>().is_some() {
            return ENVIRONMENT;
        }
        if let Some(store) = cause.downcast_ref::<StoreError>() {
            return if store.is_environment() {
                ENVIRONMENT
            } else {
                FAILED
            };
        }
    }
    FAILED
}
