//! Pre-flight with an agent: a task split by the agent (`whilly plan decompose`), the agent's
//! TRIZ analysis (`whilly plan triz --agent`) and the decision gate's LLM pass (`[gate] llm`).
//! Each is one read-only [`OneShot`] call whose JSON answer is dug out of the reply, parsed,
//! checked against the plan, and sent back once with its problems when it fails (as plan
//! generation does); the checks themselves are pure and live in `plan::decompose` and
//! `plan::agent_review`.

use super::error::PrdError;
use super::oneshot::OneShot;
use super::plan_gen::{extract_json_with, keep_raw_reply};
use super::prompts;
use crate::domain::{PlanSpec, Usd};
use crate::plan::agent_review::{self, AgentTriz, GateVerdicts};
use crate::plan::decompose::{self, Split, SplitRules};
use crate::plan::{self, canonical_json};
use serde::de::DeserializeOwned;
use std::path::Path;

/// Repair rounds after a first answer that fails its checks.
pub(crate) const REPAIR_ROUNDS: u32 = 1;

/// An answer that passed its checks, with what it took.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer<T> {
    pub value: T,
    pub calls: u32,
    pub cost: Usd,
}

/// Where the agent is asked and where a failed reply is kept.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call<'a> {
    pub agent: &'a OneShot,
    pub cwd: &'a Path,
    /// `.whilly/prd/`: the raw reply of an answer that never passed its checks.
    pub raw_dir: &'a Path,
}

/// Asks `prompt`, takes the JSON object with the array `key`, parses it as `T` and checks it
/// with `problems`; one repair round with the problems; typed failure with the raw reply kept.
async fn ask_json<T: DeserializeOwned>(
    call: Call<'_>,
    label: &str,
    what: &'static str,
    key: &str,
    prompt: String,
    problems: impl Fn(&T) -> Vec<String>,
) -> Result<Answer<T>, PrdError> {
    let mut cost = Usd::ZERO;
    let mut calls = 0;
    let mut next = prompt.clone();
    loop {
        let reply = call.agent.ask(label, &next, call.cwd).await?;
        calls += 1;
        cost += reply.cost;
        let found = match extract_json_with(&reply.text, key) {
            None => Err(format!(
                "no JSON object with a \"{key}\" array was found in the reply (reply with the JSON object only)"
            )),
            Some(json) => match serde_json::from_str::<T>(&json) {
                Err(e) => Err(format!("the JSON does not match the format: {e}")),
                Ok(v) => {
                    let p = problems(&v);
                    if p.is_empty() {
                        Ok(v)
                    } else {
                        Err(p.join("\n"))
                    }
                }
            },
        };
        match found {
            Ok(value) => return Ok(Answer { value, calls, cost }),
            Err(p) if calls <= REPAIR_ROUNDS => {
                tracing::info!(calls, label, "agent answer invalid; asking for a repair");
                next = prompts::json_repair(&prompt, &reply.text, &p);
            }
            Err(problems) => {
                let raw_file = keep_raw_reply(call.raw_dir, label, &reply.text)?;
                return Err(PrdError::AnswerInvalid {
                    what,
                    calls,
                    problems,
                    raw_file,
                });
            }
        }
    }
}

/// The agent's split of `task_id` (picked for `reason`), checked against the plan.
pub(crate) async fn decompose_task(
    call: Call<'_>,
    spec: &PlanSpec,
    task_id: &str,
    reason: &str,
    rules: SplitRules,
) -> Result<Answer<Split>, PrdError> {
    let parent = spec
        .task(task_id)
        .ok_or(PrdError::Missing("the task to split"))?;
    let prompt = prompts::decompose(&canonical_json(spec), task_id, reason);
    ask_json(
        call,
        &format!("decompose-{task_id}"),
        "usable split",
        "subtasks",
        prompt,
        |s: &Split| decompose::split_problems(spec, parent, s, rules),
    )
    .await
}

/// The agent's contradiction analysis of `spec`, building on the deterministic report.
pub(crate) async fn triz_analysis(
    call: Call<'_>,
    spec: &PlanSpec,
) -> Result<Answer<AgentTriz>, PrdError> {
    let deterministic = plan::render_triz(&plan::triz_report(spec), false);
    let prompt = prompts::triz(&canonical_json(spec), &deterministic);
    ask_json(
        call,
        "plan-triz",
        "valid TRIZ analysis",
        "contradictions",
        prompt,
        |a: &AgentTriz| agent_review::triz_problems(spec, a),
    )
    .await
}

/// The decision gate's LLM pass: which tasks the agent finds too vague to act on.
pub(crate) async fn gate_pass(
    call: Call<'_>,
    spec: &PlanSpec,
) -> Result<Answer<GateVerdicts>, PrdError> {
    let prompt = prompts::gate_llm(&canonical_json(spec));
    ask_json(
        call,
        "plan-gate",
        "valid gate verdict",
        "verdicts",
        prompt,
        |g: &GateVerdicts| agent_review::gate_problems(spec, g),
    )
    .await
}
