//! The HTTP side of the stand-in's answers: Jira's error bodies, query decoding, Basic auth
//! (base64), and Jira's timestamp format.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

/// An answer before it is turned into HTTP.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Option<Value>,
}

impl Answer {
    pub fn json(status: u16, body: Value) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: Some(body),
        }
    }

    pub fn ok(body: Value) -> Answer {
        Answer::json(200, body)
    }

    pub fn created(body: Value) -> Answer {
        Answer::json(201, body)
    }

    pub fn no_content() -> Answer {
        Answer {
            status: 204,
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn empty(status: u16) -> Answer {
        Answer {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Answer {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

/// Jira's error body: `{"errorMessages":[...],"errors":{}}`.
pub fn error(status: u16, messages: &[&str]) -> Answer {
    Answer::json(status, json!({"errorMessages": messages, "errors": {}}))
}

/// Jira's field-level error body: `{"errorMessages":[],"errors":{field: message}}`.
pub fn field_error(status: u16, field: &str, message: &str) -> Answer {
    Answer::json(
        status,
        json!({"errorMessages": [], "errors": {field: message}}),
    )
}

pub fn unauthorized() -> Answer {
    error(
        401,
        &["Client must be authenticated to access this resource."],
    )
    .header("x-seraph-loginreason", "AUTHENTICATED_FAILED")
}

pub fn not_found() -> Answer {
    error(404, &["The requested resource could not be found."])
}

pub fn issue_not_found() -> Answer {
    error(
        404,
        &["Issue does not exist or you do not have permission to see it."],
    )
}

pub fn invalid_payload() -> Answer {
    error(
        400,
        &["Invalid request payload. Refer to the REST API documentation and try again."],
    )
}

/// Jira's timestamps: `2024-01-15T10:30:00.000+0000`.
pub fn jira_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.3f%z").to_string()
}

/// Decodes `%XX` escapes (invalid ones are kept as they are).
pub fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex_digit(bytes[i + 1]), hex_digit(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex_digit(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `a=1&b=x%20y` → decoded pairs in order (`+` is a space, as in forms).
pub fn parse_query(raw: &str) -> Vec<(String, String)> {
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64, padding optional; `None` when it is not base64.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim().trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let v = B64.iter().position(|b| *b == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// The `(email, token)` of an `Authorization: Basic base64(email:token)` header.
pub fn basic_credentials(header: &str) -> Option<(String, String)> {
    let (scheme, encoded) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(base64_decode(encoded)?).ok()?;
    let (user, token) = decoded.split_once(':')?;
    Some((user.to_string(), token.to_string()))
}

/// Whether `doc` is an ADF document Jira would store: `{"type":"doc","version":1,"content":[..]}`
/// where every node has a `type` and every text node non-empty text. The error says what is
/// wrong, for the recorded answer (Jira itself only says INVALID_INPUT).
pub fn check_adf(doc: &Value) -> Result<(), String> {
    if doc["type"] != "doc" {
        return Err("the top node is not of type doc".into());
    }
    if doc["version"] != 1 {
        return Err("the doc has no version 1".into());
    }
    if !doc["content"].is_array() {
        return Err("the doc has no content array".into());
    }
    check_node(doc)
}

fn check_node(node: &Value) -> Result<(), String> {
    let Some(kind) = node["type"].as_str() else {
        return Err(format!("a node without a type: {node}"));
    };
    if kind == "text" {
        return match node["text"].as_str() {
            Some(t) if !t.is_empty() => Ok(()),
            _ => Err("a text node with empty text".into()),
        };
    }
    match &node["content"] {
        Value::Null => Ok(()),
        Value::Array(children) => children.iter().try_for_each(check_node),
        _ => Err(format!("the content of a {kind} node is not an array")),
    }
}

/// The plain text of an ADF tree (text nodes in order, blocks on their own lines), what the
/// stand-in's `summary ~` and test helpers compare.
pub fn adf_plain(node: &Value) -> String {
    let mut out = String::new();
    collect_text(node, &mut out);
    out.trim().to_string()
}

fn collect_text(node: &Value, out: &mut String) {
    if let Some(t) = node["text"].as_str() {
        out.push_str(t);
    }
    if let Some(children) = node["content"].as_array() {
        for c in children {
            collect_text(c, out);
        }
        if node["type"] != "text" && !out.ends_with('\n') {
            out.push('\n');
        }
    }
}
