//! `c` in the console, `whilly plan challenge`: the agent plays devil's advocate on a plan.

use super::error::PrdError;
use super::oneshot::OneShot;
use super::prompts;
use crate::domain::{PlanSpec, Usd};
use crate::plan;
use std::path::Path;

/// The agent's critique of a plan (Markdown).
#[derive(Debug, Clone, PartialEq)]
pub struct Challenge {
    pub text: String,
    pub cost: Usd,
}

/// Asks the agent (read-only) to critique `spec`: risks, missing tasks, vague criteria,
/// dependencies. The deterministic TRIZ findings go with the plan so the agent builds on them
/// rather than repeating them.
pub async fn challenge_plan(
    agent: &OneShot,
    cwd: &Path,
    spec: &PlanSpec,
) -> Result<Challenge, PrdError> {
    let triz = plan::render_triz(&plan::triz_report(spec), false);
    let prompt = prompts::challenge(&plan::canonical_json(spec), &triz);
    let reply = agent.ask("plan-challenge", &prompt, cwd).await?;
    Ok(Challenge {
        text: reply.text,
        cost: reply.cost,
    })
}
