//! What the reaper does with a leased task whose lease expired or whose deadline passed: one
//! rule for both stores. Pure.
//!
//! A deadline that passed is the task's own doing (it ran too long): that attempt counts. A
//! lease that expired is not: its worker died, froze or lost the database, and the agent may
//! never have failed. Such a loss gives the attempt back, and has a limit of its own, higher than
//! the task's attempts, so that a task that kills every worker it runs on still ends.

use super::{Action, Status};

/// Why the reaper took the task back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    DeadlinePassed,
    LeaseExpired,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReapDecision {
    pub to: Status,
    pub action: Action,
    pub why: Why,
    /// The attempt counted at claim is given back (the loss was not the task's).
    pub refund_attempt: bool,
}

/// How many lost leases a task may have before it fails: three times its attempts.
pub(crate) fn lost_lease_limit(max_attempts: i64) -> i64 {
    max_attempts.max(1).saturating_mul(3)
}

/// Whether a spawn the system refused for lack of resources ends the task: such refusals do
/// not count as attempts, and have the lost-lease limit of their own. `refused_before`: the
/// task's earlier refusals.
pub(crate) fn resource_refusal_ends(refused_before: i64, max_attempts: i64) -> bool {
    refused_before + 1 >= lost_lease_limit(max_attempts)
}

/// `attempts`: counted so far, the reaped one included; `leases_lost_before`: the task's
/// earlier `task.lease_expired`.
pub(crate) fn reap_decision(
    past_deadline: bool,
    attempts: i64,
    max_attempts: i64,
    leases_lost_before: i64,
) -> ReapDecision {
    let (why, refund, ends) = if past_deadline {
        (Why::DeadlinePassed, false, attempts >= max_attempts)
    } else {
        let lost = leases_lost_before + 1;
        (
            Why::LeaseExpired,
            true,
            lost >= lost_lease_limit(max_attempts),
        )
    };
    let (to, action) = if ends {
        (Status::Failed, Action::Fail)
    } else {
        (Status::Pending, Action::Release)
    };
    ReapDecision {
        to,
        action,
        why,
        refund_attempt: refund,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_spawns_have_a_limit_above_the_attempts() {
        assert!(!resource_refusal_ends(0, 3));
        assert!(!resource_refusal_ends(7, 3));
        assert!(
            resource_refusal_ends(8, 3),
            "the ninth refusal of a 3-attempt task ends it"
        );
    }

    #[test]
    fn a_lost_lease_gives_the_attempt_back_until_its_own_limit() {
        // The last attempt's worker died: the task is not FAILED, and the attempt is returned.
        let d = reap_decision(false, 3, 3, 0);
        assert_eq!(
            (d.to, d.why, d.refund_attempt),
            (Status::Pending, Why::LeaseExpired, true)
        );
        // Losses have their own, higher limit: a task that kills every worker still ends.
        assert_eq!(reap_decision(false, 1, 3, 7).to, Status::Pending);
        let d = reap_decision(false, 1, 3, 8);
        assert_eq!((d.to, d.action), (Status::Failed, Action::Fail));
        assert_eq!(reap_decision(false, 1, 1, 2).to, Status::Failed);
    }

    #[test]
    fn a_passed_deadline_counts_against_the_task() {
        let d = reap_decision(true, 1, 3, 0);
        assert_eq!(
            (d.to, d.why, d.refund_attempt),
            (Status::Pending, Why::DeadlinePassed, false)
        );
        assert_eq!(reap_decision(true, 3, 3, 0).to, Status::Failed);
        assert_eq!(reap_decision(true, 5, 3, 0).to, Status::Failed);
    }
}
