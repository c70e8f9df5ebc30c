//! The one interface every agent backend implements and its settings (the factory is
//! [`super::runner`]).
//!
//! A backend turns an [`Invocation`] into an [`AgentCommand`] (argv, env, cwd) for the `pty`
//! module, and turns the raw PTY bytes back into an [`AgentResult`]. It never spawns anything.

use super::classify::ErrorClass;
use super::error::AgentError;
use super::result::{AgentResult, PriceTable};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Which kind of agent a configured name runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BackendKind {
    #[default]
    Claude,
    OpenCode,
    Codex,
    Gemini,
    /// Any command line template.
    Command,
    /// A human, through files in `.whilly/handoff/`; no process.
    Handoff,
}

impl BackendKind {
    pub const ALL: [BackendKind; 6] = [
        BackendKind::Claude,
        BackendKind::OpenCode,
        BackendKind::Codex,
        BackendKind::Gemini,
        BackendKind::Command,
        BackendKind::Handoff,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Claude => "claude",
            BackendKind::OpenCode => "opencode",
            BackendKind::Codex => "codex",
            BackendKind::Gemini => "gemini",
            BackendKind::Command => "command",
            BackendKind::Handoff => "handoff",
        }
    }

    /// The executable looked up on PATH when `agents.<name>.bin` is not set.
    pub fn default_binary(self) -> Option<&'static str> {
        match self {
            BackendKind::Claude => Some("claude"),
            BackendKind::OpenCode => Some("opencode"),
            BackendKind::Codex => Some("codex"),
            BackendKind::Gemini => Some("gemini"),
            BackendKind::Command | BackendKind::Handoff => None,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for BackendKind {
    type Err = AgentError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "claude" | "claude-code" | "claude_code" => Ok(BackendKind::Claude),
            "opencode" => Ok(BackendKind::OpenCode),
            "codex" => Ok(BackendKind::Codex),
            "gemini" => Ok(BackendKind::Gemini),
            "command" | "cmd" => Ok(BackendKind::Command),
            "handoff" | "human" => Ok(BackendKind::Handoff),
            _ => Err(AgentError::UnknownBackend(s.to_string())),
        }
    }
}

/// How much the agent may do without asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PermissionMode {
    /// Everything, without prompts (the agent runs in its own worktree).
    #[default]
    Full,
    /// File edits without prompts; other tools per the agent's own defaults.
    AcceptEdits,
    /// No edits and no shell: for plan generation and reviews.
    ReadOnly,
}

impl FromStr for PermissionMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "full" | "bypass" | "yolo" => Ok(PermissionMode::Full),
            "accept-edits" | "acceptedits" | "safe" => Ok(PermissionMode::AcceptEdits),
            "read-only" | "readonly" => Ok(PermissionMode::ReadOnly),
            _ => Err(format!(
                "unknown permission mode {s:?} (expected full, accept-edits or read-only)"
            )),
        }
    }
}

/// What the agent prints. `Stream` keeps a live transcript possible (Claude stream-json);
/// both end with a machine-readable result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum OutputMode {
    #[default]
    Stream,
    Json,
}

/// The configuration of one agent (`[agents.<name>]`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AgentSettings {
    /// The configured name, used in error messages (`agents.<name>.bin`).
    pub name: String,
    pub kind: BackendKind,
    /// `agents.<name>.bin`; empty means the kind's default binary on PATH.
    pub bin: String,
    pub model: Option<String>,
    pub permission: PermissionMode,
    pub output: OutputMode,
    /// Appended after the backend's own arguments, before the prompt where order matters.
    pub extra_args: Vec<String>,
    /// Extra environment for the agent.
    pub env: Vec<(String, String)>,
    /// `agents.<name>.command`, for [`BackendKind::Command`].
    pub command: Option<String>,
}

impl AgentSettings {
    /// The configured model, if any (an empty string is none).
    pub fn model_name(&self) -> Option<&str> {
        self.model.as_deref().filter(|m| !m.is_empty())
    }

    /// The value of environment variable `name` the agent sees: its configured `env` (the
    /// last entry wins, as at spawn), else whilly's own, which the agent inherits.
    pub fn env_var(&self, name: &str) -> Option<std::ffi::OsString> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into())
            .or_else(|| std::env::var_os(name))
    }

    /// Settings for `kind` with every default, named after the kind.
    pub fn new(kind: BackendKind) -> AgentSettings {
        AgentSettings {
            name: kind.as_str().to_string(),
            kind,
            ..AgentSettings::default()
        }
    }
}

/// One attempt's inputs.
#[derive(Debug, Clone, Copy)]
pub struct Invocation<'a> {
    /// The full prompt text.
    pub prompt: &'a str,
    /// The same prompt, already written to a file by the engine.
    pub prompt_file: &'a Path,
    /// The task's worktree; the agent runs there.
    pub workdir: &'a Path,
    pub task_id: &'a str,
}

/// What the `pty` module spawns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    /// Absolute path of the executable.
    pub program: PathBuf,
    /// Arguments after the program name, each passed as is (no shell).
    pub args: Vec<String>,
    /// Added to the inherited environment.
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
}

