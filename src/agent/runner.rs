//! What does a task for a configured agent name: a program, or a human.

use super::backend::{AgentSettings, Backend, BackendKind};
use super::binary::resolve_binary;
use super::claude::Claude;
use super::codex::Codex;
use super::error::AgentError;
use super::gemini::Gemini;
use super::opencode::OpenCode;
use super::process_backend::ProcessBackend;
use std::path::PathBuf;
use std::sync::Arc;

/// Who does the work of an attempt. The executor runs a [`Runner::Process`] in a PTY and hands a
/// [`Runner::Handoff`] to a human through the handoff files; neither pretends to be the other.
#[derive(Debug, Clone)]
pub enum Runner {
    /// An agent program, run through its backend.
    Process(Arc<dyn Backend>),
    /// A human (or another tool) through `.whilly/handoff/`; nothing is spawned.
    Handoff,
}

impl Runner {
    pub fn is_handoff(&self) -> bool {
        matches!(self, Runner::Handoff)
    }
}

/// The runner for `settings`: the handoff for [`BackendKind::Handoff`], else the backend with its
/// binary resolved now, so a missing agent is reported before any task is claimed.
pub fn build_runner(settings: &AgentSettings) -> Result<Runner, AgentError> {
    match settings.kind {
        BackendKind::Handoff => Ok(Runner::Handoff),
        _ => Ok(Runner::Process(Arc::from(build_backend(settings)?))),
    }
}

/// Builds the backend for `settings`, resolving its binary now so a missing agent is reported
/// before any task is claimed. The handoff has none (it is [`super::runner::Runner::Handoff`]).
pub fn build_backend(settings: &AgentSettings) -> Result<Box<dyn Backend>, AgentError> {
    let s = settings.clone();
    Ok(match settings.kind {
        BackendKind::Claude => Box::new(ProcessBackend::new(s, resolve(settings)?, Claude)),
        BackendKind::OpenCode => Box::new(ProcessBackend::new(s, resolve(settings)?, OpenCode)),
        BackendKind::Codex => Box::new(ProcessBackend::new(s, resolve(settings)?, Codex)),
        BackendKind::Gemini => Box::new(ProcessBackend::new(s, resolve(settings)?, Gemini)),
        BackendKind::Command => Box::new(super::command::build(s)?),
        // A human is no process: see [`super::runner::build_runner`].
        BackendKind::Handoff => {
            return Err(AgentError::NotAProcess {
                backend: settings.name.clone(),
            });
        }
    })
}

fn resolve(settings: &AgentSettings) -> Result<PathBuf, AgentError> {
    let configured = if settings.bin.trim().is_empty() {
        settings.kind.default_binary().unwrap_or_default()
    } else {
        settings.bin.as_str()
    };
    resolve_binary(&settings.name, configured)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn handoff_is_no_process_and_programs_are() {
        let handoff = AgentSettings::new(BackendKind::Handoff);
        assert!(build_runner(&handoff).unwrap().is_handoff());
        let err = build_backend(&handoff).unwrap_err().to_string();
        assert!(
            err.contains("handoff") && err.contains("no program"),
            "{err}"
        );
        let mut sh = AgentSettings::new(BackendKind::Command);
        sh.command = Some("sh -c true".into());
        match build_runner(&sh).unwrap() {
            Runner::Process(b) => assert_eq!(b.kind(), BackendKind::Command),
            Runner::Handoff => panic!("a command agent is a process"),
        }
    }

    #[test]
    fn missing_binary_fails_the_build() {
        let mut s = AgentSettings::new(BackendKind::Codex);
        s.bin = "/definitely/not/here/codex".into();
        let err = build_backend(&s).unwrap_err().to_string();
        assert!(err.contains("agents.codex.bin"), "{err}");
        assert!(build_backend(&AgentSettings::new(BackendKind::Handoff)).is_err());
    }
}
