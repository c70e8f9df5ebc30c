//! When a rate-limited backend may be used again: the reset time an agent's error names.
//!
//! Providers say it in many ways: an HTTP `retry-after: 30` header, Codex's "Please try again
//! in 20.5s" (a rate limit) or "try again at 3:55 AM" (a usage limit, in local time; on another
//! day "try again at Dec 7th, 2026 3:55 AM"), Gemini's `"retryDelay": "5s"`, Claude Code's
//! `usage limit reached|1767225600` (a unix epoch) or "resets at 3pm", an ISO timestamp. The first that is found wins; none found
//! means the caller's default cooldown. Pure: the caller passes the local "now", so "3pm" is
//! read in the operator's time zone.

use chrono::{DateTime, Duration as Span, FixedOffset, NaiveDate, NaiveTime, TimeZone, Utc};
use regex::Regex;
use std::sync::LazyLock;
use std::time::Duration;

/// A reset further away than this is not believed (a typo, a weekly limit misread): the pause
/// is cut to it, and the next attempt finds out again.
pub const MAX_PAUSE: Duration = Duration::from_secs(7 * 24 * 3600);

/// When a backend paused by a rate limit may be used again, and whether the agent said so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pause {
    pub until: DateTime<Utc>,
    /// `true`: the time came from the agent's message; `false`: the default cooldown.
    pub parsed: bool,
}

fn re(pattern: &str) -> Regex {
    // Constant patterns, checked by the tests below; a broken one never matches instead of
    // panicking in a release build.
    Regex::new(pattern).unwrap_or_else(|_| never())
}

fn never() -> Regex {
    #[allow(clippy::unwrap_used)]
    Regex::new(r"[^\s\S]").unwrap()
}

static RETRY_AFTER: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?i)retry[-_ ]after"?\s*[:=]\s*"?(\d+(?:\.\d+)?)"#));
static RETRY_DELAY: LazyLock<Regex> =
    LazyLock::new(|| re(r#"(?i)"?retryDelay"?\s*:\s*"(\d+(?:\.\d+)?)s""#));
static EPOCH: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)limit reached\s*\|\s*(\d{9,13})\b"));
static IN_SPAN: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:try again|retry|resets?|available again|wait)\s+(?:in|after)\s+((?:\d+(?:\.\d+)?\s*(?:milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)[\s,]*(?:and\s+)?)+)",
    )
});
static SPAN_PART: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(\d+(?:\.\d+)?)\s*(milliseconds?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d)",
    )
});
static ISO: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)(?:reset|until|after|at)\D{0,20}?(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}))",
    )
});
static CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    re(r"(?i)(?:resets?\s+(?:at\s+)?|try again at\s+)(\d{1,2})(?::(\d{2}))?\s*(am|pm)?\b")
});
/// Codex's usage limit on another day: "try again at Dec 7th, 2026 3:55 AM" (local time).
static DATED_CLOCK: LazyLock<Regex> = LazyLock::new(|| {
    re(
        r"(?i)try again at\s+([a-z]{3})[a-z]*\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\s+(\d{1,2}):(\d{2})\s*(am|pm)?\b",
    )
});

