//! The agents a run would start: the configured default and any an unfinished task or plan
//! names. Each must resolve to a program (the same lookup a run does), and its `--version` is
//! shown so a box with an old CLI is easy to spot.

use super::DoctorEnv;
use crate::agent::{self, BackendKind};
use crate::domain::doctor::Finding;
use crate::engine::configure;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AgentFacts {
    pub name: String,
    /// Who needs it: `run.agent`, or the plans whose unfinished tasks name it.
    pub needed_by: Vec<String>,
    /// The program, `Ok(None)` for one without a program of its own (a human handoff), or why
    /// it cannot be started.
    pub program: Result<Option<PathBuf>, String>,
    /// The first line `PROGRAM --version` printed (built-in backends only).
    pub version: Option<String>,
}

pub(crate) async fn gather(env: &DoctorEnv<'_>) -> Vec<AgentFacts> {
    let cfg = env.config;
    let mut needed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    needed
        .entry(cfg.run.agent.clone())
        .or_default()
        .push("run.agent".into());
    if let Ok(store) = &env.store
        && let Ok(plans) = store.list_plans().await
    {
        for p in plans.iter().filter(|p| p.plan.archived_at.is_none()) {
            if p.counts.all_terminal() {
                continue;
            }
            let Ok(tasks) = store.list_tasks(&p.plan.id).await else {
                continue;
            };
            for t in tasks.iter().filter(|t| !t.status.is_terminal()) {
                if let Some(a) = t.spec.agent.as_ref().or(p.plan.spec.agent.as_ref()) {
                    let by = needed.entry(a.clone()).or_default();
                    let label = format!("plan {}", p.plan.id);
                    if !by.contains(&label) {
                        by.push(label);
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for (name, needed_by) in needed {
        let program = program_of(cfg, &name);
        let version = match &program {
            Ok(Some(path)) if is_builtin(cfg, &name) => version_of(path).await,
            _ => None,
        };
        out.push(AgentFacts {
            name,
            needed_by,
            program,
            version,
        });
    }
    out
}

fn is_builtin(cfg: &crate::config::Config, name: &str) -> bool {
    configure::agent_settings(cfg, name).is_ok_and(|s| s.kind.default_binary().is_some())
}

/// The same lookup a run makes before it claims anything.
fn program_of(cfg: &crate::config::Config, name: &str) -> Result<Option<PathBuf>, String> {
    let settings = configure::agent_settings(cfg, name).map_err(|e| e.to_string())?;
    if settings.kind == BackendKind::Handoff {
        return Ok(None);
    }
    agent::build_runner(&settings).map_err(|e| e.to_string())?;
    Ok(match settings.kind.default_binary() {
        Some(default) => {
            let bin = if settings.bin.trim().is_empty() {
                default
            } else {
                settings.bin.as_str()
            };
            agent::resolve_binary(name, bin).ok()
        }
        // A command template's program was found by build_runner; it has no version flag we
        // could rely on.
        None => None,
    })
}

/// `PROGRAM --version`, first line, within 5 s.
async fn version_of(path: &std::path::Path) -> Option<String> {
    let child = tokio::process::Command::new(path)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(5), child)
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(80).collect())
}

pub(crate) fn judge(facts: &[AgentFacts]) -> Vec<Finding> {
    facts
        .iter()
        .map(|a| match &a.program {
            Ok(program) => {
                let mut what = format!("agent {}", a.name);
                if let Some(v) = &a.version {
                    what.push_str(&format!(" ({v})"));
                }
                match program {
                    Some(p) => what.push_str(&format!(" at {}", p.display())),
                    None if a.name == "handoff" => what.push_str(": a human, no program"),
                    None => what.push_str(": its command can be started"),
                }
                Finding::ok("agents", what)
            }
            Err(e) => Finding::problem(
                "agents",
                format!(
                    "agent {} (needed by {}) cannot be started: {e}",
                    a.name,
                    a.needed_by.join(", ")
                ),
                "a run that needs it refuses to start (exit 4); its tasks wait",
                format!(
                    "install it, or point agents.{}.bin (or its template) at the program: `whilly config set agents.{}.bin /path/to/it`",
                    a.name, a.name
                ),
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    #[test]
    fn a_missing_agent_says_who_needs_it_and_how_to_point_at_it() {
        let facts = vec![
            AgentFacts {
                name: "claude".into(),
                needed_by: vec!["run.agent".into()],
                program: Ok(Some("/usr/bin/claude".into())),
                version: Some("2.1.0 (Claude Code)".into()),
            },
            AgentFacts {
                name: "codex".into(),
                needed_by: vec!["plan p".into()],
                program: Err("codex: not on PATH".into()),
                version: None,
            },
        ];
        let v = judge(&facts);
        assert_eq!(v[0].severity, Severity::Ok);
        assert_eq!(
            v[0].what,
            "agent claude (2.1.0 (Claude Code)) at /usr/bin/claude"
        );
        assert_eq!(v[1].severity, Severity::Problem);
        assert!(v[1].what.contains("(needed by plan p)"), "{}", v[1].what);
        assert!(v[1].fix.contains("agents.codex.bin"));
    }
}
