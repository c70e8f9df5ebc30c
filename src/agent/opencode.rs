//! OpenCode: `opencode run --format json [--model provider/model] [--auto] <prompt>`.
//!
//! The output is JSON Lines: `step_start`, `text`, `tool_use`, `step_finish` (tokens, cost,
//! reason) and `error`. A `step_finish` whose reason is not `tool-calls` ends the run; the text of
//! that step is the final answer. `cost` is 0 unless the provider's model has prices in the
//! OpenCode config; then usage is priced from `[prices]`.
//!
//! Permissions (opencode-ai 1.18, docs/agents.md): `run` auto-rejects every tool whose rule is
//! `ask`, so full mode passes `--auto` (approve all that is not denied); accept-edits allows edits
//! through `OPENCODE_PERMISSION` and leaves the rest to the user's config; read-only denies edits,
//! bash and web fetches there, which removes those tools (the built-in `plan` agent still writes
//! through bash).

use super::backend::{
    AgentSettings, BackendKind, Invocation, PermissionMode, base_env, dash_safe_prompt,
};
use super::classify::{ErrorClass, class_for_status, classify_outcome};
use super::jsonscan::json_objects;
use super::live_usage::{LineReader, Reading, UsageMeter};
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, CostSource, PriceTable, Usage, apply_prices, u64_at};
use super::transcript::{JsonLinesFilter, end_line, text_lines, tool_call_line, tool_result_line};
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
        if s.permission == PermissionMode::Full {
            args.push("--auto".to_string());
        }
        args.extend(s.extra_args.iter().cloned());
        // Trailing positional: a leading dash would be read as an option.
        args.push(dash_safe_prompt(inv));
        args
    }

    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_opencode_output(clean, model, prices)
    }

    fn env(&self, s: &AgentSettings) -> Vec<(String, String)> {
        let mut env = base_env(s);
        if let Some(rules) = permission_rules(s.permission) {
            env.push(("OPENCODE_PERMISSION".to_string(), rules.to_string()));
        }
        env
    }

    fn display_filter(&self, _s: &AgentSettings) -> Option<Box<dyn crate::pty::LineFilter>> {
        Some(Box::new(JsonLinesFilter(render_opencode_event)))
    }

    fn usage_meter(&self, s: &AgentSettings, prices: &PriceTable) -> Option<UsageMeter> {
        Some(UsageMeter::new(
            OPENCODE_METER,
            prices.clone(),
            s.model.clone(),
        ))
    }

    /// OpenCode's `error` event carries the provider's HTTP status.
    fn classify(
        &self,
        exit_code: Option<i32>,
        result: &AgentResult,
        clean: &str,
    ) -> Option<ErrorClass> {
        if result.is_error {
            let status = result
                .raw_json
                .as_ref()
                .and_then(|j| j["error"]["data"]["statusCode"].as_u64());
            if let Some(class) = status
                .and_then(|s| u16::try_from(s).ok())
                .and_then(class_for_status)
            {
                return Some(class);
            }
        }
        classify_outcome(exit_code, result, clean)
    }
}

/// OpenCode's spend while it works: each `step_finish` (one model request) adds its `cost` when
/// the CLI priced it (non-zero), else its tokens priced with the configured model.
pub const OPENCODE_METER: LineReader = LineReader {
    needles: &["step_finish"],
    read: opencode_meter_reading,
};

fn opencode_meter_reading(v: &Value, _configured: Option<&str>) -> Vec<Reading> {
    if v["type"] != "step_finish" {
        return Vec::new();
    }
    let part = &v["part"];
    vec![Reading::Usage {
        key: None,
        model: None,
        usage: step_usage(&part["tokens"]),
        cost: part["cost"].as_f64().filter(|c| *c > 0.0),
    }]
}

/// A step's `tokens`: input without cache reads, reasoning billed as output.
fn step_usage(t: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(t, "input"),
        output_tokens: u64_at(t, "output").saturating_add(u64_at(t, "reasoning")),
        cache_read_input_tokens: u64_at(&t["cache"], "read"),
        cache_creation_input_tokens: u64_at(&t["cache"], "write"),
    }
}

