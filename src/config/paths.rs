//! Where the config files and default directories are. All of it is computed from an injected
//! environment map so tests never touch the real home directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The process environment as a map (variables that are not valid UTF-8 are skipped: no setting
/// can use them).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect()
}

/// An XDG base directory: the variable when it holds an absolute path (the spec says relative
/// values are ignored), else `$HOME/<fallback>`.
fn xdg_dir(env: &BTreeMap<String, String>, var: &str, fallback: &str) -> Option<PathBuf> {
    if let Some(dir) = env.get(var).map(PathBuf::from).filter(|p| p.is_absolute()) {
        return Some(dir);
    }
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|home| Path::new(home).join(fallback))
}

/// `$XDG_CONFIG_HOME/whilly/config.toml`, else `~/.config/whilly/config.toml`.
pub fn user_config_path(env: &BTreeMap<String, String>) -> PathBuf {
    xdg_dir(env, "XDG_CONFIG_HOME", ".config")
        .unwrap_or_else(|| PathBuf::from(".config"))
        .join("whilly")
        .join("config.toml")
}

/// `whilly.toml` at the repository root.
pub fn repo_config_path(root: &Path) -> PathBuf {
    root.join("whilly.toml")
}

/// `$XDG_DATA_HOME/whilly/worktrees`, else `~/.local/share/whilly/worktrees`; worktrees live
/// outside the repository so tools scanning the repo do not see every task's copy.
pub fn default_worktrees_dir(env: &BTreeMap<String, String>) -> PathBuf {
    match xdg_dir(env, "XDG_DATA_HOME", ".local/share") {
        Some(dir) => dir.join("whilly").join("worktrees"),
        None => PathBuf::from(".whilly").join("worktrees"),
    }
}

/// The two config files and whether they exist.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigFiles {
    pub user: PathBuf,
    pub user_exists: bool,
    pub repo: PathBuf,
    pub repo_exists: bool,
}

impl ConfigFiles {
    pub fn locate(
        repo_root: &Path,
        user_override: Option<&Path>,
        env: &BTreeMap<String, String>,
    ) -> Self {
        let user = user_override.map_or_else(|| user_config_path(env), Path::to_path_buf);
        let repo = repo_config_path(repo_root);
        ConfigFiles {
            user_exists: user.is_file(),
            user,
            repo_exists: repo.is_file(),
            repo,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn user_file_prefers_xdg_then_home() {
        assert_eq!(
            user_config_path(&env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            PathBuf::from("/x/whilly/config.toml")
        );
        assert_eq!(
            user_config_path(&env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            PathBuf::from("/h/.config/whilly/config.toml")
        );
        assert_eq!(
            user_config_path(&env(&[("HOME", "/h")])),
            PathBuf::from("/h/.config/whilly/config.toml")
        );
        assert_eq!(
            default_worktrees_dir(&env(&[("HOME", "/h")])),
            PathBuf::from("/h/.local/share/whilly/worktrees")
        );
    }
}
