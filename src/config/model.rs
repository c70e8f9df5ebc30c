//! The typed configuration. Every field has a default, so an empty file is a valid file, and
//! `deny_unknown_fields` everywhere turns a typo into an error instead of a silently ignored line.

use super::secret::Secret;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub database: DatabaseConfig,
    pub queue: QueueConfig,
    pub run: RunConfig,
    pub worktrees: WorktreesConfig,
    /// Agent name → how to run it. The built-in names (claude, opencode, codex, gemini, command)
    /// are always present; other names must say `backend = "command"` and give a template.
    pub agents: BTreeMap<String, AgentConfig>,
    /// Model name → USD per million tokens, for runs whose agent does not report its own cost.
    pub prices: BTreeMap<String, PriceConfig>,
    pub verification: VerificationConfig,
    pub retry: RetryConfig,
    pub handoff: HandoffConfig,
    pub guards: GuardsConfig,
    pub sandbox: SandboxConfig,
    pub notifications: NotificationsConfig,
    pub tui: TuiConfig,
    /// Key chord → TUI action name (snake_case); the TUI validates the action names.
    pub keys: BTreeMap<String, String>,
    pub logging: LoggingConfig,
    pub delivery: DeliveryConfig,
    pub github: GithubConfig,
    pub jira: JiraConfig,
    pub http: HttpConfig,
    pub remote: RemoteConfig,
    pub gate: GateConfig,
}

/// `[gate]`: the decision gate's optional agent pass at import.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GateConfig {
    /// After the deterministic rules, one read-only agent call per imported plan flags tasks too
    /// vague to act on. Fail-open: an agent error lets every task through with a warning.
    pub llm: bool,
    /// The agent of that pass (default: run.agent).
    pub agent: Option<String>,
}

/// `[remote]`: agents' terminals watched from a console in another process (remote panes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RemoteConfig {
    /// This worker publishes an agent's terminal while a console watches it.
    pub publish: bool,
    /// Keys typed into a remote pane reach the agent (both the console's and the worker's
    /// configuration must say so).
    pub takeover: bool,
}

impl Default for RemoteConfig {
    fn default() -> Self {
        RemoteConfig {
            publish: true,
            takeover: false,
        }
    }
}

