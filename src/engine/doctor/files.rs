//! `.whilly/` must be the user's alone: the queue, the events, attempt logs and prompts may hold
//! source and secrets. Directories 0700, files 0600 (`fsutil::private_dir` keeps new ones so).

use crate::domain::doctor::{Finding, Fix};
use std::path::{Path, PathBuf};

/// What the walk over `.whilly/` found readable by others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PermFacts {
    pub state_dir: PathBuf,
    pub exists: bool,
    /// Directories with any group or other bits, and their mode.
    pub wide_dirs: Vec<(PathBuf, u32)>,
    pub wide_files: Vec<(PathBuf, u32)>,
}

/// Walks `.whilly/` without following symlinks. Worktrees kept inside it (the fallback when
/// there is no home directory) hold the project's own files, whose modes are the project's
/// business, so they are left out.
pub fn gather(state_dir: &Path) -> PermFacts {
    let mut f = PermFacts {
        state_dir: state_dir.to_path_buf(),
        exists: state_dir.is_dir(),
        ..Default::default()
    };
    let skip = state_dir.join("worktrees");
    let mut stack = vec![state_dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let mode = mode_of(&md);
        if md.is_dir() {
            if mode & 0o077 != 0 {
                f.wide_dirs.push((p.clone(), mode));
            }
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(rd.flatten().map(|e| e.path()).filter(|c| *c != skip));
            }
        } else if md.is_file() && mode & 0o077 != 0 {
            f.wide_files.push((p, mode));
        }
    }
    f.wide_dirs.sort();
    f.wide_files.sort();
    f
}

#[cfg(unix)]
fn mode_of(md: &std::fs::Metadata) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    md.permissions().mode() & 0o777
}

#[cfg(not(unix))]
fn mode_of(_md: &std::fs::Metadata) -> u32 {
    0o700
}

pub fn judge(f: &PermFacts) -> Vec<Finding> {
    let shown = f.state_dir.display();
    if !f.exists {
        return vec![Finding::ok(
            "files",
            format!("{shown} does not exist yet (whilly creates it private)"),
        )];
    }
    if f.wide_dirs.is_empty() && f.wide_files.is_empty() {
        return vec![Finding::ok(
            "files",
            format!("{shown} is private (directories 0700, files 0600)"),
        )];
    }
    let examples: Vec<String> = f
        .wide_dirs
        .iter()
        .chain(&f.wide_files)
        .take(3)
        .map(|(p, m)| format!("{} ({m:04o})", p.display()))
        .collect();
    vec![
        Finding::problem(
            "files",
            format!(
                "{} directories and {} files under {shown} can be read by other users: {}",
                f.wide_dirs.len(),
                f.wide_files.len(),
                examples.join(", ")
            ),
            "the queue, the audit trail, attempt logs and prompts hold your source and may hold secrets",
            format!(
                "chmod 700 the directories and 600 the files (`chmod -R go-rwx {shown}`); `whilly doctor --fix` does it"
            ),
        )
        .fixable(Fix::NarrowPermissions {
            dirs: f.wide_dirs.iter().map(|(p, _)| p.clone()).collect(),
            files: f.wide_files.iter().map(|(p, _)| p.clone()).collect(),
        }),
    ]
}

/// The fix: directories to 0700, files to 0600.
pub fn narrow(dirs: &[PathBuf], files: &[PathBuf]) -> Result<String, super::DoctorError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for (paths, mode) in [(dirs, 0o700), (files, 0o600)] {
            for p in paths {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).map_err(
                    |source| super::DoctorError::Io {
                        path: p.display().to_string(),
                        source,
                    },
                )?;
            }
        }
    }
    Ok(format!(
        "narrowed {} directories to 0700 and {} files to 0600",
        dirs.len(),
        files.len()
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::domain::doctor::Severity;

    #[test]
    fn private_is_ok_and_wide_is_a_fixable_problem() {
        let base = PermFacts {
            state_dir: "/r/.whilly".into(),
            exists: true,
            ..Default::default()
        };
        assert_eq!(judge(&base)[0].severity, Severity::Ok);
        let wide = PermFacts {
            wide_dirs: vec![("/r/.whilly".into(), 0o755)],
            wide_files: vec![("/r/.whilly/events.jsonl".into(), 0o644)],
            ..base
        };
        let f = &judge(&wide)[0];
        assert_eq!(f.severity, Severity::Problem);
        assert!(f.what.contains("/r/.whilly (0755)"), "{}", f.what);
        assert!(f.what.contains("events.jsonl (0644)"), "{}", f.what);
        assert!(f.fix.contains("chmod"));
        assert!(matches!(f.fixable, Some(Fix::NarrowPermissions { .. })));
    }

    #[cfg(unix)]
    #[test]
    fn the_walk_finds_wide_modes_and_the_fix_narrows_them() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join(".whilly");
        std::fs::create_dir_all(state.join("worktrees/x")).unwrap();
        std::fs::write(state.join("a.log"), "x").unwrap();
        std::fs::write(state.join("worktrees/x/src.rs"), "x").unwrap();
        for (p, m) in [(&state, 0o755), (&state.join("a.log"), 0o644)] {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        }
        let f = gather(&state);
        assert_eq!(f.wide_dirs, vec![(state.clone(), 0o755)]);
        assert_eq!(f.wide_files, vec![(state.join("a.log"), 0o644)]);
        narrow(&[state.clone()], &[state.join("a.log")]).unwrap();
        let again = gather(&state);
        assert!(again.wide_dirs.is_empty() && again.wide_files.is_empty());
    }
}
