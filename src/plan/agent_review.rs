//! What an agent may add to pre-flight, as data: its TRIZ analysis ([`AgentTriz`]) and the
//! decision gate's LLM pass ([`GateVerdicts`]). Schemas, validation against the plan, rendering;
//! the agent calls live in `prd::preflight`.

use super::triz::{TrizSeverity, Verdict};
use crate::domain::PlanSpec;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The agent's contradiction analysis of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentTriz {
    pub verdict: Verdict,
    #[serde(default)]
    pub summary: String,
    pub contradictions: Vec<Contradiction>,
}

/// One technical contradiction: improving one parameter worsens another.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Contradiction {
    pub task_ids: Vec<String>,
    pub improving: String,
    pub worsening: String,
    pub principles: Vec<String>,
    pub severity: TrizSeverity,
    #[serde(default)]
    pub explanation: String,
}

/// Every problem of `answer` against `plan` (empty when it can be shown), for the repair round.
pub(crate) fn triz_problems(plan: &PlanSpec, answer: &AgentTriz) -> Vec<String> {
    let mut out = Vec::new();
    for (i, c) in answer.contradictions.iter().enumerate() {
        let at = format!("contradictions[{i}]");
        if c.improving.trim().is_empty() || c.worsening.trim().is_empty() {
            out.push(format!(
                "{at}: both \"improving\" and \"worsening\" parameters are required"
            ));
        }
        if c.principles.iter().all(|p| p.trim().is_empty()) {
            out.push(format!("{at}.principles: name at least one principle"));
        }
        unknown_ids(plan, &c.task_ids, &format!("{at}.task_ids"), &mut out);
    }
    out
}

fn unknown_ids(plan: &PlanSpec, ids: &[String], at: &str, out: &mut Vec<String>) {
    for id in ids {
        if plan.task(id).is_none() {
            out.push(format!("{at}: {id:?} is not a task of the plan"));
        }
    }
}

/// The agent's analysis as text, under a heading that says whose it is.
pub(crate) fn render_agent_triz(agent: &str, a: &AgentTriz) -> String {
    let mut out = format!(
        "\nAgent's analysis ({agent})\nverdict: {}   contradictions: {}\n",
        a.verdict,
        a.contradictions.len()
    );
    if !a.summary.trim().is_empty() {
        let _ = writeln!(out, "{}", a.summary.trim());
    }
    for c in &a.contradictions {
        let _ = writeln!(
            out,
            "[{}] {}: improving {} worsens {}\n    principles: {}",
            c.severity.as_str(),
            c.task_ids.join(", "),
            c.improving.trim(),
            c.worsening.trim(),
            c.principles.join("; ")
        );
        if !c.explanation.trim().is_empty() {
            let _ = writeln!(out, "    {}", c.explanation.trim());
        }
    }
    out
}

/// The decision gate's LLM pass over a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateVerdicts {
    pub verdicts: Vec<GateVerdict>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct GateVerdict {
    pub task_id: String,
    pub vague: bool,
    #[serde(default)]
    pub reason: String,
}

/// Every problem of the gate pass against `plan`: unknown ids (a task the agent left out simply
/// passes; the pass is advisory and fails open).
pub(crate) fn gate_problems(plan: &PlanSpec, answer: &GateVerdicts) -> Vec<String> {
    let mut out = Vec::new();
    for (i, v) in answer.verdicts.iter().enumerate() {
        unknown_ids(
            plan,
            std::slice::from_ref(&v.task_id),
            &format!("verdicts[{i}].task_id"),
            &mut out,
        );
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::TaskSpec;

    fn plan() -> PlanSpec {
        PlanSpec {
            id: "p".into(),
            tasks: vec![TaskSpec {
                id: "T-1".into(),
                ..TaskSpec::default()
            }],
            ..PlanSpec::default()
        }
    }

    #[test]
    fn triz_answer_is_validated_and_rendered_as_the_agents() {
        let a: AgentTriz = serde_json::from_str(
            r#"{"verdict":"revise","summary":"Too fast.","contradictions":[
              {"task_ids":["T-1"],"improving":"speed","worsening":"reliability",
               "principles":["1 Segmentation"],"severity":"high","explanation":"split it"}]}"#,
        )
        .unwrap();
        assert!(triz_problems(&plan(), &a).is_empty());
        let text = render_agent_triz("claude", &a);
        assert!(text.contains("Agent's analysis (claude)"), "{text}");
        assert!(
            text.contains("[high] T-1: improving speed worsens reliability"),
            "{text}"
        );
        let mut bad = a.clone();
        bad.contradictions[0].task_ids = vec!["T-9".into()];
        bad.contradictions[0].principles.clear();
        let p = triz_problems(&plan(), &bad).join("\n");
        assert!(p.contains("\"T-9\" is not a task"), "{p}");
        assert!(p.contains("name at least one principle"), "{p}");
        assert!(
            serde_json::from_str::<AgentTriz>(r#"{"verdict":"maybe","contradictions":[]}"#)
                .is_err()
        );
    }

    #[test]
    fn gate_answer_names_plan_tasks() {
        let g: GateVerdicts = serde_json::from_str(
            r#"{"verdicts":[{"task_id":"T-1","vague":true,"reason":"no criteria"},{"task_id":"X","vague":false}]}"#,
        )
        .unwrap();
        assert_eq!(gate_problems(&plan(), &g).len(), 1);
    }
}