/// The reset time `text` names, if any, as seen from `now` (local time).
pub fn reset_time(text: &str, now: DateTime<FixedOffset>) -> Option<DateTime<Utc>> {
    let now_utc = now.with_timezone(&Utc);
    let after = |secs: f64| -> Option<DateTime<Utc>> {
        let ms = (secs * 1000.0).round();
        (0.0..1e15)
            .contains(&ms)
            .then(|| now_utc + Span::milliseconds(ms as i64))
    };
    if let Some(c) = RETRY_AFTER.captures(text) {
        return c[1].parse().ok().and_then(after);
    }
    if let Some(c) = RETRY_DELAY.captures(text) {
        return c[1].parse().ok().and_then(after);
    }
    if let Some(c) = EPOCH.captures(text) {
        let n: i64 = c[1].parse().ok()?;
        // Seconds, or milliseconds when it has 13 digits.
        let secs = if c[1].len() >= 13 { n / 1000 } else { n };
        return Utc.timestamp_opt(secs, 0).single();
    }
    if let Some(c) = IN_SPAN.captures(text) {
        let secs: f64 = SPAN_PART
            .captures_iter(&c[1])
            .filter_map(|p| Some(p[1].parse::<f64>().ok()? * unit_secs(&p[2])))
            .sum();
        return after(secs);
    }
    if let Some(c) = ISO.captures(text) {
        let s = c[1].replace(' ', "T");
        if let Ok(t) = DateTime::parse_from_rfc3339(&s) {
            return Some(t.with_timezone(&Utc));
        }
        // `+0100` without the colon.
        if let Ok(t) = DateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M:%S%.f%z") {
            return Some(t.with_timezone(&Utc));
        }
        if let Ok(t) = DateTime::parse_from_str(&s, "%Y-%m-%dT%H:%M%z") {
            return Some(t.with_timezone(&Utc));
        }
    }
    if let Some(c) = DATED_CLOCK.captures(text) {
        let month = MONTHS
            .iter()
            .position(|m| m.eq_ignore_ascii_case(&c[1]))
            .and_then(|i| u32::try_from(i + 1).ok())?;
        let date = NaiveDate::from_ymd_opt(c[3].parse().ok()?, month, c[2].parse().ok()?)?;
        let time = clock_time(&c[4], Some(&c[5]), c.get(6).map(|m| m.as_str()))?;
        let at = now
            .offset()
            .from_local_datetime(&date.and_time(time))
            .single()?;
        return Some(minute_end_if_current(at, now).with_timezone(&Utc));
    }
    if let Some(c) = CLOCK.captures(text) {
        // A bare number is a clock time only with am/pm or minutes ("resets 5" says nothing).
        if c.get(2).is_none() && c.get(3).is_none() {
            return None;
        }
        let time = clock_time(
            &c[1],
            c.get(2).map(|m| m.as_str()),
            c.get(3).map(|m| m.as_str()),
        )?;
        let today = now.date_naive().and_time(time);
        let mut at = now.offset().from_local_datetime(&today).single()?;
        at = minute_end_if_current(at, now);
        if at <= now {
            at += Span::days(1);
        }
        return Some(at.with_timezone(&Utc));
    }
    None
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// `hour[:minute] [am|pm]` as a time of day, `None` when out of range.
fn clock_time(hour: &str, minute: Option<&str>, ampm: Option<&str>) -> Option<NaiveTime> {
    let mut hour: u32 = hour.parse().ok()?;
    let minute: u32 = minute.map_or(Some(0), |m| m.parse().ok())?;
    if let Some(ampm) = ampm {
        if hour == 0 || hour > 12 {
            return None;
        }
        hour %= 12;
        if ampm.eq_ignore_ascii_case("pm") {
            hour += 12;
        }
    }
    NaiveTime::from_hms_opt(hour, minute, 0)
}

/// A clock time names a minute, and the reset lies somewhere in it: when that minute is the
/// current one (Codex prints a reset seconds ahead as this minute), its end, so the pause is
/// never shorter than the wait asked for; any other time as it is.
fn minute_end_if_current(
    at: DateTime<FixedOffset>,
    now: DateTime<FixedOffset>,
) -> DateTime<FixedOffset> {
    if at <= now && now < at + Span::minutes(1) {
        at + Span::minutes(1)
    } else {
        at
    }
}

fn unit_secs(unit: &str) -> f64 {
    let u = unit.to_ascii_lowercase();
    if u == "ms" || u.starts_with("milli") {
        0.001
    } else if u.starts_with('s') {
        1.0
    } else if u.starts_with('m') {
        60.0
    } else if u.starts_with('h') {
        3600.0
    } else {
        86400.0
    }
}

