//! OpenCode: `opencode run --format json [--model provider/model] <prompt>`.
//!
//! The output is JSON Lines: `step_start`, `text`, `tool_use`, `step_finish` (tokens, cost,
//! reason) and `error`. A `step_finish` whose reason is not `tool-calls` ends the run; the text of
//! that step is the final answer. `opencode run` approves tools itself, so full and accept-edits
//! differ only through the user's OpenCode config; read-only uses the built-in `plan` agent.

use super::backend::{AgentSettings, BackendKind, Invocation, PermissionMode, dash_safe_prompt};
use super::jsonscan::json_objects;
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, CostSource, PriceTable, Usage, apply_prices, u64_at};
use crate::domain::Usd;
use serde_json::Value;

/// The OpenCode CLI.
#[derive(Debug, Clone, Copy)]
pub struct OpenCode;

pub type OpenCodeBackend = ProcessBackend<OpenCode>;

impl Cli for OpenCode {
    const KIND: BackendKind = BackendKind::OpenCode;

    fn args(&self, s: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        let mut args = vec![
            "run".to_string(),
            "--format".to_string(),
            "json".to_string(),
        ];
        if let Some(model) = s.model_name() {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        if s.permission == PermissionMode::ReadOnly {
            args.extend(["--agent".to_string(), "plan".to_string()]);
        }
        args.extend(s.extra_args.iter().cloned());
        // Trailing positional: a leading dash would be read as an option.
        args.push(dash_safe_prompt(inv));
        args
    }

    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_opencode_output(clean, model, prices)
    }
}

pub fn parse_opencode_output(clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let events: Vec<Value> = json_objects(clean)
        .into_iter()
        .filter(|v| v["type"].is_string())
        .collect();
    if events.is_empty() {
        return AgentResult::no_result(clean);
    }
    let mut step_text = String::new();
    let mut final_text: Option<String> = None;
    let mut usage = Usage::default();
    let mut cost = 0.0_f64;
    let mut turns = 0u32;
    let mut error: Option<String> = None;
    let mut last: Option<&Value> = None;
    for ev in &events {
        let part = &ev["part"];
        match ev["type"].as_str().unwrap_or_default() {
            "step_start" => step_text.clear(),
            "text" => {
                if let Some(t) = part["text"].as_str() {
                    step_text.push_str(t);
                }
            }
            "step_finish" => {
                turns = turns.saturating_add(1);
                let t = &part["tokens"];
                usage.add(&Usage {
                    input_tokens: u64_at(t, "input"),
                    output_tokens: u64_at(t, "output").saturating_add(u64_at(t, "reasoning")),
                    cache_read_input_tokens: u64_at(&t["cache"], "read"),
                    cache_creation_input_tokens: u64_at(&t["cache"], "write"),
                });
                cost += part["cost"].as_f64().unwrap_or(0.0);
                if part["reason"] != "tool-calls" {
                    final_text = Some(step_text.trim().to_string());
                    last = Some(ev);
                }
            }
            "error" => {
                let e = &ev["error"];
                let msg = e["data"]["message"]
                    .as_str()
                    .or_else(|| e["message"].as_str())
                    .or_else(|| e["name"].as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| e.to_string());
                error = Some(msg);
                last = Some(ev);
            }
            _ => {}
        }
    }
    let mut out = AgentResult {
        usage,
        num_turns: turns,
        raw_json: last.cloned(),
        ..AgentResult::answered(error, final_text, step_text.trim().to_string())
    };
    if cost > 0.0 {
        out.cost = Usd::from_f64(cost);
        out.cost_source = CostSource::Reported;
    }
    apply_prices(&mut out, model, prices);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::backend::test_support::inv;
    use crate::agent::result::ModelPrice;
    use std::path::PathBuf;

    #[test]
    fn argv() {
        let mut s = AgentSettings::new(BackendKind::OpenCode);
        s.model = Some("anthropic/claude-sonnet-4-5".into());
        let b = OpenCodeBackend::new(s.clone(), PathBuf::from("/bin/opencode"), OpenCode);
        assert_eq!(
            b.args(&inv("fix it")),
            [
                "run",
                "--format",
                "json",
                "--model",
                "anthropic/claude-sonnet-4-5",
                "fix it"
            ]
        );
        s.permission = PermissionMode::ReadOnly;
        let b = OpenCodeBackend::new(s, PathBuf::from("/bin/opencode"), OpenCode);
        assert!(
            b.args(&inv("p"))
                .windows(2)
                .any(|w| w == ["--agent", "plan"])
        );
    }

    #[test]
    fn final_step_text_tokens_and_cost() {
        let out = r#"{"type":"step_start","part":{"type":"step-start"}}
{"type":"text","part":{"type":"text","text":"Let me look. <promise>COMPLETE</promise> is what I print at the end"}}
{"type":"tool_use","part":{"tool":"bash","state":{"input":{"command":"ls"}}}}
{"type":"step_finish","part":{"reason":"tool-calls","cost":0.001,"tokens":{"input":100,"output":10,"reasoning":5,"cache":{"read":50,"write":0}}}}
{"type":"step_start","part":{"type":"step-start"}}
{"type":"text","part":{"type":"text","text":"Done.\n<promise>COMPLETE</promise>"}}
{"type":"step_finish","part":{"reason":"stop","cost":0.002,"tokens":{"input":200,"output":20,"reasoning":0,"cache":{"read":100,"write":10}}}}
"#;
        let r = parse_opencode_output(out, None, &PriceTable::new());
        assert_eq!(r.text, "Done.\n<promise>COMPLETE</promise>");
        assert!(r.marker_found && !r.is_error);
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 300,
                output_tokens: 35,
                cache_read_input_tokens: 150,
                cache_creation_input_tokens: 10
            }
        );
        assert_eq!(
            (r.cost, r.cost_source, r.num_turns),
            (Usd(3000), CostSource::Reported, 2)
        );
    }

    #[test]
    fn zero_cost_is_priced_and_errors_reported() {
        let out = "{\"type\":\"text\",\"part\":{\"text\":\"ok\"}}\n{\"type\":\"step_finish\",\"part\":{\"reason\":\"stop\",\"cost\":0,\"tokens\":{\"input\":1000000,\"output\":0}}}\n";
        let mut prices = PriceTable::new();
        prices.insert("claude-sonnet-4-5", ModelPrice::new(3.0, 15.0));
        let r = parse_opencode_output(out, Some("anthropic/claude-sonnet-4-5"), &prices);
        assert_eq!(
            (r.cost, r.cost_source),
            (Usd::from_f64(3.0), CostSource::Priced)
        );
        assert!(!r.marker_found);
        let out = r#"{"type":"error","error":{"name":"APIError","data":{"message":"Unauthorized: invalid x-api-key","statusCode":401}}}"#;
        let r = parse_opencode_output(out, None, &PriceTable::new());
        assert!(r.is_error && r.text.contains("invalid x-api-key"));
        assert!(
            parse_opencode_output("plain crash\n", None, &PriceTable::new()).subtype == "no_result"
        );
    }
}
