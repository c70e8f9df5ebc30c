use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A snapshot of a session's output accounting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OutputStats {
    pub total_bytes: u64,
    /// When the last output arrived; `None` before the first byte.
    pub last_output: Option<Instant>,
    /// Time since the last output (or since spawn when there was none): the "idle" signal.
    pub idle_for: Duration,
    /// Average rate since spawn.
    pub bytes_per_sec_avg: f64,
    /// Rate over the last complete one-second window (0 when output has stopped).
    pub bytes_per_sec_recent: f64,
}

const WINDOW: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct RateWindow {
    start: Instant,
    bytes: u64,
    last_rate: f64,
}

/// Counters updated by the reader thread and read by anyone.
#[derive(Debug)]
pub(crate) struct OutputCounters {
    started: Instant,
    total: AtomicU64,
    /// Nanoseconds after `started` of the last output, plus one (0 = none yet).
    last_nanos: AtomicU64,
    window: Mutex<RateWindow>,
}

impl OutputCounters {
    pub(crate) fn new(started: Instant) -> Self {
        Self {
            started,
            total: AtomicU64::new(0),
            last_nanos: AtomicU64::new(0),
            window: Mutex::new(RateWindow {
                start: started,
                bytes: 0,
                last_rate: 0.0,
            }),
        }
    }

    pub(crate) fn record(&self, n: usize, now: Instant) {
        self.total.fetch_add(n as u64, Ordering::Relaxed);
        let nanos = now.saturating_duration_since(self.started).as_nanos();
        self.last_nanos.store(
            u64::try_from(nanos).unwrap_or(u64::MAX - 1) + 1,
            Ordering::Relaxed,
        );
        let mut w = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let age = now.saturating_duration_since(w.start);
        if age >= WINDOW {
            w.last_rate = if age < WINDOW * 2 {
                w.bytes as f64 / age.as_secs_f64()
            } else {
                0.0
            };
            w.start = now;
            w.bytes = 0;
        }
        w.bytes += n as u64;
    }

    pub(crate) fn snapshot(&self, now: Instant) -> OutputStats {
        let total = self.total.load(Ordering::Relaxed);
        let last_nanos = self.last_nanos.load(Ordering::Relaxed);
        let last_output =
            (last_nanos > 0).then(|| self.started + Duration::from_nanos(last_nanos - 1));
        let since = last_output.unwrap_or(self.started);
        let elapsed = now.saturating_duration_since(self.started).as_secs_f64();
        let recent = {
            let w = self.window.lock().unwrap_or_else(|e| e.into_inner());
            if now.saturating_duration_since(w.start) < WINDOW * 2 {
                w.last_rate
            } else {
                0.0
            }
        };
        OutputStats {
            total_bytes: total,
            last_output,
            idle_for: now.saturating_duration_since(since),
            bytes_per_sec_avg: if elapsed > 0.0 {
                total as f64 / elapsed
            } else {
                0.0
            },
            bytes_per_sec_recent: recent,
        }
    }
}
