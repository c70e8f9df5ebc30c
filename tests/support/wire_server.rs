//! A scripted model server for the Codex, OpenCode and Gemini CLIs, each spoken in its own wire
//! API (see /docs/agents.md):
//!
//! - [`Wire::Responses`] (Codex): OpenAI Responses, `POST /v1/responses`, SSE `response.*` events;
//!   a tool call is an `exec_command` `function_call`, its result a `function_call_output`.
//! - [`Wire::Chat`] (OpenCode): OpenAI chat completions, `POST /v1/chat/completions` streamed with
//!   a usage chunk; a tool call is `write` in `delta.tool_calls`, its result a `tool` message. The
//!   title request (no tools) is a side request.
//! - [`Wire::Gemini`]: `POST /v1beta/models/<m>:streamGenerateContent?alt=sse` for the agent loop,
//!   `:generateContent` for its model router (a side request answered with the JSON it asks for);
//!   a tool call is a `write_file` `functionCall`, its result a `functionResponse`.
//!
//! Every scenario answers the agent loop's requests ("main" requests); side requests always get
//! a harmless answer. Every request is recorded for assertions.

#![allow(dead_code)]

#[path = "http_sse.rs"]
mod http_sse;

use http_sse::{Listener, Request, hang, read_request, respond_json, sse_event, start_sse};
use serde_json::{Value, json};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const MARKER: &str = "<promise>COMPLETE</promise>";

/// Usage every scripted main answer reports: prompt tokens (cached ones included), of which
/// cached, and output tokens.
pub const PROMPT_TOKENS: u64 = 1234;
pub const CACHED_TOKENS: u64 = 200;
pub const OUTPUT_TOKENS: u64 = 56;

/// Which CLI's API the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Responses,
    Chat,
    Gemini,
}

/// What the server plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// One text answer ending with the marker.
    Complete,
    /// One text answer without the marker.
    NoMarker,
    /// A tool call of the CLI's own writing `file` (relative to the workspace) with `content`;
    /// on the tool's result, a text answer ending with the marker.
    WriteFile { file: String, content: String },
    /// HTTP 401 with the provider's authentication error for every main request.
    AuthError,
    /// HTTP `status` (429 or 503) for the first `failures` main requests, then like `Complete`.
    Fail { status: u16, failures: usize },
    /// The provider's rate limit with its reset `reset_secs` ahead, for the first `failures` main
    /// requests, then like `Complete`; said the wire's own way (see [`rate_limit`]).
    RateLimited { reset_secs: u64, failures: usize },
    /// Main requests are read and never answered.
    Hang,
    /// Like `WriteFile` for the first main request; the request carrying the tool's result is
    /// never answered, so the CLI cannot finish on its own (a budget has to stop it).
    WriteThenHang { file: String, content: String },
}

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// A request of the agent loop, as opposed to titles, routing and metadata.
    pub main: bool,
    /// The HTTP status answered (0: never answered); a rate limit inside a Responses stream
    /// counts as its 429.
    pub status: u16,
    pub body: Option<Value>,
}

struct State {
    wire: Wire,
    scenario: Scenario,
    requests: Mutex<Vec<Seen>>,
    failures: AtomicUsize,
    counter: AtomicUsize,
}

pub struct WireServer {
    listener: Listener,
    state: Arc<State>,
}

impl WireServer {
    pub fn start(wire: Wire, scenario: Scenario) -> WireServer {
        let state = Arc::new(State {
            wire,
            scenario,
            requests: Mutex::new(Vec::new()),
            failures: AtomicUsize::new(0),
            counter: AtomicUsize::new(0),
        });
        let st = state.clone();
        let listener = Listener::start(move |conn, stop| handle(conn, &st, stop));
        WireServer { listener, state }
    }

