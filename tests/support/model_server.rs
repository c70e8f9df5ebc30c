//! A scripted model server that plays the Anthropic Messages API for the real Claude Code CLI.
//!
//! `ModelServer::start(Scenario::…)` listens on 127.0.0.1:<random>; point the CLI at it with
//! `ANTHROPIC_BASE_URL=server.base_url()`. Every `POST /v1/messages` is answered as the API
//! streams (`text/event-stream`: message_start, content_block_*, message_delta, message_stop), or
//! with an HTTP error for the error scenarios. Any other request gets a harmless answer and is
//! logged. The scenario is the server's default, or the one named in the request's user text as
//! `whilly-scenario:<name>` (names: complete, write, bash, overloaded, auth, long, no-marker).
//!
//! The HTTP plumbing (listener, request reader, SSE) is `http_sse.rs`, shared with the servers
//! for the other agents' wire APIs (`wire_server.rs`).

#![allow(dead_code)]

#[path = "http_sse.rs"]
mod http_sse;

use http_sse::{Listener, read_request, sse_event, start_sse};
use serde_json::{Value, json};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

pub const MARKER: &str = "<promise>COMPLETE</promise>";

/// Tokens every scripted answer reports; tests compute expected costs from these.
pub const INPUT_TOKENS: u64 = 1000;
pub const OUTPUT_TOKENS: u64 = 50;

/// What the server plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scenario {
    /// One text answer ending with the marker.
    Complete,
    /// A `Write` tool call (absolute `path`, or `<cwd from the system prompt>/hello.txt`), then,
    /// on the tool result, a text answer ending with the marker.
    WriteFile {
        path: Option<PathBuf>,
        content: String,
    },
    /// A `Bash` tool call, then the marker.
    Bash { command: String },
    /// HTTP 529 overloaded_error for the first `failures` main requests, then like `Complete`.
    Overloaded { failures: usize },
    /// HTTP 401 authentication_error for every request.
    AuthError,
    /// A long answer streamed in `chunks` small deltas, ending with the marker.
    LongStream { chunks: usize },
    /// A plain answer without the marker.
    NoMarker,
    /// Scripted text answers: the first rule whose needles all occur in the request's user text
    /// answers with its text; no rule matching answers like `Complete`.
    Rules(Vec<Rule>),
}

/// One scripted answer of [`Scenario::Rules`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub needles: Vec<String>,
    pub answer: String,
    /// A `Bash` tool call to make before answering (the answer comes on the tool result).
    pub bash: Option<String>,
}

impl Rule {
    pub fn new(needles: &[&str], answer: &str) -> Rule {
        Rule {
            needles: needles.iter().map(|n| n.to_string()).collect(),
            answer: answer.to_string(),
            bash: None,
        }
    }

    /// Answers a request matching `needles` with a `Bash` tool call running `command`.
    pub fn bash(needles: &[&str], command: &str) -> Rule {
        Rule {
            bash: Some(command.to_string()),
            ..Rule::new(needles, "")
        }
    }
}

impl Scenario {
    fn from_keyword(name: &str) -> Option<Scenario> {
        Some(match name {
            "complete" => Scenario::Complete,
            "write" => Scenario::WriteFile {
                path: None,
                content: "hello from the model\n".into(),
            },
            "bash" => Scenario::Bash {
                command: "echo bash-ran > bash.txt".into(),
            },
            "overloaded" => Scenario::Overloaded { failures: 1 },
            "auth" => Scenario::AuthError,
            "long" => Scenario::LongStream { chunks: 300 },
            "no-marker" => Scenario::NoMarker,
            _ => return None,
        })
    }
}

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    /// `POST /v1/messages` with tools (the agent loop), as opposed to side requests.
    pub main: bool,
    /// The HTTP status answered.
    pub status: u16,
    pub body: Option<Value>,
}

struct State {
    default: Scenario,
    requests: Mutex<Vec<Seen>>,
    main_requests: AtomicUsize,
    overload_failures: AtomicUsize,
}

pub struct ModelServer {
    listener: Listener,
    state: Arc<State>,
}

