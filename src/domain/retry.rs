//! How long a task waits before its next attempt after a retryable failure.

use std::time::Duration;

/// The original's schedule: 5, 10, 20, 40, then 60 s for every later retry.
pub const DEFAULT_BACKOFF_SECS: [u64; 5] = [5, 10, 20, 40, 60];

/// The wait before retry number `retry` (1 = the first retry, i.e. after the first failed
/// attempt): the schedule's entry, its last entry once exhausted. `retry` 0 counts as 1.
///
/// An empty schedule means the default one, not "no wait": `[retry] backoff_secs = []` is
/// refused by the config check, so an empty list only comes from code that set nothing, and
/// retrying at once would turn a failing agent into a hot loop against its API.
pub fn backoff(retry: u32, schedule: &[u64]) -> Duration {
    let schedule = if schedule.is_empty() {
        &DEFAULT_BACKOFF_SECS[..]
    } else {
        schedule
    };
    let idx = (retry.max(1) as usize - 1).min(schedule.len() - 1);
    Duration::from_secs(schedule[idx])
}

/// [`backoff`] after a task's `attempts` so far (the store's count, which includes the attempt
/// that just failed): a negative count is treated as none, a huge one as the schedule's end.
pub(crate) fn backoff_after(attempts: i64, schedule: &[u64]) -> Duration {
    backoff(u32::try_from(attempts.max(0)).unwrap_or(u32::MAX), schedule)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_then_its_last_entry() {
        let s = &DEFAULT_BACKOFF_SECS;
        let secs: Vec<u64> = (0..8).map(|a| backoff(a, s).as_secs()).collect();
        assert_eq!(secs, [5, 5, 10, 20, 40, 60, 60, 60]);
        assert_eq!(backoff(2, &[1]).as_secs(), 1);
        assert_eq!(backoff(u32::MAX, s).as_secs(), 60);
    }

    #[test]
    fn an_empty_schedule_is_the_default_one() {
        for retry in 0..8 {
            assert_eq!(backoff(retry, &[]), backoff(retry, &DEFAULT_BACKOFF_SECS));
        }
        assert_eq!(backoff(3, &[]).as_secs(), 20);
    }

    #[test]
    fn after_attempts_counts_the_failed_one() {
        let s = [7, 8, 9];
        // One attempt made and failed: the first retry's wait.
        assert_eq!(backoff_after(1, &s).as_secs(), 7);
        assert_eq!(backoff_after(2, &s).as_secs(), 8);
        assert_eq!(backoff_after(0, &s).as_secs(), 7);
        assert_eq!(backoff_after(-3, &s).as_secs(), 7);
        assert_eq!(backoff_after(i64::MAX, &s).as_secs(), 9);
    }
}
