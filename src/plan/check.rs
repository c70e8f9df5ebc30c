//! `plan check`: parse, validate and gate a plan file, collecting every problem at once.

use super::diagnostic::{Diagnostic, Location, Severity, pointer_join};
use super::gate::{GateResult, gate_failures};
use super::locate::locate_pointers;
use super::parse::{SourceMap, parse_plan};
use super::validate::validate_plan;
use crate::domain::PlanSpec;
use std::io::Read;
use std::path::{Path, PathBuf};

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
}

/// Checks a plan held in memory. `strict` turns decision-gate warnings into errors.
pub fn check_plan(bytes: &[u8], file: &str, strict: bool) -> CheckReport {
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
    let file = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_PLAN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    if bytes.len() as u64 > MAX_PLAN_BYTES {
        return Err(PlanFileError::TooLarge {
            path: path.to_path_buf(),
            size: bytes.len() as u64,
            limit: MAX_PLAN_BYTES,
        });
    }
    Ok(check_plan(&bytes, &path.display().to_string(), strict))
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
