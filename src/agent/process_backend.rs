//! The one [`Backend`] every agent CLI runs as: a program in the task's worktree, its argv built
//! by that CLI's rules and its output read by that CLI's parser.
//!
//! What differs between CLIs is a [`Cli`]: the argv for the settings (model, output format,
//! permission mode), how the output becomes an [`AgentResult`], and, where a CLI needs it, extra
//! environment, a live pane view or its own error classes. Each CLI's module (`claude`,
//! `opencode`, `codex`, `gemini`, `command`) holds only that; spawning details, settings and the
//! defaults live here once.

use super::backend::{AgentCommand, AgentSettings, Backend, BackendKind, Invocation, base_env};
use super::classify::{ErrorClass, classify_outcome};
use super::error::AgentError;
use super::live_usage::{SessionLog, UsageMeter};
use super::result::{AgentResult, PriceTable, clean_output};
use std::fmt;
use std::path::{Path, PathBuf};

/// What one agent CLI does differently: its command line and its output.
pub trait Cli: fmt::Debug + Send + Sync {
    const KIND: BackendKind;

    /// The argv after the program name.
    fn args(&self, settings: &AgentSettings, inv: &Invocation<'_>) -> Vec<String>;

    /// The result from the cleaned output (ANSI stripped); `model` prices usage the CLI reported
    /// without a cost.
    fn parse(&self, clean: &str, model: Option<&str>, prices: &PriceTable) -> AgentResult;

    /// The environment added for one run: the configured extras unless the CLI needs more.
    fn env(&self, settings: &AgentSettings) -> Vec<(String, String)> {
        base_env(settings)
    }

    /// See [`Backend::display_filter`].
    fn display_filter(&self, _settings: &AgentSettings) -> Option<Box<dyn crate::pty::LineFilter>> {
        None
    }

    /// See [`Backend::usage_meter`].
    fn usage_meter(&self, _settings: &AgentSettings, _prices: &PriceTable) -> Option<UsageMeter> {
        None
    }

    /// See [`Backend::session_log`].
    fn session_log(&self, _settings: &AgentSettings) -> Option<SessionLog> {
        None
    }

    /// See [`Backend::classify`]; `clean` is the output with ANSI stripped.
    fn classify(
        &self,
        exit_code: Option<i32>,
        result: &AgentResult,
        clean: &str,
    ) -> Option<ErrorClass> {
        classify_outcome(exit_code, result, clean)
    }
}

/// An agent CLI `C` with its settings and resolved program.
#[derive(Debug, Clone)]
pub struct ProcessBackend<C> {
    settings: AgentSettings,
    program: PathBuf,
    cli: C,
}

impl<C: Cli> ProcessBackend<C> {
    pub fn new(settings: AgentSettings, program: PathBuf, cli: C) -> ProcessBackend<C> {
        ProcessBackend {
            settings,
            program,
            cli,
        }
    }

    /// The argv after the program name for one attempt.
    pub fn args(&self, inv: &Invocation<'_>) -> Vec<String> {
        self.cli.args(&self.settings, inv)
    }

    /// The executable that runs.
    pub fn program(&self) -> &Path {
        &self.program
    }
}

impl<C: Cli> Backend for ProcessBackend<C> {
    fn kind(&self) -> BackendKind {
        C::KIND
    }

    fn settings(&self) -> &AgentSettings {
        &self.settings
    }

    fn command(&self, inv: &Invocation<'_>) -> Result<AgentCommand, AgentError> {
        Ok(AgentCommand::in_workdir(
            &self.program,
            self.args(inv),
            self.cli.env(&self.settings),
            inv,
        ))
    }

    fn parse_result(&self, raw: &[u8], prices: &PriceTable) -> AgentResult {
        self.cli
            .parse(&clean_output(raw), self.settings.model.as_deref(), prices)
    }

    fn display_filter(&self) -> Option<Box<dyn crate::pty::LineFilter>> {
        self.cli.display_filter(&self.settings)
    }

    fn usage_meter(&self, prices: &PriceTable) -> Option<UsageMeter> {
        self.cli.usage_meter(&self.settings, prices)
    }

    fn session_log(&self) -> Option<SessionLog> {
        self.cli.session_log(&self.settings)
    }

    fn classify(
        &self,
        exit_code: Option<i32>,
        result: &AgentResult,
        raw: &[u8],
    ) -> Option<ErrorClass> {
        self.cli.classify(exit_code, result, &clean_output(raw))
    }
}
