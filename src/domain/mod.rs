//! Pure domain logic: no IO, no async. Everything here is tested directly.

pub(crate) mod checks;
pub(crate) mod dispatch;
pub(crate) mod doctor;
pub mod exit_codes;
pub(crate) mod graph;
pub(crate) mod ids;
pub(crate) mod landing_lint;
pub(crate) mod model;
pub(crate) mod money;
pub(crate) mod payload_caps;
pub mod rate_limit;
pub(crate) mod reap;
pub(crate) mod resources;
pub(crate) mod retry;
pub(crate) mod sandbox_report;
pub mod secrets;
pub(crate) mod split;
pub(crate) mod status;

pub use ids::{IdError, safe_id, validate_id};
pub use model::{PlanFormat, PlanSpec, Priority, RepoTarget, TaskSpec, VerificationCommand};
pub use money::{Usd, budget_allows};
pub use split::TaskSplit;
pub use status::{Action, IllegalTransition, Status, transition};