/// The `OPENCODE_PERMISSION` rules a mode needs, `None` for full (where `--auto` approves).
pub fn permission_rules(mode: PermissionMode) -> Option<&'static str> {
    match mode {
        PermissionMode::Full => None,
        PermissionMode::AcceptEdits => Some(r#"{"edit":"allow"}"#),
        PermissionMode::ReadOnly => Some(r#"{"edit":"deny","bash":"deny","webfetch":"deny"}"#),
    }
}

/// One OpenCode event as pane lines (see [`super::transcript`]).
pub fn render_opencode_event(v: &Value) -> Option<String> {
    let part = &v["part"];
    match v["type"].as_str()? {
        "text" => text_lines(part["text"].as_str()?),
        "tool_use" => {
            let state = &part["state"];
            let input = &state["input"];
            let detail = input["command"]
                .as_str()
                .or(input["filePath"].as_str())
                .or(input["pattern"].as_str())
                .map_or_else(|| input.to_string(), str::to_string);
            let call = tool_call_line(part["tool"].as_str().unwrap_or("tool"), &detail);
            let result = match state["status"].as_str() {
                Some("error") => tool_result_line(state["error"].as_str().unwrap_or("error"), true),
                _ => tool_result_line(state["output"].as_str().unwrap_or_default(), false),
            };
            Some(format!("{call}\n{result}"))
        }
        "step_finish" if part["reason"] != "tool-calls" => {
            let t = &part["tokens"];
            let mut facts = vec![format!("{} tokens", u64_at(t, "total"))];
            if let Some(c) = part["cost"].as_f64().filter(|c| *c > 0.0) {
                facts.push(Usd::from_f64(c).to_string());
            }
            Some(end_line(None, &facts))
        }
        "error" => Some(end_line(Some(&error_text(&v["error"])), &[])),
        _ => None,
    }
}

fn error_text(e: &Value) -> String {
    e["data"]["message"]
        .as_str()
        .or_else(|| e["message"].as_str())
        .or_else(|| e["name"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| e.to_string())
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
                usage.add(&step_usage(&part["tokens"]));
                cost += part["cost"].as_f64().unwrap_or(0.0);
                if part["reason"] != "tool-calls" {
                    final_text = Some(step_text.trim().to_string());
                    last = Some(ev);
                }
            }
            "error" => {
                error = Some(error_text(&ev["error"]));
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
    use crate::agent::backend::Backend;
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
                "--auto",
                "fix it"
            ]
        );
        assert!(
            !b.command(&inv("p"))
                .unwrap()
                .env
                .iter()
                .any(|(k, _)| k == "OPENCODE_PERMISSION")
        );
        s.permission = PermissionMode::ReadOnly;
        let b = OpenCodeBackend::new(s, PathBuf::from("/bin/opencode"), OpenCode);
        let args = b.args(&inv("p"));
        // The plan agent still writes through bash: read-only is the permission rules' job.
        assert!(
            !args.iter().any(|a| a == "--agent" || a == "--auto"),
            "{args:?}"
        );
        let env = b.command(&inv("p")).unwrap().env;
        let rules = env
            .iter()
            .find(|(k, _)| k == "OPENCODE_PERMISSION")
            .map(|(_, v)| serde_json::from_str::<Value>(v).unwrap())
            .unwrap();
        assert_eq!(
            (&rules["edit"], &rules["bash"]),
            (&"deny".into(), &"deny".into())
        );
    }

    use crate::agent::fixture as sample;

    #[test]
    fn real_samples_of_opencode_1_18() {
        let mut prices = PriceTable::new();
        prices.insert("mock-model", ModelPrice::new(1.0, 10.0));
        let r = parse_opencode_output(
            &sample("opencode-run-json-toolcall-write.jsonl"),
            Some("mock/mock-model"),
            &prices,
        );
        assert!(r.marker_found && !r.is_error, "{r:?}");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 2068,
                output_tokens: 112,
                cache_read_input_tokens: 400,
                cache_creation_input_tokens: 0
            }
        );
        // cost 0 in the output: priced from the table.
        assert_eq!(r.cost_source, CostSource::Priced);
        let r = parse_opencode_output(
            &sample("opencode-run-json-priced-model.jsonl"),
            None,
            &prices,
        );
        assert_eq!(
            (r.cost, r.cost_source),
            (Usd::from_f64(0.001614), CostSource::Reported)
        );
        let raw = sample("opencode-run-json-error-401.jsonl");
        let r = parse_opencode_output(&raw, None, &prices);
        assert!(
            r.is_error && r.text == "Incorrect API key provided: dummy",
            "{r:?}"
        );
        let b = OpenCodeBackend::new(
            AgentSettings::new(BackendKind::OpenCode),
            PathBuf::from("/bin/opencode"),
            OpenCode,
        );
        assert_eq!(
            b.classify(Some(1), &r, raw.as_bytes()),
            Some(ErrorClass::Auth)
        );
        // Denied tools: the run still answers, no write happened.
        let r = parse_opencode_output(
            &sample("opencode-run-json-permission-deny.jsonl"),
            None,
            &prices,
        );
        assert!(r.marker_found, "{r:?}");
    }

    #[test]
    fn meter_of_real_runs_ends_at_the_parsed_cost() {
        use crate::agent::live_usage::run_meter;
        let mut prices = PriceTable::new();
        prices.insert("mock-model", ModelPrice::new(1.0, 10.0));
        let mut s = AgentSettings::new(BackendKind::OpenCode);
        s.model = Some("mock/mock-model".into());
        let b = OpenCodeBackend::new(s, PathBuf::from("/bin/opencode"), OpenCode);
        // cost 0 in the output: the tokens priced step by step; a priced model: its own cost.
        for (name, source) in [
            ("opencode-run-json-toolcall-write.jsonl", CostSource::Priced),
            ("opencode-run-json-hello.jsonl", CostSource::Priced),
            (
                "opencode-run-json-permission-deny.jsonl",
                CostSource::Priced,
            ),
            ("opencode-run-json-priced-model.jsonl", CostSource::Reported),
        ] {
            let out = sample(name);
            let mut meter = b.usage_meter(&prices).unwrap();
            let live = run_meter(&mut meter, &out);
            let r = b.parse_result(out.as_bytes(), &prices);
            assert_eq!(r.cost_source, source, "{name}");
            assert!(r.cost > Usd::ZERO, "{name}");
            assert_eq!((live, meter.usage()), (r.cost, r.usage), "{name}");
        }
        // The first step's spend counts as soon as it finishes, before the run ends.
        let out = sample("opencode-run-json-toolcall-write.jsonl");
        let mut meter = b.usage_meter(&prices).unwrap();
        let first = out.lines().find_map(|l| meter.feed_line(l)).unwrap();
        assert_eq!(
            first,
            ModelPrice::new(1.0, 10.0).cost(&Usage {
                input_tokens: 1034,
                output_tokens: 56,
                cache_read_input_tokens: 200,
                cache_creation_input_tokens: 0
            })
        );
    }

    #[test]
    fn pane_transcript_of_a_real_run() {
        let got: Vec<String> = sample("opencode-run-json-toolcall-write.jsonl")
            .lines()
            .filter_map(|l| crate::agent::transcript::render_line_with(l, render_opencode_event))
            .collect();
        let joined = got.join("\n");
        assert_eq!(
            joined,
            "▶ write mock_out.txt\n  ↳ Wrote file successfully.\nDone.\n<promise>COMPLETE</promise>\n✔ finished · 1290 tokens"
        );
        let err = sample("opencode-run-json-error-401.jsonl");
        let r =
            crate::agent::transcript::render_line_with(err.trim(), render_opencode_event).unwrap();
        assert!(
            r.starts_with("✘ failed") && r.contains("Incorrect API key"),
            "{r}"
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
