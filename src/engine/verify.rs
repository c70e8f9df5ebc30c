//! Verification commands: the evidence that a task is done, run in the task's worktree, each in
//! its own process group with a timeout, output kept.

use crate::domain::VerificationCommand;
use serde::Serialize;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Output beyond this is cut (head and tail are kept) so a chatty test suite cannot blow memory.
const MAX_OUTPUT: usize = 256 * 1024;

#[derive(Debug, Clone, Serialize, PartialEq)]
pub(crate) struct CheckResult {
    pub name: String,
    pub command: String,
    pub required: bool,
    pub passed: bool,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    /// stdout and stderr interleaved as they were read, possibly cut in the middle.
    pub output: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub(crate) struct Verification {
    pub checks: Vec<CheckResult>,
}

impl Verification {
    /// Every required check passed (optional ones may fail).
    pub(crate) fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.passed || !c.required)
    }

    /// The required checks that failed, for the repair prompt and the failure reason.
    pub(crate) fn failures(&self) -> Vec<&CheckResult> {
        self.checks
            .iter()
            .filter(|c| c.required && !c.passed)
            .collect()
    }

    /// A short text of the failures to hand back to the agent.
    pub(crate) fn failure_report(&self) -> String {
        let mut out = String::new();
        for c in self.failures() {
            let status = if c.timed_out {
                "timed out".to_string()
            } else {
                format!(
                    "exit {}",
                    c.exit_code.map_or("signal".to_string(), |c| c.to_string())
                )
            };
            out.push_str(&format!(
                "$ {}\n({}, {})\n{}\n",
                c.command,
                c.name,
                status,
                tail(&c.output, 4000)
            ));
        }
        out
    }
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// Runs `commands` one after another in `dir` with `sh -c`. `env` is the whole environment the
/// commands see (an allow-list chosen by the caller, so secrets in the orchestrator's environment
/// are not handed to arbitrary scripts).
pub(crate) async fn run_checks(
    commands: &[VerificationCommand],
    dir: &Path,
    env: &[(String, String)],
    default_timeout: Duration,
) -> Verification {
    let mut checks = Vec::with_capacity(commands.len());
    for vc in commands {
        let timeout = vc
            .timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(default_timeout);
        checks.push(run_one(vc, dir, env, timeout).await);
    }
    Verification { checks }
}

async fn run_one(
    vc: &VerificationCommand,
    dir: &Path,
    env: &[(String, String)],
    timeout: Duration,
) -> CheckResult {
    let started = Instant::now();
    let mut result = CheckResult {
        name: vc.name.clone(),
        command: vc.command.clone(),
        required: vc.required,
        passed: false,
        exit_code: None,
        timed_out: false,
        duration_ms: 0,
        output: String::new(),
    };
    // Through the guard: if whilly is killed, the check's process group goes with it.
    let mut cmd = crate::procguard::tokio_command("sh");
    cmd.arg("-c")
        .arg(&vc.command)
        .current_dir(dir)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            result.output = format!("cannot start `sh -c`: {e}");
            return result;
        }
    };
    let pid = child.id();
    let (mut out, mut err) = (child.stdout.take(), child.stderr.take());
    let collect = async {
        let mut buf = Vec::new();
        let mut a = [0u8; 8192];
        let mut b = [0u8; 8192];
        let (mut out_open, mut err_open) = (out.is_some(), err.is_some());
        while out_open || err_open {
            tokio::select! {
                n = async { match out.as_mut() { Some(o) => o.read(&mut a).await, None => Ok(0) } }, if out_open => {
                    match n { Ok(0) | Err(_) => out_open = false, Ok(n) => push_capped(&mut buf, &a[..n]) }
                }
                n = async { match err.as_mut() { Some(e) => e.read(&mut b).await, None => Ok(0) } }, if err_open => {
                    match n { Ok(0) | Err(_) => err_open = false, Ok(n) => push_capped(&mut buf, &b[..n]) }
                }
            }
        }
        let status = child.wait().await;
        (buf, status)
    };
    match tokio::time::timeout(timeout, collect).await {
        Ok((buf, status)) => {
            result.output = String::from_utf8_lossy(&buf).into_owned();
            if let Ok(status) = status {
                result.exit_code = status.code();
                result.passed = status.success();
            }
        }
        Err(_) => {
            result.timed_out = true;
            if let Some(pid) = pid {
                // The whole group, so children of the check die with it.
                crate::procguard::kill_group(pid);
            }
            result.output = format!("timed out after {}s", timeout.as_secs());
        }
    }
    result.duration_ms = started.elapsed().as_millis() as u64;
    result
}

fn push_capped(buf: &mut Vec<u8>, bytes: &[u8]) {
    if buf.len() >= MAX_OUTPUT {
        return;
    }
    let room = MAX_OUTPUT - buf.len();
    buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    if buf.len() >= MAX_OUTPUT {
        buf.extend_from_slice(b"\n[output cut at 256 KiB]\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vc(name: &str, command: &str, required: bool) -> VerificationCommand {
        VerificationCommand {
            name: name.into(),
            command: command.into(),
            required,
            repair_max_attempts: 0,
            timeout_secs: None,
        }
    }

    fn env() -> Vec<(String, String)> {
        vec![("PATH".into(), std::env::var("PATH").unwrap_or_default())]
    }

    #[tokio::test]
    async fn passing_and_failing_checks_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f.txt"), "hello\n").unwrap();
        let v = run_checks(
            &[
                vc("exists", "test -s f.txt && cat f.txt", true),
                vc("lint", "echo nope >&2; exit 3", false),
            ],
            dir.path(),
            &env(),
            Duration::from_secs(10),
        )
        .await;
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.checks[0].output, "hello\n");
        assert_eq!(v.checks[1].exit_code, Some(3));
        assert!(v.checks[1].output.contains("nope"));

        let v = run_checks(
            &[vc("must", "exit 1", true)],
            dir.path(),
            &env(),
            Duration::from_secs(10),
        )
        .await;
        assert!(!v.passed());
        assert!(v.failure_report().contains("exit 1"));
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("child-alive");
        let cmd = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let v = run_checks(
            &[vc("slow", &cmd, true)],
            dir.path(),
            &env(),
            Duration::from_millis(300),
        )
        .await;
        assert!(v.checks[0].timed_out);
        assert!(!v.passed());
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert!(
            !marker.exists(),
            "the check's background child survived the timeout"
        );
    }

    #[tokio::test]
    async fn environment_is_only_the_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let v = run_checks(
            &[vc("env", "env", true)],
            dir.path(),
            &env(),
            Duration::from_secs(5),
        )
        .await;
        assert!(
            !v.checks[0].output.contains("CARGO"),
            "{}",
            v.checks[0].output
        );
    }
}
