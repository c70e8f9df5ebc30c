//! Plan files: parsing both shapes (v3 `tasks.json`, v4 plan JSON), validation with precise
//! locations, the decision gate, the deterministic TRIZ report and the canonical export.
//!
//! Flow: bytes → [`parse_plan`] (shape, types, pointers) → [`validate_plan`] (ids, references,
//! cycles) → [`gate_failures`] per task; [`check_plan`] / [`load_plan_file`] run all three and
//! collect every problem in a [`CheckReport`].

pub(crate) mod agent_review;
pub mod check;
pub(crate) mod decompose;
pub(crate) mod diagnostic;
pub mod export;
pub(crate) mod gate;
pub(crate) mod locate;
pub(crate) mod parse;
pub mod render;
pub(crate) mod sources;
pub mod starter;
pub mod triz;
pub(crate) mod validate;

pub use check::{
    CheckReport, MAX_PLAN_BYTES, PlanFileError, check_plan, check_plan_with, check_spec,
    load_plan_file, load_plan_file_with,
};
pub use diagnostic::{Diagnostic, Location, Severity};
pub use export::{canonical_json, canonical_value};
pub use gate::{GATE_SKIP_REASON, GateFailure, GateResult, gate_failures};
pub use parse::{Parsed, SourceMap, parse_plan};
pub use render::{render_check, render_diagnostic, render_triz};
pub use triz::{TrizFinding, TrizReport, TrizSeverity, Verdict, triz_report};
pub use validate::validate_plan;