/// How long a backend is paused after a rate limit: until the reset the message names (at
/// most [`MAX_PAUSE`] away), or for `default` when it names none or one already past.
pub fn pause_for(text: &str, now: DateTime<FixedOffset>, default: Duration) -> Pause {
    let now_utc = now.with_timezone(&Utc);
    let max = now_utc + Span::from_std(MAX_PAUSE).unwrap_or(Span::days(7));
    match reset_time(text, now) {
        Some(t) if t > now_utc => Pause {
            until: t.min(max),
            parsed: true,
        },
        _ => Pause {
            until: now_utc + Span::from_std(default).unwrap_or(Span::seconds(60)),
            parsed: false,
        },
    }
}

/// What an `agent.paused` event says: which backend, until when, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseNote {
    pub agent: String,
    pub until: DateTime<Utc>,
    /// `usage limit` or `rate limit`.
    pub reason: String,
}

impl PauseNote {
    /// The event's payload.
    pub fn payload(&self, parsed: bool) -> serde_json::Value {
        serde_json::json!({
            "agent": self.agent,
            "until": self.until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "reason": self.reason,
            "parsed": parsed,
        })
    }

    pub fn from_payload(v: &serde_json::Value) -> Option<PauseNote> {
        let until = DateTime::parse_from_rfc3339(v.get("until")?.as_str()?).ok()?;
        Some(PauseNote {
            agent: v.get("agent")?.as_str()?.to_string(),
            until: until.with_timezone(&Utc),
            reason: v
                .get("reason")
                .and_then(|r| r.as_str())
                .unwrap_or("rate limit")
                .to_string(),
        })
    }

    /// `claude paused until 15:04 (usage limit)`, the time in `tz` (the operator's).
    pub fn label<Tz: TimeZone>(&self, tz: &Tz) -> String
    where
        Tz::Offset: std::fmt::Display,
    {
        format!(
            "{} paused until {} ({})",
            self.agent,
            self.until.with_timezone(tz).format("%H:%M"),
            self.reason
        )
    }
}

