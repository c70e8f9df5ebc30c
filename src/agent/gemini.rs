//! Gemini CLI: `gemini -p <prompt> --output-format json|stream-json [-m model] [--yolo]`.
//!
//! `json` prints one (pretty-printed) object `{response, stats{models{<m>{tokens{…}}}}, error?}`;
//! `stream-json` prints JSON Lines ending with a `result` event. Gemini reports no cost, so usage
//! is priced from the table.

use super::backend::{
    AgentSettings, BackendKind, Invocation, OutputMode, PermissionMode, dash_safe_prompt,
};
use super::jsonscan::json_objects;
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, PriceTable, Usage, apply_prices, u64_at};
use serde_json::Value;

/// The Gemini CLI.
#[derive(Debug, Clone, Copy)]
pub struct Gemini;

pub type GeminiBackend = ProcessBackend<Gemini>;

impl Cli for Gemini {
    const KIND: BackendKind = BackendKind::Gemini;

    fn args(&self, s: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        let format = match s.output {
            OutputMode::Stream => "stream-json",
            OutputMode::Json => "json",
        };
        let mut args = vec![
            "-p".to_string(),
            dash_safe_prompt(inv),
            "--output-format".to_string(),
            format.to_string(),
        ];
        if let Some(model) = s.model_name() {
            args.extend(["-m".to_string(), model.to_string()]);
        }
        match s.permission {
            PermissionMode::Full => args.push("--yolo".to_string()),
            PermissionMode::AcceptEdits => {
                args.extend(["--approval-mode".to_string(), "auto_edit".to_string()])
            }
            // The default approval mode cannot ask anyone in headless mode, so tools that need
            // approval are refused: read-only in effect.
            PermissionMode::ReadOnly => {
                args.extend(["--approval-mode".to_string(), "default".to_string()])
            }
        }
        args.extend(s.extra_args.iter().cloned());
        args
    }

    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_gemini_output(clean, model, prices)
    }
}

pub fn parse_gemini_output(clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let objects = json_objects(clean);
    if let Some(obj) = objects.iter().rev().find(|v| {
        v.get("response").is_some() || (v.get("error").is_some() && v.get("type").is_none())
    }) {
        return from_json_object(obj, model, prices);
    }
    from_stream(&objects, clean, model, prices)
}

/// `--output-format json`: one object.
fn from_json_object(obj: &Value, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let error = error_message(&obj["error"]);
    let response = obj["response"].as_str().unwrap_or_default().to_string();
    let (usage, stats_model) = stats_usage(&obj["stats"]);
    let mut out = AgentResult {
        usage,
        num_turns: 1,
        raw_json: Some(obj.clone()),
        ..AgentResult::answered(error, Some(response), String::new())
    };
    apply_prices(&mut out, model.or(stats_model.as_deref()), prices);
    out
}

/// `--output-format stream-json`: assistant `message` events since the last tool call form the
/// final answer; the `result` event holds status and stats.
fn from_stream(
    events: &[Value],
    clean: &str,
    model: Option<&str>,
    prices: &PriceTable,
) -> AgentResult {
    let Some(result) = events.iter().rev().find(|v| v["type"] == "result") else {
        return AgentResult::no_result(clean);
    };
    let mut text = String::new();
    let mut turns = 0u32;
    let mut init_model = None;
    for ev in events {
        match ev["type"].as_str().unwrap_or_default() {
            "init" => init_model = ev["model"].as_str().map(str::to_string),
            "message" if ev["role"] == "assistant" => {
                if ev["delta"] != true {
                    text.clear();
                    turns = turns.saturating_add(1);
                }
                text.push_str(ev["content"].as_str().unwrap_or_default());
            }
            "tool_use" | "tool_result" => text.clear(),
            _ => {}
        }
    }
    let error = error_message(&result["error"]).or_else(|| {
        (result["status"] != "success").then(|| format!("status {}", result["status"]))
    });
    let stats = &result["stats"];
    let (mut usage, stats_model) = stats_usage(stats);
    if usage == Usage::default() {
        usage = Usage {
            input_tokens: u64_at(stats, "input_tokens"),
            output_tokens: u64_at(stats, "output_tokens"),
            ..Usage::default()
        };
    }
    let mut out = AgentResult {
        usage,
        num_turns: turns.max(1),
        duration_ms: stats.get("duration_ms").and_then(Value::as_u64),
        raw_json: Some(result.clone()),
        ..AgentResult::answered(error, Some(text.trim().to_string()), String::new())
    };
    apply_prices(
        &mut out,
        model.or(stats_model.as_deref()).or(init_model.as_deref()),
        prices,
    );
    out
}

