//! GitHub's rate limits as GitHub documents them, decided purely from an answer's status,
//! headers and message: `retry-after` is honoured; a spent primary limit
//! (`x-ratelimit-remaining: 0`) waits for `x-ratelimit-reset`; a secondary limit without
//! `retry-after` backs off at least 60 s, doubling; GraphQL reports its limit as HTTP 200 with a
//! `RATE_LIMITED` error. Server errors and dropped connections are retried a few times.

use std::time::Duration;

/// Tries of one request before its error is final.
pub(crate) const MAX_TRIES: u32 = 5;

/// What to do with an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pace {
    /// Use the answer.
    Go,
    /// Wait, then send the request again.
    Retry { after: Duration, why: String },
}

/// What the pacer sees of an answer.
#[derive(Debug, Clone, Default)]
pub(crate) struct Answer<'a> {
    pub status: u16,
    pub retry_after: Option<&'a str>,
    pub remaining: Option<&'a str>,
    /// Epoch seconds.
    pub reset: Option<&'a str>,
    /// The body's `message` (REST) or the first error's `type`/`message` (GraphQL).
    pub message: &'a str,
    /// A GraphQL answer with a `RATE_LIMITED` error.
    pub graphql_limited: bool,
}

/// The decision for an answer to try number `attempt` (1-based), at `now` (epoch seconds).
/// `secondary_hits` counts secondary limits met in a row, for the doubling.
pub(crate) fn decide(a: &Answer<'_>, attempt: u32, now: u64, secondary_hits: u32) -> Pace {
    if attempt >= MAX_TRIES {
        return Pace::Go;
    }
    let limited_status = matches!(a.status, 403 | 429);
    let secondary = limited_status
        && a.message
            .to_ascii_lowercase()
            .contains("secondary rate limit");
    if let Some(secs) = a.retry_after.and_then(|v| v.trim().parse::<u64>().ok())
        && (limited_status || a.status >= 500)
    {
        return Pace::Retry {
            after: Duration::from_secs(secs.max(1)),
            why: format!("GitHub asked to retry after {secs} s ({})", a.status),
        };
    }
    if secondary {
        let secs = 60u64.saturating_mul(1 << secondary_hits.min(4));
        return Pace::Retry {
            after: Duration::from_secs(secs),
            why: "GitHub's secondary rate limit".into(),
        };
    }
    let spent = a.remaining.map(str::trim) == Some("0");
    if (limited_status && spent) || a.graphql_limited {
        let reset = a.reset.and_then(|v| v.trim().parse::<u64>().ok());
        let after = match reset {
            Some(r) if r > now => r - now + 1,
            Some(_) => 1,
            // GraphQL without a reset header: back off like a secondary limit.
            None => 60u64.saturating_mul(1 << secondary_hits.min(4)),
        };
        return Pace::Retry {
            after: Duration::from_secs(after),
            why: "GitHub's rate limit is spent".into(),
        };
    }
    if a.status >= 500 {
        return Pace::Retry {
            after: Duration::from_millis(500 * u64::from(attempt)),
            why: format!("GitHub answered {}", a.status),
        };
    }
    Pace::Go
}

/// Backoff after a connection error on try `attempt`.
pub(crate) fn after_network_error(attempt: u32) -> Option<Duration> {
    (attempt < MAX_TRIES).then(|| Duration::from_millis(300 * u64::from(attempt)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(status: u16) -> Answer<'static> {
        Answer {
            status,
            ..Answer::default()
        }
    }

    #[test]
    fn each_limit_waits_as_documented() {
        assert_eq!(decide(&a(200), 1, 0, 0), Pace::Go);
        assert_eq!(decide(&a(404), 1, 0, 0), Pace::Go);
        let retry = Answer {
            retry_after: Some("7"),
            ..a(429)
        };
        assert!(
            matches!(decide(&retry, 1, 0, 0), Pace::Retry { after, .. } if after == Duration::from_secs(7))
        );
        let primary = Answer {
            remaining: Some("0"),
            reset: Some("1000"),
            message: "API rate limit exceeded for user",
            ..a(403)
        };
        assert!(
            matches!(decide(&primary, 1, 990, 0), Pace::Retry { after, .. } if after == Duration::from_secs(11))
        );
        let secondary = Answer {
            message: "You have exceeded a secondary rate limit",
            ..a(403)
        };
        assert!(
            matches!(decide(&secondary, 1, 0, 0), Pace::Retry { after, .. } if after == Duration::from_secs(60))
        );
        assert!(
            matches!(decide(&secondary, 2, 0, 2), Pace::Retry { after, .. } if after == Duration::from_secs(240))
        );
        let graphql = Answer {
            graphql_limited: true,
            reset: Some("105"),
            ..a(200)
        };
        assert!(
            matches!(decide(&graphql, 1, 100, 0), Pace::Retry { after, .. } if after == Duration::from_secs(6))
        );
        // A plain 403 (no permission) is an answer, not a limit.
        assert_eq!(
            decide(
                &Answer {
                    message: "Resource not accessible",
                    ..a(403)
                },
                1,
                0,
                0
            ),
            Pace::Go
        );
        assert!(matches!(decide(&a(502), 1, 0, 0), Pace::Retry { .. }));
        assert_eq!(decide(&a(502), MAX_TRIES, 0, 0), Pace::Go, "tries end");
    }
}
