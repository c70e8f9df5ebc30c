//! Claude Code: `claude -p <prompt> --output-format stream-json --verbose …`.
//!
//! stream-json prints one JSON event per line (system init, assistant and user messages, and a
//! final `{"type":"result",…}` with the exact cost), so the pane can show a live transcript and the
//! result is still machine-readable.

use super::backend::{
    AgentSettings, BackendKind, Invocation, OutputMode, PermissionMode, base_env, dash_safe_prompt,
    is_root,
};
use super::classify::{ErrorClass, class_for_status, classify_outcome};
use super::jsonscan::json_objects;
use super::live_usage::{LineReader, Reading, UsageMeter};
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, CostSource, PriceTable, Usage, apply_prices, has_marker, u64_at};
use super::transcript::TranscriptFilter;
use crate::domain::Usd;
use serde_json::Value;

/// Tools refused in read-only mode: everything that writes or runs commands.
pub const READ_ONLY_DISALLOWED: &str = "Bash,Edit,Write,MultiEdit,NotebookEdit";

/// The Claude Code CLI.
#[derive(Debug, Clone, Copy)]
pub struct Claude;

pub type ClaudeBackend = ProcessBackend<Claude>;

impl Cli for Claude {
    const KIND: BackendKind = BackendKind::Claude;

    /// The prompt comes right after `-p`, before any option that takes a list, so it can never
    /// be swallowed as an option value.
    fn args(&self, s: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        let mut args = vec![
            "-p".to_string(),
            dash_safe_prompt(inv),
            "--output-format".to_string(),
        ];
        match s.output {
            OutputMode::Stream => args.extend(["stream-json".to_string(), "--verbose".to_string()]),
            OutputMode::Json => args.push("json".to_string()),
        }
        if let Some(model) = s.model_name() {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        match s.permission {
            PermissionMode::Full => args.push("--dangerously-skip-permissions".to_string()),
            PermissionMode::AcceptEdits => {
                args.extend(["--permission-mode".to_string(), "acceptEdits".to_string()])
            }
            PermissionMode::ReadOnly => args.extend([
                "--disallowedTools".to_string(),
                READ_ONLY_DISALLOWED.to_string(),
            ]),
        }
        args.extend(s.extra_args.iter().cloned());
        args
    }

    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
        parse_claude_output(clean, model, prices)
    }

    fn env(&self, settings: &AgentSettings) -> Vec<(String, String)> {
        env(settings, is_root())
    }

    fn display_filter(&self, s: &AgentSettings) -> Option<Box<dyn crate::pty::LineFilter>> {
        (s.output == OutputMode::Stream)
            .then(|| Box::new(TranscriptFilter) as Box<dyn crate::pty::LineFilter>)
    }

    fn usage_meter(&self, s: &AgentSettings, prices: &PriceTable) -> Option<UsageMeter> {
        (s.output == OutputMode::Stream)
            .then(|| UsageMeter::new(CLAUDE_METER, prices.clone(), s.model.clone()))
    }