/// `usage limit` when the message speaks of a usage limit or quota (a plan's allowance,
/// hours away), else `rate limit` (requests per minute, seconds away).
pub fn limit_kind(message: &str) -> &'static str {
    static USAGE: LazyLock<Regex> =
        LazyLock::new(|| re(r"(?i)usage limit|quota|limit reached|resource_exhausted"));
    // OpenAI's per-minute limits say "Rate limit reached for gpt-5 … on tokens per min".
    static RATE: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)rate limit (?:reached|exceeded)"));
    if USAGE.is_match(message) && !RATE.is_match(message) {
        "usage limit"
    } else {
        "rate limit"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339("2026-12-06T14:00:00+01:00").unwrap()
    }

    fn secs_ahead(text: &str) -> Option<i64> {
        reset_time(text, now()).map(|t| (t - now().with_timezone(&Utc)).num_milliseconds())
    }

    #[test]
    fn relative_delays() {
        assert_eq!(secs_ahead("HTTP 429\nretry-after: 5"), Some(5000));
        assert_eq!(secs_ahead("Retry-After: 30"), Some(30_000));
        assert_eq!(
            secs_ahead(
                r#"{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay": "5s"}"#
            ),
            Some(5000)
        );
        assert_eq!(
            secs_ahead("Rate limit reached for gpt-5. Please try again in 20.5s."),
            Some(20_500)
        );
        assert_eq!(secs_ahead("try again in 5 seconds"), Some(5000));
        assert_eq!(secs_ahead("Please try again in 1m30s"), Some(90_000));
        assert_eq!(
            secs_ahead("quota exceeded, try again in 2 hours and 5 minutes"),
            Some((2 * 3600 + 5 * 60) * 1000)
        );
        assert_eq!(secs_ahead("try again in 250ms"), Some(250));
    }

    #[test]
    fn absolute_times() {
        let epoch = now().timestamp() + 3600;
        assert_eq!(
            secs_ahead(&format!("Claude AI usage limit reached|{epoch}")),
            Some(3_600_000)
        );
        assert_eq!(
            secs_ahead(&format!("usage limit reached|{}", epoch * 1000)),
            Some(3_600_000)
        );
        assert_eq!(
            secs_ahead("limit resets at 2026-12-06T13:30:00Z"),
            Some(30 * 60 * 1000)
        );
        assert_eq!(
            secs_ahead("quota until 2026-12-06 15:00:00+0100"),
            Some(3_600_000)
        );
    }

    #[test]
    fn local_clock_times_today_or_tomorrow() {
        // now is 14:00 local.
        assert_eq!(
            secs_ahead("5-hour limit reached ∙ resets 3pm"),
            Some(3_600_000)
        );
        assert_eq!(
            secs_ahead("Your limit resets at 15:04."),
            Some(64 * 60 * 1000)
        );
        // 9am has passed today: tomorrow.
        assert_eq!(secs_ahead("resets 9am"), Some(19 * 3_600_000));
        assert_eq!(secs_ahead("resets 12am"), Some(10 * 3_600_000));
        assert_eq!(secs_ahead("resets 5"), None);
        assert_eq!(secs_ahead("resets 13pm"), None);
        // The minute named is the current one: the reset is within it, so its end.
        assert_eq!(secs_ahead("resets at 14:00"), Some(60_000));
    }

    #[test]
    fn codex_usage_limits() {
        // Codex 0.171's message for an HTTP 429 `usage_limit_reached` with `resets_at`.
        let msg = |at: &str| {
            format!(
                "You\u{2019}ve hit your usage limit. Upgrade to Pro (https://chatgpt.com/explore/pro), visit https://chatgpt.com/settings/usage to purchase more credits or try again at {at}."
            )
        };
        assert_eq!(secs_ahead(&msg("3:55 PM")), Some(115 * 60 * 1000));
        assert_eq!(secs_ahead(&msg("2:00 PM")), Some(60_000));
        assert_eq!(
            secs_ahead(&msg("Dec 7th, 2026 3:55 AM")),
            Some((13 * 60 + 55) * 60 * 1000)
        );
        assert_eq!(
            secs_ahead(&msg("Jan 1st, 2027 12:05 AM")),
            Some(((25 * 24 + 10) * 60 + 5) * 60 * 1000)
        );
        assert_eq!(limit_kind(&msg("3:55 PM")), "usage limit");
    }

    #[test]
    fn pause_notes_round_trip_and_read_well() {
        let note = PauseNote {
            agent: "claude".into(),
            until: DateTime::parse_from_rfc3339("2026-12-06T15:04:00Z")
                .unwrap()
                .with_timezone(&Utc),
            reason: limit_kind("Claude AI usage limit reached|1767225600").into(),
        };
        assert_eq!(
            PauseNote::from_payload(&note.payload(true)),
            Some(note.clone())
        );
        assert_eq!(note.label(&Utc), "claude paused until 15:04 (usage limit)");
        assert_eq!(limit_kind("429 Too Many Requests"), "rate limit");
        assert_eq!(
            limit_kind(
                "rate limit exceeded: Rate limit reached for gpt-5 in organization org-x on tokens per min (TPM). Please try again in 5s."
            ),
            "rate limit"
        );
        assert_eq!(
            limit_kind("5-hour limit reached ∙ resets 3pm"),
            "usage limit"
        );
        assert_eq!(
            PauseNote::from_payload(&serde_json::json!({"agent": "x"})),
            None
        );
    }

    #[test]
    fn nothing_named_means_the_default() {
        assert_eq!(secs_ahead("429 Too Many Requests"), None);
        let p = pause_for("429 Too Many Requests", now(), Duration::from_secs(60));
        assert!(!p.parsed);
        assert_eq!(p.until, now().with_timezone(&Utc) + Span::seconds(60));
        // A reset already past is no reason to hammer the API: the default again.
        let p = pause_for(
            "limit resets at 2026-12-06T12:00:00Z",
            now(),
            Duration::from_secs(60),
        );
        assert!(!p.parsed);
        let p = pause_for("retry-after: 5", now(), Duration::from_secs(60));
        assert!(p.parsed);
        assert_eq!(p.until, now().with_timezone(&Utc) + Span::seconds(5));
        // Far futures are cut.
        let p = pause_for("try again in 30 days", now(), Duration::from_secs(60));
        assert_eq!(p.until, now().with_timezone(&Utc) + Span::days(7));
    }
}
