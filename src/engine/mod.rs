//! The engine: claim → worktree → agent in a PTY → verify → repair → deliver → complete.
//!
//! `worker` is the loop (claims, leases, reaper, budget, shutdown, settlement) and knows nothing
//! of agents; an [`executor::Executor`] does one attempt's work.

pub mod attempt;
pub mod board_sync;
pub mod budget;
pub mod checks;
pub mod configure;
pub mod control;
pub mod decision;
pub mod delivery;
pub mod dispatch;
pub mod doctor;
mod engine_config;
pub mod executor;
pub mod fence;
pub mod follow;
pub mod github_publish;
pub mod handoff_runner;
pub mod inbox;
pub mod intake;
pub mod jira_sync;
pub mod landing;
pub mod live_spend;
pub mod outage;
pub mod outcome;
pub mod panes;
mod plan_state;
pub mod presence;
pub mod progress;
pub mod publish;
pub mod pull_watch;
pub mod report;
mod schedule;
pub mod sessions;
mod settle;
pub mod setup;
mod setup_error;
mod spend;
mod turn;
pub mod verify;
pub mod worker;

pub use control::{StopLevel, StopReason};
pub use executor::{AttemptOutcome, Executor};
pub use outcome::RunEnd;
pub use worker::{Engine, EngineConfig, RunSummary};
