//! Codex: `codex exec --json --skip-git-repo-check [--model m] <permission flags> --cd <workdir>
//! <prompt>`.
//!
//! JSON Lines: `thread.started`, `turn.started`, `item.*` (the final answer is the last
//! `agent_message` item; `error` items are warnings), `turn.completed` with usage, `turn.failed`.
//! A top-level `error` event is transient (Codex prints one per reconnect and carries on), so it
//! counts only when no turn completed after it. Codex reports no cost and never names its model,
//! so usage is priced from the table with `agents.codex.model`. The older `{"msg":{…}}` shape is
//! read as well. Verified against codex-cli 0.171.0 (docs/agents.md).

use super::backend::{AgentSettings, BackendKind, Invocation, PermissionMode, dash_safe_prompt};
use super::jsonscan::json_objects;
use super::live_usage::{
    LineReader, Reading, SessionLog, UsageMeter, file_in, subdirs_newest_first,
};
use super::process_backend::{Cli, ProcessBackend};
use super::result::{AgentResult, PriceTable, Usage, apply_prices, u64_at};
use super::transcript::{
    JsonLinesFilter, end_line, status_line, text_lines, tool_call_line, tool_result_line,
};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The Codex CLI.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

pub type CodexBackend = ProcessBackend<Codex>;

impl Cli for Codex {
    const KIND: BackendKind = BackendKind::Codex;

