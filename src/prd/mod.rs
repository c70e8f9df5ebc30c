//! The PRD wizard and the plan challenge, without any UI: what `whilly prd …`, `whilly plan
//! challenge` and the console's `n` and `c` keys drive.
//!
//! - [`oneshot`]: one read-only agent call ([`OneShot::ask`]) as a plain child process in its
//!   own process group, killed on timeout and on drop; typed errors.
//! - [`interview`]: one question at a time ([`interview::next_question`], [`Step`]), tolerant
//!   parsing of the agent's reply.
//! - [`document`]: the PRD written by the agent, [`slug`], saved as `docs/PRD-<slug>.md` without
//!   replacing a different file.
//! - [`plan_gen`]: the PRD turned into a plan (JSON extracted from chatter, checked like a plan
//!   file, one repair round, the raw reply kept under `.whilly/prd/` on failure), gate results.
//! - [`merge`]: [`merge_into`] a plan already imported, or [`save_as_new_plan`].
//! - [`challenge`]: the agent's critique of a plan.
//! - [`preflight`]: the agent's split of a task too big, its TRIZ analysis, the gate's LLM pass
//!   (JSON answers checked against the plan, one repair round).
//! - [`decompose`]: those splits applied in turn, shown as a diff, and written into an imported
//!   plan (`whilly plan decompose`, the console's split key).
//! - [`wizard`]: [`Wizard`], the whole flow as one pure state machine (`handle(Input) ->
//!   Vec<Effect>`) that both `whilly prd` and the console drive; its rules live there.
//! - [`jobs`]: [`run_job`], the wizard's jobs (agent calls, files, merges, imports) run for real.
//!
//! The prompts live in [`prompts`].

pub(crate) mod challenge;
pub(crate) mod decompose;
pub(crate) mod document;
pub(crate) mod error;
pub(crate) mod interview;
pub(crate) mod jobs;
pub(crate) mod merge;
pub(crate) mod oneshot;
pub(crate) mod plan_gen;
pub(crate) mod preflight;
pub(crate) mod prompts;
pub(crate) mod wizard;

pub use challenge::{Challenge, challenge_plan};
pub use document::{PrdDraft, save_prd, slug, write_prd};
pub use error::{MergeError, PrdError};
pub use interview::{DEFAULT_MAX_QUESTIONS, QaPair, Step, next_question, parse_step};
pub use jobs::{JobContext, JobDone, Spent, plan_request, run_job};
pub use merge::{
    Collisions, MergeOutcome, default_plan_path, merge_and_import, merge_into, save_as_new_plan,
    write_plan_file,
};
pub use oneshot::{OneShot, OneShotError};
pub use plan_gen::{GeneratedPlan, PlanRequest, check_spec, extract_json, generate_plan};
pub use wizard::{
    Applied, Effect, Input, Job, PlanOptions, PlanProblem, Reply, STATE_DIR, Stage, Wizard,
    WizardOptions,
};
