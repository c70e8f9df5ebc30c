//! The agent sandbox: on Linux, agents, their checks and every process they start run under
//! Landlock, allowed to write only in their worktree, the temporary directory and the paths
//! their backend needs, and reading everywhere. The policy travels to the process guard
//! ([`crate::procguard`]) in [`ENV`]; the guard applies it to itself before it forks the
//! program, so the program and everything it starts inherit it and none can lift it.
//!
//! Why Landlock: unprivileged, stackable, inherited across fork and exec, and it refuses writes
//! in the kernel whatever the program does (`git -C ../repo`, an absolute path, a symlink out).

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The environment variable carrying the policy (JSON) from whilly to its guard.
pub(crate) const ENV: &str = "WHILLY_SANDBOX";

/// Where a sandboxed program may write; everything else is read-only to it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    pub write: Vec<PathBuf>,
}

impl Policy {
    /// The policy as the value of [`ENV`].
    pub fn to_env(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"write\":[]}".into())
    }
}

/// What the kernel offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Support {
    /// Landlock with this ABI version.
    Landlock(i32),
    /// No Landlock (kernel before 5.13, or not enabled at boot): programs run unconfined.
    Missing,
}

impl Support {
    /// Asks the kernel which Landlock ABI it has.
    pub(crate) fn probe() -> Support {
        const LANDLOCK_CREATE_RULESET_VERSION: libc::c_long = 1;
        // SAFETY: with a null attribute, size 0 and the VERSION flag the call only returns the
        // ABI version (or an error); it reads and writes no memory of ours.
        let abi = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<libc::c_void>(),
                0usize,
                LANDLOCK_CREATE_RULESET_VERSION,
            )
        };
        if abi >= 1 {
            Support::Landlock(abi as i32)
        } else {
            Support::Missing
        }
    }

    /// One line for `doctor` and the run's start.
    pub(crate) fn describe(self) -> String {
        match self {
            Support::Landlock(abi) => format!(
                "Landlock ABI {abi}: agents write only in their worktree, the temp directory and their own config"
            ),
            Support::Missing => "this kernel has no Landlock (Linux 5.13+, enabled at boot): agents run without the sandbox; whilly still compares your checkout before and after each attempt".into(),
        }
    }
}

/// Why the sandbox could not be put in place (the guard then starts nothing: fail closed).
#[derive(Debug, thiserror::Error)]
#[error("sandbox: {0}")]
pub(crate) struct SandboxError(String);

/// Restricts this process (and what it starts from now on) to `policy`. Paths that do not exist
/// are skipped. On a kernel without Landlock nothing is restricted and `Ok(false)` is returned.
pub(crate) fn restrict_self(policy: &Policy) -> Result<bool, SandboxError> {
    use landlock::{
        ABI, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, path_beneath_rules,
    };
    let abi = ABI::V5;
    let write = AccessFs::from_write(abi);
    let present: Vec<&Path> = policy
        .write
        .iter()
        .map(PathBuf::as_path)
        .filter(|p| p.exists())
        .collect();
    let err = |e: landlock::RulesetError| SandboxError(e.to_string());
    let status = Ruleset::default()
        .handle_access(write)
        .map_err(err)?
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(present, write))
        .map_err(err)?
        .restrict_self()
        .map_err(err)?;
    Ok(status.ruleset != RulesetStatus::NotEnforced)
}

/// Paths every sandboxed program may write: the temporary directories, devices (its terminal,
/// `/dev/null`) and the per-user runtime directory. A temporary directory that holds one of
/// the `protected` paths (the repository itself lives under `/tmp`) is left out: Landlock
/// cannot allow a tree minus a subtree, so the program then gets a private temp directory
/// instead (see [`private_tmp`]).
pub(crate) fn common_write_paths(
    env: &dyn Fn(&str) -> Option<String>,
    protected: &[&Path],
) -> (Vec<PathBuf>, bool) {
    let mut temps = vec![
        std::env::temp_dir(),
        PathBuf::from("/tmp"),
        PathBuf::from("/var/tmp"),
    ];
    if let Some(t) = env("TMPDIR") {
        temps.push(PathBuf::from(t));
    }
    let holds_protected = |t: &Path| {
        let t = t.canonicalize().unwrap_or_else(|_| t.to_path_buf());
        protected.iter().any(|p| {
            p.canonicalize()
                .unwrap_or_else(|_| p.to_path_buf())
                .starts_with(&t)
        })
    };
    let all = temps.len();
    let mut out: Vec<PathBuf> = temps.into_iter().filter(|t| !holds_protected(t)).collect();
    let narrowed = out.len() < all;
    out.push(PathBuf::from("/dev"));
    if let Some(r) = env("XDG_RUNTIME_DIR") {
        out.push(PathBuf::from(r));
    }
    (out, narrowed)
}

/// A temporary directory of this whilly process's own (mode 0700), for sandboxed programs when
/// the shared one cannot be opened to them.
pub(crate) fn private_tmp() -> std::io::Result<PathBuf> {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    if let Some(d) = DIR.get() {
        return Ok(d.clone());
    }
    let d = std::env::temp_dir().join(format!("whilly-sandbox-{}", std::process::id()));
    crate::fsutil::private_dir(&d)?;
    Ok(DIR.get_or_init(|| d).clone())
}

