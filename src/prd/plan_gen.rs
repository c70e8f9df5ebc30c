//! From a PRD to a plan: one read-only agent call, the JSON dug out of whatever the agent wrapped
//! it in, checked by the same parser and validator as a plan file, one repair round with the
//! problems sent back, and on final failure the raw reply kept on disk for the operator.

use super::error::PrdError;
use super::oneshot::OneShot;
use super::prompts;
use crate::domain::{PlanSpec, Status, Usd};
use crate::plan::{self, CheckReport, GateResult};
use std::path::{Path, PathBuf};

/// Repair rounds after the first reply when the caller does not say.
pub(crate) const DEFAULT_REPAIR_ROUNDS: u32 = 1;

/// What the plan is about and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRequest {
    /// The PRD's Markdown.
    pub prd: String,
    /// The PRD's path as the plan records it (`prd_file`), relative to the root when possible.
    pub prd_file: String,
    pub plan_id: String,
    pub project: String,
    pub repair_rounds: u32,
}

/// A plan the agent wrote that parses and validates.
#[derive(Debug, Clone)]
pub struct GeneratedPlan {
    pub spec: PlanSpec,
    /// Tasks failing the decision gate (only those).
    pub gate: Vec<GateResult>,
    /// Warnings of the check (the gate's among them).
    pub warnings: Vec<String>,
    /// Agent calls it took (1 without repair).
    pub calls: u32,
    pub cost: Usd,
}

/// Asks the agent for the plan; see the module doc. `raw_dir` (`.whilly/prd/`) receives the raw
/// reply when no valid plan came out of any round.
pub async fn generate_plan(
    agent: &OneShot,
    cwd: &Path,
    req: &PlanRequest,
    raw_dir: &Path,
) -> Result<GeneratedPlan, PrdError> {
    let prompt = prompts::plan(&req.prd, &req.prd_file, &req.plan_id, &req.project);
    let mut cost = Usd::ZERO;
    let mut calls = 0;
    let mut next_prompt = prompt.clone();
    loop {
        let reply = agent.ask("prd-plan", &next_prompt, cwd).await?;
        calls += 1;
        cost += reply.cost;
        match plan_from_reply(&reply.text, req) {
            Ok(mut generated) => {
                generated.calls = calls;
                generated.cost = cost;
                return Ok(generated);
            }
            Err(problems) if calls <= req.repair_rounds => {
                tracing::info!(calls, "plan reply invalid; asking for a repair");
                next_prompt = prompts::plan_repair(&prompt, &reply.text, &problems);
            }
            Err(problems) => {
                let raw_file = keep_raw_reply(raw_dir, &req.plan_id, &reply.text)?;
                return Err(PrdError::PlanInvalid {
                    raw_file,
                    calls,
                    problems,
                });
            }
        }
    }
}

/// The plan in one reply, normalised for our use, or the problems as text for the agent.
pub(crate) fn plan_from_reply(reply: &str, req: &PlanRequest) -> Result<GeneratedPlan, String> {
    let Some(json) = extract_json(reply) else {
        return Err(
            "no JSON object with a \"tasks\" array was found in the reply (reply with the JSON \
             object only)"
                .to_string(),
        );
    };
    let report = plan::check_plan(json.as_bytes(), "plan", false);
    let Some(mut spec) = report.valid_plan().cloned() else {
        return Err(problems_text(&report));
    };
    normalise(&mut spec, req);
    // The normalised spec is what will be saved and imported: check that, not the reply.
    let report = check_spec(&spec);
    if report.has_errors() {
        return Err(problems_text(&report));
    }
    Ok(GeneratedPlan {
        gate: report.gate.clone(),
        warnings: warnings_text(&report),
        spec,
        calls: 0,
        cost: Usd::ZERO,
    })
}

/// Our plan id, project and PRD path win over whatever the agent wrote; every task starts
/// PENDING whatever status the agent gave it.
fn normalise(spec: &mut PlanSpec, req: &PlanRequest) {
    spec.id = req.plan_id.clone();
    spec.project = req.project.clone();
    spec.extra.insert(
        "prd_file".to_string(),
        serde_json::Value::String(req.prd_file.clone()),
    );
    for t in &mut spec.tasks {
        t.status = Some(Status::Pending);
    }
}

pub use crate::plan::check_spec;

