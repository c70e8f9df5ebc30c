//! `plan check`: parse, validate and gate a plan file, collecting every problem at once.

use super::diagnostic::{Diagnostic, Location, Severity, pointer_join};
use super::gate::{GateResult, gate_failures};
use super::locate::locate_pointers;
use super::parse::{SourceMap, parse_plan};
use super::validate::validate_plan;
use crate::domain::PlanSpec;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The agent every run knows without configuration: a human, through a handoff.
const HANDOFF_AGENT: &str = "handoff";

/// Plan files larger than this are refused before they are read: real plans are kilobytes, and
/// a multi-gigabyte file (a log passed by mistake) must not be pulled into memory.
pub const MAX_PLAN_BYTES: u64 = 32 * 1024 * 1024;

/// Everything `plan check` found.
#[derive(Debug, Clone, Default)]
pub struct CheckReport {
    pub file: String,
    /// Present whenever the file had a readable shape, even with errors.
    pub plan: Option<PlanSpec>,
    /// Parse, then validation, then gate problems, each group in file order.
    pub diagnostics: Vec<Diagnostic>,
    /// Tasks that fail the decision gate (only those).
    pub gate: Vec<GateResult>,
    pub strict: bool,
    pub source: SourceMap,
}

impl CheckReport {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    pub fn error_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }

    pub fn warning_count(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .count()
    }

    /// The plan, only if it has no errors: what an import may use.
    pub fn valid_plan(&self) -> Option<&PlanSpec> {
        if self.has_errors() {
            None
        } else {
            self.plan.as_ref()
        }
    }
}

/// Why a plan file could not even be looked at.
#[derive(Debug, thiserror::Error)]
pub enum PlanFileError {
    #[error("cannot read plan file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "plan file {path} is {size} bytes; the limit is {limit} bytes (32 MiB): is this really a plan?"
    )]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error(
        "{path} is a named pipe nobody is writing to: give a plan file, or write the plan into the pipe as it is read"
    )]
    IdlePipe { path: PathBuf },
}

/// Checks a plan held in memory. `strict` turns decision-gate warnings into errors.
pub fn check_plan(bytes: &[u8], file: &str, strict: bool) -> CheckReport {
    check_plan_with(bytes, file, strict, None)
}

/// [`check_plan`], and with `agents` (the agent names the configuration knows) every agent the
/// plan names must be one of them or the built-in `handoff`: a typo would otherwise pass the check and
/// stop the run only when it starts.
pub fn check_plan_with(
    bytes: &[u8],
    file: &str,
    strict: bool,
    agents: Option<&BTreeSet<String>>,
) -> CheckReport {
    let mut report = CheckReport {
        file: file.to_string(),
        strict,
        ..CheckReport::default()
    };
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        report.diagnostics.push(
            Diagnostic::error(
                "too_large",
                Location::File,
                format!(
                    "the plan is {} bytes; the limit is {MAX_PLAN_BYTES} bytes (32 MiB)",
                    bytes.len()
                ),
            )
            .with_hint("split the plan into several files"),
        );
        return report;
    }
    let parsed = parse_plan(bytes, file);
    report.diagnostics = parsed.diagnostics;
    report.source = parsed.source;
    if let Some(plan) = &parsed.plan {
        report
            .diagnostics
            .extend(validate_plan(plan, &report.source));
        if let Some(known) = agents {
            report
                .diagnostics
                .extend(unknown_agents(plan, &report.source, known));
        }
        let severity = if strict {
            Severity::Error
        } else {
            Severity::Warning
        };
        for (i, task) in plan.tasks.iter().enumerate() {
            let failures = gate_failures(task);
            if failures.is_empty() {
                continue;
            }
            let ptr = report.source.task_pointer(i);
            for f in &failures {
                report.diagnostics.push(Diagnostic {
                    severity,
                    code: f.code(),
                    message: format!("task \"{}\": decision gate: {f}", task.id),
                    location: Location::Pointer(pointer_join(&ptr, f.field())),
                    hint: Some(f.hint().to_string()),
                    line_col: None,
                });
            }
            report.gate.push(GateResult {
                task_id: task.id.clone(),
                failures,
            });
        }
    }
    report.plan = parsed.plan;
    resolve_positions(bytes, &mut report.diagnostics);
    report
}

