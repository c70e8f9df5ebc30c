//! What the executor is set up with: agents, prices, guards, worktrees, checks, delivery.

use super::*;

pub(crate) struct ExecutorConfig {
    /// `.whilly/runs/<run id>`: logs and prompts of this run's attempts.
    pub run_dir: PathBuf,
    /// The agent for tasks and plans that name none.
    pub default_agent: String,
    /// Every agent tasks may name, built (binaries resolved) before the run starts: a program,
    /// or the human handoff.
    pub agents: BTreeMap<String, Runner>,
    pub prices: PriceTable,
    pub guards: Guards,
    pub verification_timeout: Duration,
    /// Whether test steps and the repository's own checks run (see [`crate::engine::checks`]).
    pub checks: crate::engine::checks::CheckPolicy,
    /// Variables the verification commands see (from this process's environment).
    pub verification_env: Vec<(String, String)>,
    /// What may never be committed: secrets, files over the size limit.
    pub landing: crate::domain::landing_lint::LandingLimits,
    /// Where agents and checks may write (`[sandbox]`): `None` when the sandbox is off.
    pub sandbox: Option<SandboxSettings>,
    /// A task that ended FAILED keeps its worktree and branch for inspection
    /// (`[worktrees] keep_failed`); otherwise both are removed.
    pub keep_failed: bool,
    pub pty_size: TermSize,
    pub scrollback: usize,
    /// The most bytes an attempt's log keeps, head and tail (`[logging] attempt_log_max_mb`).
    pub attempt_log_max: u64,
    /// How long an agent may take to finish up after a graceful stop.
    pub grace: Duration,
    pub handoff: HandoffDir,
    pub handoff_timeout: Duration,
    pub handoff_poll: Duration,
    pub merge: MergeMode,
    /// The commit tasks start from when the base branch's head cannot be read.
    pub base_commit: String,
    pub default_task_timeout: Option<Duration>,
    /// The engine's lease length: what the delivery fence's heartbeat extends the lease by.
    pub lease: Duration,
    /// Pushing to a remote, and which tasks are delivered how.
    pub remote: crate::engine::remote_delivery::RemoteDelivery,
    /// Pull requests, labels and status comments on the forge; `None`: no forge configured
    /// (tasks that need one wait as not published, their branch kept).
    pub publisher: Option<Arc<dyn crate::engine::remote_delivery::Publisher>>,
}