    /// `http://127.0.0.1:PORT` (no path).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.listener.addr())
    }

    pub fn requests(&self) -> Vec<Seen> {
        self.state.requests.lock().expect("requests lock").clone()
    }

    /// Main requests seen, errors included.
    pub fn main_requests(&self) -> usize {
        self.requests().iter().filter(|r| r.main).count()
    }

    /// Main requests answered with 200.
    pub fn answered(&self) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.main && r.status == 200)
            .count()
    }

    /// A one-line summary of every request, for assertion messages.
    pub fn log(&self) -> String {
        self.requests()
            .iter()
            .map(|r| format!("{} {} main={} -> {}", r.method, r.path, r.main, r.status))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn is_main(wire: Wire, req: &Request, body: &Value) -> bool {
    match wire {
        Wire::Responses => req.route().ends_with("/responses"),
        Wire::Chat => {
            req.route().ends_with("/chat/completions")
                && body["tools"].as_array().is_some_and(|t| !t.is_empty())
        }
        Wire::Gemini => req.route().ends_with(":streamGenerateContent"),
    }
}

fn handle(mut stream: TcpStream, state: &State, stop: &AtomicBool) -> std::io::Result<()> {
    let Some(req) = read_request(&stream)? else {
        return Ok(());
    };
    let body = req.json().unwrap_or(Value::Null);
    let main = req.method == "POST" && is_main(state.wire, &req, &body);
    let record = |status: u16| {
        state.requests.lock().expect("requests lock").push(Seen {
            method: req.method.clone(),
            path: req.path.clone(),
            main,
            status,
            body: Some(body.clone()),
        });
    };
    let n = state.counter.fetch_add(1, Ordering::SeqCst);
    if !main {
        record(200);
        return side_answer(&mut stream, state.wire, &req, n);
    }
    match &state.scenario {
        Scenario::Hang => {
            record(0);
            return hang(stop);
        }
        Scenario::AuthError => {
            record(401);
            return respond_json(&mut stream, 401, &auth_error(state.wire), "");
        }
        Scenario::Fail { status, failures }
            if state.failures.fetch_add(1, Ordering::SeqCst) < *failures =>
        {
            record(*status);
            return respond_json(
                &mut stream,
                *status,
                &fail_error(state.wire, *status),
                "retry-after: 0\r\n",
            );
        }
        Scenario::RateLimited {
            reset_secs,
            failures,
        } if state.failures.fetch_add(1, Ordering::SeqCst) < *failures => {
            record(429);
            return rate_limit(&mut stream, state.wire, *reset_secs, n);
        }
        _ => {}
    }
    let tool_result = has_tool_result(state.wire, &body);
    if tool_result && matches!(state.scenario, Scenario::WriteThenHang { .. }) {
        record(0);
        return hang(stop);
    }
    record(200);
    let turn = if tool_result {
        Turn::Text(format!("The file is written and checked.\n{MARKER}"))
    } else {
        match &state.scenario {
            Scenario::WriteFile { file, content } | Scenario::WriteThenHang { file, content } => {
                Turn::Write {
                    file: file.clone(),
                    content: content.clone(),
                }
            }
            Scenario::NoMarker => Turn::Text("I looked at it but did not finish.".into()),
            _ => Turn::Text(format!("Task complete.\n{MARKER}")),
        }
    };
    match state.wire {
        Wire::Responses => responses_sse(&mut stream, &turn, n),
        Wire::Chat => chat_sse(&mut stream, &turn, n),
        Wire::Gemini => gemini_sse(&mut stream, &turn, &body, n),
    }
}

enum Turn {
    Text(String),
    Write { file: String, content: String },
}

fn has_tool_result(wire: Wire, body: &Value) -> bool {
    match wire {
        Wire::Responses => body["input"]
            .as_array()
            .is_some_and(|items| items.iter().any(|i| i["type"] == "function_call_output")),
        Wire::Chat => body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "tool"),
        Wire::Gemini => body["contents"]
            .as_array()
            .and_then(|c| c.last())
            .and_then(|c| c["parts"].as_array())
            .is_some_and(|parts| parts.iter().any(|p| p.get("functionResponse").is_some())),
    }
}

fn auth_error(wire: Wire) -> Value {
    match wire {
        Wire::Gemini => json!({"error": {"code": 401, "status": "UNAUTHENTICATED",
            "message": "API key not valid. Please pass a valid API key."}}),
        _ => json!({"error": {"type": "invalid_request_error", "code": "invalid_api_key",
            "message": "Incorrect API key provided: test-key. You can find your API key at https://platform.openai.com/account/api-keys."}}),
    }
}

fn fail_error(wire: Wire, status: u16) -> Value {
    match (wire, status) {
        (Wire::Gemini, 429) => json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "Resource has been exhausted (e.g. check quota)."}}),
        (Wire::Gemini, s) => json!({"error": {"code": s, "status": "UNAVAILABLE",
            "message": "The model is overloaded. Please try again later."}}),
        (_, 429) => json!({"error": {"type": "requests", "code": "rate_limit_exceeded",
            "message": "Rate limit reached for requests. Please try again in 1s."}}),
        (_, _) => json!({"error": {"type": "server_error", "code": "server_is_overloaded",
            "message": "The server is overloaded. Please try again later."}}),
    }
}

