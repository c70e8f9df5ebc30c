//! Coalescing PTY resizes: every resize makes an agent's TUI repaint in full, so a pane's PTY is
//! resized only once its size has stayed the same for a short debounce.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Rows and columns, clamped to at least 2×2 like the emulator.
pub(crate) type Cells = (u16, u16);

#[derive(Debug)]
pub(crate) struct ResizeCoalescer {
    debounce: Duration,
    applied: HashMap<i64, Cells>,
    pending: HashMap<i64, (Cells, Instant)>,
}

impl ResizeCoalescer {
    pub(crate) fn new(debounce: Duration) -> Self {
        ResizeCoalescer {
            debounce,
            applied: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    /// Records the size a pane currently has (e.g. the PTY's size when first seen).
    pub(crate) fn note_applied(&mut self, key: i64, size: Cells) {
        self.applied.entry(key).or_insert(clamp(size));
    }

    /// The size the pane should have now.
    pub(crate) fn want(&mut self, key: i64, size: Cells, now: Instant) {
        let size = clamp(size);
        match self.pending.get(&key) {
            Some((p, _)) if *p == size => {}
            _ if self.applied.get(&key) == Some(&size) => {
                self.pending.remove(&key);
            }
            _ => {
                self.pending.insert(key, (size, now));
            }
        }
    }

    /// Resizes whose size has been stable for the debounce; they count as applied.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<(i64, Cells)> {
        let ready: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, (_, since))| now.saturating_duration_since(*since) >= self.debounce)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::new();
        for k in ready {
            if let Some((size, _)) = self.pending.remove(&k) {
                self.applied.insert(k, size);
                out.push((k, size));
            }
        }
        out.sort_unstable();
        out
    }

    /// When the next pending resize becomes due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.pending.values().map(|(_, t)| *t + self.debounce).min()
    }

    /// Forgets panes that no longer exist.
    pub(crate) fn retain(&mut self, keep: impl Fn(i64) -> bool) {
        self.applied.retain(|k, _| keep(*k));
        self.pending.retain(|k, _| keep(*k));
    }
}

fn clamp((rows, cols): Cells) -> Cells {
    (rows.max(2), cols.max(2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_of_sizes_becomes_one_resize() {
        let t0 = Instant::now();
        let d = Duration::from_millis(50);
        let mut c = ResizeCoalescer::new(d);
        c.note_applied(1, (40, 160));
        for (i, cols) in [100u16, 90, 80, 70].iter().enumerate() {
            c.want(1, (20, *cols), t0 + Duration::from_millis(i as u64 * 10));
            assert!(c.due(t0 + Duration::from_millis(i as u64 * 10)).is_empty());
        }
        assert_eq!(c.next_due(), Some(t0 + Duration::from_millis(30) + d));
        assert_eq!(c.due(t0 + Duration::from_millis(200)), vec![(1, (20, 70))]);
        assert!(c.due(t0 + Duration::from_secs(1)).is_empty());
        c.want(1, (20, 70), t0 + Duration::from_secs(2));
        assert_eq!(c.next_due(), None, "unchanged size is not resized again");
    }

    #[test]
    fn sizes_are_clamped_and_unchanged_sizes_ignored() {
        let t0 = Instant::now();
        let mut c = ResizeCoalescer::new(Duration::ZERO);
        c.note_applied(7, (2, 2));
        c.want(7, (0, 1), t0);
        assert!(c.due(t0).is_empty());
        c.want(7, (1, 30), t0);
        assert_eq!(c.due(t0), vec![(7, (2, 30))]);
        c.retain(|_| false);
        assert_eq!(c.next_due(), None);
    }
}
