//! Pure domain logic: no IO, no async. Everything here is tested directly.

pub mod checks;
pub mod dispatch;
pub mod doctor;
pub mod graph;
pub mod ids;
pub mod landing_lint;
pub mod model;
pub mod money;
pub mod payload_caps;
pub mod rate_limit;
pub mod reap;
pub mod resources;
pub mod retry;
pub mod sandbox_report;
pub mod secrets;
pub mod split;
pub mod status;

pub use ids::{IdError, safe_id, validate_id};
pub use model::{PlanFormat, PlanSpec, Priority, RepoTarget, TaskSpec, VerificationCommand};
pub use money::{Usd, budget_allows};
pub use split::TaskSplit;
pub use status::{Action, IllegalTransition, Status, transition};
