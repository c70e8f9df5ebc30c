//! Error classes of a failed attempt and how long to wait before retrying.
//!
//! Claude reports API failures inside its result (`is_error: true`, `result: "API Error: 529 …"`)
//! and other agents print them; the class decides whether retrying can help.

use super::result::AgentResult;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::LazyLock;

/// Why an attempt failed, as far as retrying is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    /// Bad, missing or expired credentials, no permission, or no credit: never retried, since
    /// every further attempt would fail the same way (and the operator has to act).
    Auth,
    /// The provider is overloaded (HTTP 529 / 503 "overloaded").
    Overloaded,
    /// HTTP 429, rate or usage limits.
    RateLimited,
    /// 5xx, bare 403, timeouts and connection failures.
    ServerError,
    /// Anything else: a plain failed attempt, counted against the task's attempts.
    Other,
}

impl ErrorClass {
    /// Whether the engine should retry the same attempt after [`backoff`].
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorClass::Overloaded | ErrorClass::RateLimited | ErrorClass::ServerError
        )
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Auth => "auth",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Other => "other",
        }
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The retry backoff is the domain's (one rule for the engine and for callers of this module).
pub use crate::domain::retry::{DEFAULT_BACKOFF_SECS, backoff};

fn re(pattern: &str) -> Regex {
    // The patterns are constants checked by the tests; an invalid one would be a programming error
    // caught there, so falling back to a never-matching regex keeps release builds panic-free.
    Regex::new(pattern).unwrap_or_else(|_| never())
}

fn never() -> Regex {
    #[allow(clippy::unwrap_used)]
    Regex::new(r"[^\s\S]").unwrap()
}

static STATUS: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r#"(?i)(?:api error|status(?:\s*code)?|statusCode"?|http(?:/\d(?:\.\d)?)?|error|got status)\s*[:=]?\s*\(?(\d{3})\b"#,
    )
});
static AUTH: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)authentication_error|permission_error|invalid[ _-]?(?:x-)?api[ _-]?key|api key not valid|incorrect api key|please run /login|oauth token (?:has )?(?:expired|been revoked|revoked)|credit balance is too low|insufficient_quota",
    )
});
static OVERLOADED: LazyLock<Regex> =
    LazyLock::new(|| re(r"(?i)overloaded_error|\boverloaded\b|model is overloaded"));
static RATE: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)rate_limit_error|rate[ -]?limit|too many requests|resource_exhausted|usage limit|limit reached|quota exceeded|exceeded your current quota",
    )
});
static SERVER: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)api_error|internal server error|bad gateway|service unavailable|gateway time-?out|connection error|(?:request|connection) timed out|econnreset|econnrefused|etimedout|socket hang up|fetch failed|stream error|(?-i:\bUNAVAILABLE\b)",
    )
});

/// The class of an HTTP status from a provider API, or `None` for codes that say nothing
/// about retrying (2xx, 404, …).
pub(crate) fn class_for_status(code: u16) -> Option<ErrorClass> {
    match code {
        401 | 402 => Some(ErrorClass::Auth),
        529 => Some(ErrorClass::Overloaded),
        429 => Some(ErrorClass::RateLimited),
        // The original retried 403 too; a real permission problem says permission_error, which
        // the text patterns classify as Auth first.
        403 | 408 | 500..=528 | 530..=599 => Some(ErrorClass::ServerError),
        _ => None,
    }
}

/// The class of an error message, or `None` when it names no known failure.
pub fn classify_text(text: &str) -> Option<ErrorClass> {
    if AUTH.is_match(text) {
        return Some(ErrorClass::Auth);
    }
    let from_status = STATUS
        .captures_iter(text)
        .find_map(|cap| cap[1].parse().ok().and_then(class_for_status));
    if from_status == Some(ErrorClass::Auth) {
        return from_status;
    }
    if OVERLOADED.is_match(text) {
        return Some(ErrorClass::Overloaded);
    }
    if from_status.is_some() {
        return from_status;
    }
    if RATE.is_match(text) {
        return Some(ErrorClass::RateLimited);
    }
    if SERVER.is_match(text) {
        return Some(ErrorClass::ServerError);
    }
    None
}

