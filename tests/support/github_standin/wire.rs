//! The HTTP side of the stand-in's answers: GitHub's error bodies, query and path decoding,
//! ETags, pagination with `Link` headers, and the rate-limit budgets and their headers.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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
        let location = body["url"].as_str().map(str::to_string);
        let mut a = Answer::json(201, body);
        if let Some(l) = location {
            a.headers.push(("location".into(), l));
        }
        a
    }

    pub fn no_content() -> Answer {
        Answer {
            status: 204,
            headers: Vec::new(),
            body: None,
        }
    }

    pub fn header(mut self, name: &str, value: impl Into<String>) -> Answer {
        self.headers.push((name.to_string(), value.into()));
        self
    }
}

const DOCS: &str = "https://docs.github.com/rest";

/// GitHub's error body: `{"message", "documentation_url", "status"}`.
pub fn error(status: u16, message: &str) -> Answer {
    Answer::json(
        status,
        json!({"message": message, "documentation_url": DOCS, "status": status.to_string()}),
    )
}

pub fn not_found() -> Answer {
    error(404, "Not Found")
}

pub fn bad_credentials() -> Answer {
    error(401, "Bad credentials")
}

pub fn problems_parsing_json() -> Answer {
    error(400, "Problems parsing JSON")
}

/// 422 "Validation Failed" with GitHub's `errors` array.
pub fn validation_failed(errors: Vec<Value>) -> Answer {
    Answer::json(
        422,
        json!({"message": "Validation Failed", "errors": errors, "documentation_url": DOCS, "status": "422"}),
    )
}

pub fn missing_field(resource: &str, field: &str) -> Answer {
    validation_failed(vec![
        json!({"resource": resource, "code": "missing_field", "field": field}),
    ])
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

/// Escapes everything but RFC 3986 unreserved characters.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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

pub fn fingerprint(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))[..12].to_string()
}

/// A weak ETag of the body text, as GitHub sends them.
pub fn etag(body: &str) -> String {
    format!("W/\"{}\"", hex::encode(Sha256::digest(body.as_bytes())))
}

/// Whether an `If-None-Match` value (one tag, a list, or `*`) matches `etag`, weakly.
pub fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    if_none_match
        .split(',')
        .any(|t| t.trim() == "*" || bare(t) == bare(etag))
}

/// The page of `items` the query asks for (`per_page` default 30, max 100; `page` from 1), with
/// a `Link` header of absolute URLs to `link_base` (e.g. `http://h/repositories/1/issues`) that
/// keep the request's other parameters.
pub fn paginate(items: Vec<Value>, query: &[(String, String)], link_base: &str) -> Answer {
    let get = |k: &str| query.iter().find(|(q, _)| q == k).map(|(_, v)| v.as_str());
    let per_page = get("per_page")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(30)
        .min(100);
    let page = get("page")
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|n| *n > 0)
        .unwrap_or(1);
    let last = items.len().div_ceil(per_page).max(1);
    let body: Vec<Value> = items
        .into_iter()
        .skip((page - 1).saturating_mul(per_page))
        .take(per_page)
        .collect();
    let mut answer = Answer::ok(Value::Array(body));
    if last > 1 {
        let url = |p: usize| {
            let mut params: Vec<String> = query
                .iter()
                .filter(|(k, _)| k != "page")
                .map(|(k, v)| format!("{}={}", percent_encode(k), percent_encode(v)))
                .collect();
            params.push(format!("page={p}"));
            format!("<{link_base}?{}>", params.join("&"))
        };
        let mut rels = Vec::new();
        if page > 1 {
            rels.push(format!("{}; rel=\"prev\"", url((page - 1).min(last))));
        }
        if page < last {
            rels.push(format!("{}; rel=\"next\"", url(page + 1)));
            rels.push(format!("{}; rel=\"last\"", url(last)));
        }
        if page > 1 {
            rels.push(format!("{}; rel=\"first\"", url(1)));
        }
        answer.headers.push(("link".into(), rels.join(", ")));
    }
    answer
}

/// One hourly budget (REST `core` or `graphql`).
#[derive(Debug, Clone)]
pub struct Budget {
    pub resource: &'static str,
    pub limit: u64,
    pub used: u64,
    /// Epoch seconds when the window resets.
    pub reset: i64,
}

impl Budget {
    pub fn new(resource: &'static str) -> Budget {
        Budget {
            resource,
            limit: super::RATE_LIMIT,
            used: 0,
            reset: now_epoch() + 3600,
        }
    }

    /// Starts a new window once the old one is over.
    pub fn roll(&mut self) {
        let now = now_epoch();
        if now >= self.reset {
            self.used = 0;
            self.reset = now + 3600;
        }
    }

    pub fn remaining(&self) -> u64 {
        self.limit.saturating_sub(self.used)
    }

    pub fn headers(&self) -> Vec<(String, String)> {
        rate_headers(
            self.resource,
            self.limit,
            self.remaining(),
            self.reset,
            self.used,
        )
    }

    /// The headers of a spent budget that resets at `reset`.
    pub fn spent_headers(&self, reset: i64) -> Vec<(String, String)> {
        rate_headers(self.resource, self.limit, 0, reset, self.limit)
    }

    pub fn json(&self) -> Value {
        json!({"limit": self.limit, "used": self.used, "remaining": self.remaining(), "reset": self.reset})
    }
}

fn rate_headers(
    resource: &str,
    limit: u64,
    remaining: u64,
    reset: i64,
    used: u64,
) -> Vec<(String, String)> {
    vec![
        ("x-ratelimit-limit".into(), limit.to_string()),
        ("x-ratelimit-remaining".into(), remaining.to_string()),
        ("x-ratelimit-reset".into(), reset.to_string()),
        ("x-ratelimit-used".into(), used.to_string()),
        ("x-ratelimit-resource".into(), resource.to_string()),
    ]
}

pub fn now_epoch() -> i64 {
    chrono::Utc::now().timestamp()
}

pub const PRIMARY_MESSAGE: &str = "API rate limit exceeded for user ID 1. If you reach out to GitHub Support for help, please include the request ID STANDIN:0000 and timestamp.";
pub const SECONDARY_MESSAGE: &str = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. If you reach out to GitHub Support for help, please include the request ID STANDIN:0000.";

pub fn primary_rate_limited() -> Answer {
    Answer::json(
        403,
        json!({"message": PRIMARY_MESSAGE, "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits", "status": "403"}),
    )
}

pub fn secondary_rate_limited(status: u16) -> Answer {
    Answer::json(
        status,
        json!({"message": SECONDARY_MESSAGE, "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits", "status": status.to_string()}),
    )
}
