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
}