fn error_message(e: &Value) -> Option<String> {
    match e {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        other => Some(
            other["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| other.to_string()),
        ),
    }
}

/// Usage summed over `stats.models.*.tokens`, and the first model's name.
fn stats_usage(stats: &Value) -> (Usage, Option<String>) {
    let mut usage = Usage::default();
    let mut first = None;
    if let Some(models) = stats["models"].as_object() {
        for (name, m) in models {
            first.get_or_insert_with(|| name.clone());
            let t = &m["tokens"];
            let cached = u64_at(t, "cached");
            usage.add(&Usage {
                input_tokens: u64_at(t, "prompt").saturating_sub(cached),
                output_tokens: u64_at(t, "candidates").saturating_add(u64_at(t, "thoughts")),
                cache_read_input_tokens: cached,
                cache_creation_input_tokens: 0,
            });
        }
    }
    (usage, first)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::backend::test_support::inv;
    use crate::agent::result::{CostSource, ModelPrice};
    use crate::domain::Usd;
    use std::path::PathBuf;

    #[test]
    fn argv() {
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.output = OutputMode::Json;
        s.model = Some("gemini-2.5-pro".into());
        let b = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        assert_eq!(
            b.args(&inv("go")),
            [
                "-p",
                "go",
                "--output-format",
                "json",
                "-m",
                "gemini-2.5-pro",
                "--yolo"
            ]
        );
    }

    #[test]
    fn pretty_json_object() {
        let out = "Loaded cached credentials.\n{\n  \"response\": \"Done\\n<promise>COMPLETE</promise>\",\n  \"stats\": {\n    \"models\": {\n      \"gemini-2.5-pro\": {\"tokens\": {\"prompt\": 1000000, \"candidates\": 100000, \"cached\": 500000, \"thoughts\": 0}}\n    }\n  }\n}\n";
        let mut prices = PriceTable::new();
        prices.insert(
            "gemini-2.5-pro",
            ModelPrice {
                input_per_mtok: 1.0,
                output_per_mtok: 10.0,
                cache_read_per_mtok: Some(0.0),
                cache_write_per_mtok: None,
            },
        );
        let r = parse_gemini_output(out, None, &prices);
        assert!(r.marker_found && !r.is_error);
        assert_eq!(
            (
                r.usage.input_tokens,
                r.usage.cache_read_input_tokens,
                r.usage.output_tokens
            ),
            (500_000, 500_000, 100_000)
        );
        assert_eq!(
            (r.cost, r.cost_source),
            (Usd::from_f64(1.5), CostSource::Priced)
        );
        let err = "{\"error\": {\"type\": \"ApiError\", \"message\": \"API key not valid. Please pass a valid API key.\", \"code\": 400}}";
        let r = parse_gemini_output(err, None, &prices);
        assert!(r.is_error && r.text.contains("API key not valid"));
    }

    #[test]
    fn stream_json() {
        let out = r#"{"type":"init","session_id":"s","model":"gemini-2.5-flash"}
{"type":"message","role":"user","content":"print <promise>COMPLETE</promise>"}
{"type":"message","role":"assistant","content":"Running tests"}
{"type":"tool_use","tool_name":"run_shell_command","parameters":{"command":"make test"}}
{"type":"tool_result","status":"success","output":"ok"}
{"type":"message","role":"assistant","content":"All good.\n"}
{"type":"message","role":"assistant","content":"<promise>COMPLETE</promise>","delta":true}
{"type":"result","status":"success","stats":{"input_tokens":50,"output_tokens":7,"duration_ms":900}}
"#;
        let r = parse_gemini_output(out, None, &PriceTable::new());
        assert_eq!(r.text, "All good.\n<promise>COMPLETE</promise>");
        assert!(r.marker_found);
        assert_eq!(
            (r.usage.input_tokens, r.usage.output_tokens, r.duration_ms),
            (50, 7, Some(900))
        );
    }
}
