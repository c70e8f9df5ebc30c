//! Reading a forge's answer without trusting it. A proxy in front of GitHub or Jira answers an
//! outage with an HTML page, a connection can drop half way through a body, and a broken or
//! hostile server can send hundreds of megabytes: the body is read in chunks up to a cap, and
//! what is not JSON is described (an HTML page by its title, JSON cut short by its length) so
//! the error names what came back instead of quoting a page of markup.

use serde_json::Value;

/// The largest answer read. GitHub's biggest pages (100 issues of up to 64 KiB each, a board's
/// items with their fields) stay well below it.
pub const MAX_ANSWER_BYTES: usize = 32 << 20;

/// Why a body could not be read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unread {
    /// Longer than the cap; reading stopped there.
    TooLarge { limit: usize },
    /// The connection failed part way (reset, timed out): `got` bytes had arrived.
    Cut { got: usize, detail: String },
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::TooLarge { limit } => write!(
                f,
                "the answer is larger than {} MiB; whilly stopped reading it",
                limit >> 20
            ),
            Unread::Cut { got, detail } => {
                write!(f, "the answer broke off after {got} bytes ({detail})")
            }
        }
    }
}

/// The body of `resp`, at most `limit` bytes. A `Content-Length` over the cap is refused
/// before anything is read.
pub async fn read(resp: &mut reqwest::Response, limit: usize) -> Result<Vec<u8>, Unread> {
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(Unread::TooLarge { limit });
    }
    let mut body = Vec::new();
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(Unread::TooLarge { limit });
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(Unread::Cut {
                    got: body.len(),
                    detail: error_text(&e),
                });
            }
        }
    }
}

/// What a forge's answer turned out to be, by the one policy both clients follow: a body that
/// broke off, or a success that is not JSON, is asked again when the request may be repeated
/// (a read; a change is not: it may have been made); one too large never is.
#[derive(Debug)]
pub enum Taken {
    /// The body, as JSON when it is (`not_json` says what it was otherwise; for an error
    /// status that is the message).
    Answer {
        value: Value,
        not_json: Option<String>,
        raw: Vec<u8>,
    },
    /// Ask again (the reason, for the log).
    Retry(String),
    /// The connection broke off and the request may not be repeated: a network error.
    BrokeOff(String),
    /// Not an answer the client can use: too large, or a success that is not JSON.
    Bad(String),
}

/// Reads `resp` (its status `status`) by [`Taken`]'s policy; `may_retry`: the request may be
/// repeated and tries remain.
pub async fn take(resp: &mut reqwest::Response, may_retry: bool) -> Taken {
    let status = resp.status();
    let raw = match read(resp, MAX_ANSWER_BYTES).await {
        Ok(raw) => raw,
        Err(cut @ Unread::Cut { .. }) if may_retry => return Taken::Retry(cut.to_string()),
        Err(cut @ Unread::Cut { .. }) => return Taken::BrokeOff(cut.to_string()),
        Err(too_large) => return Taken::Bad(too_large.to_string()),
    };
    match json(&raw) {
        Ok(value) => Taken::Answer {
            value,
            not_json: None,
            raw,
        },
        // A 2xx that is not JSON is a proxy's or a broken server's page: a read may find the
        // real answer on another try.
        Err(why) if status.is_success() && may_retry => {
            Taken::Retry(format!("it answered {status} with {why}"))
        }
        Err(why) if status.is_success() => Taken::Bad(why),
        Err(why) => Taken::Answer {
            value: Value::Null,
            not_json: Some(why),
            raw,
        },
    }
}

/// A reqwest error's text and causes, without the URL (which may carry query parameters).
pub fn error_text(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    if let Some(u) = e.url() {
        s = s.replace(u.as_str(), "");
        s = s.replace(" for url ()", "");
    }
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let c_text = c.to_string();
        if !s.contains(&c_text) {
            s.push_str(": ");
            s.push_str(&c_text);
        }
        cause = c.source();
    }
    s
}

/// The body as JSON; an empty body is `Null`. Anything else is described for an error.
pub fn json(body: &[u8]) -> Result<Value, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    serde_json::from_slice(body).map_err(|e| describe(body, &e))
}

/// What a body that is not JSON is, in a few words: `an HTML page titled "502 Bad Gateway"`,
/// `JSON cut short after 812 bytes`, `text starting "upstream connect error"`.
fn describe(body: &[u8], e: &serde_json::Error) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(64 << 10)]);
    let head = text.trim_start();
    let lower = head
        .get(..head.len().min(512))
        .unwrap_or(head)
        .to_ascii_lowercase();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") || lower.contains("<body")
    {
        return match html_title(&text) {
            Some(t) => format!("an HTML page titled {t:?}, not JSON"),
            None => "an HTML page, not JSON".to_string(),
        };
    }
    if e.classify() == serde_json::error::Category::Eof {
        return format!("JSON cut short after {} bytes", body.len());
    }
    if matches!(head.chars().next(), Some('{' | '[')) {
        return format!("JSON that does not parse ({e})");
    }
    format!("text starting {:?}, not JSON", excerpt(head, 80))
}

/// The `<title>` of an HTML page, whitespace folded and cut to 100 characters.
fn html_title(page: &str) -> Option<String> {
    let lower = page.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = page.get(start..end)?;
    let folded = title.split_whitespace().collect::<Vec<_>>().join(" ");
    (!folded.is_empty()).then(|| excerpt(&folded, 100))
}

/// The first `max` characters of `s` with control characters dropped (a terminal must not
/// run what a server sent).
pub fn excerpt(s: &str, max: usize) -> String {
    let mut out: String = s
        .chars()
        .filter(|c| !c.is_control() || *c == ' ')
        .take(max)
        .collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn not_json(body: &str) -> String {
        json(body.as_bytes()).unwrap_err()
    }

    #[test]
    fn json_and_empty_bodies_parse() {
        assert_eq!(json(b"").unwrap(), Value::Null);
        assert_eq!(json(b"  \n").unwrap(), Value::Null);
        assert_eq!(json(br#"{"a":1}"#).unwrap()["a"], 1);
    }

    #[test]
    fn an_html_error_page_is_named_by_its_title() {
        let page = "<!DOCTYPE html>\n<html><head><title>\n 502 Bad\n Gateway </title></head><body>…</body></html>";
        assert_eq!(
            not_json(page),
            "an HTML page titled \"502 Bad Gateway\", not JSON"
        );
        assert_eq!(
            not_json("<html><body>down</body></html>"),
            "an HTML page, not JSON"
        );
    }

    #[test]
    fn truncated_json_says_where_it_stopped() {
        assert_eq!(
            not_json(r#"{"items": [{"id": 1}, {"id""#),
            "JSON cut short after 27 bytes"
        );
        assert!(not_json(r#"{"a": tru}"#).starts_with("JSON that does not parse"));
    }

    #[test]
    fn other_text_is_quoted_without_control_characters() {
        assert_eq!(
            not_json("upstream connect error\x1b[31m or disconnect"),
            "text starting \"upstream connect error[31m or disconnect\", not JSON"
        );
        let long = "x".repeat(500);
        assert!(not_json(&long).ends_with("…\", not JSON"));
    }
}
