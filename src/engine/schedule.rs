//! The worker loop's decisions, without IO: what the operator's stop requests, the run's clock
//! and a store outage do to the run, when the reaper, the heartbeats and the claims are due,
//! whether a slot may be filled now, what to do once nothing runs, and when to wake. The loop
//! (`worker.rs`) tells it what happened and carries out what it answers; every exit of a run is
//! decided here and tested directly (see the tests below).

use super::control::{StopLevel, StopReason};
use super::outcome::RunEnd;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The loop's settings the decisions depend on.
#[derive(Debug, Clone)]
pub(super) struct Timing {
    /// Attempts at once (0 for an observer).
    pub slots: usize,
    pub heartbeat: Duration,
    pub reaper_interval: Duration,
    /// Workers silent this long are marked offline (zero: never).
    pub offline_after: Duration,
    /// How often between two claims when nothing wakes the loop.
    pub safety_poll: Duration,
    pub poll: Duration,
    pub grace: Duration,
    pub run_deadline: Option<Instant>,
    /// A console's engine: it serves its plan until stopped and reports when idle.
    pub serving: bool,
    /// Ends once its work is done (a run, `worker --until-idle`).
    pub exit_when_idle: bool,
    pub observer: bool,
}

/// How often a serving engine sums up its idle plan at most (the summary reads the plan's
/// tasks and events, so it is done again only once something may have changed).
pub(super) const IDLE_REPORT_EVERY: Duration = Duration::from_secs(2);

/// What the loop sees of its attempts and its store at a moment.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct View {
    pub running: usize,
    pub unsettled: usize,
    /// The store failed lately and the next try is not due yet.
    pub outage_waiting: bool,
    /// The store is failing (waiting or not).
    pub in_outage: bool,
    /// It has failed for longer than the run waits.
    pub outage_exceeded: bool,
    pub outage_next_try: Option<Instant>,
    /// Someone listens to a serving engine's idle reports (the console is in front).
    pub watched: bool,
}

impl View {
    fn busy(&self) -> usize {
        self.running + self.unsettled
    }

    fn idle(&self) -> bool {
        self.running == 0 && self.unsettled == 0
    }
}

/// What the loop does at the start of a turn, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Command {
    /// Stop every running attempt.
    StopAll(StopLevel, StopReason),
    /// The store's outage lasted too long: the run gives up once its agents stopped.
    GiveUp,
    /// Return expired leases (then say [`Scheduler::reaped`]).
    Reap,
    /// Extend every running attempt's lease.
    Heartbeat,
    /// Write running spend and check the budgets.
    WatchBudget,
    /// Write the outcomes of ended attempts (then say [`Scheduler::settled`]).
    Settle,
}

/// What to do when no attempt runs and no outcome waits to be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Idle {
    /// The run is over.
    Exit,
    /// Ask the store whether the work is done ([`Scheduler::finished`] takes the answer).
    CheckFinished,
    /// A serving engine: sum up the idle plan for the console.
    Report,
    /// Nothing now.
    Wait,
    /// Attempts run or outcomes wait: a serving engine's last report no longer holds.
    Busy,
}

/// When the loop wakes next, and whether it may meanwhile wait for the store's news of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Wake {
    pub at: Instant,
    /// A slot is free and no claim is due: wait for work too.
    pub for_work: Option<Instant>,
}

#[derive(Debug)]
pub(super) struct Scheduler {
    t: Timing,
    end: Option<RunEnd>,
    stop_claiming: bool,
    fatal: bool,
    graceful_since: Option<Instant>,
    next_heartbeat: Instant,
    next_reap: Instant,
    next_offline_check: Instant,
    next_safety_claim: Instant,
    /// When the next rate-limit pause ends: the claim is tried again then.
    pause_wake: Option<Instant>,
    last_report: Option<Instant>,
    /// A claim is tried only when work may have come (a wakeup, a slot freed, a backoff
    /// over, the reaper returned tasks) or the safety poll is due: an idle engine costs the
    /// database nothing between those.
    claim_due: bool,
    /// Something changed that an idle check or report should look at.
    news: bool,
    idle_check: bool,
    /// Tasks sent back for a retry, not to be claimed again before then (by task pk).
    not_before: HashMap<i64, Instant>,
}

