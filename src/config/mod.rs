//! Whilly's configuration: a typed [`Config`] built from layers (built-in defaults < user file <
//! repository `whilly.toml` < `WHILLY_*` environment < command-line flags), with the source of
//! every value recorded and secrets kept as references (`env:`, `keyring:`, `file:`) or redacted
//! literals.

pub(crate) mod edit;
mod error;
mod load;
mod locate;
mod model;
mod paths;
pub mod schema;
mod secret;
mod validate;

pub use error::{ConfigError, Origin, Problem, line_col};
pub use load::{
    FilePos, LoadOptions, Loaded, Source, flatten, load, load_files, parse_override,
    read_config_file,
};
pub use model::{
    AgentConfig, Backend, Config, DatabaseConfig, DeliveryConfig, DeliveryMode, GateConfig,
    GithubConfig, GuardsConfig, HandoffConfig, HttpConfig, JiraConfig, JiraStatuses, LoggingConfig,
    MergeMode, NotificationsConfig, PermissionMode, PriceConfig, ProfileMode, ProjectColumns,
    ProjectConfig, QueueConfig, RemoteConfig, RetryConfig, RunConfig, SandboxConfig, SandboxMode,
    TEMPLATE_PLACEHOLDERS, TuiConfig, VerificationConfig, WorktreesConfig,
};
pub use paths::{
    ConfigFiles, default_worktrees_dir, process_env, repo_config_path, user_config_path,
};
pub use secret::{
    DEFAULT_KEYRING_USER, KEYRING_SERVICE, Secret, SecretRef, SecretString, keyring_delete,
    keyring_set, redact,
};
