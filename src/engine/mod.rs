//! The engine: claim → worktree → agent in a PTY → verify → repair → deliver → complete.
//!
//! `worker` is the loop (claims, leases, reaper, budget, shutdown, settlement) and knows nothing
//! of agents; an [`executor::Executor`] does one attempt's work.

pub(crate) mod agent_limits;
pub(crate) mod attempt;
pub(crate) mod awaiting_human;
pub(crate) mod board_sync;
pub(crate) mod budget;
pub(crate) mod checks;
pub(crate) mod configure;
pub mod control;
pub(crate) mod decision;
pub(crate) mod delivery;
pub(crate) mod doctor;
mod engine_config;
pub mod executor;
pub(crate) mod fence;
pub(crate) mod follow;
pub(crate) mod github_publisher;
pub(crate) mod handoff_runner;
pub(crate) mod intake;
pub(crate) mod jira_sync;
pub(crate) mod landing;
pub(crate) mod live_spend;
pub(crate) mod outage;
pub(crate) mod outcome;
pub mod panes;
mod plan_state;
pub(crate) mod presence;
pub(crate) mod progress;
pub(crate) mod pull_watch;
pub(crate) mod remote_delivery;
pub(crate) mod report;
mod schedule;
pub mod sessions;
mod settle;
pub(crate) mod setup;
mod setup_error;
mod spend;
pub(crate) mod stack;
pub(crate) mod stuck;
pub(crate) mod trail;
mod turn;
pub(crate) mod verify;
pub(crate) mod worker;

pub use control::{StopLevel, StopReason};
pub use engine_config::{EngineConfig, FollowerSetup, PanesSetup};
pub use executor::{AttemptOutcome, Executor};
pub use outcome::RunEnd;
pub use setup::Observer;
pub use stuck::Stuck;
pub use worker::{Engine, RunSummary};