    fn args(&self, s: &AgentSettings, inv: &Invocation<'_>) -> Vec<String> {
        // Whilly's worktrees are git repositories, but one-shot calls may run elsewhere.
        let mut args = vec![
            "exec".to_string(),
            "--json".to_string(),
            "--skip-git-repo-check".to_string(),
        ];
        if let Some(model) = s.model_name() {
            args.extend(["--model".to_string(), model.to_string()]);
        }
        match s.permission {
            PermissionMode::Full => {
                args.push("--dangerously-bypass-approvals-and-sandbox".to_string())
            }
            // `--full-auto` is gone (exit 2 since 0.1xx); the sandbox that lets it write in the
            // workspace is what accept-edits means. Exec never asks for approval.
            PermissionMode::AcceptEdits => {
                args.extend(["--sandbox".to_string(), "workspace-write".to_string()])
            }
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

    fn display_filter(&self, _s: &AgentSettings) -> Option<Box<dyn crate::pty::LineFilter>> {
        Some(Box::new(JsonLinesFilter(render_codex_event)))
    }

    fn usage_meter(&self, s: &AgentSettings, prices: &PriceTable) -> Option<UsageMeter> {
        Some(UsageMeter::new(
            CODEX_METER,
            prices.clone(),
            s.model.clone(),
        ))
    }

    fn session_log(&self, s: &AgentSettings) -> Option<SessionLog> {
        Some(SessionLog {
            dir: codex_home(s)?.join("sessions"),
            needle: "thread.started",
            id_of: |v| match v["type"].as_str() {
                Some("thread.started") => v["thread_id"].as_str().map(str::to_string),
                _ => None,
            },
            locate: rollout_file,
        })
    }
}

/// How many dated folders (newest first) a thread's file is looked for in: the run's own day,
/// and the one before for a run started just before midnight.
const RECENT_DAYS: usize = 2;

/// Thread `id`'s session file, `sessions/YYYY/MM/DD/rollout-<time>-<id>.jsonl`, in the newest
/// dated folders only (a busy `~/.codex` holds years of them).
fn rollout_file(sessions: &Path, id: &str) -> Option<PathBuf> {
    let days = subdirs_newest_first(sessions)
        .iter()
        .flat_map(|year| subdirs_newest_first(year))
        .flat_map(|month| subdirs_newest_first(&month))
        .take(RECENT_DAYS)
        .collect::<Vec<_>>();
    days.iter()
        .find_map(|day| file_in(day, |name| is_rollout_of(name, id)))
}

fn is_rollout_of(name: &str, id: &str) -> bool {
    name.starts_with("rollout-")
        && name
            .strip_suffix(".jsonl")
            .and_then(|n| n.strip_suffix(id))
            .is_some_and(|n| n.ends_with('-'))
}

/// Where Codex keeps its state: `CODEX_HOME`, else `HOME/.codex` (each from the agent's
/// configured environment first, then whilly's own, which the agent inherits).
fn codex_home(s: &AgentSettings) -> Option<PathBuf> {
    s.env_var("CODEX_HOME")
        .map(PathBuf::from)
        .or_else(|| s.env_var("HOME").map(|h| PathBuf::from(h).join(".codex")))
        .filter(|p| p.is_absolute())
}

/// Codex's spend while it works. `codex exec` runs one turn and prints its usage
/// (`turn.completed`) only as the run ends; its session file has a running total
/// (`token_count`) after every model request, which the engine follows
/// ([`SessionLog`]). Both are the session's total so far, under one key, so neither adds to the
/// other. Priced with the configured model (Codex never names one).
pub const CODEX_METER: LineReader = LineReader {
    needles: &["turn.completed", "token_count"],
    read: codex_meter_reading,
};

fn codex_meter_reading(v: &Value, _configured: Option<&str>) -> Vec<Reading> {
    let total = |usage| Reading::Usage {
        key: Some("total".to_string()),
        model: None,
        usage,
        cost: None,
    };
    match event(v) {
        Some(("turn.completed", body)) => vec![total(codex_usage(&body["usage"]))],
        Some(("token_count", body)) => vec![total(token_count_usage(body))],
        _ => Vec::new(),
    }
}

/// An event's type and body: older releases wrap every event as `{"id":…,"msg":{"type":…}}`,
/// the session file as `{"type":"event_msg","payload":{"type":…}}`.
fn event(ev: &Value) -> Option<(&str, &Value)> {
    match (ev["type"].as_str(), ev["msg"]["type"].as_str()) {
        (Some("event_msg"), _) => Some((ev["payload"]["type"].as_str()?, &ev["payload"])),
        (Some(k), _) => Some((k, ev)),
        (None, Some(k)) => Some((k, &ev["msg"])),
        _ => None,
    }
}

/// The old shape's `token_count`: cumulative totals, at the top or in `info.total_token_usage`.
fn token_count_usage(body: &Value) -> Usage {
    if body["info"]["total_token_usage"].is_object() {
        codex_usage(&body["info"]["total_token_usage"])
    } else {
        codex_usage(body)
    }
}

/// One Codex event as pane lines (see [`super::transcript`]).
pub fn render_codex_event(v: &Value) -> Option<String> {
    let item = &v["item"];
    match (v["type"].as_str()?, item["type"].as_str()) {
        ("thread.started", _) => Some(status_line("codex session started")),
        ("item.started", Some("command_execution")) => Some(tool_call_line(
            "Bash:",
            item["command"].as_str().unwrap_or_default(),
        )),
        ("item.completed", Some("command_execution")) => {
            let code = item["exit_code"].as_i64();
            let out = item["aggregated_output"].as_str().unwrap_or_default();
            let text = if out.trim().is_empty() {
                format!("exit {}", code.map_or("?".to_string(), |c| c.to_string()))
            } else {
                out.to_string()
            };
            Some(tool_result_line(&text, code != Some(0)))
        }
        ("item.completed", Some("file_change")) => {
            let paths: Vec<&str> = item["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["path"].as_str())
                .collect();
            Some(tool_call_line("Edit", &paths.join(", ")))
        }
        ("item.completed", Some("agent_message")) => text_lines(item["text"].as_str()?),
        ("item.completed", Some("reasoning")) => Some("… thinking".to_string()),
        ("item.completed", Some("error")) | ("error", _) => Some(status_line(
            v["message"].as_str().or(item["message"].as_str())?,
        )),
        ("turn.completed", _) => {
            let u = codex_usage(&v["usage"]);
            Some(end_line(None, &[format!("{} tokens", u.total())]))
        }
        ("turn.failed", _) => Some(end_line(
            Some(v["error"]["message"].as_str().unwrap_or("turn failed")),
            &[],
        )),
        _ => None,
    }
}

pub fn parse_codex_output(clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult {
    let events = json_objects(clean);
    let mut final_text: Option<String> = None;
    let mut usage = Usage::default();
    let mut turns = 0u32;
    let mut error: Option<String> = None;
    // The last transient `error` event since a turn completed: fatal only if nothing followed.
    let mut transient: Option<String> = None;
    let mut last: Option<&Value> = None;
    let mut seen = false;
    for ev in &events {
        let Some((kind, body)) = event(ev) else {
            continue;
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
                transient = None;
                turns = turns.saturating_add(1);
                // The thread's total so far (exec builds it from the running total, not the
                // turn's own), so the latest replaces the earlier ones.
                usage = codex_usage(&body["usage"]);
                last = Some(ev);
            }
            // Old shape: cumulative totals, so the latest replaces the earlier ones.
            "token_count" => usage = token_count_usage(body),
            "turn.failed" => {
                error = body["error"]["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| Some(body["error"].to_string()));
                last = Some(ev);
            }
            "error" => {
                transient = body["message"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| Some(body.to_string()));
            }
            _ => {}
        }
    }
    if !seen {
        return AgentResult::no_result(clean);
    }
    // A run that ended on reconnect errors (a dead provider, killed at last) names the last one.
    let error = error.or(if final_text.is_none() {
        transient
    } else {
        None
    });
    let mut out = AgentResult {
        usage,
        num_turns: turns,
        raw_json: last.cloned(),
        ..AgentResult::answered(error, final_text, String::new())
    };
    apply_prices(&mut out, model, prices);
    out
}

/// Codex counts cache reads and writes inside `input_tokens`; split them out so each is priced
/// once at its own rate.
fn codex_usage(u: &Value) -> Usage {
    let input = u64_at(u, "input_tokens");
    let cached = u64_at(u, "cached_input_tokens");
    let written = u64_at(u, "cache_write_input_tokens");
    Usage {
        input_tokens: input.saturating_sub(cached).saturating_sub(written),
        output_tokens: u64_at(u, "output_tokens")
            .saturating_add(u64_at(u, "reasoning_output_tokens")),
        cache_read_input_tokens: cached,
        cache_creation_input_tokens: written,
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
                "--skip-git-repo-check",
                "--model",
                "gpt-5-codex",
                "--dangerously-bypass-approvals-and-sandbox",
                "--cd",
                "/wt",
                "go"
            ]
        );
        s.permission = PermissionMode::ReadOnly;
        let args =
            CodexBackend::new(s.clone(), PathBuf::from("/bin/codex"), Codex).args(&inv("go"));
        assert!(args.windows(2).any(|w| w == ["--sandbox", "read-only"]));
        s.permission = PermissionMode::AcceptEdits;
        let args = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex).args(&inv("go"));
        assert!(
            args.windows(2)
                .any(|w| w == ["--sandbox", "workspace-write"])
        );
        assert!(!args.iter().any(|a| a == "--full-auto"), "{args:?}");
    }

    use crate::agent::fixture as sample;

    #[test]
    fn real_samples_of_codex_0_171() {
        let mut prices = PriceTable::new();
        prices.insert("gpt-5", ModelPrice::new(1.25, 10.0));
        // A tool call, then the answer: two requests' usage, cached tokens split out.
        let r = parse_codex_output(
            &sample("codex-exec-json-toolcall-bypass.jsonl"),
            Some("gpt-5"),
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
        assert_eq!(r.cost_source, CostSource::Priced);
        // Codex never names its model: without agents.codex.model the cost is unknown.
        let r = parse_codex_output(&sample("codex-exec-json-hello.jsonl"), None, &prices);
        assert_eq!(r.cost_source, CostSource::Unknown);
        // Reconnects, then success: the transient errors are not the result.
        for name in [
            "codex-exec-json-transient-retry-then-success.jsonl",
            "codex-exec-json-openai-base-url-ws-fallback.jsonl",
        ] {
            let r = parse_codex_output(&sample(name), None, &prices);
            assert!(r.marker_found && !r.is_error, "{name}: {r:?}");
        }
        // A provider that never answers: killed in the end, the last reconnect error is why.
        let r = parse_codex_output(
            &sample("codex-exec-json-error-unreachable.jsonl"),
            None,
            &prices,
        );
        assert!(r.is_error && r.text.contains("Reconnecting"), "{r:?}");
        let cache = codex_usage(
            &serde_json::json!({"input_tokens": 100, "cached_input_tokens": 30,
            "cache_write_input_tokens": 20, "output_tokens": 5}),
        );
        assert_eq!(
            (
                cache.input_tokens,
                cache.cache_read_input_tokens,
                cache.cache_creation_input_tokens
            ),
            (50, 30, 20)
        );
    }

    #[test]
    fn meter_of_real_runs_ends_at_the_parsed_cost() {
        use crate::agent::backend::Backend;
        use crate::agent::live_usage::run_meter;
        let mut prices = PriceTable::new();
        prices.insert("gpt-5", ModelPrice::new(1.25, 10.0));
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.model = Some("gpt-5".into());
        let b = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex);
        for name in [
            "codex-exec-json-toolcall-bypass.jsonl",
            "codex-exec-json-hello.jsonl",
            "codex-exec-json-transient-retry-then-success.jsonl",
            "codex-exec-json-toolcall-workspace-write.jsonl",
        ] {
            let out = sample(name);
            let mut meter = b.usage_meter(&prices).unwrap();
            let live = run_meter(&mut meter, &out);
            let r = b.parse_result(out.as_bytes(), &prices);
            assert_eq!(r.cost_source, CostSource::Priced, "{name}");
            assert!(r.cost > Usd::ZERO, "{name}");
            assert_eq!((live, meter.usage()), (r.cost, r.usage), "{name}");
        }
        // `turn.completed` carries the thread's running total, like the session file's
        // `token_count` and the old shape's: each replaces the last, never adds.
        let mut meter = b.usage_meter(&prices).unwrap();
        let turn = r#"{"type":"turn.completed","usage":{"input_tokens":1000000,"cached_input_tokens":0,"output_tokens":0}}"#;
        assert_eq!(meter.feed_line(turn), Some(Usd::from_f64(1.25)));
        assert_eq!(meter.feed_line(turn), None);
        let bigger = turn.replace("1000000", "2000000");
        assert_eq!(meter.feed_line(&bigger), Some(Usd::from_f64(2.5)));
        let mut meter = b.usage_meter(&prices).unwrap();
        for n in [1, 2] {
            let line = format!(
                r#"{{"id":"0","msg":{{"type":"token_count","input_tokens":{}}}}}"#,
                n * 1_000_000
            );
            assert_eq!(meter.feed_line(&line), Some(Usd::from_f64(1.25 * n as f64)));
        }
        // The session file's shape, read by the same meter: a running total after each request.
        let mut meter = b.usage_meter(&prices).unwrap();
        let file_line = |input: u64| {
            format!(
                r#"{{"timestamp":"2026-12-06T07:48:08.488Z","type":"event_msg","payload":{{"type":"token_count","info":{{"total_token_usage":{{"input_tokens":{input},"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":0,"reasoning_output_tokens":0,"total_tokens":{input}}}}}}}}}"#
            )
        };
        assert_eq!(
            meter.feed_line(&file_line(1_000_000)),
            Some(Usd::from_f64(1.25))
        );
        assert_eq!(
            meter.feed_line(&file_line(2_000_000)),
            Some(Usd::from_f64(2.5))
        );
        // The same total from stdout as the run ends: no double count.
        assert_eq!(meter.feed_line(&bigger), None);
        assert_eq!(meter.cost(), Usd::from_f64(2.5));
        // Codex never names its model: without agents.codex.model nothing is priced.
        let unset = CodexBackend::new(
            AgentSettings::new(BackendKind::Codex),
            PathBuf::from("/bin/codex"),
            Codex,
        );
        let mut meter = unset.usage_meter(&prices).unwrap();
        assert_eq!(meter.feed_line(turn), None);
    }

    #[test]
    fn pane_transcript_of_a_real_run() {
        let got: Vec<String> = sample("codex-exec-json-toolcall-bypass.jsonl")
            .lines()
            .filter_map(|l| crate::agent::transcript::render_line_with(l, render_codex_event))
            .collect();
        let joined = got.join("\n");
        assert!(joined.contains("▶ Bash: /bin/bash -lc"), "{joined}");
        assert!(joined.contains("  ↳ exit 0"), "{joined}");
        assert!(
            joined.contains("Done.\n<promise>COMPLETE</promise>"),
            "{joined}"
        );
        assert!(joined.ends_with("✔ finished · 2580 tokens"), "{joined}");
        assert!(!joined.contains("{\"type\""), "{joined}");
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

    /// Codex 0.171's two ways of passing a limit's reset on: a `rate_limit_exceeded` in the
    /// Responses stream keeps the provider's "Please try again in 5s"; an HTTP 429
    /// `usage_limit_reached` becomes "try again at 3:56 AM" (local time, here UTC). Both are
    /// rate limits, and the reset is read from what the engine looks in.
    #[test]
    fn real_rate_and_usage_limits_keep_their_reset() {
        use crate::agent::classify::{ErrorClass, classify_outcome};
        use crate::domain::rate_limit::pause_for;
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-06T03:55:30+00:00").unwrap();
        for (name, secs) in [
            ("codex-exec-json-rate-limit-stream.jsonl", 5),
            ("codex-exec-json-usage-limit-429.jsonl", 30),
        ] {
            let raw = sample(name);
            let r = parse_codex_output(&raw, None, &PriceTable::new());
            assert!(r.is_error, "{name}: {r:?}");
            assert_eq!(
                classify_outcome(Some(1), &r, &raw),
                Some(ErrorClass::RateLimited),
                "{name}"
            );
            let pause = pause_for(&r.text, now, std::time::Duration::from_secs(60));
            assert!(pause.parsed, "{name}: {r:?}");
            assert_eq!(
                (pause.until - now.with_timezone(&chrono::Utc)).num_seconds(),
                secs,
                "{name}"
            );
        }
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

    #[test]
    fn session_log_is_the_thread_file_under_codex_home() {
        use crate::agent::backend::Backend;
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.env = vec![("CODEX_HOME".into(), "/srv/codex".into())];
        let b = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex);
        let log = b.session_log().unwrap();
        assert_eq!(log.dir, PathBuf::from("/srv/codex/sessions"));
        let id = "01a24a53-13e0-7020-a815-07569af19a36";
        let started = format!(r#"{{"type":"thread.started","thread_id":"{id}"}}"#);
        assert_eq!(log.id_in(&started).as_deref(), Some(id));
        assert_eq!(log.id_in(r#"{"type":"turn.started"}"#), None);
        let file = format!("rollout-2026-12-06T07-48-08-{id}.jsonl");
        assert!(is_rollout_of(&file, id));
        // Another thread's file, a name merely ending in the id, a different extension.
        assert!(!is_rollout_of(&file, "07569af19a36-x"));
        assert!(!is_rollout_of(
            &format!("rollout-2026-12-06T07-48-08-x{id}.jsonl"),
            id
        ));
        assert!(!is_rollout_of(&format!("notes-{id}.jsonl"), id));
        assert!(!is_rollout_of(&format!("rollout-{id}.json"), id));
        // Without CODEX_HOME, a HOME configured for the agent is the one Codex uses.
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.env = vec![("HOME".into(), "/home/agent".into())];
        let b = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex);
        if std::env::var_os("CODEX_HOME").is_none() {
            assert_eq!(
                b.session_log().unwrap().dir,
                PathBuf::from("/home/agent/.codex/sessions")
            );
        }
        // A relative CODEX_HOME is not followed (it would resolve against whilly's cwd).
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.env = vec![("CODEX_HOME".into(), "codex".into())];
        let b = CodexBackend::new(s, PathBuf::from("/bin/codex"), Codex);
        assert!(b.session_log().is_none());
    }

    #[test]
    fn the_rollout_file_is_found_in_the_newest_days_only() {
        let home = tempfile::tempdir().unwrap();
        let sessions = home.path().join("sessions");
        let id = "01a24a53-13e0-7020-a815-07569af19a36";
        assert_eq!(rollout_file(&sessions, id), None, "no sessions folder yet");
        let name = format!("rollout-2026-12-06T07-48-08-{id}.jsonl");
        let today = sessions.join("2026/12/06");
        for d in ["2026/12/06", "2026/12/05", "2026/11/30", "2025/01/01"] {
            std::fs::create_dir_all(sessions.join(d)).unwrap();
        }
        std::fs::write(today.join("rollout-x-other.jsonl"), "").unwrap();
        assert_eq!(rollout_file(&sessions, id), None);
        std::fs::write(today.join(&name), "").unwrap();
        assert_eq!(rollout_file(&sessions, id), Some(today.join(&name)));
        // Yesterday's folder is searched, older ones are not.
        std::fs::remove_file(today.join(&name)).unwrap();
        std::fs::write(sessions.join("2026/12/05").join(&name), "").unwrap();
        assert!(rollout_file(&sessions, id).is_some());
        std::fs::remove_file(sessions.join("2026/12/05").join(&name)).unwrap();
        std::fs::write(sessions.join("2026/11/30").join(&name), "").unwrap();
        assert_eq!(rollout_file(&sessions, id), None);
    }
}
