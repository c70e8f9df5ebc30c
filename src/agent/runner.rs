//! What does a task for a configured agent name: a program, or a human.

use super::backend::{AgentSettings, Backend, BackendKind, build_backend};
use super::error::AgentError;
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
}
