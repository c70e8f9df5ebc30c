//! Forges work comes from and goes to: GitHub issues in, pull requests out. The client speaks
//! the forge's API (`github`); the rest turns its answers into plans and a task's evidence
//! into a pull request. Depends only on `domain` and `config` types; the engine and the CLI call it.

pub mod board;
pub mod compose;
pub mod github;
pub mod import;
pub mod intake;
pub mod jira;
pub mod refs;
