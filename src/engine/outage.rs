//! Riding out a store that does not answer: connection loss, a server restart,
//! `pg_terminate_backend`, a full connection pool, SQLite busy.
//!
//! The engine keeps its agents running through such faults; it only needs to know when to try
//! the store again (backoff with jitter) and when to give up (the outage has lasted longer than
//! the configured limit). [`Outage`] is that bookkeeping, with no IO but the log.

use crate::store::{StoreError, StoreInfo};
use std::time::{Duration, Instant};

/// The first retry waits this long; each further failure doubles it up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// How long the store may keep failing before the engine gives up, by default.
pub(crate) const DEFAULT_OUTAGE_LIMIT: Duration = Duration::from_secs(300);

#[derive(Debug)]
pub(crate) struct Outage {
    limit: Duration,
    backend: &'static str,
    location: String,
    since: Option<Instant>,
    /// When the store last answered: an outage is dated from here, not from the first failed
    /// call's end (a call can hang for the pool's acquire timeout before it fails).
    last_ok: Instant,
    failures: u32,
    last: String,
    next_try: Instant,
}

impl Outage {
    pub(crate) fn new(limit: Duration, info: &StoreInfo) -> Outage {
        Outage {
            limit,
            backend: info.backend,
            location: info.location.clone(),
            since: None,
            last_ok: Instant::now(),
            failures: 0,
            last: String::new(),
            next_try: Instant::now(),
        }
    }

    /// The store answered.
    pub(crate) fn ok(&mut self) {
        self.last_ok = Instant::now();
        if let Some(since) = self.since.take() {
            tracing::warn!(
                backend = self.backend,
                location = %self.location,
                "the queue answers again after {:.1} s ({} failed calls)",
                since.elapsed().as_secs_f64(),
                self.failures
            );
        }
        self.failures = 0;
    }

    /// Takes a store error from `what`. A transient one is logged and absorbed (`Ok`: try again
    /// after [`Outage::next_try`]; [`Outage::exceeded`] tells when to stop trying); any other
    /// error is an answer and comes back as `Err`.
    pub(crate) fn absorb(&mut self, what: &str, e: StoreError) -> Result<(), StoreError> {
        if !e.is_transient() {
            return Err(e);
        }
        let now = Instant::now();
        self.since.get_or_insert(self.last_ok);
        self.failures = self.failures.saturating_add(1);
        self.last = e.to_string();
        tracing::warn!(
            backend = self.backend,
            location = %self.location,
            failures = self.failures,
            "{what}: the queue did not answer: {e}"
        );
        self.next_try = now + backoff(self.failures, rand::random::<f64>());
        Ok(())
    }

    /// True while the last failure's backoff runs: store calls that can wait should.
    pub(crate) fn waiting(&self) -> bool {
        self.since.is_some() && Instant::now() < self.next_try
    }

    pub(crate) fn in_outage(&self) -> bool {
        self.since.is_some()
    }

    /// When the store may be tried again (now when it answers).
    pub(crate) fn next_try(&self) -> Instant {
        self.next_try
    }

    /// True once the outage has lasted longer than the limit.
    pub(crate) fn exceeded(&self) -> bool {
        self.since.is_some_and(|s| s.elapsed() >= self.limit)
    }

    /// The error that ends the engine.
    pub(crate) fn gave_up(&self) -> StoreError {
        StoreError::Outage {
            backend: self.backend,
            location: self.location.clone(),
            waited_secs: self.since.map(|s| s.elapsed().as_secs()).unwrap_or(0),
            last: self.last.clone(),
        }
    }
}

/// Tries `f` up to `tries` times while it fails with a transient store error, waiting the
/// backoff in between (about 3 s for 6 tries): for the calls in the middle of an attempt, where
/// one dropped connection must not cost the attempt its work.
pub(crate) async fn retry_transient<T, F, Fut>(tries: u32, mut f: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut n = 0;
    loop {
        match f().await {
            Err(e) if e.is_transient() && n + 1 < tries => {
                n += 1;
                tracing::warn!("the queue did not answer (try {n} of {tries}): {e}");
                tokio::time::sleep(backoff(n + 2, rand::random::<f64>())).await;
            }
            other => return other,
        }
    }
}

/// Exponential backoff with jitter: `jitter` in [0, 1) spreads the wait over [½, 1] of the
/// step so that workers cut off together do not come back together.
pub(crate) fn backoff(failures: u32, jitter: f64) -> Duration {
    let step = FIRST_BACKOFF
        .saturating_mul(1u32 << failures.saturating_sub(1).min(10))
        .min(MAX_BACKOFF);
    step.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn info() -> StoreInfo {
        StoreInfo {
            backend: "postgres",
            location: "127.0.0.1/db".into(),
            applied_migrations: vec![],
            pending_migrations: vec![],
        }
    }

    fn transient() -> StoreError {
        StoreError::Db(sqlx::Error::PoolTimedOut)
    }

    #[test]
    fn backoff_grows_to_its_cap_and_jitter_stays_within_half() {
        assert_eq!(backoff(1, 1.0), Duration::from_millis(100));
        assert_eq!(backoff(2, 1.0), Duration::from_millis(200));
        assert_eq!(backoff(3, 0.0), Duration::from_millis(200));
        assert_eq!(backoff(30, 1.0), MAX_BACKOFF);
        assert_eq!(backoff(30, 0.0), MAX_BACKOFF / 2);
    }

    #[test]
    fn transient_errors_are_absorbed_until_the_limit() {
        let mut o = Outage::new(Duration::from_millis(50), &info());
        assert!(o.absorb("claim", transient()).is_ok());
        assert!(o.in_outage() && o.waiting() && !o.exceeded());
        std::thread::sleep(Duration::from_millis(60));
        assert!(o.absorb("claim", transient()).is_ok());
        assert!(o.exceeded());
        let e = o.gave_up();
        assert!(matches!(e, StoreError::Outage { .. }), "{e}");
        assert!(e.to_string().contains("127.0.0.1/db"), "{e}");
        o.ok();
        assert!(!o.in_outage() && !o.waiting() && !o.exceeded());
    }

    #[test]
    fn answers_are_not_absorbed() {
        let mut o = Outage::new(Duration::from_secs(60), &info());
        let e = o
            .absorb("claim", StoreError::Invalid("bad".into()))
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)));
        assert!(!o.in_outage());
    }
}
