//! Claude's stream-json lines as a readable transcript.
//!
//! The engine runs the real command in the PTY; the log and the result parser keep its raw JSON,
//! while the pane's emulator is fed [`TranscriptFilter`]'s output: each complete JSON line
//! rendered by [`render_stream_line`] (pure) and coloured by [`colour`] (pure).

use super::guards::redact_secrets;
use crate::domain::Usd;
use crate::pty::LineFilter;
use serde_json::Value;

const MAX_LINE: usize = 200;
const MAX_TEXT_LINES: usize = 40;

/// The readable form of one output line, or `None` for lines that show nothing (empty lines,
/// partial-message deltas, unknown events). Lines that are not JSON (warnings, stderr) are
/// passed through. Secrets are redacted in everything returned.
pub fn render_stream_line(line: &str) -> Option<String> {
    render_line_with(line, render_claude_event)
}

/// How one CLI's JSON event reads in a pane (`None`: shows nothing).
pub type Renderer = fn(&Value) -> Option<String>;

/// [`render_stream_line`] for any CLI's JSON Lines: `render` reads each JSON event; plain lines
/// pass through; secrets are redacted.
pub fn render_line_with(line: &str, render: Renderer) -> Option<String> {
    match PaneLine::of(line) {
        PaneLine::Blank => None,
        PaneLine::Plain(text) => Some(redact_secrets(text)),
        PaneLine::Event(v) => render(&v).map(|r| redact_secrets(&r)),
    }
}

/// One output line as a pane filter sees it.
#[derive(Debug)]
pub enum PaneLine<'a> {
    Blank,
    /// A JSON event.
    Event(Value),
    /// Anything else (warnings, stderr), trimmed: shown as is.
    Plain(&'a str),
}

impl PaneLine<'_> {
    pub fn of(line: &str) -> PaneLine<'_> {
        let trimmed = line.trim();
        if trimmed.is_empty() {
            return PaneLine::Blank;
        }
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v) => PaneLine::Event(v),
            Err(_) => PaneLine::Plain(trimmed),
        }
    }
}

/// Appends `rendered` to a pane filter's output: secrets redacted, coloured, `\r\n` line ends.
pub fn show(rendered: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(colour(&redact_secrets(rendered)).as_bytes());
}

fn render_claude_event(v: &Value) -> Option<String> {
    match v["type"].as_str()? {
        "system" => render_system(v),
        "assistant" => render_content(&v["message"]["content"], false),
        "user" => render_content(&v["message"]["content"], true),
        "result" => Some(render_result(v)),
        _ => None,
    }
}

/// The PTY display filter of stream-json agents: what the pane shows instead of raw JSON.
#[derive(Debug, Clone, Copy, Default)]
pub struct TranscriptFilter;

impl LineFilter for TranscriptFilter {
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        if let Some(text) = render_stream_line(&String::from_utf8_lossy(line)) {
            out.extend_from_slice(colour(&text).as_bytes());
        }
    }
}

/// The display filter of another CLI's JSON Lines (Codex, OpenCode, Gemini), rendered by its
/// [`Renderer`] in the same shapes and colours as Claude's transcript.
#[derive(Debug, Clone, Copy)]
pub struct JsonLinesFilter(pub Renderer);

impl LineFilter for JsonLinesFilter {
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
        if let Some(text) = render_line_with(&String::from_utf8_lossy(line), self.0) {
            out.extend_from_slice(colour(&text).as_bytes());
        }
    }
}

/// A tool call as a pane line: `▶ name detail`, one line, at most [`MAX_LINE`] characters.
pub fn tool_call_line(name: &str, detail: &str) -> String {
    truncate(
        format!("▶ {name} {}", first_line(detail)).trim_end(),
        MAX_LINE,
    )
}

/// A tool's result as a pane line: `  ↳ first line (+n lines)`, or `  ✗ …` when it failed.
pub fn tool_result_line(text: &str, failed: bool) -> String {
    let lines = text.lines().filter(|l| !l.trim().is_empty()).count();
    let first = first_line(text.lines().find(|l| !l.trim().is_empty()).unwrap_or(""));
    let more = if lines > 1 {
        format!(" (+{} lines)", lines - 1)
    } else {
        String::new()
    };
    let mark = if failed { "✗" } else { "↳" };
    truncate(&format!("  {mark} {first}{more}"), MAX_LINE)
}

/// The agent's text as pane lines (long answers cut).
pub fn text_lines(text: &str) -> Option<String> {
    let t = text.trim();
    (!t.is_empty()).then(|| limit_lines(t, MAX_TEXT_LINES))
}

/// A status line (`● …`, dim).
pub fn status_line(text: &str) -> String {
    truncate(&format!("● {}", first_line(text)), MAX_LINE)
}

/// The end of a run: `✔ finished · facts` or `✘ failed · facts` and why.
pub fn end_line(failed: Option<&str>, facts: &[String]) -> String {
    let facts = facts.join(" · ");
    match failed {
        Some(why) => format!("✘ failed · {facts}\n  {}", first_line(why)),
        None => format!("✔ finished · {facts}"),
    }
}

