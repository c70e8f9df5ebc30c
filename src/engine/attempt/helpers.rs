//! Small pieces every stage of an attempt uses: failing with evidence, recording a
//! verification round, the refused writes of a sandbox, the tail of the agent's log.

use super::*;

pub(super) fn fail(cx: &mut Ctx<'_>, reason: &str, retry: bool, detail: String) -> AttemptOutcome {
    fail_owned(cx, reason.to_string(), retry, detail)
}

pub(super) fn fail_owned(
    cx: &mut Ctx<'_>,
    reason: String,
    retry: bool,
    detail: String,
) -> AttemptOutcome {
    cx.evidence
        .insert("detail".into(), json!(agent::redact_secrets(&detail)));
    AttemptOutcome::Failed {
        cost: cx.spent,
        reason,
        retry,
        evidence: cx.evidence(),
    }
}

pub(super) fn record_verification(cx: &mut Ctx<'_>, round: u32, v: &Verification) {
    let entry = json!({ "round": round, "passed": v.passed(), "checks": v.checks.iter().map(|c| json!({
        "name": c.name, "command": c.command, "required": c.required, "passed": c.passed,
        "exit_code": c.exit_code, "timed_out": c.timed_out, "duration_ms": c.duration_ms,
        "output": agent::redact_secrets(&tail_chars(&c.output, 2000)),
    })).collect::<Vec<_>>() });
    match cx.evidence.get_mut("verification") {
        Some(Value::Array(rounds)) => rounds.push(entry),
        _ => {
            cx.evidence.insert("verification".into(), json!([entry]));
        }
    }
}

/// The paths the sandbox refused in this round, as the agent reported them in its output
/// ("Permission denied", "Read-only file system", EACCES): kept in the attempt's evidence as
/// `sandbox_refused`, so the record says which write outside the worktree was stopped.
pub(super) fn note_refused_writes(cx: &mut Ctx<'_>, worktree: &Path) {
    let Some(log) = cx
        .evidence
        .get("log")
        .and_then(|v| v.as_str())
        .map(PathBuf::from)
    else {
        return;
    };
    let raw = read_tail(&log, cx.log_start, 256 * 1024).unwrap_or_default();
    let text = String::from_utf8_lossy(&raw);
    let mut refused: Vec<String> = cx
        .evidence
        .get("sandbox_refused")
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    for path in crate::domain::sandbox_report::refused_paths(&text) {
        // A relative path is the agent's, from its worktree (`../../README.md`).
        let full = crate::domain::sandbox_report::resolve(worktree, &path);
        let shown = full.display().to_string();
        if !full.starts_with(worktree) && !refused.contains(&shown) {
            refused.push(shown);
        }
    }
    if !refused.is_empty() {
        cx.evidence.insert("sandbox_refused".into(), json!(refused));
    }
}

pub(super) fn tail_chars(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max {
        s.to_string()
    } else {
        s.chars().skip(n - max).collect()
    }
}

/// The last `max` bytes of a file (the whole file when smaller).
pub(super) fn read_tail(path: &Path, start: u64, max: u64) -> std::io::Result<Vec<u8>> {
    let mut f = std::fs::File::open(path)?;
    let len = f.metadata()?.len();
    let from = start.max(len.saturating_sub(max)).min(len);
    f.seek(SeekFrom::Start(from))?;
    let mut buf = Vec::with_capacity((len - from) as usize);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}
