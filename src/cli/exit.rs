//! Process exit codes, shared by every command.

use crate::domain::exit_codes;
use crate::store::StoreError;

pub(crate) const OK: i32 = 0;
/// Invalid input or failed work.
pub(crate) const FAILED: i32 = 1;
/// The budget is spent (as in the original).
pub(crate) const BUDGET: i32 = exit_codes::BUDGET_EXHAUSTED;
/// Environment error: database unreachable, missing binary, refused credentials.
pub(crate) const ENVIRONMENT: i32 = exit_codes::ENVIRONMENT;
pub(crate) const INTERRUPTED: i32 = exit_codes::INTERRUPTED;

/// Marks an error as an environment problem (exit 4) when it is not a `StoreError`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct EnvironmentError(pub String);

/// The command line itself is wrong (a mistyped command): said on stderr only, no JSON
/// `complete` line, as no run began.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub String);

/// The user pressed Ctrl-C.
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub(crate) struct Interrupted;

/// The error and its causes on one line, each cause once: many of our errors already name their
/// source in their own message (`cannot read plan file x: No such file…`), which `{:#}` would
/// repeat.
pub(crate) fn describe(err: &anyhow::Error) -> String {
    let mut out = err.to_string();
    for cause in err.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out
}

/// True when the error is a write to a reader that went away (`whilly … | head`).
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit code an error that reached `main` should end the process with.
pub(crate) fn code_for(err: &anyhow::Error) -> i32 {
    for cause in err.chain() {
        if cause.downcast_ref::<Interrupted>().is_some() {
            return INTERRUPTED;
        }
        if cause.downcast_ref::<EnvironmentError>().is_some() {
            return ENVIRONMENT;
        }
        if let Some(setup) = cause.downcast_ref::<crate::engine::setup::SetupError>() {
            return if setup.is_environment() {
                ENVIRONMENT
            } else {
                FAILED
            };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read plan file x.json: {source}")]
    struct Named {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let err = anyhow::Error::new(Named { source: io });
        assert_eq!(describe(&err), "cannot read plan file x.json: No such file");
        let err = err.context("importing");
        assert_eq!(
            describe(&err),
            "importing: cannot read plan file x.json: No such file"
        );
        let plain = anyhow::anyhow!("the database is gone").context("opening the queue");
        assert_eq!(describe(&plain), "opening the queue: the database is gone");
    }
}
