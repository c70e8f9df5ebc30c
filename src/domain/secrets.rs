//! Secrets in text: the shapes the secret lint knows (private keys, AWS, GitHub, Anthropic,
//! OpenAI and Slack tokens, DSN passwords, credential assignments) and their redaction. Pure, so
//! the store can redact every event payload it writes and the engine every line it logs.

use regex::Regex;
use std::fmt;
use std::sync::LazyLock;

fn re(pattern: &str) -> Regex {
    // Constant patterns, all exercised by the tests.
    Regex::new(pattern).unwrap_or_else(|_| never())
}

fn never() -> Regex {
    #[allow(clippy::unwrap_used)]
    Regex::new(r"[^\s\S]").unwrap()
}

/// The kinds of secret the lint knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SecretKind {
    AwsAccessKey,
    GithubToken,
    AnthropicKey,
    OpenAiKey,
    PrivateKey,
    DsnPassword,
    SlackToken,
}

impl SecretKind {
    pub fn as_str(self) -> &'static str {
        match self {
            SecretKind::AwsAccessKey => "aws_access_key",
            SecretKind::GithubToken => "github_token",
            SecretKind::AnthropicKey => "anthropic_api_key",
            SecretKind::OpenAiKey => "openai_api_key",
            SecretKind::PrivateKey => "private_key",
            SecretKind::DsnPassword => "dsn_password",
            SecretKind::SlackToken => "slack_token",
        }
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Secret patterns: kind and regex. Order matters where they overlap (`sk-ant-` before `sk-`).
static SECRETS: LazyLock<Vec<(SecretKind, Regex)>> = LazyLock::new(|| {
    vec![
        (
            SecretKind::PrivateKey,
            re(
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?",
            ),
        ),
        (
            SecretKind::AwsAccessKey,
            re(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ),
        (
            SecretKind::GithubToken,
            // Real tokens are 36 characters after the prefix; short ones (tests, truncated
            // copies) are still someone's secret.
            re(r"\b(?:gh[pousr]_[A-Za-z0-9]{8,}|github_pat_[A-Za-z0-9_]{22,})"),
        ),
        (SecretKind::AnthropicKey, re(r"\bsk-ant-[A-Za-z0-9_\-]{8,}")),
        (
            SecretKind::OpenAiKey,
            re(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
        ),
        (
            SecretKind::SlackToken,
            re(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"),
        ),
        (
            SecretKind::DsnPassword,
            re(r"\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:([^\s@/]+)@[^\s/]+"),
        ),
    ]
});

/// Values that look like a password in a DSN but are placeholders in documentation.
fn is_placeholder_password(p: &str) -> bool {
    let lower = p.to_ascii_lowercase();
    p.starts_with('$')
        || p.starts_with('<')
        || p.starts_with('{')
        || p.starts_with('%')
        || p.chars().all(|c| c == '*' || c == 'x' || c == 'X')
        || matches!(
            lower.as_str(),
            "pass"
                | "password"
                | "passwd"
                | "pw"
                | "pwd"
                | "secret"
                | "changeme"
                | "redacted"
                | "example"
        )
}

/// Where the secrets are in `text`: (kind, byte range). Overlapping findings keep the first.
pub fn find_secrets(text: &str) -> Vec<(SecretKind, std::ops::Range<usize>)> {
    let mut found: Vec<(SecretKind, std::ops::Range<usize>)> = Vec::new();
    for (kind, regex) in SECRETS.iter() {
        for cap in regex.captures_iter(text) {
            let (range, secret_range) = match (*kind, cap.get(1)) {
                (SecretKind::DsnPassword, Some(pw)) => {
                    if is_placeholder_password(pw.as_str()) {
                        continue;
                    }
                    (pw.range(), pw.range())
                }
                _ => {
                    let Some(m) = cap.get(0) else { continue };
                    (m.range(), m.range())
                }
            };
            if found
                .iter()
                .any(|(_, r)| r.start < range.end && range.start < r.end)
            {
                continue;
            }
            // The OpenAI shape also matches Anthropic keys (`sk-` and anything): name them right.
            let kind =
                if *kind == SecretKind::OpenAiKey && text[range.clone()].starts_with("sk-ant-") {
                    SecretKind::AnthropicKey
                } else {
                    *kind
                };
            found.push((kind, secret_range));
        }
    }
    found.sort_by_key(|(_, r)| r.start);
    found
}

/// `text` with every secret replaced by `[REDACTED:<kind>]` (a DSN keeps its user and host,
/// only the password goes), and `key=value` / `Bearer …` credentials masked as well.
pub fn redact_secrets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (kind, range) in find_secrets(text) {
        out.push_str(&text[at..range.start]);
        let _ = fmt::Write::write_fmt(&mut out, format_args!("[REDACTED:{kind}]"));
        at = range.end;
    }
    out.push_str(&text[at..]);
    redact_assignments(&out)
}

static ASSIGNMENT: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)((?:api[_-]?key|access[_-]?key|secret(?:[_-]?key)?|token|auth[_-]?token|password|passwd|client[_-]?secret)["']?\s*[:=]\s*["']?)([^\s"',;]{8,})|(\bBearer\s+)([A-Za-z0-9._~+/\-]{16,}=*)"#,
    )
});

