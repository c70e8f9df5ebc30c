//! Text and JSON output of `plan check` and `plan triz` (no colours; the CLI may add them).

use super::check::CheckReport;
use super::diagnostic::{Diagnostic, Location};
use super::triz::TrizReport;
use serde_json::json;

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `file:line:col: error[code]: message`; for problems found in the parsed document
/// `file:line:col: error[code]: /tasks/3/id: message`, or `file#/tasks/3/id: …` when the pointer
/// has no position (a missing member).
pub fn render_diagnostic(file: &str, d: &Diagnostic) -> String {
    let place = match (&d.location, d.line_col) {
        (Location::File, _) => file.to_string(),
        (Location::LineCol { line, col }, _) => format!("{file}:{line}:{col}"),
        (Location::Pointer(_), Some((line, col))) => format!("{file}:{line}:{col}"),
        (Location::Pointer(p), None) if p.is_empty() => file.to_string(),
        (Location::Pointer(p), None) => format!("{file}#{p}"),
    };
    let mut line = match (&d.location, d.line_col) {
        (Location::Pointer(p), Some(_)) if !p.is_empty() => {
            format!(
                "{place}: {}[{}]: {p}: {}",
                d.severity.as_str(),
                d.code,
                d.message
            )
        }
        _ => format!("{place}: {d}"),
    };
    if let Some(h) = &d.hint {
        line.push_str(" (hint: ");
        line.push_str(h);
        line.push(')');
    }
    line
}

/// The whole check: one line per problem, then a summary line. JSON: one object with the counts,
/// the diagnostics and the gate results.
pub fn render_check(report: &CheckReport, json: bool) -> String {
    let errors = report.error_count();
    let warnings = report.warning_count();
    if json {
        let plan = report.plan.as_ref();
        let v = json!({
            "file": report.file,
            "ok": !report.has_errors(),
            "strict": report.strict,
            "plan_id": plan.map(|p| p.id.clone()),
            "format": plan.map(|p| p.format),
            "tasks": plan.map(|p| p.tasks.len()),
            "errors": errors,
            "warnings": warnings,
            "diagnostics": report.diagnostics,
            "gate": report.gate,
        });
        let mut s = serde_json::to_string_pretty(&v).unwrap_or_default();
        s.push('\n');
        return s;
    }
    let mut out = String::new();
    for d in &report.diagnostics {
        out.push_str(&render_diagnostic(&report.file, d));
        out.push('\n');
    }
    let what = match &report.plan {
        Some(p) => format!(
            "{}: plan {} ({}), ",
            report.file,
            p.id,
            plural(p.tasks.len(), "task", "tasks")
        ),
        None => format!("{}: ", report.file),
    };
    out.push_str(&format!(
        "{what}{}, {}\n",
        plural(errors, "error", "errors"),
        plural(warnings, "warning", "warnings")
    ));
    out
}

/// The TRIZ report: verdict and ideality, then one line per finding with its principle and
/// suggestion. JSON: the report as is.
pub fn render_triz(report: &TrizReport, json: bool) -> String {
    if json {
        let mut s = serde_json::to_string_pretty(report).unwrap_or_default();
        s.push('\n');
        return s;
    }
    let mut out = format!(
        "TRIZ report for plan {} ({})\nverdict: {}   ideality: {:.3}   findings: {}\n",
        report.plan_id,
        plural(report.task_count, "task", "tasks"),
        report.verdict,
        report.ideality,
        report.findings.len()
    );
    for f in &report.findings {
        out.push_str(&format!(
            "[{}] {}: {}\n    principle #{} {}: {}\n",
            f.severity.as_str(),
            f.kind,
            f.message,
            f.principle.number,
            f.principle.name,
            f.suggestion
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::check::check_plan;
    use crate::plan::triz::triz_report;
    use serde_json::Value;

    #[test]
    fn human_check_output() {
        let text = "{\"project\": \"p\", \"tasks\": [{\"id\": \"../x\", \"description\": \"long enough description\", \"acceptance_criteria\": [\"a\"], \"test_steps\": [\"b\"]}]}";
        let r = check_plan(text.as_bytes(), "plan.json", false);
        let s = render_check(&r, false);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 2, "{s}");
        assert!(
            lines[0].starts_with("plan.json:1:29: error[bad_id]: /tasks/0/id: bad task id:"),
            "{s}"
        );
        // Without a position (a missing member's parent is still located; a bare pointer
        // diagnostic built in code is not) the pointer is the place.
        let d = Diagnostic::at("x", "/tasks/9", "m");
        assert_eq!(
            render_diagnostic("f.json", &d),
            "f.json#/tasks/9: error[x]: m"
        );
        assert_eq!(lines[1], "plan.json: plan p (1 task), 1 error, 0 warnings");
    }

    #[test]
    fn syntax_errors_show_line_and_column() {
        let r = check_plan(b"{\n  \"project\": ,\n}", "bad.json", false);
        let s = render_check(&r, false);
        assert!(
            s.starts_with("bad.json:2:14: error[json_syntax]: expected value"),
            "{s}"
        );
        assert!(s.ends_with("bad.json: 1 error, 0 warnings\n"), "{s}");
    }

    #[test]
    fn json_check_output_is_machine_readable() {
        let r = check_plan(
            b"{\"project\": \"p\", \"tasks\": [{\"id\": \"A\"}]}",
            "p.json",
            false,
        );
        let v: Value = serde_json::from_str(&render_check(&r, true)).expect("json");
        assert_eq!(v["ok"], true);
        assert_eq!(v["warnings"], 4);
        assert_eq!(v["diagnostics"][0]["code"], "missing_field");
        assert_eq!(v["gate"][0]["task_id"], "A");
        assert_eq!(v["gate"][0]["failures"][0]["rule"], "short_description");
    }

    #[test]
    fn triz_output() {
        let r = check_plan(
            b"{\"project\": \"p\", \"tasks\": [{\"id\": \"A\", \"dependencies\": [\"A\"]}]}",
            "p.json",
            false,
        );
        let report = triz_report(r.plan.as_ref().expect("plan"));
        let s = render_triz(&report, false);
        assert!(
            s.starts_with("TRIZ report for plan p (1 task)\nverdict: reject   ideality: 0.000"),
            "{s}"
        );
        assert!(
            s.contains("[critical] dependency_contradiction: dependency cycle A → A"),
            "{s}"
        );
        let v: Value = serde_json::from_str(&render_triz(&report, true)).expect("json");
        assert_eq!(v["verdict"], "reject");
        assert_eq!(v["findings"][1]["kind"], "dependency_contradiction");
        assert_eq!(v["findings"][1]["principle"]["number"], 2);
    }
}