/// The class of a finished attempt, or `None` when it succeeded (exit 0 and no error reported;
/// whether the marker was printed is the engine's separate question).
///
/// The result text is searched first, then the last plain-text lines of the output (JSON lines
/// are skipped: they carry file contents and tool output that could mention anything).
pub fn classify_outcome(
    exit_code: Option<i32>,
    result: &AgentResult,
    clean_output: &str,
) -> Option<ErrorClass> {
    if exit_code == Some(0) && !result.is_error {
        return None;
    }
    if let Some(class) = classify_text(&result.text) {
        return Some(class);
    }
    let plain: Vec<&str> = clean_output
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('{'))
        .collect();
    let tail = plain[plain.len().saturating_sub(20)..].join("\n");
    Some(classify_text(&tail).unwrap_or(ErrorClass::Other))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn claude_api_errors() {
        let cases = [
            (
                r#"API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                ErrorClass::Overloaded,
            ),
            (
                r#"API Error: 401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#,
                ErrorClass::Auth,
            ),
            ("Invalid API key · Please run /login", ErrorClass::Auth),
            ("Invalid API key · Fix external API key", ErrorClass::Auth),
            (
                "OAuth token has expired. Please obtain a new token or refresh your existing token.",
                ErrorClass::Auth,
            ),
            ("Credit balance is too low", ErrorClass::Auth),
            (
                r#"API Error: 403 {"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission"}}"#,
                ErrorClass::Auth,
            ),
            (
                r#"API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#,
                ErrorClass::RateLimited,
            ),
            (
                "Claude AI usage limit reached|1760000000",
                ErrorClass::RateLimited,
            ),
            (
                r#"API Error: 500 {"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#,
                ErrorClass::ServerError,
            ),
            ("API Error: 502 Bad Gateway", ErrorClass::ServerError),
            ("API Error: 403 Forbidden", ErrorClass::ServerError),
            ("API Error: Connection error.", ErrorClass::ServerError),
            ("API Error: Request timed out.", ErrorClass::ServerError),
            (
                "API Error (503): service unavailable",
                ErrorClass::ServerError,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(classify_text(text), Some(want), "{text}");
        }
    }

    #[test]
    fn other_agents_errors() {
        let cases = [
            (
                "stream error: exceeded retry limit, last status: 429 Too Many Requests",
                ErrorClass::RateLimited,
            ),
            (
                "unexpected status 401 Unauthorized: Incorrect API key provided",
                ErrorClass::Auth,
            ),
            (
                "You exceeded your current quota, please check your plan and billing details. insufficient_quota",
                ErrorClass::Auth,
            ),
            (
                "[API Error: got status: 429 Too Many Requests. RESOURCE_EXHAUSTED]",
                ErrorClass::RateLimited,
            ),
            (
                "API key not valid. Please pass a valid API key.",
                ErrorClass::Auth,
            ),
            (
                "got status: 503 Service Unavailable. The model is overloaded. Please try again later.",
                ErrorClass::Overloaded,
            ),
            (
                r#"{"name":"APIError","data":{"message":"Unauthorized","statusCode":401}}"#,
                ErrorClass::Auth,
            ),
            (
                "Error: connect ECONNREFUSED 127.0.0.1:443",
                ErrorClass::ServerError,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(classify_text(text), Some(want), "{text}");
        }
    }

    #[test]
    fn ordinary_text_is_not_an_error() {
        for text in [
            "",
            "All tests passed. <promise>COMPLETE</promise>",
            "Fixed the bug on line 529 of parser.rs",
            "Added 401 handling to the login page",
            "error: could not compile `whilly` due to 3 previous errors",
            "Implemented the billing page; unauthorized users now get a login prompt",
            "test parser::slow ... FAILED (test timed out after 60s)",
        ] {
            assert_eq!(classify_text(text), None, "{text}");
        }
    }

    #[test]
    fn outcome_uses_result_then_plain_tail() {
        let ok = AgentResult::default();
        assert_eq!(
            classify_outcome(Some(0), &ok, "anything 529 overloaded"),
            None
        );
        let err = AgentResult {
            is_error: true,
            text: "API Error: 529 overloaded".into(),
            ..Default::default()
        };
        assert_eq!(
            classify_outcome(Some(1), &err, ""),
            Some(ErrorClass::Overloaded)
        );
        // JSON transcript lines mentioning errors do not count; the plain stderr line does.
        let out =
            "{\"type\":\"user\",\"content\":\"401 unauthorized\"}\nfatal: rate limit exceeded\n";
        assert_eq!(
            classify_outcome(Some(1), &ok, out),
            Some(ErrorClass::RateLimited)
        );
        assert_eq!(
            classify_outcome(Some(2), &ok, "{\"x\":\"401 unauthorized\"}\nboom\n"),
            Some(ErrorClass::Other)
        );
        assert_eq!(classify_outcome(None, &ok, ""), Some(ErrorClass::Other));
    }

    #[test]
    fn spawn_errors() {
        assert!(
            ErrorClass::Overloaded.is_retryable()
                && !ErrorClass::Auth.is_retryable()
                && !ErrorClass::Other.is_retryable()
        );
    }
}
