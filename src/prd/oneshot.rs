//! One read-only agent call: a prompt in, the agent's final answer out.
//!
//! The wizard, plan generation and the challenge need an answer, not a live pane, so the agent
//! runs as a plain child process (stdin closed, stdout and stderr captured) in its own process
//! group. The group is killed on timeout and whenever the future is dropped, so cancelling a call
//! (dropping it, aborting its task) never leaves an agent running.

use crate::agent::result::{clean_output, tail_lines};
use crate::agent::{
    AgentError, AgentSettings, Backend, BackendKind, ErrorClass, Invocation, OutputMode,
    PermissionMode, PriceTable, Usage, build_backend,
};
use crate::domain::Usd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

/// Output beyond this is dropped: a plan or a PRD is kilobytes, a runaway agent is not.
const MAX_CAPTURE: usize = 16 * 1024 * 1024;

/// The default limit for one call.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Why a one-shot call produced no answer.
#[derive(Debug, thiserror::Error)]
pub enum OneShotError {
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(
        "agent {agent:?} is the handoff backend (a human); PRD and plan calls need a process agent such as claude or a command"
    )]
    NotAProcess { agent: String },
    #[error("cannot start agent {agent:?} ({program}): {source}")]
    Spawn {
        agent: String,
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the prompt file in {dir}: {source}")]
    PromptFile {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("agent {agent:?} did not answer within {}s (stopped); last output:\n{tail}", after.as_secs())]
    Timeout {
        agent: String,
        after: Duration,
        tail: String,
    },
    #[error("agent {agent:?} was refused by its provider (authentication): {message}")]
    Auth { agent: String, message: String },
    #[error("agent {agent:?} failed ({}, {class}); last output:\n{tail}", exit_text(*code))]
    Failed {
        agent: String,
        code: Option<i32>,
        class: &'static str,
        tail: String,
    },
    #[error("agent {agent:?} exited without an answer; last output:\n{tail}")]
    EmptyReply { agent: String, tail: String },
    #[error("cannot read the output of agent {agent:?}: {source}")]
    Io {
        agent: String,
        #[source]
        source: std::io::Error,
    },
}

fn exit_text(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit {c}"),
        None => "killed by a signal".to_string(),
    }
}

/// The agent's answer to one call.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The final answer (Claude's `result`; a command's whole stdout).
    pub text: String,
    pub cost: Usd,
    pub usage: Usage,
    pub elapsed: Duration,
}

/// A configured agent, forced read-only, ready for one-shot calls. Cheap to clone.
#[derive(Debug, Clone)]
pub struct OneShot {
    backend: Arc<dyn Backend>,
    prices: PriceTable,
    timeout: Duration,
    /// Where prompt files are written for the duration of a call (`.whilly/prd/`).
    scratch: PathBuf,
    /// `[sandbox] mode = "enforce"`: each call may write nothing of the repository, only the
    /// temporary directory and its CLI's own state.
    sandbox: Option<crate::sandbox::SandboxSettings>,
}

impl OneShot {
    /// Builds the agent of `settings` with read-only permission (whatever the config says) and
    /// one JSON result, resolving its binary now so a missing agent is reported before any call.
    pub fn new(settings: &AgentSettings, scratch: &Path) -> Result<OneShot, OneShotError> {
        if settings.kind == BackendKind::Handoff {
            return Err(OneShotError::NotAProcess {
                agent: settings.name.clone(),
            });
        }
        let mut s = settings.clone();
        s.permission = PermissionMode::ReadOnly;
        s.output = OutputMode::Json;
        let backend = build_backend(&s)?;
        Ok(OneShot {
            backend: Arc::from(backend),
            prices: PriceTable::new(),
            timeout: DEFAULT_TIMEOUT,
            scratch: scratch.to_path_buf(),
            sandbox: None,
        })
    }

    /// Runs every call under the sandbox: no working directory is writable (these calls only
    /// read and answer), `settings.protected` (the checkout) least of all.
    pub fn with_sandbox(mut self, settings: crate::sandbox::SandboxSettings) -> OneShot {
        self.sandbox = Some(settings);
        self
    }

    pub fn with_timeout(mut self, timeout: Duration) -> OneShot {
        self.timeout = timeout;
        self
    }

    /// Prices for agents that report tokens but no cost.
    pub fn with_prices(mut self, prices: PriceTable) -> OneShot {
        self.prices = prices;
        self
    }