const DIM: &str = "\x1b[2m";
const CYAN: &str = "\x1b[1;36m";
const GREEN: &str = "\x1b[1;32m";
const RED: &str = "\x1b[1;31m";
const RESET: &str = "\x1b[0m";

/// A rendered entry as terminal bytes: `\r\n` line ends, control characters from the agent's
/// text removed (they could move the cursor or retitle the pane), and a colour per kind of line:
/// tool calls cyan, results dim, errors red, the final result green or red, status lines dim.
pub fn colour(rendered: &str) -> String {
    let failed = rendered.starts_with('✘');
    let mut out = String::with_capacity(rendered.len() + 16);
    for line in rendered.lines() {
        let clean: String = line
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        let style = if failed {
            Some(RED)
        } else if clean.starts_with('▶') {
            Some(CYAN)
        } else if clean.starts_with("  ✗") {
            Some(RED)
        } else if clean.starts_with('✔') {
            Some(GREEN)
        } else if clean.starts_with("  ↳") || clean.starts_with('●') || clean.starts_with('…')
        {
            Some(DIM)
        } else {
            None
        };
        match style {
            Some(s) => {
                out.push_str(s);
                out.push_str(&clean);
                out.push_str(RESET);
            }
            None => out.push_str(&clean),
        }
        out.push_str("\r\n");
    }
    out
}

fn render_system(v: &Value) -> Option<String> {
    match v["subtype"].as_str() {
        Some("init") => Some(format!(
            "● session started · model {} · {}",
            v["model"].as_str().unwrap_or("?"),
            v["cwd"].as_str().unwrap_or("?")
        )),
        Some("api_retry") => {
            let attempt = v["attempt"].as_u64().unwrap_or(0);
            let max = v["max_retries"]
                .as_u64()
                .map_or(String::new(), |m| format!("/{m}"));
            let delay = v["retry_delay_ms"]
                .as_f64()
                .map_or(String::new(), |ms| format!(" in {:.1} s", ms / 1000.0));
            let status = v["error_status"]
                .as_u64()
                .map_or(String::new(), |s| format!("{s} "));
            let error = v["error"].as_str().unwrap_or("error");
            Some(format!(
                "● API retry {attempt}{max}{delay} ({status}{error})"
            ))
        }
        Some("compact_boundary") => Some("● conversation compacted".to_string()),
        _ => None,
    }
}

fn render_content(content: &Value, from_user: bool) -> Option<String> {
    let blocks = match content {
        Value::String(s) if !from_user => return Some(limit_lines(s, MAX_TEXT_LINES)),
        Value::Array(a) => a,
        _ => return None,
    };
    let mut out = Vec::new();
    for b in blocks {
        match b["type"].as_str() {
            Some("text") if !from_user => {
                let t = b["text"].as_str().unwrap_or_default().trim();
                if !t.is_empty() {
                    out.push(limit_lines(t, MAX_TEXT_LINES));
                }
            }
            Some("tool_use") => out.push(render_tool_use(&b["name"], &b["input"])),
            Some("tool_result") => out.push(render_tool_result(b)),
            Some("thinking") => out.push("… thinking".to_string()),
            _ => {}
        }
    }
    (!out.is_empty()).then(|| out.join("\n"))
}

fn render_tool_use(name: &Value, input: &Value) -> String {
    let name = name.as_str().unwrap_or("tool");
    let s = |k: &str| input[k].as_str().unwrap_or_default();
    let detail = match name {
        "Bash" => return format!("▶ Bash: {}", first_line(s("command"))),
        "Write" | "Edit" | "MultiEdit" | "Read" | "NotebookEdit" => {
            let path = if input["file_path"].is_string() {
                s("file_path")
            } else {
                s("notebook_path")
            };
            if name == "Write" {
                let lines = s("content").lines().count();
                format!("{path} ({lines} line{})", if lines == 1 { "" } else { "s" })
            } else {
                path.to_string()
            }
        }
        "Glob" | "Grep" => {
            let p = s("pattern");
            match input["path"].as_str() {
                Some(dir) => format!("{p} in {dir}"),
                None => p.to_string(),
            }
        }
        "WebFetch" | "WebSearch" => input["url"]
            .as_str()
            .or_else(|| input["query"].as_str())
            .unwrap_or_default()
            .to_string(),
        "Task" => s("description").to_string(),
        "TodoWrite" => format!("({} items)", input["todos"].as_array().map_or(0, Vec::len)),
        _ => truncate(&input.to_string(), MAX_LINE - name.len()),
    };
    truncate(format!("▶ {name} {detail}").trim_end(), MAX_LINE)
}