/// An error for each agent the plan names (its default `agent`, a task's `agent`) that is not
/// in `known`, naming the names that are.
pub fn unknown_agents(
    plan: &PlanSpec,
    source: &SourceMap,
    known: &BTreeSet<String>,
) -> Vec<Diagnostic> {
    let configured: Vec<&str> = known
        .iter()
        .map(String::as_str)
        .filter(|n| *n != HANDOFF_AGENT)
        .collect();
    let unknown = |who: String, name: &str, pointer: String| {
        Diagnostic::at(
            "unknown_agent",
            &pointer,
            format!(
                "{who}: agent \"{name}\" is not configured (configured: {}; built in: {HANDOFF_AGENT})",
                configured.join(", ")
            ),
        )
        .with_hint(format!(
            "add an [agents.{name}] table to whilly.toml (backend = \"command\" and a template), or name a configured agent"
        ))
    };
    let is_known = |name: &str| name == HANDOFF_AGENT || known.contains(name);
    let mut out = Vec::new();
    if let Some(name) = plan.agent.as_deref().filter(|n| !is_known(n)) {
        out.push(unknown("plan".into(), name, "/agent".into()));
    }
    for (i, task) in plan.tasks.iter().enumerate() {
        if let Some(name) = task.agent.as_deref().filter(|n| !is_known(n)) {
            let pointer = pointer_join(&source.task_pointer(i), "agent");
            out.push(unknown(format!("task \"{}\"", task.id), name, pointer));
        }
    }
    out
}

/// Gives pointer diagnostics a line and column, when the text is JSON (it is whenever pointer
/// diagnostics exist: they come from walking the parsed document).
fn resolve_positions(bytes: &[u8], diagnostics: &mut [Diagnostic]) {
    let pointers: Vec<&str> = diagnostics.iter().filter_map(Diagnostic::pointer).collect();
    if pointers.is_empty() {
        return;
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let mut found = locate_pointers(text, &pointers);
    // A pointer to a member that is not there (an empty list left out, a missing key) is shown
    // at the closest enclosing value that is, usually the task object.
    let missing: Vec<&str> = pointers
        .iter()
        .copied()
        .filter(|p| !found.contains_key(*p))
        .collect();
    if !missing.is_empty() {
        let parents: Vec<&str> = missing
            .iter()
            .flat_map(|p| p.match_indices('/').map(|(i, _)| &p[..i]))
            .collect();
        let parent_at = locate_pointers(text, &parents);
        for p in missing {
            let nearest = p
                .match_indices('/')
                .map(|(i, _)| &p[..i])
                .rev()
                .find_map(|parent| parent_at.get(parent).copied());
            if let Some(at) = nearest {
                found.insert(p.to_string(), at);
            }
        }
    }
    for d in diagnostics.iter_mut() {
        if let Location::Pointer(p) = &d.location {
            d.line_col = found.get(p).copied();
        }
    }
}

/// Reads and checks a plan file. The size is checked from the metadata before reading, and the
/// read itself is capped, so a huge or endless file (a FIFO, /dev/zero) is refused quickly.
pub fn load_plan_file(path: &Path, strict: bool) -> Result<CheckReport, PlanFileError> {
    load_plan_file_with(path, strict, None)
}

/// [`load_plan_file`] that also checks the agent names against `agents` (see
/// [`check_plan_with`]).
pub fn load_plan_file_with(
    path: &Path,
    strict: bool,
    agents: Option<&BTreeSet<String>>,
) -> Result<CheckReport, PlanFileError> {
    let io = |source| PlanFileError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(PlanFileError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if meta.len() > MAX_PLAN_BYTES {
        return Err(PlanFileError::TooLarge {
            path: path.to_path_buf(),
            size: meta.len(),
            limit: MAX_PLAN_BYTES,
        });
    }
    let file = open_without_waiting(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_PLAN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.is_empty() && std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()) {
        return Err(PlanFileError::IdlePipe {
            path: path.to_path_buf(),
        });
    }
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        return Err(PlanFileError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: MAX_PLAN_BYTES,
        });
    }
    Ok(check_plan_with(
        &bytes,
        &path.display().to_string(),
        strict,
        agents,
    ))
}

/// Opens `path` for reading without waiting for a writer: a plan given as a FIFO nobody
/// writes reads as empty (and is refused as such) instead of hanging the command, while one
/// fed by a writer (`<(generate-plan)`) is read to its end as before.
fn open_without_waiting(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    use std::os::unix::io::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    // Reads block again once open (a slow writer is waited for, as a pipe is).
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETFL) };
    if flags >= 0 {
        // SAFETY: as above.
        unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    Ok(file)
}