/// `[http]`: the HTTP surface (`whilly serve`, `--http`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Where to listen; loopback unless a token is set.
    pub addr: String,
    /// The bearer token every route but `/health/live` requires (a secret reference).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// Connections open at once; one more is closed at once.
    pub max_connections: u32,
    /// How long a client has to send a whole request head.
    pub header_timeout_secs: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            addr: "127.0.0.1:8787".into(),
            token: None,
            max_connections: 128,
            header_timeout_secs: 10,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            database: DatabaseConfig::default(),
            queue: QueueConfig::default(),
            run: RunConfig::default(),
            worktrees: WorktreesConfig::default(),
            agents: default_agents(),
            prices: default_prices(),
            verification: VerificationConfig::default(),
            retry: RetryConfig::default(),
            handoff: HandoffConfig::default(),
            guards: GuardsConfig::default(),
            sandbox: SandboxConfig::default(),
            notifications: NotificationsConfig::default(),
            tui: TuiConfig::default(),
            keys: BTreeMap::new(),
            logging: LoggingConfig::default(),
            delivery: DeliveryConfig::default(),
            github: GithubConfig::default(),
            jira: JiraConfig::default(),
            http: HttpConfig::default(),
            remote: RemoteConfig::default(),
            gate: GateConfig::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseConfig {
    /// `postgres://…` or `sqlite:PATH`; none means SQLite at `.whilly/whilly.db` in the repository.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Secret>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QueueConfig {
    pub heartbeat_secs: u64,
    pub lease_secs: u64,
    pub reaper_interval_secs: u64,
    pub poll_interval_ms: u64,
    pub notify: bool,
    pub notify_debounce_ms: u64,
    pub default_max_attempts: u32,
    pub default_task_estimate_usd: f64,
    /// How long the queue may not answer before an engine stops its agents and exits 2.
    pub outage_secs: u64,
    /// A worker without a heartbeat for this long is marked offline (and not counted).
    pub worker_offline_secs: u64,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            heartbeat_secs: 10,
            lease_secs: 30,
            reaper_interval_secs: 5,
            poll_interval_ms: 1000,
            notify: true,
            notify_debounce_ms: 20,
            default_max_attempts: 3,
            default_task_estimate_usd: 0.0,
            outage_secs: 300,
            worker_offline_secs: 120,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunConfig {
    pub parallel: u32,
    pub agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget_usd: Option<f64>,
    /// Wall-clock limit for a whole run, written like `90m` or `2h 30m`.
    #[serde(with = "duration_opt", skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Duration>,
    pub grace_period_secs: u64,
    pub headless: bool,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            parallel: 3,
            agent: "claude".into(),
            budget_usd: None,
            timeout: None,
            grace_period_secs: 30,
            headless: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MergeMode {
    /// Fast-forward the base branch to the task branch (fails if it diverged).
    #[default]
    Ff,
    CherryPick,
    /// Leave the task branch for a human or a PR.
    #[serde(rename = "none")]
    NoMerge,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WorktreesConfig {
    pub dir: PathBuf,
    /// Untracked files copied from the repository into each new worktree.
    pub include: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub setup_command: Option<String>,
    pub merge: MergeMode,
    pub keep_failed: bool,
    /// Most disk whilly's worktrees of this repository may take (`20G`, `500M`); `whilly
    /// doctor` reports going over it. Unset: no budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_disk: Option<String>,
    /// Finished worktrees kept for later tasks of the repository (0: none).
    pub pool: u32,
    /// A pooled worktree keeps its ignored build outputs (`cache_dirs`) for the next task.
    pub keep_build_cache: bool,
    /// Names of ignored directories holding build outputs, at any depth.
    pub cache_dirs: Vec<String>,
}

impl WorktreesConfig {
    /// `max_disk` in bytes (`None` when unset or unreadable; validation reports the latter).
    pub fn max_disk_bytes(&self) -> Option<u64> {
        self.max_disk
            .as_deref()
            .and_then(|s| crate::domain::doctor::parse_size(s).ok())
    }
}

impl Default for WorktreesConfig {
    fn default() -> Self {
        WorktreesConfig {
            dir: super::paths::default_worktrees_dir(&super::paths::process_env()),
            include: vec![".env".into(), ".env.local".into()],
            setup_command: None,
            merge: MergeMode::Ff,
            keep_failed: true,
            max_disk: None,
            pool: 4,
            keep_build_cache: true,
            cache_dirs: crate::workspace::DEFAULT_CACHE_DIRS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Claude,
    Opencode,
    Codex,
    Gemini,
    /// Any program, run through `template`.
    Command,
}

impl Backend {
    /// The backend an agent name implies when the table does not say `backend = …`.
    pub fn for_name(name: &str) -> Option<Backend> {
        match name {
            "claude" => Some(Backend::Claude),
            "opencode" => Some(Backend::Opencode),
            "codex" => Some(Backend::Codex),
            "gemini" => Some(Backend::Gemini),
            "command" => Some(Backend::Command),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PermissionMode {
    /// The agent may run anything without asking.
    Full,
    #[default]
    AcceptEdits,
    ReadOnly,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bin: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub permission_mode: PermissionMode,
    pub extra_args: Vec<String>,
    /// For the command backend: the command line, with `{prompt_file}`, `{prompt}`, `{workdir}`
    /// and `{task_id}` substituted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// At most this many tasks run on this agent at once, across the slots (a provider's
    /// concurrent-request limit); unset: no cap.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u32>,
}

impl AgentConfig {
    fn with_bin(bin: &str) -> Self {
        AgentConfig {
            bin: Some(bin.into()),
            ..AgentConfig::default()
        }
    }

    /// The backend for the agent called `name`: explicit `backend`, else implied by the name.
    pub fn backend(&self, name: &str) -> Option<Backend> {
        self.backend.or_else(|| Backend::for_name(name))
    }

    /// The program to run: explicit `bin`, else the agent's name.
    pub fn program<'a>(&'a self, name: &'a str) -> &'a str {
        self.bin.as_deref().unwrap_or(name)
    }
}

/// Placeholders a command template may use.
pub const TEMPLATE_PLACEHOLDERS: [&str; 4] = ["prompt_file", "prompt", "workdir", "task_id"];

fn default_agents() -> BTreeMap<String, AgentConfig> {
    ["claude", "opencode", "codex", "gemini"]
        .into_iter()
        .map(|name| (name.to_string(), AgentConfig::with_bin(name)))
        .chain([("command".to_string(), AgentConfig::default())])
        .collect()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
}

fn default_prices() -> BTreeMap<String, PriceConfig> {
    // List prices (USD per million tokens) at the time of writing; override in config when they change.
    [
        ("claude-opus-4-1", 15.0, 75.0),
        ("claude-opus-4-5", 5.0, 25.0),
        ("claude-sonnet-4-5", 3.0, 15.0),
        ("claude-haiku-4-5", 1.0, 5.0),
        ("gpt-5", 1.25, 10.0),
        ("gemini-2.5-pro", 1.25, 10.0),
        ("gemini-2.5-flash", 0.3, 2.5),
    ]
    .into_iter()
    .map(|(model, input, output)| {
        (
            model.to_string(),
            PriceConfig {
                input_per_mtok: input,
                output_per_mtok: output,
            },
        )
    })
    .collect()
}

/// Whether the repository's own checks run when a plan declares none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ProfileMode {
    #[default]
    Auto,
    Off,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct VerificationConfig {
    pub timeout_secs: u64,
    /// Test steps that are shell commands (their first word a program on PATH or a builtin)
    /// run as required checks after the agent finishes; prose steps stay in the prompt.
    pub test_steps: bool,
    /// With no `verification_commands`, the repository's own checks (`cargo test`, `pytest -q`,
    /// `npm test`, `go test ./...`, …): `auto` runs them, `off` does not.
    pub profile: ProfileMode,
    /// Environment variables passed through to verification commands; everything else is dropped.
    pub env_allowlist: Vec<String>,
}

impl Default for VerificationConfig {
    fn default() -> Self {
        VerificationConfig {
            timeout_secs: 600,
            test_steps: true,
            profile: ProfileMode::Auto,
            env_allowlist: [
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TERM",
                "USER",
                "TMPDIR",
                "CARGO_HOME",
                "RUSTUP_HOME",
            ]
            .into_iter()
            .map(String::from)
            .collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetryConfig {
    /// Wait before the n-th retry; the last value repeats.
    pub backoff_secs: Vec<u64>,
    /// How long an agent that reports a rate or usage limit without saying when it resets
    /// is paused.
    pub rate_limit_cooldown_secs: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            backoff_secs: vec![5, 10, 20, 40, 60],
            rate_limit_cooldown_secs: 60,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HandoffConfig {
    pub timeout_secs: u64,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        HandoffConfig {
            timeout_secs: 86_400,
        }
    }
}

/// `[sandbox]`: where agents and their checks may write (Landlock, on Linux).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SandboxConfig {
    pub mode: SandboxMode,
    /// Paths agents may write beyond their worktree, the temp directory, the repository's git
    /// directory and their backend's own config and caches.
    pub allow_write: Vec<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            mode: SandboxMode::Enforce,
            allow_write: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxMode {
    #[default]
    Enforce,
    Off,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardsConfig {
    /// Extra regular expressions that mark a prompt as an injection attempt.
    pub injection_patterns: Vec<String>,
    pub secret_lint: bool,
}

impl Default for GuardsConfig {
    fn default() -> Self {
        GuardsConfig {
            injection_patterns: Vec::new(),
            secret_lint: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NotificationsConfig {
    pub desktop: bool,
    pub terminal: bool,
    pub bell: bool,
}

impl Default for NotificationsConfig {
    fn default() -> Self {
        NotificationsConfig {
            desktop: true,
            terminal: true,
            bell: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TuiConfig {
    pub fps: u32,
    /// Frame rate over SSH, where every frame costs bandwidth.
    pub ssh_fps: u32,
    pub scrollback_lines: u32,
    pub theme: String,
}

impl Default for TuiConfig {
    fn default() -> Self {
        TuiConfig {
            fps: 60,
            ssh_fps: 30,
            scrollback_lines: 5000,
            theme: "default".into(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoggingConfig {
    /// A tracing filter: `info`, `debug`, or directives like `whilly::store=debug,info`.
    pub level: String,
    /// Relative paths are relative to the repository root.
    pub dir: PathBuf,
    /// The most MiB one attempt's log keeps (its head and tail); 0: no limit.
    pub attempt_log_max_mb: u64,
}

impl Default for LoggingConfig {
    fn default() -> Self {
        LoggingConfig {
            level: "info".into(),
            dir: PathBuf::from(".whilly/logs"),
            attempt_log_max_mb: 100,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GithubConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// The REST API's base URL; GraphQL is at `<api_url>/graphql`. GitHub Enterprise:
    /// `https://HOST/api/v3`.
    pub api_url: String,
    /// `owner/name` pull requests go to when a task does not come from an issue and the
    /// remote's URL does not say (a remote given as a local path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Longest wait for a rate limit to reset before a GitHub call fails instead.
    #[serde(with = "duration")]
    pub max_wait: Duration,
    /// Longest time one request may take, its answer read whole, before it counts as a
    /// network failure (retried when retrying is safe).
    pub timeout_secs: u64,
    /// The labels an issue moves through.
    pub label_ready: String,
    pub label_in_progress: String,
    pub label_in_review: String,
    pub label_failed: String,
    /// The Projects v2 board kept in step with the work.
    pub project: ProjectConfig,
}

/// `[github.project]`: a Projects (v2) board whose Status column follows each task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectConfig {
    /// The organisation or user owning the board; unset: no board.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// The board's number (`github.com/orgs/OWNER/projects/NUMBER`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<u64>,
    /// The single-select field holding the columns.
    pub status_field: String,
    pub columns: ProjectColumns,
}

impl Default for ProjectConfig {
    fn default() -> Self {
        ProjectConfig {
            owner: None,
            number: None,
            status_field: "Status".into(),
            columns: ProjectColumns::default(),
        }
    }
}

/// `[github.project.columns]`: the column for each of Whilly's states.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectColumns {
    pub todo: String,
    pub in_progress: String,
    pub in_review: String,
    pub done: String,
    pub failed: String,
    pub refused: String,
    pub on_hold: String,
    pub human_loop: String,
}

impl Default for ProjectColumns {
    fn default() -> Self {
        ProjectColumns {
            todo: "Todo".into(),
            in_progress: "In Progress".into(),
            in_review: "In Review".into(),
            done: "Done".into(),
            failed: "Failed".into(),
            refused: "Refused".into(),
            on_hold: "On Hold".into(),
            human_loop: "Human Loop".into(),
        }
    }
}

impl Default for GithubConfig {
    fn default() -> Self {
        GithubConfig {
            token: None,
            api_url: "https://api.github.com".into(),
            repo: None,
            max_wait: Duration::from_secs(15 * 60),
            timeout_secs: 60,
            label_ready: "whilly:ready".into(),
            label_in_progress: "whilly:in-progress".into(),
            label_in_review: "whilly:in-review".into(),
            label_failed: "whilly:failed".into(),
            project: ProjectConfig::default(),
        }
    }
}

/// Where finished work goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryMode {
    /// Into the base branch of this clone (`merge`: ff or cherry-pick).
    Merge,
    /// The task branch pushed to the remote.
    Branch,
    /// The task branch pushed and a pull request opened (or updated) for it.
    Pr,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DeliveryConfig {
    /// `None`: `merge` for local plans, `pr` for plans made from GitHub issues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<DeliveryMode>,
    /// How `merge` lands the work; `None`: `worktrees.merge` (the older key), else `ff`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub merge: Option<MergeMode>,
    pub remote: String,
    /// `merge` lands on `remote`'s base branch and pushes it (clones sharing a queue).
    pub push: bool,
    /// Open pull requests as drafts.
    pub draft: bool,
    /// The branch pull requests go into; `None`: the repository's default branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Mark a draft pull request ready for review when every required check passed.
    pub ready_when_verified: bool,
    /// A changed file larger than this many MiB parks the task instead of landing; 0: no limit.
    pub max_file_mb: u64,
}

impl Default for DeliveryConfig {
    fn default() -> Self {
        DeliveryConfig {
            mode: None,
            merge: None,
            remote: "origin".into(),
            push: false,
            draft: true,
            base: None,
            ready_when_verified: false,
            max_file_mb: 10,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JiraConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// Unset: the keyring's `whilly/jira.token`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<Secret>,
    /// The REST API version (3: Jira Cloud).
    pub api: u32,
    /// Issues read per search page (Jira allows at most 100).
    pub page_size: u32,
    /// A custom field holding acceptance criteria (`customfield_10042`); unset: an
    /// "Acceptance" heading of the description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acceptance_field: Option<String>,
    /// When an issue moves to Done: `pr_opened` or `merged`.
    pub transition_on: String,
    /// Longest wait for a 429's `Retry-After` before the call fails instead.
    #[serde(with = "duration")]
    pub max_wait: Duration,
    /// Longest time one request may take, its answer read whole.
    pub timeout_secs: u64,
    pub statuses: JiraStatuses,
}

impl Default for JiraConfig {
    fn default() -> Self {
        JiraConfig {
            url: None,
            user: None,
            token: None,
            api: 3,
            page_size: 50,
            acceptance_field: None,
            transition_on: "merged".into(),
            max_wait: Duration::from_secs(15 * 60),
            timeout_secs: 60,
            statuses: JiraStatuses::default(),
        }
    }
}

/// `[jira.statuses]`: the Jira status for each of Whilly's states, by name (transition ids
/// differ per workflow, so the target status is what is configured).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JiraStatuses {
    pub todo: String,
    pub in_progress: String,
    pub in_review: String,
    pub done: String,
    pub failed: String,
    pub cancelled: String,
    pub blocked: String,
    pub waiting: String,
}

impl Default for JiraStatuses {
    fn default() -> Self {
        JiraStatuses {
            todo: "To Do".into(),
            in_progress: "In Progress".into(),
            in_review: "In Review".into(),
            done: "Done".into(),
            failed: "Failed".into(),
            cancelled: "Cancelled".into(),
            blocked: "Blocked".into(),
            waiting: "Waiting for Customer".into(),
        }
    }
}

/// `Option<Duration>` as a humantime string (`90s`, `2h 30m`).
mod duration_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_str(&humantime::format_duration(*d).to_string()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(text.trim())
            .map(Some)
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {text:?} ({e}); write e.g. \"90m\" or \"2h 30m\""
                ))
            })
    }
}

/// `Duration` as a humantime string (`15m`, `90s`).
mod duration {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&humantime::format_duration(*value).to_string())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(text.trim()).map_err(|e| {
            serde::de::Error::custom(format!(
                "invalid duration {text:?} ({e}); write e.g. \"15m\" or \"90s\""
            ))
        })
    }
}
