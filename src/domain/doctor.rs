//! What `whilly doctor` says: findings, each with what is wrong, why it matters and how to fix
//! it, and the fixes doctor may apply itself. Pure data and rules; the checks that gather facts
//! live in `engine::doctor`.

use serde::Serialize;
use std::path::PathBuf;

/// How bad a finding is. Only a `Problem` makes doctor exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Severity {
    Ok,
    Warn,
    Problem,
}

impl Severity {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Severity::Ok => "ok",
            Severity::Warn => "warn",
            Severity::Problem => "PROBLEM",
        }
    }
}

/// One thing doctor looked at and what it found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Finding {
    /// The group of checks (`database`, `agents`, `tokens`, `keyring`, `plans`, `worktrees`,
    /// `leases`, `workers`, `files`, `disk`).
    pub check: &'static str,
    pub severity: Severity,
    pub what: String,
    /// Why it matters (empty for `Ok`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub why: String,
    /// What to do about it (empty for `Ok`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub fix: String,
    /// What `--fix` would do about it; `None` when only a human can fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fixable: Option<Fix>,
}

impl Finding {
    pub(crate) fn ok(check: &'static str, what: impl Into<String>) -> Finding {
        Finding {
            check,
            severity: Severity::Ok,
            what: what.into(),
            why: String::new(),
            fix: String::new(),
            fixable: None,
        }
    }

    pub(crate) fn warn(
        check: &'static str,
        what: impl Into<String>,
        why: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Warn,
            why: why.into(),
            fix: fix.into(),
            ..Finding::ok(check, what)
        }
    }

    pub(crate) fn problem(
        check: &'static str,
        what: impl Into<String>,
        why: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            severity: Severity::Problem,
            ..Finding::warn(check, what, why, fix)
        }
    }

    pub(crate) fn fixable(mut self, fix: Fix) -> Finding {
        self.fixable = Some(fix);
        self
    }
}

/// A fix doctor applies itself with `--fix`: only what cannot lose work.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Fix {
    /// Directories to 0700 and files to 0600.
    NarrowPermissions {
        dirs: Vec<PathBuf>,
        files: Vec<PathBuf>,
    },
    /// Remove a worktree (directory and git entry); delete its branch only when `delete_branch`
    /// (its commits are all on the base branch).
    RemoveWorktree {
        path: PathBuf,
        /// The admin entry under `.git/worktrees/` (empty for a stray directory).
        name: String,
        branch: Option<String>,
        delete_branch: bool,
    },
    /// Delete a task branch whose commits are all on the base branch.
    DeleteBranch { branch: String },
    /// Run the reaper: expired leases go back to PENDING (or FAILED), with their events.
    ReclaimLeases,
    /// Mark workers silent for longer than the offline threshold offline (one event each).
    MarkWorkersOffline { workers: Vec<String> },
    /// Archive plans whose file is gone and whose tasks have all ended (reversible).
    ArchivePlan { plan_id: String },
}

/// Doctor's exit code: 1 when a problem is left, 0 otherwise (warnings allowed).
pub(crate) fn exit_code(findings: &[Finding]) -> i32 {
    if findings.iter().any(|f| f.severity == Severity::Problem) {
        1
    } else {
        0
    }
}

/// The fixes to apply, in the order the findings came, each once.
pub(crate) fn fixes(findings: &[Finding]) -> Vec<Fix> {
    let mut out: Vec<Fix> = Vec::new();
    for f in findings {
        if let Some(fix) = &f.fixable
            && !out.contains(fix)
        {
            out.push(fix.clone());
        }
    }
    out
}

/// A size in bytes from `20G`, `500M`, `1.5T`, `64K`, `1024` (binary units; an optional `B`,
/// `iB`, any case). What `[worktrees] max_disk` takes.
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || format!("expected a size like 20G, 500M or 1.5T, got {text:?}");
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit
        .strip_suffix("ib")
        .or_else(|| unit.strip_suffix('b'))
        .unwrap_or(&unit);
    let mult: u64 = match unit {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        "t" => 1 << 40,
        _ => return Err(bad()),
    };
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// `1.5 GiB`, `512 B`: sizes as doctor and `worktrees list` print them.
pub(crate) fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_binary_units() {
        assert_eq!(parse_size("20G"), Ok(20 << 30));
        assert_eq!(parse_size("500M"), Ok(500 << 20));
        assert_eq!(parse_size("500 MiB"), Ok(500 << 20));
        assert_eq!(parse_size("1.5t"), Ok(3 << 39));
        assert_eq!(parse_size("64kb"), Ok(64 << 10));
        assert_eq!(parse_size("1024"), Ok(1024));
        for bad in ["", "G", "20X", "-1G", "0", "1..2G", "20 gigs"] {
            assert!(parse_size(bad).unwrap_err().contains("20G"), "{bad}");
        }
    }

    #[test]
    fn only_problems_fail_and_fixes_come_once() {
        let w = Finding::warn("plans", "w", "why", "fix");
        let p = Finding::problem("leases", "p", "why", "fix").fixable(Fix::ReclaimLeases);
        assert_eq!(exit_code(&[Finding::ok("database", "fine"), w.clone()]), 0);
        assert_eq!(exit_code(&[w, p.clone()]), 1);
        assert_eq!(fixes(&[p.clone(), p]), vec![Fix::ReclaimLeases]);
    }

    #[test]
    fn sizes_print_in_binary_units() {
        assert_eq!(human_size(512), "512 B");
        assert_eq!(human_size(3 << 29), "1.5 GiB");
    }
}
