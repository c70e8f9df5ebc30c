//! Pure domain logic: no IO, no async. Everything here is tested directly.

pub mod graph;
pub mod ids;
pub mod model;
pub mod money;
pub mod status;

pub use ids::{safe_id, validate_id, IdError};
pub use model::{PlanFormat, PlanSpec, Priority, RepoTarget, TaskSpec, VerificationCommand};
pub use money::{budget_allows, Usd};
pub use status::{transition, Action, IllegalTransition, Status};
