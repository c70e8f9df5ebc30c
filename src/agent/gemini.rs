//! Gemini CLI: `gemini -p <prompt> --output-format json|stream-json [-m model] [--yolo]`.
//!
//! `json` prints one (pretty-printed) object `{response, stats{models{<m>{tokens{…}}}}}`, or
//! `{error}` on stderr when the run failed; `stream-json` prints JSON Lines ending with a
//! `result` event. Gemini reports no cost, so each model's usage is priced from the table.
//! Verified against Gemini CLI 0.61 (docs/agents.md): it needs a trust override in a whilly
//! worktree; `default` approval mode registers no writing tool headless (read-only in effect).

use super::backend::{
    AgentSettings, BackendKind, Invocation, OutputMode, PermissionMode, base_env, dash_safe_prompt,
};
use super::classify::{ErrorClass, class_for_status, classify_outcome, classify_text};
use super::jsonscan::json_objects;
use super::live_usage::{
    LineReader, Reading, SessionLog, UsageMeter, file_in, subdirs_newest_first,
};
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, CostSource, PriceTable, Usage, apply_prices, u64_at};
use super::transcript::{
    PaneLine, end_line, show, status_line, text_lines, tool_call_line, tool_result_line,
};
use crate::domain::Usd;
use serde_json::Value;
use std::path::{Path, PathBuf};

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

    /// Gemini CLI refuses an untrusted folder (exit 55, and `--yolo` silently downgraded), and
    /// every whilly worktree is one; the worktree is the sandbox whilly gives the agent.
    fn env(&self, s: &AgentSettings) -> Vec<(String, String)> {
        let mut env = base_env(s);
        env.push(("GEMINI_CLI_TRUST_WORKSPACE".to_string(), "true".to_string()));
        env
    }

    fn display_filter(&self, s: &AgentSettings) -> Option<Box<dyn crate::pty::LineFilter>> {
        (s.output == OutputMode::Stream)
            .then(|| Box::new(GeminiTranscript::default()) as Box<dyn crate::pty::LineFilter>)
    }

    fn usage_meter(&self, s: &AgentSettings, prices: &PriceTable) -> Option<UsageMeter> {
        (s.output == OutputMode::Stream)
            .then(|| UsageMeter::new(GEMINI_METER, prices.clone(), s.model.clone()))
    }

    fn session_log(&self, s: &AgentSettings) -> Option<SessionLog> {
        if s.output != OutputMode::Stream {
            return None;
        }
        Some(SessionLog {
            dir: gemini_home(s)?.join(".gemini").join("tmp"),
            needle: "\"init\"",
            id_of: |v| match v["type"].as_str() {
                Some("init") => v["session_id"].as_str().map(str::to_string),
                _ => None,
            },
            locate: chat_file,
        })
    }

    /// The API error's HTTP status, then Gemini's exit code, then the text.
    fn classify(
        &self,
        exit_code: Option<i32>,
        result: &AgentResult,
        clean: &str,
    ) -> Option<ErrorClass> {
        if exit_code == Some(0) && !result.is_error {
            return None;
        }
        let status = result
            .raw_json
            .as_ref()
            .and_then(|j| j["error"]["code"].as_u64())
            .and_then(|c| u16::try_from(c).ok())
            .or_else(|| api_status(&result.text));
        if let Some(class) = status.and_then(class_for_status) {
            return Some(class);
        }
        if let Some(class) = classify_text(&result.text) {
            return Some(class);
        }
        if let Some(class) = exit_code.and_then(class_for_exit) {
            return Some(class);
        }
        classify_outcome(exit_code, result, clean)
    }
}