impl Scheduler {
    pub(super) fn new(t: Timing, now: Instant) -> Scheduler {
        Scheduler {
            next_heartbeat: now + t.heartbeat,
            next_reap: now,
            next_offline_check: now,
            next_safety_claim: now + t.safety_poll,
            t,
            end: None,
            stop_claiming: false,
            fatal: false,
            graceful_since: None,
            pause_wake: None,
            last_report: None,
            claim_due: true,
            news: true,
            idle_check: true,
            not_before: HashMap::new(),
        }
    }

    /// How the run ends, once decided.
    #[cfg(test)]
    pub(crate) fn end(&self) -> Option<RunEnd> {
        self.end
    }

    #[cfg(test)]
    pub(crate) fn gave_up(&self) -> bool {
        self.fatal
    }

    /// The start of a turn: the operator's stop requests (`level`), the run's clock, the
    /// store's outage, and what is due.
    pub(super) fn tick(&mut self, now: Instant, level: StopLevel, v: &View) -> Vec<Command> {
        let mut out = Vec::new();
        if level >= StopLevel::Drain && !self.stop_claiming {
            self.stop_claiming = true;
            // A serving engine stopped while idle did not interrupt anything: its end is what
            // the plan's state says.
            if !(self.t.serving && v.running == 0) {
                self.end.get_or_insert(RunEnd::Interrupted);
            }
        }
        // Graceful implies Drain, handled just above.
        if level >= StopLevel::Graceful && self.graceful_since.is_none() {
            self.graceful_since = Some(now);
            out.push(Command::StopAll(StopLevel::Graceful, StopReason::Shutdown));
        }
        if level >= StopLevel::Now
            || self
                .graceful_since
                .is_some_and(|g| now.duration_since(g) >= self.t.grace)
        {
            out.push(Command::StopAll(StopLevel::Now, StopReason::Shutdown));
        }
        if let Some(deadline) = self.t.run_deadline
            && now >= deadline
            && !matches!(
                self.end,
                Some(RunEnd::TimedOut | RunEnd::Interrupted | RunEnd::BudgetExhausted)
            )
        {
            self.end = Some(RunEnd::TimedOut);
            self.stop_claiming = true;
            out.push(Command::StopAll(StopLevel::Now, StopReason::RunTimeout));
        }
        if !self.fatal && v.outage_exceeded {
            self.fatal = true;
            self.stop_claiming = true;
            out.push(Command::GiveUp);
            out.push(Command::StopAll(StopLevel::Now, StopReason::StoreOutage));
        }
        if now >= self.next_reap && !v.outage_waiting {
            self.next_reap = now + self.t.reaper_interval;
            out.push(Command::Reap);
        }
        if now >= self.next_heartbeat {
            self.next_heartbeat = now + self.t.heartbeat;
            out.push(Command::Heartbeat);
        }
        if !v.outage_waiting {
            out.push(Command::WatchBudget);
        }
        if v.unsettled > 0 && !v.outage_waiting {
            out.push(Command::Settle);
        }
        out
    }

    /// The reaper ran; `returned`: it gave tasks back to the queue. Answers whether marking
    /// silent workers offline is due now.
    pub(super) fn reaped(&mut self, now: Instant, returned: bool, outage_waiting: bool) -> bool {
        if returned {
            self.work_changed();
        }
        if self.t.offline_after > Duration::ZERO
            && now >= self.next_offline_check
            && !outage_waiting
        {
            // Workers are marked offline after minutes: a few looks per threshold are enough.
            let every = self.t.reaper_interval.max(self.t.offline_after / 4);
            self.next_offline_check = now + every;
            return true;
        }
        false
    }

    /// Outcomes were written: slots are free, the plan changed.
    pub(super) fn settled(&mut self) {
        self.claim_due = true;
        self.news = true;
    }

    /// A run of one plan whose budget is spent: it ends; answers whether its attempts must be
    /// stopped now (the first time).
    pub(super) fn budget_spent(&mut self) -> bool {
        if self.end == Some(RunEnd::BudgetExhausted) {
            return false;
        }
        self.end = Some(RunEnd::BudgetExhausted);
        self.stop_claiming = true;
        true
    }