/// Every error of a check, one per line, as the agent (and the operator) should read them.
pub(crate) fn problems_text(report: &CheckReport) -> String {
    report
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(|d| plan::render_diagnostic(&report.file, d))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every warning of a check (the decision gate's among them), one line each.
pub(crate) fn warnings_text(report: &CheckReport) -> Vec<String> {
    report
        .diagnostics
        .iter()
        .filter(|d| !d.is_error())
        .map(|d| plan::render_diagnostic(&report.file, d))
        .collect()
}

/// The plan JSON inside an agent reply: the whole reply, a fenced block, or the first object
/// with a `tasks` member found among prose. Returned as text so problems keep line numbers.
pub fn extract_json(reply: &str) -> Option<String> {
    extract_json_with(reply, "tasks")
}

/// The JSON object inside an agent reply whose member `key` is an array, found as
/// [`extract_json`] finds a plan (decomposition and TRIZ answers use it with their own key).
pub(crate) fn extract_json_with(reply: &str, key: &str) -> Option<String> {
    let quoted_key = format!("\"{key}\"");
    let trimmed = reply.trim();
    let is_plan = |text: &str| {
        serde_json::from_str::<serde_json::Value>(text)
            .is_ok_and(|v| v.get(key).is_some_and(serde_json::Value::is_array))
    };
    if is_plan(trimmed) {
        return Some(trimmed.to_string());
    }
    for block in fenced_blocks(reply) {
        if is_plan(block.trim()) {
            return Some(block.trim().to_string());
        }
    }
    // An object anywhere in the prose: try each `{` until one parses as a plan. An object that
    // parses but holds no "tasks" anywhere is skipped whole, so a large unrelated object is not
    // re-parsed from each of its inner braces.
    let mut skip_to = 0;
    for (i, _) in reply.match_indices('{') {
        if i < skip_to {
            continue;
        }
        let mut stream =
            serde_json::Deserializer::from_str(&reply[i..]).into_iter::<serde_json::Value>();
        if let Some(Ok(v)) = stream.next() {
            let text = &reply[i..i + stream.byte_offset()];
            if v.get(key).is_some_and(serde_json::Value::is_array) {
                return Some(text.to_string());
            }
            if !text.contains(&quoted_key) {
                skip_to = i + text.len();
            }
        }
    }
    // Something that looks like the plan but does not parse: hand it to the checker, whose
    // line:col errors are what the repair round needs.
    for block in fenced_blocks(reply) {
        if block.contains(&quoted_key) {
            return Some(block.trim().to_string());
        }
    }
    let (start, end) = (reply.find('{')?, reply.rfind('}')?);
    (start < end && reply[start..=end].contains(&quoted_key))
        .then(|| reply[start..=end].to_string())
}

/// The contents of ``` fenced blocks, in order.
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("```") {
        let after = &rest[open + 3..];
        let Some(nl) = after.find('\n') else { break };
        let body = &after[nl + 1..];
        let Some(close) = body.find("```") else { break };
        out.push(&body[..close]);
        rest = &body[close + 3..];
    }
    out
}

/// Writes the raw reply to `<raw_dir>/plan-reply-<plan>-<utc time>.txt` and returns the path.
pub(crate) fn keep_raw_reply(
    raw_dir: &Path,
    plan_id: &str,
    reply: &str,
) -> Result<PathBuf, PrdError> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let path = raw_dir.join(format!(
        "plan-reply-{}-{stamp}.txt",
        crate::domain::safe_id(plan_id)
    ));
    crate::fsutil::atomic_write(&path, reply.as_bytes()).map_err(|source| PrdError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const PLAN: &str = r#"{"project":"x","plan_id":"agent-id","tasks":[
 {"id":"TASK-001","status":"done","priority":"high","description":"Create the sync module with its public API.",
  "acceptance_criteria":["module exists"],"test_steps":["cargo test sync"]},
 {"id":"TASK-002","status":"pending","priority":"low","description":"short","dependencies":["TASK-001"]}]}"#;

    fn req() -> PlanRequest {
        PlanRequest {
            prd: "# P\n".into(),
            prd_file: "docs/PRD-p.md".into(),
            plan_id: "prd-p".into(),
            project: "proj".into(),
            repair_rounds: 1,
        }
    }

    #[test]
    fn json_is_found_in_fences_and_prose() {
        for reply in [
            PLAN.to_string(),
            format!("Here is the plan:\n```json\n{PLAN}\n```\nHope it helps."),
            format!("Plan follows {PLAN} -- end"),
            format!("{{\"note\": 1}}\n```\n{PLAN}\n```"),
            format!("{{\"wrapper\": {{\"a\": 1}}, \"plan\": {PLAN}}}"),
        ] {
            let got = extract_json(&reply).unwrap();
            assert!(
                serde_json::from_str::<serde_json::Value>(&got).is_ok(),
                "{got}"
            );
            assert!(got.contains("TASK-002"));
        }
        assert_eq!(extract_json("no json here"), None);
        // Broken JSON that is clearly the plan goes to the checker for located errors.
        let broken = extract_json("```json\n{\"project\":\"x\",\"tasks\":[}\n```").unwrap();
        assert!(broken.starts_with("{\"project\""));
    }

    #[test]
    fn reply_is_normalised_and_gated() {
        let g = plan_from_reply(PLAN, &req()).unwrap();
        assert_eq!(
            (g.spec.id.as_str(), g.spec.project.as_str()),
            ("prd-p", "proj")
        );
        assert_eq!(g.spec.extra["prd_file"], "docs/PRD-p.md");
        assert!(
            g.spec
                .tasks
                .iter()
                .all(|t| t.status == Some(Status::Pending))
        );
        assert_eq!(g.gate.len(), 1);
        assert_eq!(g.gate[0].task_id, "TASK-002");
        assert!(!g.warnings.is_empty());
    }

    #[test]
    fn invalid_plans_give_located_problems() {
        let dangling = PLAN.replace("[\"TASK-001\"]", "[\"TASK-404\"]");
        let err = plan_from_reply(&dangling, &req()).unwrap_err();
        assert!(err.contains("TASK-404"), "{err}");
        let syntax = "```json\n{\"project\":\"x\",\"tasks\":[\n  {\"id\": }\n]}\n```";
        let err = plan_from_reply(syntax, &req()).unwrap_err();
        assert!(err.contains("plan:2:10"), "{err}");
        let err = plan_from_reply("I cannot do that.", &req()).unwrap_err();
        assert!(err.contains("no JSON object"), "{err}");
    }

    #[test]
    fn raw_reply_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = keep_raw_reply(dir.path(), "../evil", "raw text").unwrap();
        assert_eq!(p.parent().unwrap(), dir.path());
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "raw text");
    }
}