/// Where Gemini CLI keeps its state: `GEMINI_CLI_HOME`, else `HOME` (each from the agent's
/// configured environment first, then whilly's own); `.gemini` below it.
fn gemini_home(s: &AgentSettings) -> Option<PathBuf> {
    s.env_var("GEMINI_CLI_HOME")
        .or_else(|| s.env_var("HOME"))
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// Session `id`'s chat file: `tmp/<project>/chats/session-<time>-<first 8 of id>.jsonl`, the
/// project being a folder Gemini names after the working directory.
fn chat_file(tmp: &Path, id: &str) -> Option<PathBuf> {
    let short = id.get(..8)?;
    let suffix = format!("-{short}.jsonl");
    subdirs_newest_first(tmp).iter().find_map(|project| {
        file_in(&project.join("chats"), |name| {
            name.starts_with("session-") && name.ends_with(&suffix)
        })
    })
}

/// Gemini's spend. Its stream-json carries usage only in the final `result` line (0.61 prints
/// no per-turn usage), but its chat file (followed through [`SessionLog`]) records each model
/// reply with its `tokens` as it arrives: those add up per reply id while it works, and the
/// `result` line then settles the account with the run's own totals, each model priced as
/// [`parse_gemini_output`] prices it (a configured model pins every call).
pub const GEMINI_METER: LineReader = LineReader {
    needles: &["\"result\"", "\"tokens\""],
    read: gemini_meter_reading,
};

fn gemini_meter_reading(v: &Value, configured: Option<&str>) -> Vec<Reading> {
    match v["type"].as_str() {
        Some("result") => std::iter::once(Reading::Settled)
            .chain(
                result_model_usage(&v["stats"])
                    .into_iter()
                    .map(|(name, usage)| Reading::Usage {
                        key: Some(format!("result/{name}")),
                        model: Some(configured.map_or(name, str::to_string)),
                        usage,
                        cost: None,
                    }),
            )
            .collect(),
        // A reply in the chat file.
        Some("gemini") if v["tokens"].is_object() => {
            let usage = prompt_tokens_usage(&v["tokens"], "input", "output");
            let model = v["model"].as_str().map(str::to_string);
            vec![Reading::Usage {
                key: v["id"].as_str().map(|id| format!("reply/{id}")),
                model: configured.map(str::to_string).or(model),
                usage,
                cost: None,
            }]
        }
        _ => Vec::new(),
    }
}

/// Gemini's stream-json in a pane: each event rendered by [`render_gemini_event`], except the
/// assistant's text, which streams as many `delta` messages: those are joined and shown as one
/// text when anything else arrives (a tool call, its result, the end, a new message).
#[derive(Debug, Default)]
pub struct GeminiTranscript {
    text: String,
}

impl GeminiTranscript {
    fn flush(&mut self, out: &mut Vec<u8>) {
        if let Some(text) = text_lines(&std::mem::take(&mut self.text)) {
            show(&text, out);
        }
    }
}

impl crate::pty::LineFilter for GeminiTranscript {
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        let line = String::from_utf8_lossy(line);
        let rendered = match PaneLine::of(&line) {
            PaneLine::Blank => return,
            PaneLine::Event(v) if v["type"] == "message" && v["role"] == "assistant" => {
                if v["delta"] != true {
                    self.flush(out);
                }
                self.text
                    .push_str(v["content"].as_str().unwrap_or_default());
                return;
            }
            PaneLine::Event(v) => render_gemini_event(&v),
            PaneLine::Plain(text) => Some(text.to_string()),
        };
        self.flush(out);
        if let Some(r) = rendered {
            show(&r, out);
        }
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

/// `--output-format json`: one object (on stderr when the run failed).
fn from_json_object(obj: &Value, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let error = error_message(&obj["error"]);
    let response = obj["response"].as_str().unwrap_or_default().to_string();
    let per_model = json_model_usage(&obj["stats"]);
    let mut out = AgentResult {
        usage: sum(&per_model),
        num_turns: 1,
        raw_json: Some(obj.clone()),
        ..AgentResult::answered(error, Some(response), String::new())
    };
    price_per_model(&mut out, &per_model, model, prices);
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
    for ev in events {
        match ev["type"].as_str().unwrap_or_default() {
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
    let per_model = result_model_usage(stats);
    let mut out = AgentResult {
        usage: sum(&per_model),
        num_turns: turns.max(1),
        duration_ms: stats.get("duration_ms").and_then(Value::as_u64),
        raw_json: Some(result.clone()),
        ..AgentResult::answered(error, Some(text.trim().to_string()), String::new())
    };
    price_per_model(&mut out, &per_model, model, prices);
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

/// stream-json stats (whole run or one model): `input_tokens` includes the cached ones, which
/// `input` leaves out.
fn stream_usage(s: &Value) -> Usage {
    let cached = u64_at(s, "cached");
    let input = match s.get("input").and_then(Value::as_u64) {
        Some(fresh) => fresh,
        None => u64_at(s, "input_tokens").saturating_sub(cached),
    };
    Usage {
        input_tokens: input,
        output_tokens: u64_at(s, "output_tokens"),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
    }
}

/// Usage per model of stream-json's `stats.models`.
fn stream_model_usage(stats: &Value) -> Vec<(String, Usage)> {
    stats["models"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, m)| (name.clone(), stream_usage(m)))
        .collect()
}

/// Usage per model of a stream-json `result`'s stats; one unnamed entry when it names none.
fn result_model_usage(stats: &Value) -> Vec<(String, Usage)> {
    let mut per_model = stream_model_usage(stats);
    if per_model.is_empty() {
        per_model.push((String::new(), stream_usage(stats)));
    }
    per_model
}

/// Usage per model of json's `stats.models.<m>.tokens` (`prompt` includes `cached`).
fn json_model_usage(stats: &Value) -> Vec<(String, Usage)> {
    stats["models"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, m)| {
            let usage = prompt_tokens_usage(&m["tokens"], "prompt", "candidates");
            (name.clone(), usage)
        })
        .collect()
}

/// Gemini's token counts where the prompt count includes the cached tokens (json's `prompt`,
/// the chat file's `input`): cache reads split out, thoughts counted as output.
fn prompt_tokens_usage(t: &Value, prompt: &str, output: &str) -> Usage {
    let cached = u64_at(t, "cached");
    Usage {
        input_tokens: u64_at(t, prompt).saturating_sub(cached),
        output_tokens: u64_at(t, output).saturating_add(u64_at(t, "thoughts")),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: 0,
    }
}

fn sum(per_model: &[(String, Usage)]) -> Usage {
    let mut total = Usage::default();
    for (_, u) in per_model {
        total.add(u);
    }
    total
}

/// Each model's usage at its own price: in auto mode Gemini CLI routes through a small model and
/// answers with another, so one price for all would be wrong. A configured model (`-m`, which
/// pins every call) prices everything; any model without a price leaves the cost unknown.
fn price_per_model(
    out: &mut AgentResult,
    per_model: &[(String, Usage)],
    configured: Option<&str>,
    prices: &PriceTable,
) {
    if configured.is_some() {
        apply_prices(out, configured, prices);
        return;
    }
    let priced: Option<Vec<Usd>> = per_model.iter().map(|(m, u)| prices.price(m, u)).collect();
    match priced {
        Some(costs) if !costs.is_empty() => {
            out.cost = costs.into_iter().fold(Usd::ZERO, |a, b| a + b);
            out.cost_source = CostSource::Priced;
        }
        _ => apply_prices(out, None, prices),
    }
}

/// Gemini CLI's own exit codes (its `Fatal*Error` classes, 0.61): 41 authentication; 42 bad
/// input, 44 sandbox, 52 config, 53 turn limit, 54 tool execution, 55 untrusted folder (plain
/// failures, whose message is on stderr). An API error exits with its HTTP status mod 256.
pub fn class_for_exit(code: i32) -> Option<ErrorClass> {
    match code {
        41 => Some(ErrorClass::Auth),
        42 | 44 | 52 | 53 | 54 | 55 => Some(ErrorClass::Other),
        128..=255 => u16::try_from(code + 256).ok().and_then(class_for_status),
        _ => None,
    }
}

/// The HTTP status inside a Gemini API error message (`{"error":{"code":429,…}}`).
fn api_status(text: &str) -> Option<u16> {
    let at = text.find("\"code\":")? + 7;
    let digits: String = text[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// One Gemini CLI stream-json event as pane lines (see [`super::transcript`]).
pub fn render_gemini_event(v: &Value) -> Option<String> {
    match v["type"].as_str()? {
        "init" => Some(status_line(&format!(
            "session started · model {}",
            v["model"].as_str().unwrap_or("?")
        ))),
        "message" if v["role"] == "assistant" => text_lines(v["content"].as_str()?),
        "tool_use" => {
            let p = &v["parameters"];
            let detail = p["command"]
                .as_str()
                .or(p["file_path"].as_str())
                .or(p["dir_path"].as_str())
                .map_or_else(|| p.to_string(), str::to_string);
            Some(tool_call_line(
                v["tool_name"].as_str().unwrap_or("tool"),
                &detail,
            ))
        }
        "tool_result" => {
            let failed = v["status"] != "success";
            let text = v["error"]["message"]
                .as_str()
                .or(v["output"].as_str())
                .unwrap_or(if failed { "failed" } else { "ok" });
            Some(tool_result_line(text, failed))
        }
        "error" => Some(status_line(v["message"].as_str().unwrap_or("error"))),
        "result" => {
            let stats = &v["stats"];
            let mut facts = vec![format!("{} tokens", u64_at(stats, "total_tokens"))];
            if let Some(ms) = stats["duration_ms"].as_u64() {
                facts.push(format!("{:.1} s", ms as f64 / 1000.0));
            }
            let why = error_message(&v["error"]);
            let failed = (v["status"] != "success")
                .then(|| why.unwrap_or_else(|| format!("status {}", v["status"])));
            Some(end_line(failed.as_deref(), &facts))
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::backend::test_support::inv;
    use crate::agent::result::{CostSource, ModelPrice};
    use crate::domain::Usd;

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

    use crate::agent::fixture as sample;

    #[test]
    fn trust_override_in_every_mode() {
        use crate::agent::backend::Backend;
        for mode in [
            PermissionMode::Full,
            PermissionMode::AcceptEdits,
            PermissionMode::ReadOnly,
        ] {
            let mut s = AgentSettings::new(BackendKind::Gemini);
            s.permission = mode;
            let env = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini)
                .command(&inv("go"))
                .unwrap()
                .env;
            assert!(env.contains(&("GEMINI_CLI_TRUST_WORKSPACE".into(), "true".into())));
        }
    }

    #[test]
    fn real_samples_of_gemini_0_61() {
        let mut prices = PriceTable::new();
        prices.insert("gemini-3.5-flash-lite", ModelPrice::new(0.1, 0.4));
        prices.insert("gemini-3.8-flash", ModelPrice::new(0.3, 2.5));
        // stream-json in auto mode: router and main model, each at its price, cache reads apart.
        let r = parse_gemini_output(
            &sample("gemini-o-stream-json-toolcall-yolo.jsonl"),
            None,
            &prices,
        );
        assert!(r.marker_found && !r.is_error, "{r:?}");
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 3102,
                output_tokens: 168,
                cache_read_input_tokens: 600,
                cache_creation_input_tokens: 0
            }
        );
        let router = ModelPrice::new(0.1, 0.4).cost(&Usage {
            input_tokens: 1034,
            output_tokens: 56,
            cache_read_input_tokens: 200,
            cache_creation_input_tokens: 0,
        });
        let main = ModelPrice::new(0.3, 2.5).cost(&Usage {
            input_tokens: 2068,
            output_tokens: 112,
            cache_read_input_tokens: 400,
            cache_creation_input_tokens: 0,
        });
        assert_eq!((r.cost, r.cost_source), (router + main, CostSource::Priced));
        // One model without a price: unknown, not a wrong number.
        let mut partial = PriceTable::new();
        partial.insert("gemini-3.8-flash", ModelPrice::new(0.3, 2.5));
        let r = parse_gemini_output(
            &sample("gemini-o-stream-json-toolcall-yolo.jsonl"),
            None,
            &partial,
        );
        assert_eq!(r.cost_source, CostSource::Unknown);
        // json with a pinned model.
        prices.insert("gemini-2.5-pro", ModelPrice::new(1.25, 10.0));
        let r = parse_gemini_output(
            &sample("gemini-o-json-toolcall-yolo-model-pinned.json"),
            Some("gemini-2.5-pro"),
            &prices,
        );
        assert!(r.marker_found, "{r:?}");
        assert_eq!(
            (r.usage.input_tokens, r.usage.cache_read_input_tokens),
            (2068, 400)
        );
        assert_eq!(r.cost_source, CostSource::Priced);
        // An API error in json mode is on stderr (after warnings and a stack trace).
        let b = GeminiBackend::new(
            AgentSettings::new(BackendKind::Gemini),
            PathBuf::from("/bin/gemini"),
            Gemini,
        );
        use crate::agent::backend::Backend;
        let err = sample("gemini-o-json-error-400.stderr.txt");
        let r = b.parse_result(err.as_bytes(), &prices);
        assert!(r.is_error && r.text.contains("API key not valid"), "{r:?}");
        assert_eq!(
            b.classify(Some(144), &r, err.as_bytes()),
            Some(ErrorClass::Auth)
        );
        let stream_err = sample("gemini-o-stream-json-error-400.jsonl");
        let r = b.parse_result(stream_err.as_bytes(), &prices);
        assert!(r.is_error && r.text.contains("API key not valid"), "{r:?}");
        assert_eq!(
            b.classify(Some(1), &r, stream_err.as_bytes()),
            Some(ErrorClass::Auth)
        );
        // The untrusted-folder refusal: plain text, a plain failure.
        let untrusted = sample("gemini-untrusted-dir-exit55.stderr.txt");
        let r = b.parse_result(untrusted.as_bytes(), &prices);
        assert_eq!(r.subtype, "no_result");
        assert_eq!(
            b.classify(Some(55), &r, untrusted.as_bytes()),
            Some(ErrorClass::Other)
        );
    }

    #[test]
    fn exit_codes() {
        assert_eq!(class_for_exit(41), Some(ErrorClass::Auth));
        assert_eq!(class_for_exit(53), Some(ErrorClass::Other));
        assert_eq!(class_for_exit(429 - 256), Some(ErrorClass::RateLimited));
        assert_eq!(class_for_exit(503 - 256), Some(ErrorClass::ServerError));
        assert_eq!(class_for_exit(401 - 256), Some(ErrorClass::Auth));
        assert_eq!(class_for_exit(1), None);
        assert_eq!(
            api_status(r#"[API Error: {"error":{"code":429,"message":"x"}}]"#),
            Some(429)
        );
    }

    #[test]
    fn meter_of_real_runs_jumps_to_the_parsed_cost_at_the_result_line() {
        use crate::agent::backend::Backend;
        use crate::agent::live_usage::run_meter;
        let mut prices = PriceTable::new();
        prices.insert("gemini-3.5-flash-lite", ModelPrice::new(0.1, 0.4));
        prices.insert("gemini-3.8-flash", ModelPrice::new(0.3, 2.5));
        prices.insert("gemini-3.1-pro", ModelPrice::new(2.0, 12.0));
        prices.insert("gemini-2.5-pro", ModelPrice::new(1.25, 10.0));
        let auto = GeminiBackend::new(
            AgentSettings::new(BackendKind::Gemini),
            PathBuf::from("/bin/gemini"),
            Gemini,
        );
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.model = Some("gemini-2.5-pro".into());
        let pinned = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        for name in [
            "gemini-o-stream-json-toolcall-yolo.jsonl",
            "gemini-o-stream-json-yolo-shell.jsonl",
            "gemini-o-stream-json-approval-plan-write_file.jsonl",
        ] {
            let out = sample(name);
            for b in [&auto, &pinned] {
                let mut meter = b.usage_meter(&prices).unwrap();
                // Nothing before the result line: Gemini prints no usage until then.
                let (before, last) = out.trim_end().rsplit_once('\n').unwrap();
                assert_eq!(run_meter(&mut meter, before), Usd::ZERO, "{name}");
                let live = meter.feed_line(last).unwrap();
                let r = b.parse_result(out.as_bytes(), &prices);
                assert_eq!(r.cost_source, CostSource::Priced, "{name}");
                assert_eq!((live, meter.usage()), (r.cost, r.usage), "{name}");
                // The line seen twice does not count twice.
                assert_eq!(meter.feed_line(last), None, "{name}");
            }
        }
        // Pinned to a model without a price: nothing is priced, as in the result.
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.model = Some("gemini-9".into());
        let b = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        let mut meter = b.usage_meter(&prices).unwrap();
        assert_eq!(
            run_meter(
                &mut meter,
                &sample("gemini-o-stream-json-toolcall-yolo.jsonl")
            ),
            Usd::ZERO
        );
        // json output has no live view and no meter.
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.output = OutputMode::Json;
        let b = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        assert!(b.usage_meter(&prices).is_none());
    }

    /// The pane's lines for `output` fed line by line through Gemini's display filter, colours
    /// removed.
    fn pane(output: &str) -> Vec<String> {
        use crate::pty::LineFilter;
        let mut filter = GeminiTranscript::default();
        let mut out = Vec::new();
        for line in output.split('\n') {
            filter.line(line.as_bytes(), &mut out);
        }
        let text = crate::agent::result::clean_output(&out);
        text.lines().map(str::to_string).collect()
    }

    #[test]
    fn pane_joins_streamed_text_into_one() {
        // Gemini CLI 0.61 against the scripted server streaming the answer in pieces.
        let got = pane(&sample("gemini-o-stream-json-deltas.jsonl"));
        assert_eq!(
            got,
            [
                "● session started · model gemini-2.5-pro",
                "▶ write_file <WORKDIR>/hello.txt",
                "  ↳ ok",
                "The file is written and checked.",
                "<promise>COMPLETE</promise>",
                "✔ finished · 2580 tokens · 0.1 s",
                "Warning: 256-color support not detected. Using a terminal with at least 256-color support is recommended for a better visual experience.",
                "YOLO mode is enabled. All tool calls will be automatically approved.",
            ]
        );
        // Text is flushed by a tool call, a new (non-delta) message, and anything else; pieces
        // that split a secret still have it redacted, since the text is redacted whole.
        let lines = [
            r#"{"type":"message","role":"assistant","content":"Let me ","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"look.","delta":true}"#,
            r#"{"type":"tool_use","tool_name":"run_shell_command","parameters":{"command":"ls"}}"#,
            r#"{"type":"tool_result","status":"success","output":"a"}"#,
            r#"{"type":"message","role":"assistant","content":"token ghp_1234567890abc","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"defghijABCDEFGHIJ123456 ok","delta":true}"#,
            r#"{"type":"message","role":"assistant","content":"A new message."}"#,
            r#"{"type":"message","role":"assistant","content":" Continued.","delta":true}"#,
        ];
        let got = pane(&lines.join("\n"));
        assert_eq!(
            got[..3],
            ["Let me look.", "▶ run_shell_command ls", "  ↳ a"]
        );
        assert!(
            got[3].starts_with("token [REDACTED") && got[3].ends_with(" ok"),
            "{got:?}"
        );
        // The last text waits for what follows it.
        assert_eq!(got.len(), 4, "{got:?}");
    }

    #[test]
    fn pane_transcript_of_a_real_run() {
        let got: Vec<String> = sample("gemini-o-stream-json-toolcall-yolo.jsonl")
            .lines()
            .filter_map(|l| crate::agent::transcript::render_line_with(l, render_gemini_event))
            .collect();
        assert_eq!(
            got,
            [
                "● session started · model auto",
                "▶ write_file <WORKDIR>/gemini-yolo/mock_out.txt",
                "  ↳ ok",
                "Done.\n<promise>COMPLETE</promise>",
                "✔ finished · 3870 tokens · 0.1 s",
            ]
        );
    }

    /// Chat-file replies add up while Gemini works; its `result` line settles the account with
    /// the run's own totals, and a reply read late from the file adds nothing after it.
    #[test]
    fn chat_file_replies_meter_until_the_result_settles() {
        use crate::agent::backend::Backend;
        let mut prices = PriceTable::new();
        prices.insert("gemini-2.5-pro", ModelPrice::new(1.0, 10.0));
        let dir = tempfile::tempdir().unwrap();
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.output = OutputMode::Stream;
        s.env = vec![("HOME".into(), dir.path().to_string_lossy().into_owned())];
        let b = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        let mut meter = b.usage_meter(&prices).unwrap();
        let reply = |id: &str, input: u64| {
            format!(
                r#"{{"id":"{id}","type":"gemini","content":"","tokens":{{"input":{input},"output":0,"cached":0,"thoughts":0,"tool":0,"total":{input}}},"model":"gemini-2.5-pro"}}"#
            )
        };
        assert_eq!(
            meter.feed_line(&reply("a", 1_000_000)),
            Some(Usd::from_f64(1.0))
        );
        // The same reply rewritten (Gemini appends it again with its tool calls): not added.
        assert_eq!(meter.feed_line(&reply("a", 1_000_000)), None);
        assert_eq!(
            meter.feed_line(&reply("b", 1_000_000)),
            Some(Usd::from_f64(2.0))
        );
        let result = r#"{"type":"result","status":"success","stats":{"total_tokens":2000000,"input_tokens":2000000,"output_tokens":0,"cached":0,"input":2000000,"duration_ms":1,"tool_calls":1,"models":{"gemini-2.5-pro":{"total_tokens":2000000,"input_tokens":2000000,"output_tokens":0,"cached":0,"input":2000000}}}}"#;
        meter.feed_line(result);
        assert_eq!(meter.cost(), Usd::from_f64(2.0));
        assert_eq!(meter.feed_line(&reply("c", 1_000_000)), None);
        assert_eq!(meter.cost(), Usd::from_f64(2.0));

        // The session's chat file, found from the `init` event's id under `HOME/.gemini/tmp`.
        let log = b.session_log().unwrap();
        let init = r#"{"type":"init","timestamp":"2026-12-03T17:49:52.598Z","session_id":"7b0ef27a-068d-4582-8bd8-c891acd0e487","model":"auto"}"#;
        let id = log.id_in(init).unwrap();
        assert_eq!((log.locate)(&log.dir, &id), None);
        let chats = log.dir.join("t-1/chats");
        std::fs::create_dir_all(&chats).unwrap();
        std::fs::write(chats.join("session-2026-12-06T08-46-deadbeef.jsonl"), "").unwrap();
        assert_eq!((log.locate)(&log.dir, &id), None, "another session's file");
        let file = chats.join("session-2026-12-06T08-46-7b0ef27a.jsonl");
        std::fs::write(&file, "").unwrap();
        assert_eq!((log.locate)(&log.dir, &id), Some(file));
        // Only with stream-json, where the meter runs.
        let mut s = AgentSettings::new(BackendKind::Gemini);
        s.output = OutputMode::Json;
        let b = GeminiBackend::new(s, PathBuf::from("/bin/gemini"), Gemini);
        assert!(b.session_log().is_none());
    }
}
