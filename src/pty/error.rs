use std::path::PathBuf;

/// Everything spawning or driving a PTY session can fail with.
#[derive(Debug, thiserror::Error)]
pub enum PtyError {
    /// The spawn spec itself is unusable (empty argv, zero size …); nothing was started.
    #[error("invalid spawn spec: {0}")]
    InvalidSpec(String),

    #[error(
        "working directory {path} is not usable: {source}\n  check: the directory must exist and be readable"
    )]
    Cwd {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(
        "cannot open the session log {path}: {source}\n  check: the parent directory must be writable"
    )]
    Log {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error("cannot open a pseudo-terminal: {0}")]
    OpenPty(String),

    #[error(
        "cannot start {program:?}: {detail}\n  check: the program exists on PATH and is executable"
    )]
    Spawn { program: String, detail: String },

    /// The child did not end up leading its own process group, so group signals would miss it.
    #[error("child {pid} is not a process-group leader (pgid {pgid})")]
    NotGroupLeader { pid: i32, pgid: i32 },

    #[error("cannot resize the pseudo-terminal to {rows}x{cols}: {detail}")]
    Resize {
        rows: u16,
        cols: u16,
        detail: String,
    },

    /// The writer's queue is full: the child is not reading its input.
    #[error("the child is not reading its input (input queue full); try again later")]
    InputBackpressure,

    /// The writer thread has ended (the child closed its terminal or exited).
    #[error("the session's input is closed (the child has exited or closed its terminal)")]
    InputClosed,

    #[error("cannot signal process group {pgid}: {source}")]
    Signal { pgid: i32, source: std::io::Error },

    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

impl PtyError {
    /// Whether the system refused the spawn for lack of resources (no descriptors, processes,
    /// memory or pseudo-terminals left): nothing the task did, so not one of its attempts.
    pub fn lack_of_resources(&self) -> bool {
        use crate::domain::resources::{is_resource_io as io, is_resource_text as text};
        match self {
            PtyError::Cwd { source, .. }
            | PtyError::Log { source, .. }
            | PtyError::Io { source, .. } => io(source),
            PtyError::OpenPty(detail) | PtyError::Spawn { detail, .. } => text(detail),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_system_out_of_descriptors_or_processes_is_a_lack_of_resources() {
        let emfile = PtyError::Log {
            path: "/x".into(),
            source: std::io::Error::from_raw_os_error(libc::EMFILE),
        };
        assert!(emfile.lack_of_resources());
        assert!(
            PtyError::OpenPty("openpty: Too many open files (os error 24)".into())
                .lack_of_resources()
        );
        assert!(
            PtyError::Spawn {
                program: "claude".into(),
                detail: "fork: Resource temporarily unavailable (os error 11)".into()
            }
            .lack_of_resources()
        );
        assert!(
            !PtyError::Spawn {
                program: "claude".into(),
                detail: "No such file or directory (os error 2)".into()
            }
            .lack_of_resources()
        );
        let missing = PtyError::Cwd {
            path: "/x".into(),
            source: std::io::Error::from_raw_os_error(libc::ENOENT),
        };
        assert!(!missing.lack_of_resources());
    }
}
