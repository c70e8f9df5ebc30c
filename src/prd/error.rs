//! Errors of the PRD wizard, plan generation, merging and the challenge.

use super::oneshot::OneShotError;
use crate::store::StoreError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PrdError {
    #[error(transparent)]
    Agent(#[from] OneShotError),
    #[error("the agent's reply is not {what}; it said:\n{reply}")]
    Unparseable { what: &'static str, reply: String },
    #[error(
        "the agent gave no valid plan after {calls} call(s); its last reply is kept in {}\nproblems:\n{problems}",
        raw_file.display()
    )]
    PlanInvalid {
        raw_file: PathBuf,
        calls: u32,
        problems: String,
    },
    #[error(
        "the agent gave no {what} after {calls} call(s); its last reply is kept in {}\nproblems:\n{problems}",
        raw_file.display()
    )]
    AnswerInvalid {
        what: &'static str,
        raw_file: PathBuf,
        calls: u32,
        problems: String,
    },
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Decompose(#[from] crate::plan::decompose::DecomposeError),
    #[error("this step needs {0}, which it was not given")]
    Missing(&'static str),
}

/// Why a plan could not be merged into another.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error(
        "task ids already in plan {plan}: {}; rename them or merge with renaming",
        ids.join(", ")
    )]
    Collision { plan: String, ids: Vec<String> },
    #[error("the merged plan is invalid:\n{0}")]
    Invalid(String),
}
