//! What an engine is set up with: its slots, leases and clocks, the plan or plans it serves,
//! and the followers that keep forges in step while it runs (the board, Jira, remote panes).

use super::follow::PlanSync;
use super::outcome::RunSummary;
use crate::domain::Usd;
use crate::store::Store;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Debug, Clone)]
pub struct EngineConfig {
    pub worker_id: String,
    /// Only this plan's tasks (a `run`), or any plan (a `worker`).
    pub plan_id: Option<String>,
    pub slots: usize,
    pub tags: Vec<String>,
    pub lease: Duration,
    pub heartbeat: Duration,
    pub reaper_interval: Duration,
    pub poll: Duration,
    pub grace: Duration,
    pub run_timeout: Option<Duration>,
    pub default_estimate: Usd,
    /// Backoff before a retried task may be claimed again, by failed attempt (seconds; see
    /// [`crate::domain::retry::backoff`], empty means the default schedule).
    pub retry_backoff: Vec<u64>,
    /// `run` ends when its plan has nothing left to do; a `worker` keeps waiting for work
    /// (unless `--until-idle`).
    pub exit_when_idle: bool,
    /// How long the store may fail with transient errors before the engine stops its agents and
    /// gives up; agents keep running meanwhile.
    pub store_outage: Duration,
    /// Workers whose heartbeat is older than this are marked offline by the reaper pass
    /// (zero: never).
    pub offline_after: Duration,
    /// The console's engine: it serves its plan until stopped instead of ending when nothing
    /// is left, and says here what the run would have ended with each time it runs out of
    /// work (`None` once it has work again). Work that arrives later (merged in, reset, sent
    /// back) runs without a restart.
    pub idle_reports: Option<Arc<watch::Sender<Option<RunSummary>>>>,
    /// Claims nothing: a console that cannot run the plan's tasks (an agent is missing) and
    /// watches other workers run them.
    pub observer: bool,
    /// What is kept in step with the queue while the engine runs (the project board, Jira
    /// issues): each made once the engine runs, from its store.
    pub followers: Vec<FollowerSetup>,
    /// Remote panes: the sessions whose terminals are published while a console watches.
    pub panes: Option<PanesSetup>,
    /// Agents paused by rate limits, `max_parallel` per agent, fallbacks.
    pub dispatch: super::agent_limits::DispatchConfig,
}

/// What the engine's pane publisher needs (`[remote]`).
#[derive(Clone)]
pub struct PanesSetup {
    pub sessions: super::sessions::SessionRegistry,
    /// Viewers' keys reach the agents (`[remote] takeover`).
    pub takeover: bool,
}

impl std::fmt::Debug for PanesSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PanesSetup")
            .field("takeover", &self.takeover)
            .finish_non_exhaustive()
    }
}

/// Makes one thing kept in step with the queue (see [`super::follow`]) from the engine's
/// store; an error says why it is not kept in step (the run goes on without it).
#[derive(Clone)]
pub struct FollowerSetup {
    /// For the warning when it cannot be made (`project board`, `Jira`).
    pub name: &'static str,
    pub make: MakeFollower,
}

pub(super) type MakeFollower =
    Arc<dyn Fn(Arc<dyn Store>) -> Result<Box<dyn PlanSync>, String> + Send + Sync>;

impl std::fmt::Debug for FollowerSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FollowerSetup")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl EngineConfig {
    pub fn new(worker_id: impl Into<String>) -> Self {
        EngineConfig {
            worker_id: worker_id.into(),
            plan_id: None,
            slots: 3,
            tags: Vec::new(),
            lease: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            reaper_interval: Duration::from_secs(5),
            poll: Duration::from_secs(1),
            grace: Duration::from_secs(30),
            run_timeout: None,
            default_estimate: Usd::ZERO,
            retry_backoff: vec![5, 10, 20, 40, 60],
            exit_when_idle: true,
            store_outage: super::outage::DEFAULT_OUTAGE_LIMIT,
            offline_after: Duration::from_secs(120),
            idle_reports: None,
            observer: false,
            followers: Vec::new(),
            panes: None,
            dispatch: super::agent_limits::DispatchConfig {
                cooldown: Duration::from_secs(60),
                ..Default::default()
            },
        }
    }
}