impl ModelServer {
    pub fn start(default: Scenario) -> ModelServer {
        let state = Arc::new(State {
            default,
            requests: Mutex::new(Vec::new()),
            main_requests: AtomicUsize::new(0),
            overload_failures: AtomicUsize::new(0),
        });
        let st = state.clone();
        let listener = Listener::start(move |conn, _stop| handle(conn, &st));
        ModelServer { listener, state }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.listener.addr())
    }

    /// Every request seen so far.
    pub fn requests(&self) -> Vec<Seen> {
        self.state.requests.lock().expect("requests lock").clone()
    }

    /// `POST /v1/messages` requests of the agent loop (with tools), errors included.
    pub fn main_request_count(&self) -> usize {
        self.state.main_requests.load(Ordering::SeqCst)
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

fn handle(mut stream: TcpStream, state: &State) -> std::io::Result<()> {
    let Some(req) = read_request(&stream)? else {
        return Ok(());
    };
    let body: Option<Value> = serde_json::from_slice(&req.body).ok();
    let route = req.path.split('?').next().unwrap_or_default().to_string();
    let record = |main: bool, status: u16| {
        state.requests.lock().expect("requests lock").push(Seen {
            method: req.method.clone(),
            path: req.path.clone(),
            main,
            status,
            body: body.clone(),
        });
    };

    if req.method != "POST" || route != "/v1/messages" {
        let answer = if route.ends_with("/count_tokens") {
            json!({"input_tokens": INPUT_TOKENS})
        } else {
            json!({})
        };
        record(false, 200);
        eprintln!("model_server: side request {} {}", req.method, req.path);
        return respond_json(&mut stream, 200, &answer);
    }
    let Some(body) = body.clone() else {
        record(false, 400);
        return respond_json(
            &mut stream,
            400,
            &api_error("invalid_request_error", "body is not JSON"),
        );
    };
    let main = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let model = body["model"]
        .as_str()
        .unwrap_or("claude-sonnet-4-5")
        .to_string();
    let scenario = scenario_for(&body, &state.default);
    let stream_mode = body["stream"].as_bool().unwrap_or(false);

    if main {
        state.main_requests.fetch_add(1, Ordering::SeqCst);
    }
    if scenario == Scenario::AuthError {
        record(main, 401);
        return respond_json(
            &mut stream,
            401,
            &api_error("authentication_error", "invalid x-api-key"),
        );
    }
    if let Scenario::Overloaded { failures } = scenario
        && main
        && state.overload_failures.fetch_add(1, Ordering::SeqCst) < failures
    {
        record(main, 529);
        return respond_json(
            &mut stream,
            529,
            &api_error("overloaded_error", "Overloaded"),
        );
    }
    record(main, 200);

    // Side requests (titles, summaries, no tools) get a short plain answer.
    let blocks: Vec<Block> = if !main {
        vec![Block::Text("ok".into())]
    } else if last_user_has_tool_result(&body) {
        vec![Block::Text(format!(
            "The work is done and checked.\n{MARKER}"
        ))]
    } else {
        match &scenario {
            Scenario::WriteFile { path, content } => {
                let path = path
                    .clone()
                    .unwrap_or_else(|| cwd_from_system(&body).join("hello.txt"));
                vec![
                    Block::Text("I'll write the file.".into()),
                    Block::Tool {
                        name: "Write".into(),
                        input: json!({"file_path": path, "content": content}),
                    },
                ]
            }
            Scenario::Bash { command } => vec![
                Block::Text("Running the command.".into()),
                Block::Tool {
                    name: "Bash".into(),
                    input: json!({"command": command, "description": "scripted command"}),
                },
            ],
            Scenario::LongStream { chunks } => vec![Block::Chunks(
                (0..*chunks)
                    .map(|i| format!("chunk {i} of a long streamed answer. "))
                    .chain([format!("\n{MARKER}")])
                    .collect(),
            )],
            Scenario::NoMarker => vec![Block::Text(
                "I looked at it but did not finish the task.".into(),
            )],
            Scenario::Rules(rules) => {
                let text = user_text(&body);
                let rule = rules
                    .iter()
                    .find(|r| r.needles.iter().all(|n| text.contains(n.as_str())));
                match rule {
                    Some(Rule {
                        bash: Some(command),
                        ..
                    }) => vec![
                        Block::Text("Running the command.".into()),
                        Block::Tool {
                            name: "Bash".into(),
                            input: json!({"command": command, "description": "scripted command"}),
                        },
                    ],
                    Some(r) => vec![Block::Text(r.answer.clone())],
                    None => vec![Block::Text(format!("Task complete.\n{MARKER}"))],
                }
            }
            _ => vec![Block::Text(format!("Task complete.\n{MARKER}"))],
        }
    };
    if stream_mode {
        respond_sse(&mut stream, &model, &blocks)
    } else {
        respond_json(&mut stream, 200, &message_json(&model, &blocks))
    }
}

enum Block {
    Text(String),
    Chunks(Vec<String>),
    Tool { name: String, input: Value },
}

fn api_error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Every user text of the request, joined.
fn user_text(body: &Value) -> String {
    user_texts(body).join("\n")
}

fn user_texts(body: &Value) -> Vec<String> {
    let mut texts = Vec::new();
    for m in body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
    {
        match &m["content"] {
            Value::String(s) => texts.push(s.clone()),
            Value::Array(parts) => texts.extend(
                parts
                    .iter()
                    .filter_map(|p| p["text"].as_str().map(str::to_string)),
            ),
            _ => {}
        }
    }
    texts
}

/// The scenario named in any user text of the request, else the server default.
fn scenario_for(body: &Value, default: &Scenario) -> Scenario {
    for t in user_texts(body) {
        if let Some(pos) = t.find("whilly-scenario:") {
            let name: String = t[pos + 16..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            if let Some(s) = Scenario::from_keyword(&name) {
                return s;
            }
        }
    }
    default.clone()
}

fn last_user_has_tool_result(body: &Value) -> bool {
    body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .is_some_and(|parts| parts.iter().any(|p| p["type"] == "tool_result"))
}

/// The working directory Claude Code states in its system prompt ("Working directory: /x").
fn cwd_from_system(body: &Value) -> PathBuf {
    let system = match &body["system"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    };
    system
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Working directory:")
                .map(|p| PathBuf::from(p.trim()))
        })
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

fn respond_json(stream: &mut TcpStream, status: u16, body: &Value) -> std::io::Result<()> {
    // The real API tells clients whether an error is worth retrying; 401 is not.
    let retry = match status {
        401 | 400 => "x-should-retry: false\r\n",
        529 => "x-should-retry: true\r\n",
        _ => "",
    };
    http_sse::respond_json(
        stream,
        status,
        body,
        &format!("request-id: req_test\r\n{retry}"),
    )
}

fn message_json(model: &str, blocks: &[Block]) -> Value {
    let mut content = Vec::new();
    let mut tool = false;
    for (i, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(t) => content.push(json!({"type": "text", "text": t})),
            Block::Chunks(c) => content.push(json!({"type": "text", "text": c.concat()})),
            Block::Tool { name, input } => {
                tool = true;
                content.push(json!({"type": "tool_use", "id": format!("toolu_{i:02}"), "name": name, "input": input}));
            }
        }
    }
    json!({
        "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": if tool { "tool_use" } else { "end_turn" }, "stop_sequence": null,
        "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    })
}

fn respond_sse(stream: &mut TcpStream, model: &str, blocks: &[Block]) -> std::io::Result<()> {
    start_sse(stream, "request-id: req_test\r\n")?;
    let mut send = |event: &str, data: Value| -> std::io::Result<()> {
        sse_event(stream, Some(event), &data.to_string())
    };
    send(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        }}),
    )?;
    let mut tool = false;
    for (index, b) in blocks.iter().enumerate() {
        match b {
            Block::Text(t) => {
                send(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                )?;
                send(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
                )?;
            }
            Block::Chunks(chunks) => {
                send(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
                )?;
                for c in chunks {
                    send(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": c}}),
                    )?;
                }
            }
            Block::Tool { name, input } => {
                tool = true;
                send(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{index:02}"), "name": name, "input": {}}}),
                )?;
                // Split the JSON in two deltas, as the API streams it in pieces.
                let json = input.to_string();
                let mid = json
                    .char_indices()
                    .nth(json.chars().count() / 2)
                    .map_or(0, |(i, _)| i);
                for part in [&json[..mid], &json[mid..]] {
                    send(
                        "content_block_delta",
                        json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": part}}),
                    )?;
                }
            }
        }
        send(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        )?;
    }
    send(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": if tool { "tool_use" } else { "end_turn" }, "stop_sequence": null}, "usage": {"output_tokens": OUTPUT_TOKENS}}),
    )?;
    send("message_stop", json!({"type": "message_stop"}))
}