/// Masks values of credential-looking assignments; only values with both letters and digits,
/// so `token = required` or `password: ********` are left alone.
fn redact_assignments(text: &str) -> String {
    ASSIGNMENT
        .replace_all(text, |c: &regex::Captures<'_>| {
            let (prefix, value) = match (c.get(1), c.get(2), c.get(3), c.get(4)) {
                (Some(p), Some(v), _, _) | (_, _, Some(p), Some(v)) => (p.as_str(), v.as_str()),
                _ => return c[0].to_string(),
            };
            let looks_secret = value.chars().any(|ch| ch.is_ascii_digit())
                && value.chars().any(|ch| ch.is_ascii_alphabetic());
            if looks_secret && !value.starts_with("[REDACTED") && !value.starts_with('$') {
                format!("{prefix}[REDACTED]")
            } else {
                c[0].to_string()
            }
        })
        .into_owned()
}

/// `bytes` with every secret redacted. Output that is not UTF-8 is kept byte for byte unless a
/// secret shows in its lossy reading (then that reading, redacted, is what is kept).
pub fn redact_bytes(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    match std::str::from_utf8(bytes) {
        Ok(text) => match redact_secrets(text) {
            r if r == text => Cow::Borrowed(bytes),
            r => Cow::Owned(r.into_bytes()),
        },
        Err(_) => {
            let lossy = String::from_utf8_lossy(bytes);
            let r = redact_secrets(&lossy);
            if r == lossy {
                Cow::Borrowed(bytes)
            } else {
                Cow::Owned(r.into_bytes())
            }
        }
    }
}

/// A word held back at the end of a piece of a stream is at most this long.
const HOLD_MAX: usize = 512;

/// Redacts a byte stream that arrives in pieces (a terminal's output): the word a piece ends
/// in is held until the next piece (or [`StreamRedactor::flush`]), so a token split across two
/// pieces is still caught.
#[derive(Debug, Default)]
pub struct StreamRedactor {
    held: Vec<u8>,
}

impl StreamRedactor {
    pub fn new() -> StreamRedactor {
        StreamRedactor::default()
    }

    /// What can be passed on of `held + bytes`, redacted.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.held.extend_from_slice(bytes);
        let boundary = self
            .held
            .iter()
            .rposition(|b| b.is_ascii_whitespace() || *b < 0x20 || *b == 0x7f);
        let cut = match boundary {
            Some(i) if self.held.len() - (i + 1) <= HOLD_MAX => i + 1,
            None if self.held.len() <= HOLD_MAX => 0,
            _ => self.held.len(),
        };
        let rest = self.held.split_off(cut);
        let out = redact_bytes(&self.held).into_owned();
        self.held = rest;
        out
    }

    /// Whether a word is held back.
    pub fn holding(&self) -> bool {
        !self.held.is_empty()
    }

    /// Everything held, redacted (the stream went quiet).
    pub fn flush(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        redact_bytes(&held).into_owned()
    }
}

