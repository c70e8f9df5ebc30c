//! Small text formatters shared by the views.

use crate::domain::Usd;
use std::time::Duration;

/// `mm:ss`, or `h:mm:ss` from an hour on.
pub fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{:02}:{:02}", s / 60, s % 60)
    }
}

/// `$1.23` (four decimals under a cent, as `Usd` prints).
pub fn money(u: Usd) -> String {
    u.to_string()
}

/// A rough duration: `45s`, `12m`, `3h 20m`, `5d`.
pub fn rough(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m", s / 60),
        3600..=86_399 => format!("{}h {}m", s / 3600, s / 60 % 60),
        _ => format!("{}d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(clock(Duration::from_secs(65)), "01:05");
        assert_eq!(clock(Duration::from_secs(3725)), "1:02:05");
        assert_eq!(rough(Duration::from_secs(7300)), "2h 1m");
    }
}