    pub fn agent_name(&self) -> &str {
        &self.backend.settings().name
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Runs the agent once with `prompt` in `cwd`. `label` names the call in placeholders
    /// (`{task_id}`) and in the pointer text of prompts too long for argv.
    pub async fn ask(&self, label: &str, prompt: &str, cwd: &Path) -> Result<Reply, OneShotError> {
        let agent = self.agent_name().to_string();
        std::fs::create_dir_all(&self.scratch).map_err(|source| OneShotError::PromptFile {
            dir: self.scratch.clone(),
            source,
        })?;
        // Removed when the call ends, however it ends.
        let prompt_file = tempfile::Builder::new()
            .prefix("prompt-")
            .suffix(".md")
            .tempfile_in(&self.scratch)
            .and_then(|f| {
                std::fs::write(f.path(), prompt)?;
                Ok(f)
            })
            .map_err(|source| OneShotError::PromptFile {
                dir: self.scratch.clone(),
                source,
            })?;
        let inv = Invocation {
            prompt,
            prompt_file: prompt_file.path(),
            workdir: cwd,
            task_id: label,
        };
        let cmd = self.backend.command(&inv)?;
        let started = Instant::now();
        // Through the guard (when the program exists): a killed whilly takes the call with it.
        let mut command = crate::procguard::tokio_command(&cmd.program);
        command
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .current_dir(&cmd.cwd)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        if let Some(s) = &self.sandbox {
            let kind = self.backend.settings().kind.as_str();
            let (policy, tmpdir) = s.policy(None, kind, &cmd.env);
            command.env(crate::sandbox::ENV, policy.to_env());
            if let Some(t) = tmpdir {
                command.env("TMPDIR", t);
            }
        }
        let mut child = command.spawn().map_err(|source| OneShotError::Spawn {
            agent: agent.clone(),
            program: cmd.program.display().to_string(),
            source,
        })?;
        let group = GroupGuard(child.id());
        let stdout = child.stdout.take().map(|o| tokio::spawn(read_capped(o)));
        let stderr = child.stderr.take().map(|e| tokio::spawn(read_capped(e)));

        let waited = tokio::time::timeout(self.timeout, child.wait()).await;
        // Whatever the leader did, nothing of its group may outlive the call; this also closes
        // pipes a straggling grandchild would hold open, so the readers below finish.
        drop(group);
        let out = join_reader(stdout).await;
        let err = join_reader(stderr).await;
        let status = match waited {
            Err(_) => {
                return Err(OneShotError::Timeout {
                    agent,
                    after: self.timeout,
                    tail: tail_of(&out, &err),
                });
            }
            Ok(Err(source)) => return Err(OneShotError::Io { agent, source }),
            Ok(Ok(status)) => status,
        };
        let mut result = self.backend.parse_result(&out, &self.prices);
        // Some agents print their error object on stderr (Gemini CLI with `-o json`): with
        // nothing on stdout, the answer is read from both.
        if result.subtype == "no_result" && !err.is_empty() {
            let both = self
                .backend
                .parse_result(&[&out[..], &err].concat(), &self.prices);
            if both.subtype != "no_result" {
                result = both;
            }
        }
        let code = status.code();
        if let Some(class) = self
            .backend
            .classify(code, &result, &[&out[..], &err].concat())
        {
            let tail = tail_of(&out, &err);
            return Err(match class {
                ErrorClass::Auth => OneShotError::Auth {
                    agent,
                    message: if result.text.trim().is_empty() {
                        tail
                    } else {
                        result.text
                    },
                },
                other => OneShotError::Failed {
                    agent,
                    code,
                    class: other.as_str(),
                    tail,
                },
            });
        }
        // A plain command's answer is its whole output; the backend keeps only the tail because
        // that is all a task needs to look for the completion marker.
        let text = if result.subtype == "text" {
            clean_output(&out).trim().to_string()
        } else {
            result.text.trim().to_string()
        };
        if text.is_empty() {
            return Err(OneShotError::EmptyReply {
                agent,
                tail: tail_of(&out, &err),
            });
        }
        Ok(Reply {
            text,
            cost: result.cost,
            usage: result.usage,
            elapsed: started.elapsed(),
        })
    }
}

/// SIGKILL to the child's process group when dropped (call end, timeout, cancellation).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            crate::procguard::kill_group(pid);
        }
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match r.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if buf.len() < MAX_CAPTURE {
                    let room = MAX_CAPTURE - buf.len();
                    buf.extend_from_slice(&chunk[..n.min(room)]);
                }
            }
        }
    }
    buf
}

async fn join_reader(handle: Option<tokio::task::JoinHandle<Vec<u8>>>) -> Vec<u8> {
    let Some(handle) = handle else {
        return Vec::new();
    };
    // The group is dead, so the pipes close at once; the limit only guards against a
    // descendant that left the group and kept a pipe.
    match tokio::time::timeout(Duration::from_secs(5), handle).await {
        Ok(Ok(buf)) => buf,
        _ => Vec::new(),
    }
}

fn tail_of(out: &[u8], err: &[u8]) -> String {
    let text = format!("{}\n{}", clean_output(out), clean_output(err));
    let tail = tail_lines(&text, 15);
    crate::agent::redact_secrets(&tail)
}