/// A plan held in memory (edited by the operator, split by an agent) checked exactly as a plan
/// file is checked: its canonical text through the parser, validator and gate.
pub fn check_spec(spec: &crate::domain::PlanSpec) -> CheckReport {
    check_plan(
        super::export::canonical_json(spec).as_bytes(),
        "plan",
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gate_is_a_warning_unless_strict() {
        let text =
            json!({"project": "p", "tasks": [{"id": "A", "description": "short"}]}).to_string();
        let r = check_plan(text.as_bytes(), "t.json", false);
        assert!(!r.has_errors(), "{:?}", r.diagnostics);
        assert_eq!(r.warning_count(), 3);
        assert_eq!(r.gate.len(), 1);
        assert_eq!(r.gate[0].failures.len(), 3);
        let r = check_plan(text.as_bytes(), "t.json", true);
        assert_eq!(r.error_count(), 3);
        let codes: Vec<&str> = r.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(
            codes,
            [
                "gate_short_description",
                "gate_no_acceptance_criteria",
                "gate_no_test_steps"
            ]
        );
        assert_eq!(r.diagnostics[0].pointer(), Some("/tasks/0/description"));
    }

    #[test]
    fn absent_members_are_placed_at_their_object() {
        let text =
            "{\"project\": \"p\",\n \"tasks\": [\n  {\"id\": \"A\", \"description\": \"x\"}]}";
        let r = check_plan(text.as_bytes(), "t.json", false);
        let at: Vec<(&str, Option<(usize, usize)>)> =
            r.diagnostics.iter().map(|d| (d.code, d.line_col)).collect();
        assert_eq!(
            at,
            [
                ("gate_short_description", Some((3, 15))),
                ("gate_no_acceptance_criteria", Some((3, 3))),
                ("gate_no_test_steps", Some((3, 3))),
            ]
        );
    }

    #[test]
    fn plan_survives_validation_errors() {
        let text =
            json!({"project": "p", "tasks": [{"id": "A", "dependencies": ["A", "X"]}]}).to_string();
        let r = check_plan(text.as_bytes(), "t.json", false);
        assert!(r.has_errors());
        assert!(r.plan.is_some());
        assert!(r.valid_plan().is_none());
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_agent_the_config_does_not_know_is_an_error() {
        let text = json!({"project": "p", "agent": "clade", "tasks": [
            {"id": "A", "agent": "claude"},
            {"id": "B", "agent": "nope"},
            {"id": "C", "agent": "handoff"},
            {"id": "D"},
        ]})
        .to_string();
        let known = names(&["claude", "command"]);
        // Without the configuration nothing is said about agents.
        let r = check_plan(text.as_bytes(), "t.json", false);
        assert!(!r.has_errors(), "{:?}", r.diagnostics);
        let r = check_plan_with(text.as_bytes(), "t.json", false, Some(&known));
        let agents: Vec<&Diagnostic> = r
            .diagnostics
            .iter()
            .filter(|d| d.code == "unknown_agent")
            .collect();
        assert_eq!(agents.len(), 2, "{:?}", r.diagnostics);
        assert!(r.has_errors());
        assert!(agents.iter().all(|d| d.is_error()));
        assert_eq!(agents[0].pointer(), Some("/agent"));
        assert_eq!(
            agents[0].message,
            "plan: agent \"clade\" is not configured (configured: claude, command; built in: handoff)"
        );
        assert_eq!(agents[1].pointer(), Some("/tasks/1/agent"));
        assert_eq!(
            agents[1].message,
            "task \"B\": agent \"nope\" is not configured (configured: claude, command; built in: handoff)"
        );
        assert_eq!(
            agents[1].hint.as_deref(),
            Some(
                "add an [agents.nope] table to whilly.toml (backend = \"command\" and a template), or name a configured agent"
            )
        );
        assert!(agents[1].line_col.is_some());
    }

    #[test]
    fn missing_file_is_a_typed_error() {
        let e = load_plan_file(Path::new("/nonexistent/plan.json"), false);
        assert!(matches!(e, Err(PlanFileError::Io { .. })));
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            load_plan_file(dir.path(), false),
            Err(PlanFileError::NotAFile { .. })
        ));
    }
}