/// A rate limit whose reset is `secs` ahead, as each provider sends it.
///
/// - Responses (Codex): the request is accepted and the stream ends in `response.failed` with
///   `rate_limit_exceeded` and "Please try again in 5s". Codex 0.171 prints that message in its
///   `turn.failed`; it drops the body of an HTTP 429 (it says only "exceeded retry limit, last
///   status: 429"), so the stream is the way a reset reaches whilly through Codex.
/// - Chat (OpenCode): HTTP 429, `retry-after` and OpenAI's message.
/// - Gemini: HTTP 429 `RESOURCE_EXHAUSTED` with a `RetryInfo` `retryDelay`.
fn rate_limit(stream: &mut TcpStream, wire: Wire, secs: u64, n: usize) -> std::io::Result<()> {
    let message = format!(
        "Rate limit reached for gpt-5 in organization org-test on tokens per min (TPM): Limit 30000, Used 30000, Requested {PROMPT_TOKENS}. Please try again in {secs}s. Visit https://platform.openai.com/account/rate-limits to learn more."
    );
    match wire {
        Wire::Responses => {
            start_sse(stream, "")?;
            let id = format!("resp_{n}");
            let created = json!({"type": "response.created",
                "response": {"id": id, "status": "in_progress", "output": []}});
            sse_event(stream, Some("response.created"), &created.to_string())?;
            let failed = json!({"type": "response.failed", "response": {"id": id,
                "status": "failed", "output": [],
                "error": {"code": "rate_limit_exceeded", "message": message}}});
            sse_event(stream, Some("response.failed"), &failed.to_string())
        }
        Wire::Chat => respond_json(
            stream,
            429,
            &json!({"error": {"type": "tokens", "code": "rate_limit_exceeded", "message": message}}),
            &format!("retry-after: {secs}\r\n"),
        ),
        Wire::Gemini => respond_json(
            stream,
            429,
            &json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": format!("You exceeded your current quota. Please retry in {secs}s."),
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
                    {"quotaMetric": "generativelanguage.googleapis.com/generate_content_requests",
                     "quotaId": "GenerateRequestsPerMinutePerProjectPerModel"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")}
            ]}}),
            "",
        ),
    }
}

/// Titles (OpenCode), routing (Gemini), model lists and anything else.
fn side_answer(stream: &mut TcpStream, wire: Wire, req: &Request, n: usize) -> std::io::Result<()> {
    match wire {
        Wire::Chat if req.route().ends_with("/chat/completions") => {
            chat_sse(stream, &Turn::Text("Scripted task".into()), n)
        }
        Wire::Gemini if req.route().ends_with(":generateContent") => {
            let text = json!({"complexity_reasoning": "a scripted task", "complexity_score": 10});
            respond_json(
                stream,
                200,
                &json!({
                    "candidates": [{"content": {"role": "model", "parts": [{"text": text.to_string()}]},
                        "finishReason": "STOP", "index": 0}],
                    "usageMetadata": gemini_usage()
                }),
                "",
            )
        }
        Wire::Responses if req.route().ends_with("/models") => {
            respond_json(stream, 200, &json!({"models": []}), "")
        }
        _ => respond_json(
            stream,
            404,
            &json!({"error": {"message": "not scripted"}}),
            "",
        ),
    }
}

/// The shell command Codex's `exec_command` runs to write `file` (single-quoted for `sh`).
fn write_command(file: &str, content: &str) -> String {
    let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    format!("printf '%s' {} > {}", q(content), q(file))
}

