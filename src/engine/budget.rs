//! The budget guard's decisions: pure functions over the plan's numbers.

use crate::domain::Usd;

/// Where a plan's spend stands against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetState {
    /// No limit, or under 80 %.
    Ok,
    /// At or above 80 % of the limit: warn once.
    Warning,
    /// At or above the limit: stop claiming, stop running agents, exit 2.
    Exhausted,
}

/// `spent` against `limit`; the warning threshold is 80 %.
pub(crate) fn budget_state(limit: Option<Usd>, spent: Usd) -> BudgetState {
    match limit {
        None => BudgetState::Ok,
        Some(limit) if spent >= limit => BudgetState::Exhausted,
        Some(limit) if spent.0.saturating_mul(5) >= limit.0.saturating_mul(4) => {
            BudgetState::Warning
        }
        Some(_) => BudgetState::Ok,
    }
}

/// Whether one running attempt has gone over its own task budget.
pub(crate) fn task_over_budget(task_limit: Option<Usd>, spent_so_far: Usd) -> bool {
    matches!(task_limit, Some(limit) if spent_so_far >= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        let l = Some(Usd::from_f64(10.0));
        assert_eq!(budget_state(None, Usd::from_f64(1e6)), BudgetState::Ok);
        assert_eq!(budget_state(l, Usd::from_f64(7.99)), BudgetState::Ok);
        assert_eq!(budget_state(l, Usd::from_f64(8.0)), BudgetState::Warning);
        assert_eq!(budget_state(l, Usd::from_f64(10.0)), BudgetState::Exhausted);
        assert_eq!(
            budget_state(Some(Usd::ZERO), Usd::ZERO),
            BudgetState::Exhausted
        );
        assert!(task_over_budget(Some(Usd(5)), Usd(5)));
        assert!(!task_over_budget(None, Usd(5)));
    }
}