static KEY_BEGIN: LazyLock<Regex> =
    LazyLock::new(|| re(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"));
static KEY_END: LazyLock<Regex> =
    LazyLock::new(|| re(r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"));

/// Redacts a log that arrives in pieces (an attempt's output), whatever the split: the caller
/// hands over whole lines ([`LogRedactor::line_cut`]) and, when the output goes quiet, only
/// what [`LogRedactor::quiet_cut`] allows, so the start of a secret or of a `password = …`
/// is never written before its end has arrived; a private key whose lines arrive apart is
/// redacted from its BEGIN line to its END line.
#[derive(Debug, Default)]
pub struct LogRedactor {
    in_key: bool,
}

impl LogRedactor {
    /// How much of `pending` (output not written yet) may be written now that more arrived:
    /// every whole line; a partial line only once it is `max` bytes long, and then up to the
    /// word it ends in.
    pub fn line_cut(pending: &[u8], max: usize) -> usize {
        match pending.iter().rposition(|b| *b == b'\n') {
            Some(i) => i + 1,
            None if pending.len() >= max => word_cut(pending),
            None => 0,
        }
    }

    /// How much of `pending` (a partial line) may be written while the output is quiet: none
    /// of a short one (it may be the first half of a secret or of an assignment), and of a long
    /// one up to the word it ends in.
    pub fn quiet_cut(pending: &[u8]) -> usize {
        if pending.len() <= HOLD_MAX {
            0
        } else {
            word_cut(pending)
        }
    }

    /// `bytes` redacted, carrying the inside of a private key block across calls.
    pub fn redact(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(bytes.len());
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            let text = String::from_utf8_lossy(line);
            let newline: &[u8] = if line.ends_with(b"\n") { b"\n" } else { b"" };
            if self.in_key {
                if let Some(end) = KEY_END.find(&text) {
                    self.in_key = false;
                    out.extend(redact_bytes(text[end.end()..].as_bytes()).iter());
                } else {
                    out.extend_from_slice(newline);
                }
                continue;
            }
            if let Some(begin) = KEY_BEGIN.find(&text)
                && !KEY_END.is_match(&text[begin.end()..])
            {
                self.in_key = true;
                out.extend(redact_bytes(text[..begin.start()].as_bytes()).iter());
                out.extend_from_slice(b"[REDACTED:private_key]");
                out.extend_from_slice(newline);
                continue;
            }
            out.extend(redact_bytes(line).iter());
        }
        out
    }
}

/// Up to the last word boundary of `bytes` that leaves at most [`HOLD_MAX`] bytes held; all of
/// it when the last word is longer (a run that long is no token).
fn word_cut(bytes: &[u8]) -> usize {
    match bytes
        .iter()
        .rposition(|b| b.is_ascii_whitespace() || *b < 0x20 || *b == 0x7f)
    {
        Some(i) if bytes.len() - (i + 1) <= HOLD_MAX => i + 1,
        _ => bytes.len(),
    }
}

/// Redacts every string of a JSON value in place (object keys are left alone: they are ours).
pub fn redact_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            let red = redact_secrets(s);
            if red != *s {
                *s = red;
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(redact_json),
        serde_json::Value::Object(map) => map.values_mut().for_each(redact_json),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_tokens_and_anthropic_keys_are_redacted_and_named() {
        assert_eq!(
            redact_secrets("token ghp_abc12345XYZ here"),
            "token [REDACTED:github_token] here"
        );
        assert_eq!(
            redact_secrets("key sk-ant-api03-abcdef12"),
            "key [REDACTED:anthropic_api_key]"
        );
        // An Anthropic key long enough for the OpenAI shape is still an Anthropic key.
        let long = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789";
        assert_eq!(redact_secrets(long), "[REDACTED:anthropic_api_key]");
        // Words are not tokens.
        assert_eq!(redact_secrets("the ghp_ prefix"), "the ghp_ prefix");
    }

    #[test]
    fn json_values_are_redacted_everywhere() {
        let mut v = serde_json::json!({"a": ["x ghp_abc12345XYZ"], "b": {"c": "sk-ant-api03-abcdef12"}, "n": 1});
        redact_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"a": ["x [REDACTED:github_token]"], "b": {"c": "[REDACTED:anthropic_api_key]"}, "n": 1})
        );
    }

    /// Every kind of secret, split at every offset into two writes with the output going quiet
    /// between them, never reaches the log whole.
    #[test]
    fn a_log_split_anywhere_never_holds_a_secret() {
        let secrets = [
            "AKIAABCDEFGHIJKLMNOP",
            "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "sk-ant-api03-abcdefghijklmnopqrstuvwx",
            "sk-proj-abcdefghijklmnopqrstuvwxyz012345",
            "xoxb-1234567890-abcdefghij",
            "postgres://app:s3cretPassw0rd@db.internal:5432/app",
            "password = hunter2hunter2x9",
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz0123",
        ];
        let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\nVTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----";
        let mut all: Vec<String> = secrets.iter().map(|s| s.to_string()).collect();
        all.push(pem.to_string());
        for secret in &all {
            let line = format!("about to use {secret} now\n");
            let bytes = line.as_bytes();
            for cut in 1..bytes.len() {
                // The log sink's rules: whole lines when more arrives, `quiet_cut` in a pause.
                let mut r = LogRedactor::default();
                let mut pending: Vec<u8> = Vec::new();
                let mut out = Vec::new();
                for (piece, quiet) in [(&bytes[..cut], true), (&bytes[cut..], false)] {
                    pending.extend_from_slice(piece);
                    let n = LogRedactor::line_cut(&pending, 16 * 1024);
                    let whole: Vec<u8> = pending.drain(..n).collect();
                    out.extend(r.redact(&whole));
                    if quiet {
                        let n = LogRedactor::quiet_cut(&pending);
                        let part: Vec<u8> = pending.drain(..n).collect();
                        out.extend(r.redact(&part));
                    }
                }
                out.extend(r.redact(&pending));
                let text = String::from_utf8(out).expect("utf8");
                let needle = if secret.contains("PRIVATE KEY") {
                    secret.lines().nth(1).unwrap_or(secret)
                } else {
                    secret
                        .rsplit(['=', ' ', ':'])
                        .find(|p| p.len() >= 12)
                        .unwrap_or(secret)
                };
                assert!(!text.contains(needle), "cut at {cut}: {text}");
                assert!(text.contains("[REDACTED"), "cut at {cut}: {text}");
            }
        }
    }

    #[test]
    fn a_stream_redactor_catches_a_token_split_across_pieces() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let line = format!("pushing with {token} now\r\n");
        for cut in 1..line.len() - 1 {
            let mut r = StreamRedactor::new();
            let mut out = r.feed(&line.as_bytes()[..cut]);
            out.extend(r.feed(&line.as_bytes()[cut..]));
            out.extend(r.flush());
            let out = String::from_utf8(out).expect("utf8");
            assert!(!out.contains(token), "cut at {cut}: {out}");
            assert!(out.starts_with("pushing with [REDACTED"), "{out}");
            assert!(out.ends_with(" now\r\n"));
        }
        // Nothing is held past a boundary; a long unbroken run is not held at all.
        let mut r = StreamRedactor::new();
        assert_eq!(r.feed(b"abc def"), b"abc ");
        assert!(r.holding());
        assert_eq!(r.flush(), b"def");
        let long = vec![b'x'; HOLD_MAX + 10];
        assert_eq!(r.feed(&long).len(), long.len());
        assert!(!r.holding());
    }
}
