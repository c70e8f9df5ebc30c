//! What `.whilly/` holds on disk, by part (the queue, attempt logs, reports, whilly's own logs,
//! the wizard's files): attempt logs are capped one by one (`[logging] attempt_log_max_mb`),
//! but runs accumulate, and an operator should see that before the disk does.

use crate::domain::doctor::Finding;
use std::path::{Path, PathBuf};

/// Bytes under each entry of `.whilly/`, largest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct UsageFacts {
    pub state_dir: PathBuf,
    pub parts: Vec<(String, u64)>,
}

/// `.whilly/` holding more than this is worth a warning.
const WARN_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Walks `.whilly/` without following symlinks; worktrees kept inside it (the fallback when
/// there is no home directory) are the project's files, not whilly's, and are left out.
pub(crate) fn gather(state_dir: &Path) -> UsageFacts {
    let mut parts = Vec::new();
    for entry in std::fs::read_dir(state_dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "worktrees" {
            continue;
        }
        parts.push((name, size_of(&entry.path())));
    }
    parts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    UsageFacts {
        state_dir: state_dir.to_path_buf(),
        parts,
    }
}

fn size_of(path: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![path.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if md.is_dir() {
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()));
            }
        } else {
            total += md.len();
        }
    }
    total
}

fn human(bytes: u64) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if bytes >= 1024 * 1024 * 1024 {
        format!("{:.1} GiB", bytes as f64 / (MIB * 1024.0))
    } else {
        format!("{:.1} MiB", bytes as f64 / MIB)
    }
}

/// One line saying what `.whilly/` holds; a warning past [`WARN_BYTES`].
pub(crate) fn judge(f: &UsageFacts) -> Finding {
    let total: u64 = f.parts.iter().map(|(_, b)| b).sum();
    let by_part = f
        .parts
        .iter()
        .take(5)
        .map(|(name, b)| format!("{name} {}", human(*b)))
        .collect::<Vec<_>>()
        .join(", ");
    let what = format!(
        "{} holds {}{}",
        f.state_dir.display(),
        human(total),
        if by_part.is_empty() {
            String::new()
        } else {
            format!(" ({by_part})")
        }
    );
    if total > WARN_BYTES {
        Finding::warn(
            "disk",
            what,
            "attempt logs and reports accumulate run after run",
            format!(
                "remove old runs: the directories under {} are one run each, named by when it started (the queue and its audit trail stay in the database)",
                f.state_dir.join("runs").display()
            ),
        )
    } else {
        Finding::ok("disk", what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_parts_are_named_and_a_large_total_warns() {
        let f = UsageFacts {
            state_dir: ".whilly".into(),
            parts: vec![
                ("runs".into(), 3 * 1024 * 1024 * 1024),
                ("whilly.db".into(), 5 * 1024 * 1024),
            ],
        };
        let found = judge(&f);
        assert_eq!(found.severity, crate::domain::doctor::Severity::Warn);
        assert!(found.what.contains("runs 3.0 GiB"), "{}", found.what);
        assert!(found.what.contains("whilly.db 5.0 MiB"), "{}", found.what);
        let small = UsageFacts {
            state_dir: ".whilly".into(),
            parts: vec![("runs".into(), 1024)],
        };
        assert_eq!(judge(&small).severity, crate::domain::doctor::Severity::Ok);
    }

    #[test]
    fn worktrees_inside_are_not_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("runs/r1")).unwrap();
        std::fs::write(dir.path().join("runs/r1/1.log"), vec![0u8; 4096]).unwrap();
        std::fs::create_dir_all(dir.path().join("worktrees/x")).unwrap();
        std::fs::write(dir.path().join("worktrees/x/big"), vec![0u8; 8192]).unwrap();
        let f = gather(dir.path());
        assert_eq!(f.parts, vec![("runs".to_string(), 4096)]);
    }
}