fn responses_sse(stream: &mut TcpStream, turn: &Turn, n: usize) -> std::io::Result<()> {
    start_sse(stream, "")?;
    let mut send = |data: Value| -> std::io::Result<()> {
        let kind = data["type"].as_str().unwrap_or_default().to_string();
        sse_event(stream, Some(&kind), &data.to_string())
    };
    let id = format!("resp_{n}");
    send(
        json!({"type": "response.created", "response": {"id": id, "status": "in_progress", "output": []}}),
    )?;
    match turn {
        Turn::Text(text) => {
            let item_id = format!("msg_{n}");
            send(
                json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}}),
            )?;
            send(
                json!({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0,
                "content_index": 0, "delta": text}),
            )?;
            send(
                json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"type": "message", "id": item_id, "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
            )?;
        }
        Turn::Write { file, content } => {
            let args = json!({"cmd": write_command(file, content)}).to_string();
            let item = json!({"type": "function_call", "id": format!("fc_{n}"),
                "call_id": format!("call_{n}"), "name": "exec_command", "arguments": args,
                "status": "completed"});
            send(json!({"type": "response.output_item.added", "output_index": 0, "item": item}))?;
            send(json!({"type": "response.output_item.done", "output_index": 0, "item": item}))?;
        }
    }
    send(
        json!({"type": "response.completed", "response": {"id": id, "status": "completed",
        "output": [], "usage": {
            "input_tokens": PROMPT_TOKENS,
            "input_tokens_details": {"cached_tokens": CACHED_TOKENS},
            "output_tokens": OUTPUT_TOKENS,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": PROMPT_TOKENS + OUTPUT_TOKENS}}}),
    )
}

fn chat_sse(stream: &mut TcpStream, turn: &Turn, n: usize) -> std::io::Result<()> {
    start_sse(stream, "")?;
    let chunk = |choices: Value, usage: Value| {
        let mut c = json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk",
            "created": 1_700_000_000, "model": "mock-model", "choices": choices});
        if !usage.is_null() {
            c["usage"] = usage;
        }
        c.to_string()
    };
    let finish = match turn {
        Turn::Text(text) => {
            sse_event(
                stream,
                None,
                &chunk(
                    json!([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]),
                    Value::Null,
                ),
            )?;
            "stop"
        }
        Turn::Write { file, content } => {
            let args = json!({"filePath": file, "content": content}).to_string();
            sse_event(
                stream,
                None,
                &chunk(
                    json!([{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
                    "id": format!("call_{n}"), "type": "function",
                    "function": {"name": "write", "arguments": args}}]}, "finish_reason": null}]),
                    Value::Null,
                ),
            )?;
            "tool_calls"
        }
    };
    sse_event(
        stream,
        None,
        &chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            Value::Null,
        ),
    )?;
    sse_event(
        stream,
        None,
        &chunk(
            json!([]),
            json!({"prompt_tokens": PROMPT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                "total_tokens": PROMPT_TOKENS + OUTPUT_TOKENS,
                "prompt_tokens_details": {"cached_tokens": CACHED_TOKENS}}),
        ),
    )?;
    sse_event(stream, None, "[DONE]")
}

fn gemini_usage() -> Value {
    json!({"promptTokenCount": PROMPT_TOKENS, "candidatesTokenCount": OUTPUT_TOKENS,
        "totalTokenCount": PROMPT_TOKENS + OUTPUT_TOKENS, "cachedContentTokenCount": CACHED_TOKENS})
}

/// The workspace directory Gemini CLI states in its session context
/// ("- **Workspace Directories:**\n  - /path").
fn gemini_workspace(body: &Value) -> String {
    let text = body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    let lines: Vec<&str> = text.lines().collect();
    let dir = lines
        .windows(2)
        .find(|w| w[0].contains("Workspace Directories"))
        .and_then(|w| w[1].trim().strip_prefix("- "));
    if let Some(dir) = dir {
        return dir.trim().to_string();
    }
    "/tmp".to_string()
}

/// Text streamed in pieces of three words, as a real model streams it (Gemini CLI prints each
/// as its own `delta` message).
fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words.chunks(3).map(|c| c.concat()).collect()
}

fn gemini_sse(stream: &mut TcpStream, turn: &Turn, body: &Value, n: usize) -> std::io::Result<()> {
    start_sse(stream, "")?;
    let parts: Vec<Value> = match turn {
        Turn::Text(text) => pieces(text)
            .into_iter()
            .map(|t| json!({"text": t}))
            .collect(),
        Turn::Write { file, content } => {
            let path = format!("{}/{file}", gemini_workspace(body));
            vec![
                json!({"functionCall": {"id": format!("write_file_{n}"), "name": "write_file",
                "args": {"file_path": path, "content": content}}}),
            ]
        }
    };
    let last = parts.len().saturating_sub(1);
    for (i, part) in parts.into_iter().enumerate() {
        let mut candidate = json!({"content": {"role": "model", "parts": [part]}, "index": 0});
        let mut data = json!({"modelVersion": "gemini-2.5-pro"});
        // The finish reason and the usage come with the last piece.
        if i == last {
            candidate["finishReason"] = "STOP".into();
            data["usageMetadata"] = gemini_usage();
        }
        data["candidates"] = json!([candidate]);
        sse_event(stream, None, &data.to_string())?;
    }
    Ok(())
}