    /// A task sent back for a retry may not be claimed again before `until`.
    pub(super) fn back_off(&mut self, task_pk: i64, until: Instant) {
        self.not_before.insert(task_pk, until);
    }

    /// Before the claims of a turn: backoffs that ended, a pause that ended, or the safety
    /// poll make a claim due.
    pub(super) fn before_claims(&mut self, now: Instant) {
        let backoffs = self.not_before.len();
        self.not_before.retain(|_, nb| *nb > now);
        let pause_over = self.pause_wake.is_some_and(|at| now >= at);
        if pause_over {
            self.pause_wake = None;
        }
        if self.not_before.len() < backoffs || now >= self.next_safety_claim || pause_over {
            self.claim_due = true;
            self.news = true;
        }
        // An observer never claims, so no fruitless claim ever quiets the store's wakeups: it
        // looks at the plan every poll instead (one count query), to see the others finish it.
        if self.t.observer {
            self.news = true;
        }
    }

    /// Whether to claim a task now.
    pub(super) fn may_claim(&self, v: &View) -> bool {
        self.claim_due && !self.stop_claiming && v.busy() < self.t.slots && !v.outage_waiting
    }

    /// The tasks a claim must pass over now: those backing off.
    pub(super) fn backing_off(&mut self, now: Instant) -> Vec<i64> {
        self.not_before.retain(|_, nb| *nb > now);
        self.not_before.keys().copied().collect()
    }

    /// Whether a task sent back for a retry waits for its backoff (the work is not done).
    pub(super) fn backs_off_any(&self) -> bool {
        !self.not_before.is_empty()
    }

    /// When the earliest rate-limit pause ends (the claim is tried again then).
    pub(super) fn pause_ends(&mut self, at: Option<Instant>) {
        self.pause_wake = at;
    }

    /// The queue had nothing to claim: no claim until work may have come.
    pub(super) fn nothing_to_claim(&mut self, now: Instant) {
        self.claim_due = false;
        self.next_safety_claim = now + self.t.safety_poll;
    }

    /// What to do once the claims of the turn are made. `claimed`: this turn claimed a task.
    pub(super) fn idle(&mut self, now: Instant, v: &View, claimed: bool) -> Idle {
        if self.fatal && v.running == 0 {
            return Idle::Exit;
        }
        if !v.idle() {
            self.last_report = None;
            return Idle::Busy;
        }
        if self.stop_claiming {
            return Idle::Exit;
        }
        // A serving engine nobody watches any more (the console went to the background) ends
        // when idle like a run.
        let exit_when_idle = self.t.exit_when_idle || (self.t.serving && !v.watched);
        if exit_when_idle && (self.idle_check || (!claimed && self.news)) && !v.outage_waiting {
            self.idle_check = false;
            self.news = false;
            return Idle::CheckFinished;
        }
        if self.t.serving
            && v.watched
            && !v.outage_waiting
            && self.news
            && self
                .last_report
                .is_none_or(|at| now.duration_since(at) >= IDLE_REPORT_EVERY)
        {
            self.news = false;
            return Idle::Report;
        }
        Idle::Wait
    }

    /// The store's answer to [`Idle::CheckFinished`]: `Ok(Some(end))` ends the run.
    pub(super) fn finished(&mut self, answer: Result<Option<RunEnd>, ()>) -> Idle {
        match answer {
            Ok(Some(end)) => {
                self.end = Some(end);
                Idle::Exit
            }
            Ok(None) => Idle::Wait,
            Err(()) => {
                self.idle_check = true;
                Idle::Wait
            }
        }
    }

    /// A report was made at `now` (or, `None`, could not be: try again).
    pub(super) fn reported(&mut self, now: Option<Instant>) {
        match now {
            Some(at) => self.last_report = Some(at),
            None => self.news = true,
        }
    }

    /// An attempt ended: its slot is free and the plan changed.
    pub(super) fn attempt_ended(&mut self) {
        self.idle_check = true;
        self.work_changed();
    }