    /// Claude's result names the HTTP status of a failed API call (`api_error_status`), which
    /// is more reliable than its wording ("Invalid API key · Fix external API key").
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
                .and_then(|j| j["api_error_status"].as_u64());
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

/// Environment for one run; `root` is whether the agent runs as root.
pub fn env(settings: &AgentSettings, root: bool) -> Vec<(String, String)> {
    let mut env = base_env(settings);
    // Claude refuses --dangerously-skip-permissions as root unless told it is sandboxed;
    // the agent runs in its own worktree, which is the sandbox we offer.
    if root && settings.permission == PermissionMode::Full {
        env.push(("IS_SANDBOX".to_string(), "1".to_string()));
    }
    // An update in the middle of an unattended run would change the binary under it.
    env.push(("DISABLE_AUTOUPDATER".to_string(), "1".to_string()));
    env
}

/// The result of a Claude run from its cleaned output (json or stream-json): the last
/// `{"type":"result"}` object. `model` prices the usage if no cost was reported.
pub fn parse_claude_output(clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let objects = json_objects(clean);
    let init_model = objects
        .iter()
        .find(|v| v["type"] == "system" && v["subtype"] == "init")
        .and_then(|v| v["model"].as_str().map(str::to_string));
    let Some(result) = objects.iter().rev().find(|v| v["type"] == "result") else {
        return AgentResult::no_result(clean);
    };
    let mut out = claude_result_from_json(result);
    apply_prices(&mut out, model.or(init_model.as_deref()), prices);
    out
}

/// Claude's spend while it works: each `assistant` line carries its API message's usage so far.
/// Claude Code prints one line per content block, each repeating the message's `id` and usage,
/// so the id is the key (the latest wins); `system`/`init` names the session's model.
pub const CLAUDE_METER: LineReader = LineReader {
    needles: &["\"assistant\"", "\"init\""],
    read: claude_meter_reading,
};

fn claude_meter_reading(v: &Value, _configured: Option<&str>) -> Vec<Reading> {
    match v["type"].as_str() {
        Some("system") if v["subtype"] == "init" => v["model"]
            .as_str()
            .map(|m| Reading::SessionModel(m.to_string()))
            .into_iter()
            .collect(),
        Some("assistant") => {
            let msg = &v["message"];
            if !msg["usage"].is_object() {
                return Vec::new();
            }
            vec![Reading::Usage {
                key: msg["id"].as_str().map(str::to_string),
                model: msg["model"].as_str().map(str::to_string),
                usage: claude_usage(&msg["usage"]),
                cost: None,
            }]
        }
        _ => Vec::new(),
    }
}

/// Claude's usage object (a message's or the result's).
fn claude_usage(u: &Value) -> Usage {
    Usage {
        input_tokens: u64_at(u, "input_tokens"),
        output_tokens: u64_at(u, "output_tokens"),
        cache_read_input_tokens: u64_at(u, "cache_read_input_tokens"),
        cache_creation_input_tokens: u64_at(u, "cache_creation_input_tokens"),
    }
}

/// An [`AgentResult`] from one Claude `result` object.
pub fn claude_result_from_json(v: &Value) -> AgentResult {
    let text = v["result"].as_str().unwrap_or_default().to_string();
    let usage = claude_usage(&v["usage"]);
    let (cost, cost_source) = match v["total_cost_usd"]
        .as_f64()
        .or_else(|| v["cost_usd"].as_f64())
    {
        Some(c) => (Usd::from_f64(c), CostSource::Reported),
        None => (Usd::ZERO, CostSource::Unknown),
    };
    let subtype = v["subtype"].as_str().unwrap_or("unknown").to_string();
    let is_error = v["is_error"].as_bool().unwrap_or(subtype != "success");
    AgentResult {
        marker_found: has_marker(&text),
        text,
        cost,
        cost_source,
        usage,
        num_turns: u32::try_from(u64_at(v, "num_turns")).unwrap_or(u32::MAX),
        duration_ms: v.get("duration_ms").and_then(Value::as_u64),
        is_error,
        subtype,
        raw_json: Some(v.clone()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::backend::Backend;
    use crate::agent::backend::test_support::inv;
    use crate::agent::result::{COMPLETION_MARKER, ModelPrice, clean_output};
    use std::path::PathBuf;

    fn backend(permission: PermissionMode, output: OutputMode) -> ClaudeBackend {
        let mut s = AgentSettings::new(BackendKind::Claude);
        s.permission = permission;
        s.output = output;
        s.model = Some("claude-sonnet-4-5".into());
        s.extra_args = vec!["--max-turns".into(), "40".into()];
        ClaudeBackend::new(s, PathBuf::from("/usr/bin/claude"), Claude)
    }

    #[test]
    fn argv_per_permission_mode() {
        let b = backend(PermissionMode::Full, OutputMode::Stream);
        assert_eq!(
            b.args(&inv("do it")),
            [
                "-p",
                "do it",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "claude-sonnet-4-5",
                "--dangerously-skip-permissions",
                "--max-turns",
                "40"
            ]
        );
        let b = backend(PermissionMode::AcceptEdits, OutputMode::Json);
        assert_eq!(
            b.args(&inv("x y 'z'")),
            [
                "-p",
                "x y 'z'",
                "--output-format",
                "json",
                "--model",
                "claude-sonnet-4-5",
                "--permission-mode",
                "acceptEdits",
                "--max-turns",
                "40"
            ]
        );
        let b = backend(PermissionMode::ReadOnly, OutputMode::Stream);
        let args = b.args(&inv("-rf"));
        assert_eq!(args[1], " -rf");
        assert!(
            args.windows(2)
                .any(|w| w[0] == "--disallowedTools" && w[1] == READ_ONLY_DISALLOWED)
        );
    }

    #[test]
    fn sandbox_env_only_as_root_with_full_permissions() {
        let has = |env: &[(String, String)]| env.iter().any(|(k, v)| k == "IS_SANDBOX" && v == "1");
        let full = backend(PermissionMode::Full, OutputMode::Stream);
        assert!(has(&env(full.settings(), true)));
        assert!(!has(&env(full.settings(), false)));
        let edits = backend(PermissionMode::AcceptEdits, OutputMode::Stream);
        assert!(!has(&env(edits.settings(), true)));
        let cmd = backend(PermissionMode::Full, OutputMode::Stream)
            .command(&inv("p"))
            .unwrap();
        assert_eq!(cmd.cwd, PathBuf::from("/wt"));
        assert_eq!(cmd.argv()[0], "/usr/bin/claude");
    }

    const STREAM: &str = concat!(
        "{\"type\":\"system\",\"subtype\":\"init\",\"cwd\":\"/wt\",\"model\":\"claude-sonnet-4-5\",\"tools\":[\"Bash\"]}\r\n",
        "{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"print <promise>COMPLETE</promise> when done\"}]}}\r\n",
        "{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"Working on it\"}]}}\r\n",
        "{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"duration_ms\":2345,\"num_turns\":3,",
        "\"result\":\"All done.\\n<promise>COMPLETE</promise>\",\"total_cost_usd\":0.0123456,",
        "\"usage\":{\"input_tokens\":1200,\"output_tokens\":340,\"cache_read_input_tokens\":5000,\"cache_creation_input_tokens\":100}}\r\n",
    );

    #[test]
    fn parses_the_final_result_event() {
        let b = backend(PermissionMode::Full, OutputMode::Stream);
        let raw = format!("\x1b[?25l{STREAM}\x1b[?25h");
        let r = b.parse_result(raw.as_bytes(), &PriceTable::new());
        assert!(r.marker_found && !r.is_error);
        assert_eq!(r.text, format!("All done.\n{COMPLETION_MARKER}"));
        assert_eq!((r.cost, r.cost_source), (Usd(12_346), CostSource::Reported));
        assert_eq!(
            r.usage,
            Usage {
                input_tokens: 1200,
                output_tokens: 340,
                cache_read_input_tokens: 5000,
                cache_creation_input_tokens: 100
            }
        );
        assert_eq!(
            (r.num_turns, r.duration_ms, r.subtype.as_str()),
            (3, Some(2345), "success")
        );
        assert!(r.raw_json.is_some());
    }

    #[test]
    fn marker_only_in_transcript_does_not_count() {
        let stream = STREAM.replace(
            "All done.\\n<promise>COMPLETE</promise>",
            "I could not finish.",
        );
        let r = parse_claude_output(&clean_output(stream.as_bytes()), None, &PriceTable::new());
        assert!(!r.marker_found);
        assert_eq!(r.text, "I could not finish.");
    }

    fn assistant(id: Option<&str>, model: Option<&str>, input: u64, output: u64) -> String {
        let mut msg = serde_json::json!({
            "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": input, "output_tokens": output,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        });
        if let Some(id) = id {
            msg["id"] = id.into();
        }
        if let Some(m) = model {
            msg["model"] = m.into();
        }
        serde_json::json!({"type": "assistant", "message": msg, "session_id": "s"}).to_string()
    }

    fn meter(configured: Option<&str>) -> UsageMeter {
        let mut t = PriceTable::new();
        t.insert("claude-sonnet-4-5", ModelPrice::new(3.0, 15.0));
        t.insert("claude-haiku-4-5", ModelPrice::new(1.0, 5.0));
        backend_with_model(configured).usage_meter(&t).unwrap()
    }

    fn backend_with_model(model: Option<&str>) -> ClaudeBackend {
        let mut s = AgentSettings::new(BackendKind::Claude);
        s.model = model.map(str::to_string);
        ClaudeBackend::new(s, PathBuf::from("/usr/bin/claude"), Claude)
    }

    #[test]
    fn meter_counts_repeated_blocks_of_one_message_once() {
        let mut m = meter(None);
        let a = assistant(
            Some("msg_1"),
            Some("claude-sonnet-4-5-20250929"),
            1_000_000,
            0,
        );
        assert_eq!(m.feed_line(&a), Some(Usd::from_f64(3.0)));
        // The same message's next content block: same id, same usage: no change.
        assert_eq!(m.feed_line(&a), None);
        // Its usage grows (a later block reports more output): replaced, not added.
        let a2 = assistant(
            Some("msg_1"),
            Some("claude-sonnet-4-5-20250929"),
            1_000_000,
            100_000,
        );
        assert_eq!(m.feed_line(&a2), Some(Usd::from_f64(4.5)));
        // A second message adds up.
        let b = assistant(Some("msg_2"), Some("claude-haiku-4-5"), 0, 200_000);
        assert_eq!(m.feed_line(&b), Some(Usd::from_f64(5.5)));
        assert_eq!(m.usage().output_tokens, 300_000);
        // Cache reads and writes are priced.
        let cached = r#"{"type":"assistant","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":1000000,"cache_creation_input_tokens":1000000}}}"#;
        assert_eq!(m.feed_line(cached), Some(Usd::from_f64(5.5 + 0.3 + 3.75)));
    }

    #[test]
    fn meter_model_falls_back_to_init_then_config() {
        let mut m = meter(Some("claude-haiku-4-5"));
        assert_eq!(
            m.feed_line(&assistant(None, None, 1_000_000, 0)),
            Some(Usd::from_f64(1.0))
        );
        m.feed_line(r#"{"type":"system","subtype":"init","model":"claude-sonnet-4-5","cwd":"/w"}"#);
        assert_eq!(
            m.feed_line(&assistant(None, None, 1_000_000, 0)),
            Some(Usd::from_f64(6.0))
        );
        for noise in [
            r#"{"type":"user","message":{"content":[]}}"#,
            r#"{"type":"assistant","message":{"content":[]}}"#,
            r#"{"type":"result","total_cost_usd":99}"#,
        ] {
            assert_eq!(m.feed_line(noise), None, "{noise}");
        }
        // json output has no live usage.
        let mut s = AgentSettings::new(BackendKind::Claude);
        s.output = OutputMode::Json;
        let b = ClaudeBackend::new(s, PathBuf::from("/usr/bin/claude"), Claude);
        assert!(b.usage_meter(&PriceTable::new()).is_none());
    }

    #[test]
    fn api_error_result_and_missing_result() {
        let line = r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529 {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}","total_cost_usd":0,"usage":{"input_tokens":0,"output_tokens":0}}"#;
        let r = parse_claude_output(line, None, &PriceTable::new());
        assert!(r.is_error && !r.marker_found);
        let b = backend(PermissionMode::Full, OutputMode::Stream);
        assert_eq!(
            b.classify(Some(1), &r, line.as_bytes()),
            Some(crate::agent::ErrorClass::Overloaded)
        );
        let auth = r#"{"type":"result","subtype":"success","is_error":true,"api_error_status":401,"result":"Invalid API key · Fix external API key","total_cost_usd":0}"#;
        let r = parse_claude_output(auth, None, &PriceTable::new());
        assert_eq!(
            b.classify(Some(1), &r, auth.as_bytes()),
            Some(crate::agent::ErrorClass::Auth)
        );
        let odd = auth
            .replace("Invalid API key · Fix external API key", "something new")
            .replace("401", "529");
        let r = parse_claude_output(&odd, None, &PriceTable::new());
        assert_eq!(
            b.classify(Some(1), &r, odd.as_bytes()),
            Some(crate::agent::ErrorClass::Overloaded)
        );
        let r = parse_claude_output("Segmentation fault\n", None, &PriceTable::new());
        assert!(r.is_error && r.subtype == "no_result" && r.text == "Segmentation fault");
    }
}
