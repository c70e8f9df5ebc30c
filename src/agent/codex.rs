//! Codex: `codex exec --json [--model m] <permission flags> -C <workdir> <prompt>`.
//!
//! JSON Lines: `thread.started`, `turn.started`, `item.*` (the final answer is the last
//! `agent_message` item), `turn.completed` with usage, `turn.failed` / `error`. Codex reports
//! no cost, so usage is priced from the table. The older `{"msg":{…}}` shape is read as well.

use super::backend::{AgentSettings, BackendKind, Invocation, PermissionMode, dash_safe_prompt};
use super::jsonscan::json_objects;
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, PriceTable, Usage, apply_prices, u64_at};
use serde_json::Value;

/// The Codex CLI.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

pub type CodexBackend = ProcessBackend<Codex>;

impl Cli for Codex {
    const KIND: BackendKind = BackendKind::Codex;

    fn args(&self, s: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        let mut args = vec!["exec".to_string(), "--json".to_string()];
        if let Some(model) = s.model_name() {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        match s.permission {
            PermissionMode::Full => {
                args.push("--dangerously-bypass-approvals-and-sandbox".to_string())
            }
            PermissionMode::AcceptEdits => args.push("--full-auto".to_string()),
            PermissionMode::ReadOnly => {
                args.extend(["--sandbox".to_string(), "read-only".to_string()])
            }
        }
        args.extend([
            "--cd".to_string(),
            inv.workdir.to_string_lossy().into_owned(),
        ]);
        args.extend(s.extra_args.iter().cloned());
        args.push(dash_safe_prompt(inv));
        args
    }

    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_codex_output(clean, model, prices)
    }
}

pub fn parse_codex_output(clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let events = json_objects(clean);
    let mut final_text: Option<String> = None;
    let mut usage = Usage::default();
    let mut turns = 0u32;
    let mut error: Option<String> = None;
    let mut last: Option<&Value> = None;
    let mut seen = false;
    for ev in &events {
        // Older releases wrap every event as {"id":…,"msg":{"type":…}}.
        let (kind, body) = match (ev["type"].as_str(), ev["msg"]["type"].as_str()) {
            (Some(k), _) => (k, ev),
            (None, Some(k)) => (k, &ev["msg"]),
            _ => continue,
        };
        seen = true;
        match kind {
            "item.completed" => {
                let item = &body["item"];
                let item_type = item["type"].as_str().or_else(|| item["item_type"].as_str());
                if item_type == Some("agent_message") {
                    final_text = item["text"].as_str().map(str::to_string);
                }
            }
            "agent_message" => final_text = body["message"].as_str().map(str::to_string),
            "task_complete" => {
                if let Some(t) = body["last_agent_message"].as_str() {
                    final_text = Some(t.to_string());
                }
                last = Some(ev);
            }
            "turn.completed" => {
                turns = turns.saturating_add(1);
                usage.add(&codex_usage(&body["usage"]));
                last = Some(ev);
            }
            "token_count" => {
                // Old shape: cumulative totals, so the latest replaces the earlier ones.
                let u = if body["info"]["total_token_usage"].is_object() {
                    &body["info"]["total_token_usage"]
                } else {
                    body
                };
                usage = codex_usage(u);
            }
            "turn.failed" => {
                error = body["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| Some(body["error"].to_string()));
                last = Some(ev);
            }
            "error" => {
                error = body["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| Some(body.to_string()));
                last = Some(ev);
            }
            _ => {}
        }
    }
    if !seen {
        return AgentResult::no_result(clean);
    }
    let mut out = AgentResult {
        usage,
        num_turns: turns,
        raw_json: last.cloned(),
        ..AgentResult::answered(error, final_text, String::new())
    };
    apply_prices(&mut out, model, prices);
    out
}

/// Codex counts cached tokens inside `input_tokens`; split them out so they are priced once.
fn codex_usage(u: &Value) -> Usage {
    let input = u64_at(u, "input_tokens");
    let cached = u64_at(u, "cached_input_tokens");
    Usage {
        input_tokens: input.saturating_sub(cached),
        output_tokens: u64_at(u, "output_tokens")
            .saturating_add(u64_at(u, "reasoning_output_tokens")),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
    }
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
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.model = Some("gpt-5-codex".into());
        let b = CodexBackend::new(s.clone(), PathBuf::from("/bin/codex"), Codex);
        assert_eq!(
            b.args(&inv("go")),
            [
                "exec",
                "--json",
                "--model",
                "gpt-5-codex",
                "--dangerously-bypass-approvals-and-sandbox",
                "--cd",
                "/wt",
                "go"
            ]
        );
        s.permission = PermissionMode::ReadOnly;
        let args = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex).args(&inv("go"));
        assert!(args.windows(2).any(|w| w == ["--sandbox", "read-only"]));
    }

    #[test]
    fn jsonl_events() {
        let out = r#"{"type":"thread.started","thread_id":"t1"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"i0","type":"agent_message","text":"I will print <promise>COMPLETE</promise> at the end"}}
{"type":"item.completed","item":{"id":"i1","type":"command_execution","command":"cargo test","aggregated_output":"ok","exit_code":0}}
{"type":"item.completed","item":{"id":"i2","type":"agent_message","text":"Tests pass.\n<promise>COMPLETE</promise>"}}
{"type":"turn.completed","usage":{"input_tokens":1000000,"cached_input_tokens":400000,"output_tokens":100000}}
"#;
        let mut prices = PriceTable::new();
        prices.insert(
            "gpt-5",
            ModelPrice {
                input_per_mtok: 1.0,
                output_per_mtok: 10.0,
                cache_read_per_mtok: Some(0.1),
                cache_write_per_mtok: None,
            },
        );
        let r = parse_codex_output(out, Some("gpt-5-codex"), &prices);
        assert!(r.marker_found && !r.is_error);
        assert_eq!(r.usage.input_tokens, 600_000);
        assert_eq!(r.usage.cache_read_input_tokens, 400_000);
        assert_eq!(
            (r.cost, r.cost_source),
            (Usd::from_f64(0.6 + 0.04 + 1.0), CostSource::Priced)
        );
    }

    #[test]
    fn failures_and_old_shape() {
        let out = "{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream error: exceeded retry limit, last status: 429 Too Many Requests\"}}\n";
        let r = parse_codex_output(out, None, &PriceTable::new());
        assert!(r.is_error && r.text.contains("429"));
        let out = "{\"id\":\"0\",\"msg\":{\"type\":\"agent_message\",\"message\":\"done <promise>COMPLETE</promise>\"}}\n{\"id\":\"0\",\"msg\":{\"type\":\"token_count\",\"input_tokens\":10,\"output_tokens\":5}}\n";
        let r = parse_codex_output(out, None, &PriceTable::new());
        assert!(r.marker_found);
        assert_eq!(
            (r.usage.input_tokens, r.usage.output_tokens, r.cost_source),
            (10, 5, CostSource::Unknown)
        );
    }
}
