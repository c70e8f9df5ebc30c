//! The decision gate at import, one for every source (a plan file, GitHub issues or a Projects
//! board, Jira): each task's deterministic checks (`plan::gate_failures`) and, with `[gate] llm
//! = true`, the agent's pass, which is advisory and fail-open. The gate never refuses an import:
//! without `--strict` it warns, with `--strict` the tasks it fails are imported SKIPPED. The
//! agent's verdicts become `gate.llm_verdict` events once the plan (and so its id) exists.

use super::context::Context;
use crate::domain::PlanSpec;
use crate::plan;
use crate::store::Store;
use std::collections::BTreeMap;

/// The agent pass's verdicts, to record as events against the imported plan: (task, payload),
/// no task for a pass that failed open.
#[must_use = "the verdicts are recorded with `record` once the plan is imported"]
pub(super) struct GateVerdicts(Vec<(Option<String>, serde_json::Value)>);

/// Runs the gate over the tasks of `spec` not in `skip` already (closed upstream, say). With
/// `strict` the tasks it fails are added to `skip`; otherwise each is warned about on stderr,
/// unless `quiet` (`whilly run FILE`, which reports the import itself).
pub(super) async fn decision_gate(
    ctx: &Context,
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
            errln!("warning: {id}: decision gate{why}");
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
    match super::plan_preflight::gate_llm_pass(ctx, &asked).await {
        None => {}
        Some(Err(e)) => {
            let e = super::plan_preflight::first_line(&e);
            errln!("warning: decision gate: the agent pass failed, every task goes through: {e}");
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

impl GateVerdicts {
    /// Writes the verdicts as `gate.llm_verdict` events of `plan_id`.
    pub(super) async fn record(self, store: &dyn Store, plan_id: &str) {
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
