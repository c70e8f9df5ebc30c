//! How the engine tells running attempts to stop, and how attempts report spend while running.

use crate::domain::Usd;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use tokio::sync::watch;

/// How hard the engine wants an attempt to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopLevel {
    /// Keep going.
    Run,
    /// Claim nothing more; running attempts go on to their natural end (their own timeouts
    /// still apply): the console's "finish, then quit" and "finish in the background".
    Drain,
    /// Finish up within the grace period, then stop (first Ctrl-C / SIGTERM).
    Graceful,
    /// Kill the agent's process group now (second Ctrl-C, budget exhausted, run timeout,
    /// lease lost).
    Now,
}

/// Why an attempt is being stopped, so its task is settled with the right reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Shutdown,
    BudgetExhausted,
    RunTimeout,
    LeaseLost,
    OperatorKill,
    /// The task's own `budget_usd` is spent.
    TaskBudget,
    /// The queue has not answered for longer than the engine waits.
    StoreOutage,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Shutdown => "shutdown",
            StopReason::BudgetExhausted => "budget_exhausted",
            StopReason::RunTimeout => "run_timeout",
            StopReason::LeaseLost => "lease_lost",
            StopReason::OperatorKill => "operator_kill",
            StopReason::TaskBudget => "task_budget_exceeded",
            StopReason::StoreOutage => "store_outage",
        }
    }
}

/// Handed to an attempt: a stop signal to watch, and a meter for spend while it runs.
#[derive(Clone)]
pub struct AttemptControl {
    stop: watch::Receiver<(StopLevel, Option<StopReason>)>,
    /// Spend reported so far by this attempt (micro-dollars), read by the budget guard.
    spent: Arc<AtomicI64>,
}

/// The engine's end of an [`AttemptControl`].
pub struct AttemptHandle {
    stop: watch::Sender<(StopLevel, Option<StopReason>)>,
    spent: Arc<AtomicI64>,
}

pub fn attempt_control() -> (AttemptHandle, AttemptControl) {
    let (tx, rx) = watch::channel((StopLevel::Run, None));
    let spent = Arc::new(AtomicI64::new(0));
    (
        AttemptHandle {
            stop: tx,
            spent: spent.clone(),
        },
        AttemptControl { stop: rx, spent },
    )
}

impl AttemptHandle {
    /// Raises the stop level (never lowers it).
    pub fn stop(&self, level: StopLevel, reason: StopReason) {
        self.stop.send_if_modified(|cur| {
            if level > cur.0 {
                *cur = (level, Some(reason));
                true
            } else {
                false
            }
        });
    }

    pub fn level(&self) -> StopLevel {
        self.stop.borrow().0
    }

    pub fn spent(&self) -> Usd {
        Usd(self.spent.load(Ordering::Relaxed))
    }
}

impl AttemptControl {
    pub fn level(&self) -> StopLevel {
        self.stop.borrow().0
    }

    pub fn reason(&self) -> Option<StopReason> {
        self.stop.borrow().1
    }

    /// Resolves when the stop level reaches at least `level`.
    pub async fn reached(&mut self, level: StopLevel) -> StopReason {
        loop {
            {
                let cur = *self.stop.borrow_and_update();
                if cur.0 >= level {
                    return cur.1.unwrap_or(StopReason::Shutdown);
                }
            }
            if self.stop.changed().await.is_err() {
                // The engine is gone: nobody will settle this attempt, so stop at once.
                return StopReason::Shutdown;
            }
        }
    }

    /// Records spend known while the attempt runs (the budget guard reads it).
    pub fn set_spent(&self, total: Usd) {
        self.spent.store(total.0, Ordering::Relaxed);
    }

    pub fn spent(&self) -> Usd {
        Usd(self.spent.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stop_levels_only_rise_and_wake_waiters() {
        let (h, mut c) = attempt_control();
        let waiter = tokio::spawn(async move { c.reached(StopLevel::Now).await });
        h.stop(StopLevel::Graceful, StopReason::Shutdown);
        assert_eq!(h.level(), StopLevel::Graceful);
        h.stop(StopLevel::Now, StopReason::BudgetExhausted);
        h.stop(StopLevel::Graceful, StopReason::Shutdown);
        assert_eq!(h.level(), StopLevel::Now);
        assert_eq!(waiter.await.unwrap(), StopReason::BudgetExhausted);
    }
}
