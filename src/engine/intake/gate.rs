//! The decision gate at import, one for every source: each task's deterministic checks
//! (`plan::gate_failures`) and, with `[gate] llm = true`, the agent's pass, which is advisory
//! and fail-open. The gate never refuses an import: without `--strict` it warns, with
//! `--strict` the tasks it fails are imported SKIPPED. The agent's verdicts become
//! `gate.llm_verdict` events once the plan (and so its id) exists.

use super::{IntakeEnv, Note};
use crate::domain::PlanSpec;
use crate::plan;
use crate::prd::preflight;
use crate::store::Store;
use std::collections::BTreeMap;

/// The agent pass's verdicts, to record as events against the imported plan: (task, payload),
/// no task for a pass that failed open.
#[must_use = "the verdicts are recorded with `record` once the plan is imported"]
pub(crate) struct GateVerdicts(Vec<(Option<String>, serde_json::Value)>);

/// Runs the gate over the tasks of `spec` not in `skip` already (closed upstream, say). With
/// `strict` the tasks it fails are added to `skip`; otherwise each is warned about, unless
/// `quiet`.
pub(crate) async fn decision_gate(
    env: &IntakeEnv<'_>,
    spec: &PlanSpec,
    skip: &mut BTreeMap<String, String>,
    strict: bool,
    quiet: bool,
) -> GateVerdicts {
    let asked = PlanSpec {
        tasks: spec
            .tasks
            .iter()
            .filter(|t| !skip.contains_key(&t.id))
            .cloned()
            .collect(),
        ..spec.clone()
    };
    let fail = |id: &str, skip: &mut BTreeMap<String, String>, why: String| {
        if strict {
            skip.insert(id.to_string(), plan::GATE_SKIP_REASON.to_string());
        } else if !quiet {
            (env.notes)(Note::Warning(format!("{id}: decision gate{why}")));
        }
    };
    for task in &asked.tasks {
        let failures = plan::gate_failures(task);
        if !failures.is_empty() {
            let why: Vec<String> = failures.iter().map(|f| f.to_string()).collect();
            fail(&task.id, skip, format!(": {}", why.join("; ")));
        }
    }
    let mut events = Vec::new();
    if asked.tasks.is_empty() {
        return GateVerdicts(events);
    }
    match agent_pass(env, &asked).await {
        None => {}
        Some(Err(e)) => {
            let e = e.lines().next().unwrap_or_default().to_string();
            (env.notes)(Note::Warning(format!(
                "decision gate: the agent pass failed, every task goes through: {e}"
            )));
            events.push((None, serde_json::json!({ "fail_open": true, "error": e })));
        }
        Some(Ok((agent, verdicts))) => {
            for v in &verdicts.verdicts {
                if v.vague {
                    fail(
                        &v.task_id,
                        skip,
                        format!(" ({agent}): too vague: {}", v.reason),
                    );
                }
                events.push((
                    Some(v.task_id.clone()),
                    serde_json::json!({ "agent": agent, "vague": v.vague, "reason": v.reason }),
                ));
            }
        }
    }
    GateVerdicts(events)
}

/// The agent's pass (`[gate] llm = true`): which tasks of `spec` it finds too vague. Fail-open,
/// as in the original: no agent, an agent error or an unusable answer lets every task through
/// with a warning. `None` when the pass is off.
async fn agent_pass(
    env: &IntakeEnv<'_>,
    spec: &PlanSpec,
) -> Option<Result<(String, plan::agent_review::GateVerdicts), String>> {
    let cfg = env.cfg?;
    if !cfg.gate.llm {
        return None;
    }
    let agent = match crate::engine::configure::read_only_agent(
        cfg,
        env.repo_root,
        cfg.gate.agent.as_deref(),
        crate::prd::oneshot::DEFAULT_TIMEOUT,
    ) {
        Ok(a) => a,
        Err(e) => return Some(Err(e.to_string())),
    };
    let raw_dir = env.repo_root.join(crate::prd::STATE_DIR);
    let call = preflight::Call {
        agent: &agent,
        cwd: env.repo_root,
        raw_dir: &raw_dir,
    };
    (env.notes)(Note::Line(format!(
        "decision gate: asking {} which tasks are too vague…",
        agent.agent_name()
    )));
    Some(
        preflight::gate_pass(call, spec)
            .await
            .map(|a| (agent.agent_name().to_string(), a.value))
            .map_err(|e| e.to_string()),
    )
}

impl GateVerdicts {
    /// Writes the verdicts as `gate.llm_verdict` events of `plan_id`.
    pub(crate) async fn record(self, store: &dyn Store, plan_id: &str) {
        for (task, payload) in self.0 {
            crate::store::record_event(
                store,
                "gate.llm_verdict",
                plan_id,
                task.as_deref(),
                payload,
            )
            .await;
        }
    }
}
