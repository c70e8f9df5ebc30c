//! Running `whilly` with the real Claude Code CLI as its agent, against the scripted model server.
//!
//! Builds on `engine.rs` (a throwaway repository with a sealed environment): the whilly.toml is
//! replaced by one naming the real CLI, and the CLI's own variables (server URL, key, a private
//! config dir) are set on the `whilly` process, which the agent inherits.
#![allow(dead_code)]

use super::engine::{Output, Repo, toml_str};
use super::model_server::ModelServer;
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

pub use super::claude_bin::claude_bin;

/// whilly.toml running the real CLI; fast queue timings, no retry backoff.
pub fn claude_config(bin: &std::path::Path, repo: &Repo, parallel: usize) -> String {
    format!(
        r#"[run]
agent = "claude"
parallel = {parallel}
grace_period_secs = 1

[agents.claude]
bin = {bin}
model = "claude-sonnet-4-5"
permission_mode = "full"

[queue]
lease_secs = 30
heartbeat_secs = 1
reaper_interval_secs = 1
poll_interval_ms = 100

[retry]
backoff_secs = [0]

[verification]
timeout_secs = 30

[notifications]
desktop = false
terminal = false
bell = false

[worktrees]
dir = {wt}
"#,
        bin = toml_str(&bin.to_string_lossy()),
        wt = toml_str(&repo.wt_dir.to_string_lossy()),
    )
}

/// A repository holding `plan` and a whilly.toml for the real CLI, committed.
pub fn claude_repo(plan: &Value, bin: &std::path::Path, parallel: usize) -> Repo {
    let repo = Repo::new(plan, "true");
    repo.write("whilly.toml", &claude_config(bin, &repo, parallel));
    repo.git(&["add", "whilly.toml"]);
    repo.git(&["commit", "-q", "-m", "claude config"]);
    repo
}

/// Runs `whilly ARGS` with the CLI's environment pointing at `server`; kills it after `limit`.
pub fn run_whilly(repo: &Repo, server: &ModelServer, args: &[&str], limit: Duration) -> Output {
    run_whilly_with(repo, server, args, &[], limit)
}

/// [`run_whilly`] with more environment variables for `whilly`.
pub fn run_whilly_with(
    repo: &Repo,
    server: &ModelServer,
    args: &[&str],
    env: &[(&str, &str)],
    limit: Duration,
) -> Output {
    let out_dir = repo.home.join("outputs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let (stdout, stderr) = (
        out_dir.join(format!("claude-{stamp}.out")),
        out_dir.join(format!("claude-{stamp}.err")),
    );
    let mut child = repo
        .whilly(args)
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CONFIG_DIR", repo.home.join(".claude"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "whilly did not exit within {limit:?}\n--- stdout\n{}\n--- stderr\n{}\n--- server\n{}",
                std::fs::read_to_string(&stdout).unwrap_or_default(),
                std::fs::read_to_string(&stderr).unwrap_or_default(),
                server.log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        code: status.code(),
        stdout: std::fs::read_to_string(&stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr).unwrap_or_default(),
    }
}

/// `whilly run plan.json --headless EXTRA…` with the CLI's environment.
pub fn run_plan(repo: &Repo, server: &ModelServer, extra: &[&str], limit: Duration) -> Output {
    let mut args = vec!["run", "plan.json", "--headless"];
    args.extend(extra);
    run_whilly(repo, server, &args, limit)
}

/// A shell command that writes a file named after the worktree's branch, so every task leaves
/// its own file behind (the Bash tool runs in the CLI's cwd, the task's worktree).
pub const WRITE_OWN_FILE: &str =
    "f=out-$(git rev-parse --abbrev-ref HEAD | tr '/' '-').txt; echo written-by-claude > \"$f\"";