    /// The store says work may have come.
    pub(super) fn work_changed(&mut self) {
        self.claim_due = true;
        self.news = true;
    }

    /// When to wake next.
    pub(super) fn wake(&self, now: Instant, v: &View) -> Wake {
        let mut at = self.next_heartbeat.min(self.next_reap);
        let fill = self.claim_due && !self.stop_claiming && v.busy() < self.t.slots;
        let idle_checks = self.t.exit_when_idle || self.t.serving;
        if fill || (self.news && idle_checks && v.idle()) || self.t.observer {
            // Something is left to do that a busy store or the report interval put off:
            // look again soon.
            at = at.min(now + self.t.poll);
        }
        for t in [
            self.not_before.values().min().copied(),
            self.pause_wake,
            self.t.run_deadline,
            self.graceful_since.map(|g| g + self.t.grace),
            v.outage_next_try.filter(|_| v.in_outage),
        ]
        .into_iter()
        .flatten()
        {
            at = at.min(t);
        }
        if v.running > 0 {
            // Spend is checked at least every second while agents run.
            at = at.min(now + Duration::from_secs(1));
        }
        let for_work =
            (!self.stop_claiming && !self.claim_due && v.busy() < self.t.slots && !v.in_outage)
                .then_some(self.next_safety_claim);
        Wake { at, for_work }
    }

    /// Whether the run's end is for the plan's state to say (a serving engine stopped while
    /// idle): the loop asks the store, and hands the answer to [`Scheduler::outcome`].
    pub(super) fn ends_as_the_plan_stands(&self) -> bool {
        self.end.is_none() && self.t.serving
    }

    /// How the run ended, once its loop is over (`plan_state`: see above).
    pub(super) fn outcome(&self, plan_state: Option<RunEnd>) -> RunEnd {
        match self.end {
            Some(end) => end,
            None if self.t.serving => plan_state.unwrap_or(RunEnd::Interrupted),
            None => RunEnd::AllDone,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timing() -> Timing {
        Timing {
            slots: 2,
            heartbeat: Duration::from_secs(10),
            reaper_interval: Duration::from_secs(5),
            offline_after: Duration::from_secs(120),
            safety_poll: Duration::from_secs(30),
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            run_deadline: None,
            serving: false,
            exit_when_idle: true,
            observer: false,
        }
    }

    fn idle_view() -> View {
        View::default()
    }

    fn running(n: usize) -> View {
        View {
            running: n,
            ..View::default()
        }
    }

    #[test]
    fn a_first_turn_reaps_watches_and_claims() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        let cmds = s.tick(now, StopLevel::Run, &idle_view());
        assert_eq!(cmds, vec![Command::Reap, Command::WatchBudget]);
        assert!(s.may_claim(&idle_view()));
        assert!(!s.may_claim(&running(2)), "every slot busy");
    }

    #[test]
    fn nothing_left_ends_the_run_after_the_store_says_so() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        s.tick(now, StopLevel::Run, &idle_view());
        s.nothing_to_claim(now);
        assert_eq!(s.idle(now, &idle_view(), false), Idle::CheckFinished);
        assert_eq!(s.finished(Ok(Some(RunEnd::AllDone))), Idle::Exit);
        assert_eq!(s.outcome(None), RunEnd::AllDone);
    }

