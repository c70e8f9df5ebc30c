//! Finding an agent's executable, with an error that says which config key to fix.

use super::error::AgentError;
use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The executable for agent `name`: `configured` (the value of `agents.<name>.bin`, or empty for
/// the default, which is `name` itself) is used as a path when it contains `/`, else searched on
/// PATH like `which`.
pub fn resolve_binary(name: &str, configured: &str) -> Result<PathBuf, AgentError> {
    resolve_binary_in(name, configured, std::env::var_os("PATH").as_deref())
}

/// [`resolve_binary`] with an explicit PATH value, for tests and for callers that run agents
/// with a different environment.
pub(crate) fn resolve_binary_in(
    name: &str,
    configured: &str,
    path_var: Option<&OsStr>,
) -> Result<PathBuf, AgentError> {
    let wanted = if configured.trim().is_empty() {
        name
    } else {
        configured.trim()
    };
    let not_found = |detail: String| AgentError::BinaryNotFound {
        backend: name.to_string(),
        configured: wanted.to_string(),
        detail,
    };
    if wanted.contains('/') {
        let path = expand_home(wanted);
        return if is_executable(&path) {
            Ok(std::path::absolute(&path).unwrap_or(path))
        } else if path.exists() {
            Err(not_found(format!(
                "{} exists but is not an executable file",
                path.display()
            )))
        } else {
            Err(not_found(format!("{} does not exist", path.display())))
        };
    }
    let Some(path_var) = path_var.filter(|p| !p.is_empty()) else {
        return Err(not_found("PATH is empty".to_string()));
    };
    for dir in std::env::split_paths(path_var) {
        // An empty PATH entry means the current directory, as in the shell.
        let dir = if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir
        };
        let candidate = dir.join(wanted);
        if is_executable(&candidate) {
            return Ok(std::path::absolute(&candidate).unwrap_or(candidate));
        }
    }
    Err(not_found("not on PATH".to_string()))
}

fn expand_home(p: &str) -> PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(p),
    }
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn make_exe(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn searches_path_in_order_and_skips_non_executables() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        make_exe(a.path(), "claude", 0o644);
        let good = make_exe(b.path(), "claude", 0o755);
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        assert_eq!(resolve_binary_in("claude", "", Some(&path)).unwrap(), good);
        let other = make_exe(a.path(), "my-claude", 0o755);
        assert_eq!(
            resolve_binary_in("claude", "my-claude", Some(&path)).unwrap(),
            other
        );
    }

    #[test]
    fn missing_binary_names_backend_and_config_key() {
        let a = tempfile::tempdir().unwrap();
        let path = OsString::from(a.path());
        let err = resolve_binary_in("codex", "", Some(&path))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("agent backend `codex`")
                && err.contains("agents.codex.bin")
                && err.contains("not on PATH"),
            "{err}"
        );
        let err = resolve_binary_in("gemini", "/nope/gemini", Some(&path))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("/nope/gemini does not exist") && err.contains("agents.gemini.bin"),
            "{err}"
        );
        let dir = a.path().to_str().unwrap();
        let err = resolve_binary_in("x", dir, None).unwrap_err().to_string();
        assert!(err.contains("not an executable file"), "{err}");
        assert!(
            resolve_binary_in("x", "", None)
                .unwrap_err()
                .to_string()
                .contains("PATH is empty")
        );
    }

    #[test]
    fn explicit_path_is_used() {
        let a = tempfile::tempdir().unwrap();
        let exe = make_exe(a.path(), "agent.sh", 0o700);
        assert_eq!(
            resolve_binary_in("command", exe.to_str().unwrap(), None).unwrap(),
            exe
        );
    }
}