/// `[sandbox] mode = "enforce"`: the paths every sandboxed process may write beyond its
/// working directory and its backend's own state.
#[derive(Debug, Clone, Default)]
pub struct SandboxSettings {
    /// The repository's git directory (for agents working in a linked worktree) and
    /// `allow_write`.
    pub always: Vec<PathBuf>,
    /// What no sandboxed process may write: the operator's checkout.
    pub protected: Vec<PathBuf>,
}

impl SandboxSettings {
    /// The policy for a process working in `workdir` (`None`: a read-only call, such as the
    /// PRD wizard's, that may write no working directory at all), started by the backend
    /// `kind` (`"check"` for a check), with its own environment `env` over whilly's. Also the
    /// private temporary directory to give it as TMPDIR, when the shared one holds the
    /// checkout.
    pub fn policy(
        &self,
        workdir: Option<&Path>,
        kind: &str,
        env: &[(String, String)],
    ) -> (Policy, Option<PathBuf>) {
        let lookup = |k: &str| {
            env.iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(k).ok())
        };
        let mut write: Vec<PathBuf> = workdir.map(Path::to_path_buf).into_iter().collect();
        write.extend(self.always.iter().cloned());
        let protected: Vec<&Path> = self.protected.iter().map(PathBuf::as_path).collect();
        let (common, narrowed) = common_write_paths(&lookup, &protected);
        write.extend(common);
        // The shared temp directory holds the checkout: a private one instead, as TMPDIR.
        let tmpdir = narrowed.then(private_tmp).and_then(Result::ok);
        write.extend(tmpdir.iter().cloned());
        // A CLI that cannot create its config directory under a read-only home cannot start:
        // its own directories are made first (build caches in the home are left alone).
        for p in backend_own_paths(kind, &lookup) {
            if p.extension().is_none() && !p.exists() {
                let _ = std::fs::create_dir_all(&p);
            }
        }
        write.extend(backend_write_paths(kind, &lookup));
        (Policy { write }, tmpdir)
    }
}

/// The places a backend's CLI keeps its own state (config, sessions, caches, its npm cache), from
/// the environment the agent runs with; the CLI's own ones ([`backend_own_paths`]) are created
/// first when missing.
pub(crate) fn backend_write_paths(
    backend: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let Some(home) = env("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    let xdg = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let cache = xdg("XDG_CACHE_HOME", ".cache");
    // Build tools' caches: a check's `cargo test` or `go test` fills them as the agent's does.
    let mut out = vec![
        cache,
        home.join(".npm"),
        env("CARGO_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".cargo")),
        env("GOPATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join("go")),
        home.join(".m2"),
        home.join(".gradle"),
    ];
    out.extend(backend_own_paths(backend, env));
    out
}

/// The places the backend's CLI keeps its own config and sessions (a subset of
/// [`backend_write_paths`]): the ones whilly creates when missing, never the build caches.
pub(crate) fn backend_own_paths(
    backend: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Vec<PathBuf> {
    let Some(home) = env("HOME").map(PathBuf::from) else {
        return Vec::new();
    };
    let xdg = |var: &str, default: &str| {
        env(var)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let (config, data, state, cache) = (
        xdg("XDG_CONFIG_HOME", ".config"),
        xdg("XDG_DATA_HOME", ".local/share"),
        xdg("XDG_STATE_HOME", ".local/state"),
        xdg("XDG_CACHE_HOME", ".cache"),
    );
    let mut out = Vec::new();
    match backend {
        "claude" => match env("CLAUDE_CONFIG_DIR") {
            Some(d) => out.push(PathBuf::from(d)),
            None => out.extend([home.join(".claude"), home.join(".claude.json")]),
        },
        "codex" => out.push(
            env("CODEX_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.join(".codex")),
        ),
        // OpenCode installs its providers' packages under its cache directory at start.
        "opencode" => out.extend([
            config.join("opencode"),
            data.join("opencode"),
            state.join("opencode"),
            cache.join("opencode"),
        ]),
        "gemini" => out.push(
            env("GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| home.clone())
                .join(".gemini"),
        ),
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn each_backend_may_write_its_own_state_and_nothing_else_of_home() {
        let env = env_of(&[("HOME", "/h"), ("CODEX_HOME", "/c")]);
        let codex = backend_write_paths("codex", &env);
        assert!(codex.contains(&PathBuf::from("/c")));
        assert!(!codex.contains(&PathBuf::from("/h")));
        let claude = backend_write_paths("claude", &env);
        assert!(claude.contains(&PathBuf::from("/h/.claude.json")));
        let opencode = backend_write_paths("opencode", &env);
        assert!(opencode.contains(&PathBuf::from("/h/.config/opencode")));
        assert!(opencode.contains(&PathBuf::from("/h/.local/share/opencode")));
        // Created when missing, as Landlock cannot allow a path that does not exist.
        assert!(backend_own_paths("opencode", &env).contains(&PathBuf::from("/h/.cache/opencode")));
        let gemini = backend_write_paths("gemini", &env);
        assert!(gemini.contains(&PathBuf::from("/h/.gemini")));
        let command = backend_write_paths("command", &env);
        assert!(command.iter().all(|p| p.starts_with("/h/")), "{command:?}");
        assert!(
            !command
                .iter()
                .any(|p| p.ends_with(".claude") || p.ends_with(".codex"))
        );
    }

    #[test]
    fn the_policy_travels_as_json() {
        let p = Policy {
            write: vec!["/w".into(), "/tmp".into()],
        };
        let back: Policy = serde_json::from_str(&p.to_env()).unwrap();
        assert_eq!(back, p);
    }
}
