//! What every command needs: the repository it works on, the effective config, the store.

use super::exit::EnvironmentError;
use super::global_args::GlobalArgs;
use crate::config::{self, Config, LoadOptions};
use crate::store::Store;
use crate::store::open::{self, DatabaseTarget};
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) struct Context {
    /// The repository's top directory; outside one, the directory the command started in.
    pub repo_root: PathBuf,
    /// Whether `repo_root` is a git repository (see [`Context::require_repo`]).
    pub in_repo: bool,
    pub global: GlobalArgs,
    /// How the config was (or will be) loaded; `config` commands load it themselves.
    pub load_options: LoadOptions,
    /// Loaded once: commands ask for it several times and its warnings must print once.
    config: std::sync::OnceLock<Config>,
}

impl Context {
    pub(crate) fn new(global: GlobalArgs) -> anyhow::Result<Context> {
        let start = match &global.repo {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().context("cannot read the current directory")?,
        };
        if !start.is_dir() {
            return Err(
                EnvironmentError(format!("--repo {}: not a directory", start.display())).into(),
            );
        }
        let (repo_root, in_repo) = match find_repo_root(&start) {
            Some(root) => (root, true),
            None => (start, false),
        };
        let mut load_options = LoadOptions::from_process_env(&repo_root);
        for flag in &global.overrides {
            load_options.overrides.push(config::parse_override(flag)?);
        }
        Ok(Context {
            repo_root,
            in_repo,
            global,
            load_options,
            config: std::sync::OnceLock::new(),
        })
    }

    /// Refuses a command that works on a repository (its queue, worktrees, handoffs and logs
    /// live in it) when there is none: it would otherwise make `.whilly/` wherever it was
    /// started, or find an empty queue there and say nothing.
    pub(crate) fn require_repo(&self) -> Result<(), EnvironmentError> {
        if self.in_repo {
            return Ok(());
        }
        Err(EnvironmentError(format!(
            "not inside a git repository: {}; run it in your project or give --repo DIR",
            self.repo_root.display()
        )))
    }

    pub(crate) fn config_load_options(&self) -> LoadOptions {
        self.load_options.clone()
    }

    /// The effective configuration; an invalid file is an error naming the file, key and line.
    pub(crate) fn config(&self) -> anyhow::Result<Config> {
        if let Some(cfg) = self.config.get() {
            return Ok(cfg.clone());
        }
        let loaded = config::load(&self.load_options)?;
        for w in &loaded.warnings {
            errln!("warning: {w}");
        }
        Ok(self.config.get_or_init(|| loaded.config).clone())
    }

    /// The database URL: the flag, else the config (whose env layer holds `WHILLY_DATABASE_URL`).
    pub(crate) fn database_url(&self) -> anyhow::Result<Option<String>> {
        if let Some(url) = &self.global.database_url {
            return Ok(Some(url.clone()));
        }
        match self.config()?.database.url {
            Some(secret) => Ok(Some(secret.resolve()?.expose().to_string())),
            None => Ok(None),
        }
    }

    pub(crate) fn database_target(&self) -> anyhow::Result<DatabaseTarget> {
        let url = self.database_url()?;
        Ok(open::target_from(url.as_deref(), &self.repo_root)?)
    }

    pub(crate) async fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        let target = self.database_target()?;
        let queue = self.config()?.queue;
        let wakeups = open::Wakeups {
            notify: queue.notify,
            debounce: std::time::Duration::from_millis(queue.notify_debounce_ms),
        };
        Ok(open::open_with(&target, &self.repo_root, wakeups).await?)
    }

    pub(crate) fn state_dir(&self) -> PathBuf {
        open::state_dir(&self.repo_root)
    }
}

/// The top of the git repository containing `start` (through worktrees too); `None` outside
/// one (or in a bare repository, which has no work tree to run tasks in).
pub(crate) fn find_repo_root(start: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(start).ok()?;
    let dir = repo.workdir()?;
    // Absolute, so that commands printed for later (the detach message) work from anywhere.
    Some(std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf()))
}