impl AgentCommand {
    /// `program args` run in the invocation's working directory (the task's worktree): what
    /// every process backend spawns.
    pub fn in_workdir(
        program: &std::path::Path,
        args: Vec<String>,
        env: Vec<(String, String)>,
        inv: &Invocation<'_>,
    ) -> AgentCommand {
        AgentCommand {
            program: program.to_path_buf(),
            args,
            env,
            cwd: inv.workdir.to_path_buf(),
        }
    }

    /// Program and arguments as one list, for display and for spawners that want argv.
    pub fn argv(&self) -> Vec<String> {
        let mut argv = Vec::with_capacity(self.args.len() + 1);
        argv.push(self.program.to_string_lossy().into_owned());
        argv.extend(self.args.iter().cloned());
        argv
    }
}

/// An agent backend. Implementations are cheap, immutable, and shareable across slots; the one
/// implementation is [`ProcessBackend`](super::process_backend::ProcessBackend), parameterised by
/// each CLI's [`Cli`](super::process_backend::Cli).
pub trait Backend: Send + Sync + fmt::Debug {
    fn kind(&self) -> BackendKind;

    /// The settings this backend was built from.
    fn settings(&self) -> &AgentSettings;

    /// The process to run for one attempt.
    fn command(&self, inv: &Invocation<'_>) -> Result<AgentCommand, AgentError>;

    /// The result of an attempt from the raw PTY bytes it printed.
    fn parse_result(&self, raw: &[u8], prices: &PriceTable) -> AgentResult;

    /// What the pane shows instead of the raw output: `None` shows the bytes as printed; a
    /// stream-json backend returns a filter rendering each JSON line readably. The log and
    /// [`Backend::parse_result`] always get the raw bytes.
    fn display_filter(&self) -> Option<Box<dyn crate::pty::LineFilter>>;

    /// A meter of spend while the agent runs, fed each complete output line (only used together
    /// with [`Backend::display_filter`]); `None` when the output carries no usage to meter (json
    /// modes, command templates).
    fn usage_meter(&self, prices: &PriceTable) -> Option<super::live_usage::UsageMeter>;

    /// Where the CLI also writes its usage while it works, for the meter to follow when its
    /// output gives usage only at the end; `None` for most.
    fn session_log(&self) -> Option<super::live_usage::SessionLog>;

    /// Whether the attempt failed and how, from its exit code (`None`: killed by a signal) and
    /// result; `None` means it ran to the end without error.
    fn classify(
        &self,
        exit_code: Option<i32>,
        result: &AgentResult,
        raw: &[u8],
    ) -> Option<ErrorClass>;
}

/// One argument may be at most 128 KiB on Linux (MAX_ARG_STRLEN); larger prompts go through
/// the prompt file and the argument becomes a pointer to it.
pub const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// The prompt as an argument: the text itself, or, when too long for argv, an instruction to read
/// the prompt file.
pub fn prompt_arg(inv: &Invocation<'_>) -> String {
    if inv.prompt.len() <= MAX_PROMPT_ARG_BYTES {
        inv.prompt.to_string()
    } else {
        format!(
            "Your complete instructions for task {} are in the file {}. Read that whole file first and follow it exactly; it is the task.",
            inv.task_id,
            inv.prompt_file.display()
        )
    }
}

/// The prompt as one argument that cannot be read as an option: [`prompt_arg`], with a space
/// before a leading dash.
pub fn dash_safe_prompt(inv: &Invocation<'_>) -> String {
    let mut p = prompt_arg(inv);
    if p.starts_with('-') {
        p.insert(0, ' ');
    }
    p
}

/// Environment every process-backed agent gets, plus the configured extras.
pub(crate) fn base_env(settings: &AgentSettings) -> Vec<(String, String)> {
    settings.env.clone()
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub(crate) fn inv<'a>(prompt: &'a str) -> Invocation<'a> {
        Invocation {
            prompt,
            prompt_file: Path::new("/wt/.whilly/prompt.md"),
            workdir: Path::new("/wt"),
            task_id: "TASK-1",
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kinds_parse_and_print() {
        for k in BackendKind::ALL {
            assert_eq!(k.as_str().parse::<BackendKind>().unwrap(), k);
        }
        let err = "cursor".parse::<BackendKind>().unwrap_err().to_string();
        assert!(
            err.contains("\"cursor\"") && err.contains("handoff"),
            "{err}"
        );
        assert_eq!(
            "accept_edits".parse::<PermissionMode>(),
            Ok(PermissionMode::AcceptEdits)
        );
        assert!("root".parse::<PermissionMode>().is_err());
    }

    #[test]
    fn long_prompts_go_through_the_file() {
        let short = "do it";
        assert_eq!(prompt_arg(&test_support::inv(short)), "do it");
        let long = "x".repeat(MAX_PROMPT_ARG_BYTES + 1);
        let arg = prompt_arg(&test_support::inv(&long));
        assert!(
            arg.contains("/wt/.whilly/prompt.md") && arg.len() < 300,
            "{arg}"
        );
    }
}