fn render_tool_result(b: &Value) -> String {
    let text = match &b["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    tool_result_line(&text, b["is_error"] == true)
}

fn render_result(v: &Value) -> String {
    let mut facts = Vec::new();
    if let Some(t) = v["num_turns"].as_u64() {
        facts.push(format!("{t} turn{}", if t == 1 { "" } else { "s" }));
    }
    if let Some(ms) = v["duration_ms"].as_u64() {
        facts.push(format!("{:.1} s", ms as f64 / 1000.0));
    }
    if let Some(c) = v["total_cost_usd"].as_f64() {
        facts.push(Usd::from_f64(c).to_string());
    }
    let facts = facts.join(" · ");
    let subtype = v["subtype"].as_str().unwrap_or("result");
    if v["is_error"] == true || subtype != "success" {
        let why = first_line(v["result"].as_str().unwrap_or(subtype));
        format!("✘ failed ({subtype}) · {facts}\n  {why}")
    } else {
        format!("✔ finished · {facts}")
    }
}

fn first_line(s: &str) -> String {
    let mut lines = s.trim().lines();
    let first = lines.next().unwrap_or_default();
    let rest = if lines.next().is_some() { " …" } else { "" };
    truncate(&format!("{first}{rest}"), MAX_LINE)
}

fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
    t.push('…');
    t
}

fn limit_lines(s: &str, max: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    if lines.len() <= max {
        return s.to_string();
    }
    format!(
        "{}\n… ({} more lines)",
        lines[..max].join("\n"),
        lines.len() - max
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn renders_a_session() {
        let lines = [
            r#"{"type":"system","subtype":"init","cwd":"/wt","model":"claude-sonnet-4-5","tools":["Bash"]}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"text","text":"I'll create the file."},{"type":"tool_use","id":"t1","name":"Write","input":{"file_path":"/wt/hello.txt","content":"a\nb\n"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"File created successfully at: /wt/hello.txt"}]}}"#,
            r#"{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"cargo test\necho done","description":"run tests"}}]}}"#,
            r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","is_error":true,"content":[{"type":"text","text":"error: 2 tests failed\nline2\nline3"}]}]}}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"duration_ms":12345,"total_cost_usd":0.0123,"result":"done"}"#,
        ];
        let got: Vec<String> = lines.iter().filter_map(|l| render_stream_line(l)).collect();
        assert_eq!(
            got,
            [
                "● session started · model claude-sonnet-4-5 · /wt",
                "I'll create the file.\n▶ Write /wt/hello.txt (2 lines)",
                "  ↳ File created successfully at: /wt/hello.txt",
                "▶ Bash: cargo test …",
                "  ✗ error: 2 tests failed (+2 lines)",
                "✔ finished · 3 turns · 12.3 s · $0.01",
            ]
        );
    }

    #[test]
    fn colours_kinds_and_strips_control_characters() {
        assert_eq!(
            colour("I'll do it.\n▶ Bash: ls"),
            "I'll do it.\r\n\x1b[1;36m▶ Bash: ls\x1b[0m\r\n"
        );
        assert_eq!(
            colour("✘ failed (x)\n  why"),
            "\x1b[1;31m✘ failed (x)\x1b[0m\r\n\x1b[1;31m  why\x1b[0m\r\n"
        );
        assert_eq!(colour("evil\x1b]0;title\x07 text"), "evil]0;title text\r\n");
        let mut out = Vec::new();
        TranscriptFilter.line(br#"{"type":"stream_event"}"#, &mut out);
        assert!(out.is_empty());
        TranscriptFilter.line(
            br#"{"type":"result","subtype":"success","is_error":false,"num_turns":1}"#,
            &mut out,
        );
        assert_eq!(out, "\x1b[1;32m✔ finished · 1 turn\x1b[0m\r\n".as_bytes());
    }

    #[test]
    fn errors_noise_and_secrets() {
        let err = r#"{"type":"result","subtype":"success","is_error":true,"num_turns":1,"result":"API Error: 401 invalid x-api-key","total_cost_usd":0}"#;
        let r = render_stream_line(err).unwrap();
        assert!(
            r.starts_with("✘ failed (success)") && r.contains("API Error: 401"),
            "{r}"
        );
        let retry = r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":588.98,"error_status":529,"error":"overloaded"}"#;
        assert_eq!(
            render_stream_line(retry).unwrap(),
            "● API retry 1/10 in 0.6 s (529 overloaded)"
        );
        assert_eq!(render_stream_line("   "), None);
        assert_eq!(
            render_stream_line(r#"{"type":"stream_event","event":{}}"#),
            None
        );
        assert_eq!(
            render_stream_line("warning: low disk"),
            Some("warning: low disk".to_string())
        );
        let leak = r#"{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash","input":{"command":"export GH=ghp_1234567890abcdefghijABCDEFGHIJ123456"}}]}}"#;
        let r = render_stream_line(leak).unwrap();
        assert!(
            !r.contains("ghp_1234") && r.contains("[REDACTED:github_token]"),
            "{r}"
        );
        let long = format!(
            r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","name":"Custom","input":{{"x":"{}"}}}}]}}}}"#,
            "y".repeat(500)
        );
        assert!(render_stream_line(&long).unwrap().chars().count() <= MAX_LINE);
    }
}
