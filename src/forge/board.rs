//! Which board column a task belongs in, from its state alone: pure, so the mapping is tested
//! directly and `board status`, `board sync` and the engine's sync agree on it.

use crate::config::ProjectColumns;
use crate::domain::Status;
use crate::forge::github::PrState;

/// What decides a task's column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CardFacts<'a> {
    pub status: Status,
    pub reason: Option<&'a str>,
    /// The plan is paused.
    pub paused: bool,
    /// Its pull request, if it has one.
    pub pull: Option<PrState>,
}

/// The column for a task: PENDING → todo, CLAIMED / IN_PROGRESS → in progress, DONE with an
/// open PR → in review, DONE merged (or landed without a PR) → done, FAILED → failed, SKIPPED
/// by the gate or the guards → refused, paused or BLOCKED → on hold, HUMAN_LOOP → human loop.
pub(crate) fn column_for<'c>(f: &CardFacts<'_>, c: &'c ProjectColumns) -> &'c str {
    if f.paused && !f.status.is_terminal() {
        return &c.on_hold;
    }
    match f.status {
        Status::Pending => &c.todo,
        Status::Claimed | Status::InProgress => &c.in_progress,
        Status::Blocked => &c.on_hold,
        Status::HumanLoop => &c.human_loop,
        Status::Failed => &c.failed,
        Status::Done => match f.pull {
            Some(PrState::Draft | PrState::Open) => &c.in_review,
            // Closed without a merge: someone decided against it; a human looks.
            Some(PrState::Closed) => &c.human_loop,
            Some(PrState::Merged) | None => &c.done,
        },
        // Closed upstream: the issue is done with, whoever closed it.
        Status::Skipped if f.reason == Some(crate::forge::intake::CLOSED_UPSTREAM) => &c.done,
        Status::Skipped => &c.refused,
    }
}

/// Every column the mapping may use, once each, in the board's natural order.
pub(crate) fn columns_used(c: &ProjectColumns) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in [
        &c.todo,
        &c.in_progress,
        &c.in_review,
        &c.done,
        &c.failed,
        &c.refused,
        &c.on_hold,
        &c.human_loop,
    ] {
        if !out.iter().any(|o| o.eq_ignore_ascii_case(name)) {
            out.push(name.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(status: Status, reason: Option<&str>, paused: bool, pull: Option<PrState>) -> String {
        column_for(
            &CardFacts {
                status,
                reason,
                paused,
                pull,
            },
            &ProjectColumns::default(),
        )
        .to_string()
    }

    #[test]
    fn each_state_has_its_column() {
        assert_eq!(col(Status::Pending, None, false, None), "Todo");
        assert_eq!(col(Status::Claimed, None, false, None), "In Progress");
        assert_eq!(col(Status::InProgress, None, false, None), "In Progress");
        assert_eq!(
            col(Status::Done, None, false, Some(PrState::Draft)),
            "In Review"
        );
        assert_eq!(
            col(Status::Done, None, false, Some(PrState::Open)),
            "In Review"
        );
        assert_eq!(
            col(Status::Done, None, false, Some(PrState::Merged)),
            "Done"
        );
        assert_eq!(col(Status::Done, None, false, None), "Done");
        assert_eq!(col(Status::Failed, None, false, None), "Failed");
        assert_eq!(
            col(Status::Skipped, Some("decision_gate_failed"), false, None),
            "Refused"
        );
        assert_eq!(
            col(Status::Skipped, Some("closed_upstream"), false, None),
            "Done"
        );
        assert_eq!(col(Status::Pending, None, true, None), "On Hold");
        assert_eq!(col(Status::Done, None, true, Some(PrState::Merged)), "Done");
        assert_eq!(col(Status::HumanLoop, None, false, None), "Human Loop");
        assert_eq!(col(Status::Blocked, None, false, None), "On Hold");
    }

    #[test]
    fn columns_are_listed_once() {
        let c = ProjectColumns {
            on_hold: "todo".into(),
            ..ProjectColumns::default()
        };
        let used = columns_used(&c);
        assert_eq!(used.len(), 7);
        assert_eq!(used[0], "Todo");
    }
}