    #[test]
    fn work_still_pending_waits_without_asking_again_until_news() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        s.nothing_to_claim(now);
        assert_eq!(s.idle(now, &idle_view(), false), Idle::CheckFinished);
        assert_eq!(s.finished(Ok(None)), Idle::Wait);
        assert_eq!(s.idle(now, &idle_view(), false), Idle::Wait, "no news");
        s.attempt_ended();
        assert_eq!(s.idle(now, &idle_view(), false), Idle::CheckFinished);
        assert_eq!(s.finished(Err(())), Idle::Wait);
        assert_eq!(
            s.idle(now, &idle_view(), true),
            Idle::CheckFinished,
            "a failed check is asked again"
        );
    }

    #[test]
    fn an_observer_looks_at_the_plan_every_poll_and_never_claims() {
        let now = Instant::now();
        let mut s = Scheduler::new(
            Timing {
                slots: 0,
                observer: true,
                ..timing()
            },
            now,
        );
        for turn in 0..3 {
            let at = now + Duration::from_secs(turn);
            s.tick(at, StopLevel::Run, &idle_view());
            s.before_claims(at);
            assert!(!s.may_claim(&idle_view()));
            assert_eq!(s.idle(at, &idle_view(), false), Idle::CheckFinished);
            assert_eq!(s.finished(Ok(None)), Idle::Wait, "others still work");
            assert_eq!(s.wake(at, &idle_view()).at, at + Duration::from_secs(1));
        }
    }

    #[test]
    fn a_spent_budget_ends_the_run_once_and_stops_claiming() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        assert!(s.budget_spent(), "the first time stops the attempts");
        assert!(!s.budget_spent());
        assert!(!s.may_claim(&idle_view()));
        assert_eq!(s.idle(now, &running(1), false), Idle::Busy);
        assert_eq!(s.idle(now, &idle_view(), false), Idle::Exit);
        assert_eq!(s.outcome(None), RunEnd::BudgetExhausted);
    }

    #[test]
    fn a_long_outage_gives_up_once_and_exits_when_the_agents_stopped() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        let failing = View {
            running: 1,
            in_outage: true,
            outage_waiting: true,
            outage_exceeded: true,
            outage_next_try: Some(now + Duration::from_secs(2)),
            ..View::default()
        };
        let cmds = s.tick(now, StopLevel::Run, &failing);
        assert_eq!(
            cmds,
            vec![
                Command::GiveUp,
                Command::StopAll(StopLevel::Now, StopReason::StoreOutage)
            ]
        );
        assert!(s.gave_up());
        assert!(
            !s.tick(now, StopLevel::Run, &failing)
                .contains(&Command::GiveUp),
            "once"
        );
        assert_eq!(s.idle(now, &failing, false), Idle::Busy);
        let stopped = View {
            running: 0,
            unsettled: 1,
            ..failing
        };
        assert_eq!(
            s.idle(now, &stopped, false),
            Idle::Exit,
            "outcomes unwritten"
        );
    }

    #[test]
    fn an_interrupt_drains_then_stops_gracefully_then_now() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        let cmds = s.tick(now, StopLevel::Drain, &running(1));
        assert!(cmds.iter().all(|c| !matches!(c, Command::StopAll(..))));
        assert!(!s.may_claim(&idle_view()), "draining claims nothing");
        let cmds = s.tick(now, StopLevel::Graceful, &running(1));
        assert!(cmds.contains(&Command::StopAll(StopLevel::Graceful, StopReason::Shutdown)));
        let later = now + Duration::from_secs(31);
        let cmds = s.tick(later, StopLevel::Graceful, &running(1));
        assert!(
            cmds.contains(&Command::StopAll(StopLevel::Now, StopReason::Shutdown)),
            "after the grace period"
        );
        assert_eq!(s.idle(later, &idle_view(), false), Idle::Exit);
        assert_eq!(s.outcome(None), RunEnd::Interrupted);
    }

    #[test]
    fn the_run_timeout_stops_everything_and_says_so() {
        let now = Instant::now();
        let mut t = timing();
        t.run_deadline = Some(now + Duration::from_secs(60));
        let mut s = Scheduler::new(t, now);
        let at = now + Duration::from_secs(60);
        assert!(s.wake(now, &running(1)).at <= now + Duration::from_secs(1));
        let cmds = s.tick(at, StopLevel::Run, &running(1));
        assert!(cmds.contains(&Command::StopAll(StopLevel::Now, StopReason::RunTimeout)));
        assert!(
            !s.tick(at, StopLevel::Run, &running(1))
                .contains(&Command::StopAll(StopLevel::Now, StopReason::RunTimeout)),
            "said once"
        );
        assert_eq!(s.idle(at, &idle_view(), false), Idle::Exit);
        assert_eq!(s.outcome(None), RunEnd::TimedOut);
    }

    #[test]
    fn a_serving_engine_reports_while_watched_and_ends_when_left_alone() {
        let now = Instant::now();
        let mut t = timing();
        t.serving = true;
        t.exit_when_idle = false;
        let mut s = Scheduler::new(t, now);
        let watched = View {
            watched: true,
            ..View::default()
        };
        s.nothing_to_claim(now);
        assert_eq!(s.idle(now, &watched, false), Idle::Report);
        s.reported(Some(now));
        assert_eq!(s.idle(now, &watched, false), Idle::Wait, "no news");
        s.attempt_ended();
        assert_eq!(
            s.idle(now, &watched, false),
            Idle::Wait,
            "not again within the report interval"
        );
        assert_eq!(
            s.idle(now + IDLE_REPORT_EVERY, &watched, false),
            Idle::Report
        );
        assert_eq!(
            s.idle(now, &View::default(), false),
            Idle::CheckFinished,
            "the console went away: it ends when idle"
        );
        // Stopped while idle: the plan's state says how it went.
        s.tick(now, StopLevel::Drain, &View::default());
        assert_eq!(s.end(), None);
        assert!(s.ends_as_the_plan_stands());
        assert_eq!(s.outcome(Some(RunEnd::SomeFailed)), RunEnd::SomeFailed);
        assert_eq!(s.outcome(None), RunEnd::Interrupted);
    }

    /// A lost lease stops only its attempt (the loop does that, marking it abandoned); the
    /// run goes on, and once the attempt ended it asks whether the plan is done.
    #[test]
    fn a_lost_lease_ends_its_attempt_and_the_run_goes_on() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        s.nothing_to_claim(now);
        assert_eq!(s.idle(now, &running(1), false), Idle::Busy);
        let later = now + Duration::from_secs(10);
        assert!(
            s.tick(later, StopLevel::Run, &running(1))
                .contains(&Command::Heartbeat),
            "the heartbeat that finds the lease lost"
        );
        s.attempt_ended();
        assert!(s.may_claim(&idle_view()), "its slot is free again");
        let v = View {
            unsettled: 1,
            ..View::default()
        };
        assert!(s.tick(later, StopLevel::Run, &v).contains(&Command::Settle));
        s.settled();
        assert_eq!(s.idle(later, &idle_view(), true), Idle::CheckFinished);
        assert_eq!(s.end(), None, "a lost lease is not the run's end");
    }

    #[test]
    fn backoffs_and_pauses_make_a_claim_due_when_they_end() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        s.tick(now, StopLevel::Run, &idle_view());
        s.nothing_to_claim(now);
        assert!(!s.may_claim(&idle_view()));
        s.back_off(7, now + Duration::from_secs(4));
        assert_eq!(s.backing_off(now), vec![7]);
        assert_eq!(s.idle(now, &idle_view(), false), Idle::CheckFinished);
        assert_eq!(s.finished(Ok(None)), Idle::Wait, "a backoff is not the end");
        assert_eq!(s.wake(now, &idle_view()).at, now + Duration::from_secs(4));
        s.before_claims(now + Duration::from_secs(4));
        assert!(s.may_claim(&idle_view()), "the backoff ended");
        s.nothing_to_claim(now);
        s.pause_ends(Some(now + Duration::from_secs(3)));
        s.before_claims(now + Duration::from_secs(3));
        assert!(s.may_claim(&idle_view()), "the pause ended");
    }

    #[test]
    fn an_idle_engine_waits_for_work_until_the_safety_poll() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        s.tick(now, StopLevel::Run, &idle_view());
        s.nothing_to_claim(now);
        let w = s.wake(now, &idle_view());
        assert_eq!(w.for_work, Some(now + Duration::from_secs(30)));
        assert_eq!(s.wake(now, &running(2)).for_work, None, "no free slot");
        s.before_claims(now + Duration::from_secs(30));
        assert!(s.may_claim(&idle_view()), "the safety poll");
    }

    #[test]
    fn the_reaper_marks_workers_offline_a_few_times_per_threshold() {
        let now = Instant::now();
        let mut s = Scheduler::new(timing(), now);
        assert!(s.reaped(now, false, false));
        assert!(!s.reaped(now + Duration::from_secs(29), false, false));
        assert!(s.reaped(now + Duration::from_secs(30), true, false));
        assert!(s.may_claim(&idle_view()), "returned tasks make a claim due");
    }
}
