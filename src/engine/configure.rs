//! Turning configuration into what the engine runs with: agent backends, prices, worktree
//! settings, check policy. Pure mappings over [`Config`]; building a backend looks for its binary.

use super::remote_delivery::{DeliveryKind, RemoteDelivery};
use super::setup_error::SetupError;
use crate::agent::{self, AgentSettings, BackendKind, ModelPrice, PriceTable, Runner};
use crate::config::{self, Config};
use crate::forge::github::{GitHub, GitHubOptions, token};
use crate::workspace::{MergeMode, PushAuth, WorkspaceConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// The settings of agent `name` from `[agents.<name>]` (`handoff` is built in: a human).
pub(crate) fn agent_settings(cfg: &Config, name: &str) -> Result<AgentSettings, SetupError> {
    if name == "handoff" {
        return Ok(AgentSettings::new(BackendKind::Handoff));
    }
    let Some(a) = cfg.agents.get(name) else {
        return Err(SetupError::Config(format!(
            "agent {name:?} is not configured: add an [agents.{name}] table to whilly.toml (known: {}, handoff)",
            cfg.agents.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let kind = match a.backend(name) {
        Some(config::Backend::Claude) => BackendKind::Claude,
        Some(config::Backend::Opencode) => BackendKind::OpenCode,
        Some(config::Backend::Codex) => BackendKind::Codex,
        Some(config::Backend::Gemini) => BackendKind::Gemini,
        Some(config::Backend::Command) => BackendKind::Command,
        None => {
            return Err(SetupError::Config(format!(
                "[agents.{name}] needs `backend = \"command\"` and a `template`"
            )));
        }
    };
    Ok(AgentSettings {
        name: name.to_string(),
        kind,
        bin: a.bin.clone().unwrap_or_default(),
        model: a.model.clone(),
        permission: match a.permission_mode {
            config::PermissionMode::Full => agent::PermissionMode::Full,
            config::PermissionMode::AcceptEdits => agent::PermissionMode::AcceptEdits,
            config::PermissionMode::ReadOnly => agent::PermissionMode::ReadOnly,
        },
        output: agent::OutputMode::Stream,
        extra_args: a.extra_args.clone(),
        env: Vec::new(),
        command: a.template.clone(),
    })
}

/// Why agent `name` cannot be built here, or `None` when it can.
pub(crate) fn unavailable(cfg: &Config, name: &str) -> Option<String> {
    match agent_settings(cfg, name) {
        Ok(settings) => agent::build_runner(&settings).err().map(|e| e.to_string()),
        Err(e) => Some(e.to_string()),
    }
}

/// Builds every named agent now, so a missing binary stops the run before any claim (exit 4).
pub(crate) fn build_agents(
    cfg: &Config,
    names: &BTreeSet<String>,
) -> Result<BTreeMap<String, Runner>, SetupError> {
    let mut out: BTreeMap<String, Runner> = BTreeMap::new();
    for name in names {
        let settings = agent_settings(cfg, name)?;
        let runner = agent::build_runner(&settings).map_err(|e| match e {
            agent::AgentError::BinaryNotFound { .. } => SetupError::Environment(e.to_string()),
            other => SetupError::Agent(other),
        })?;
        out.insert(name.clone(), runner);
    }
    Ok(out)
}

pub(crate) fn price_table(cfg: &Config) -> PriceTable {
    let mut t = PriceTable::new();
    for (model, p) in &cfg.prices {
        t.insert(
            model.clone(),
            ModelPrice {
                input_per_mtok: p.input_per_mtok,
                output_per_mtok: p.output_per_mtok,
                cache_read_per_mtok: None,
                cache_write_per_mtok: None,
            },
        );
    }
    t
}

pub(crate) fn workspace_config(cfg: &Config) -> WorkspaceConfig {
    WorkspaceConfig {
        base_dir: Some(cfg.worktrees.dir.clone()),
        include: cfg.worktrees.include.clone(),
        setup_command: cfg.worktrees.setup_command.clone(),
        setup_timeout: Duration::from_secs(600),
        merge: merge_mode(cfg),
        merge_lock_timeout: Duration::from_secs(120),
        pool: cfg.worktrees.pool as usize,
        keep_build_cache: cfg.worktrees.keep_build_cache,
        cache_dirs: cfg.worktrees.cache_dirs.clone(),
        max_disk: cfg.worktrees.max_disk_bytes(),
        shared_base: cfg.delivery.push.then(|| crate::workspace::SharedBase {
            remote: cfg.delivery.remote.clone(),
            // Over HTTPS the remote takes the GitHub token; a local path or SSH needs none.
            auth: PushAuth {
                token: github_token(cfg)
                    .ok()
                    .flatten()
                    .map(|(t, _)| t.expose().to_string()),
            },
        }),
    }
}

/// The sandbox for the calls that only read and answer (the PRD wizard, challenge, decompose,
/// TRIZ): under `[sandbox] mode = "enforce"`, no write to the repository at all.
pub(crate) fn read_only_sandbox(
    cfg: &Config,
    repo_root: &std::path::Path,
) -> Option<crate::sandbox::SandboxSettings> {
    (cfg.sandbox.mode == config::SandboxMode::Enforce).then(|| crate::sandbox::SandboxSettings {
        always: cfg.sandbox.allow_write.clone(),
        protected: vec![repo_root.to_path_buf()],
    })
}

/// The read-only agent for the calls that only read and answer (the PRD wizard, the plan
/// challenge, decompose, TRIZ, the decision gate's agent pass): `agent` (default `run.agent`),
/// its prompt files under `<repo_root>/.whilly/prd/`, the configured prices, under the
/// read-only sandbox when `[sandbox]` enforces. The one builder for the CLI and the console. A
/// missing or unstartable binary is an environment problem.
pub(crate) fn read_only_agent(
    cfg: &Config,
    repo_root: &std::path::Path,
    agent: Option<&str>,
    timeout: Duration,
) -> Result<crate::prd::OneShot, SetupError> {
    use crate::prd::OneShotError;
    let name = agent.unwrap_or(&cfg.run.agent);
    let settings = agent_settings(cfg, name)?;
    let mut one = crate::prd::OneShot::new(&settings, &repo_root.join(crate::prd::STATE_DIR))
        .map_err(|e| match e {
            OneShotError::Agent(agent::AgentError::BinaryNotFound { .. })
            | OneShotError::Spawn { .. } => SetupError::Environment(e.to_string()),
            OneShotError::Agent(a) => SetupError::Agent(a),
            other => SetupError::Config(other.to_string()),
        })?;
    if let Some(s) = read_only_sandbox(cfg, repo_root) {
        one = one.with_sandbox(s);
    }
    Ok(one.with_timeout(timeout).with_prices(price_table(cfg)))
}

/// How `merge` delivery lands: `[delivery] merge`, else the older `worktrees.merge`.
pub(crate) fn merge_mode(cfg: &Config) -> MergeMode {
    match cfg.delivery.merge.unwrap_or(cfg.worktrees.merge) {
        config::MergeMode::Ff => MergeMode::Ff,
        config::MergeMode::CherryPick => MergeMode::CherryPick,
        config::MergeMode::NoMerge => MergeMode::None,
    }
}

/// `[delivery]` as the engine runs it; `token` authenticates pushes over HTTPS.
pub(crate) fn remote_delivery(cfg: &Config, token: Option<String>) -> RemoteDelivery {
    RemoteDelivery {
        mode: cfg.delivery.mode.map(|m| match m {
            config::DeliveryMode::Merge => DeliveryKind::Merge,
            config::DeliveryMode::Branch => DeliveryKind::Branch,
            config::DeliveryMode::Pr => DeliveryKind::PullRequest,
        }),
        remote: cfg.delivery.remote.clone(),
        auth: PushAuth { token },
    }
}

/// What `whilly` says when a GitHub command finds no token anywhere.
pub(crate) const NO_GITHUB_TOKEN: &str = "no GitHub token was found: set WHILLY_GITHUB_TOKEN, or [github] token in whilly.toml (e.g. \"keyring:whilly/github.token\" after `whilly config set github.token VALUE --secret`), or log in with `gh auth login`";

/// A GitHub client with the token it uses (also for pushes over HTTPS).
#[derive(Clone)]
pub(crate) struct GitHubAccess {
    pub client: GitHub,
    pub token: String,
}

/// The GitHub client `[github]` describes, with the token found by the documented chain;
/// `None` when there is no token anywhere.
pub(crate) fn github_client(cfg: &Config) -> Result<Option<GitHubAccess>, SetupError> {
    let Some((token, source)) = github_token(cfg)? else {
        return Ok(None);
    };
    let client = GitHub::new(GitHubOptions {
        api_url: cfg.github.api_url.clone(),
        token: token.clone(),
        token_source: source,
        max_wait: cfg.github.max_wait,
        mutation_interval: Duration::from_secs(1),
        timeout: Duration::from_secs(cfg.github.timeout_secs),
    })
    .map_err(|e| SetupError::Config(e.to_string()))?;
    Ok(Some(GitHubAccess {
        client,
        token: token.expose().to_string(),
    }))
}

/// The GitHub token the documented chain finds, and where it came from (`config show` says).
pub(crate) fn github_token(
    cfg: &Config,
) -> Result<Option<(crate::config::SecretString, token::TokenSource)>, SetupError> {
    let configured = match &cfg.github.token {
        Some(secret) => {
            let what = secret.to_string();
            let token = secret
                .resolve()
                .map_err(|e| SetupError::Config(format!("[github] token: {e}")))?;
            Some(token::Configured { token, what })
        }
        None => None,
    };
    Ok(token::resolve(&token::RealProbe, configured))
}

/// The publisher of pull requests, labels and status comments on GitHub.
pub(crate) fn github_publisher(
    cfg: &Config,
    access: GitHubAccess,
    store: std::sync::Arc<dyn crate::store::Store>,
) -> std::sync::Arc<dyn super::remote_delivery::Publisher> {
    let g = &cfg.github;
    std::sync::Arc::new(super::github_publisher::GitHubPublisher::new(
        access.client,
        store,
        super::github_publisher::GitHubPublishing {
            draft: cfg.delivery.draft,
            ready_when_verified: cfg.delivery.ready_when_verified,
            base: cfg.delivery.base.clone(),
            repo: g.repo.as_deref().and_then(|r| r.parse().ok()),
            label_ready: g.label_ready.clone(),
            label_in_progress: g.label_in_progress.clone(),
            label_in_review: g.label_in_review.clone(),
            label_failed: g.label_failed.clone(),
        },
    ))
}

/// The variables verification commands see: the allow-list, taken from this environment.
pub(crate) fn verification_env(cfg: &Config) -> Vec<(String, String)> {
    cfg.verification
        .env_allowlist
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.clone(), v)))
        .collect()
}

/// `[verification]`'s say over test steps and the repository's own checks.
pub(crate) fn check_policy(cfg: &Config) -> super::checks::CheckPolicy {
    super::checks::CheckPolicy {
        test_steps: cfg.verification.test_steps,
        profile: cfg.verification.profile == config::ProfileMode::Auto,
    }
}

/// The Jira client `[jira]` describes (`None` when no site is configured). The token is
/// `[jira] token` (or `WHILLY_JIRA_TOKEN`), else the keyring's `whilly/jira.token`.
pub(crate) fn jira_client(cfg: &Config) -> Result<Option<crate::forge::jira::Jira>, SetupError> {
    let j = &cfg.jira;
    let Some(url) = j.url.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Ok(None);
    };
    let Some(user) = j.user.as_deref().filter(|u| !u.trim().is_empty()) else {
        return Err(SetupError::Config(
            "[jira] user: set the account (e-mail) the API token belongs to".into(),
        ));
    };
    let token = match &j.token {
        Some(secret) => secret
            .resolve()
            .map_err(|e| SetupError::Config(format!("[jira] token: {e}")))?,
        None => keyring::Entry::new(config::KEYRING_SERVICE, "jira.token")
            .ok()
            .and_then(|e| e.get_password().ok())
            .map(config::SecretString::new)
            .ok_or_else(|| {
                SetupError::Config(
                    "[jira] token: none set; `whilly config set jira.token VALUE --secret` keeps it in the keyring, or set WHILLY_JIRA_TOKEN".into(),
                )
            })?,
    };
    // Whilly writes descriptions and comments as ADF, which only REST API 3 (Jira Cloud) takes.
    if j.api != 3 {
        return Err(SetupError::Config(format!(
            "[jira] api = {}: only 3 (Jira Cloud's REST API, which takes ADF) is supported; set api = 3",
            j.api
        )));
    }
    crate::forge::jira::Jira::new(
        url,
        user,
        token,
        j.max_wait,
        Duration::from_secs(j.timeout_secs),
    )
    .map(Some)
    .map_err(|e| SetupError::Config(e.to_string()))
}
