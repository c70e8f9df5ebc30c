//! `.whilly/` must be the user's alone: the queue, the events, attempt logs and prompts may hold
//! source and secrets. Directories 0700, files 0600 (`fsutil::private_dir` keeps new ones so).

use crate::domain::doctor::{Finding, Fix};
use std::path::{Path, PathBuf};

/// An entry with group or other permission bits.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Wide {
    pub path: PathBuf,
    pub mode: u32,
    /// Others can reach it: every directory above it (up to `.whilly/` itself) lets them
    /// through. A wide file inside a 0700 directory is shielded, not exposed.
    pub exposed: bool,
}

/// What the walk over `.whilly/` found wider than the user's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PermFacts {
    pub state_dir: PathBuf,
    pub exists: bool,
    pub wide_dirs: Vec<Wide>,
    pub wide_files: Vec<Wide>,
}

/// Walks `.whilly/` without following symlinks. Worktrees kept inside it (the fallback when
/// there is no home directory) hold the project's own files, whose modes are the project's
/// business, so they are left out.
pub(crate) fn gather(state_dir: &Path) -> PermFacts {
    let mut f = PermFacts {
        state_dir: state_dir.to_path_buf(),
        exists: state_dir.is_dir(),
        ..Default::default()
    };
    let skip = state_dir.join("worktrees");
    // (path, whether others can pass through every directory above it)
    let mut stack = vec![(state_dir.to_path_buf(), true)];
    while let Some((p, reachable)) = stack.pop() {
        let Ok(md) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let mode = mode_of(&md);
        let wide = Wide {
            path: p.clone(),
            mode,
            exposed: reachable,
        };
        if md.is_dir() {
            if mode & 0o077 != 0 {
                f.wide_dirs.push(wide);
            }
            let through = reachable && mode & 0o011 != 0;
            if let Ok(rd) = std::fs::read_dir(&p) {
                stack.extend(
                    rd.flatten()
                        .map(|e| e.path())
                        .filter(|c| *c != skip)
                        .map(|c| (c, through)),
                );
            }
        } else if md.is_file() && mode & 0o077 != 0 {
            f.wide_files.push(wide);
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

pub(crate) fn judge(f: &PermFacts) -> Vec<Finding> {
    let shown = f.state_dir.display();
    if !f.exists {
        return vec![Finding::ok(
            "files",
            format!("{shown} does not exist yet (whilly creates it private)"),
        )];
    }
    let exposed = |v: &[Wide]| v.iter().filter(|w| w.exposed).count();
    let (dirs, files) = (exposed(&f.wide_dirs), exposed(&f.wide_files));
    if dirs + files == 0 {
        let shielded = f.wide_dirs.len() + f.wide_files.len();
        let mut what = format!("{shown} is private");
        if shielded > 0 {
            what.push_str(&format!(
                " ({shielded} entries inside are wider, but only you can reach them)"
            ));
        }
        return vec![Finding::ok("files", what)];
    }
    // A few of each, so a file is named even when many directories are wide.
    let examples: Vec<String> = (f.wide_dirs.iter().filter(|w| w.exposed).take(2))
        .chain(f.wide_files.iter().filter(|w| w.exposed).take(3))
        .map(|w| format!("{} ({:04o})", w.path.display(), w.mode))
        .collect();
    vec![
        Finding::problem(
            "files",
            format!(
                "{dirs} directories and {files} files under {shown} can be read by other users: {}",
                examples.join(", ")
            ),
            "the queue, the audit trail, attempt logs and prompts hold your source and may hold secrets",
            format!(
                "chmod 700 the directories and 600 the files (`chmod -R go-rwx {shown}`); `whilly doctor --fix` does it"
            ),
        )
        // Everything wide is narrowed, shielded or not: a directory opened later must not
        // expose what it holds.
        .fixable(Fix::NarrowPermissions {
            dirs: f.wide_dirs.iter().map(|w| w.path.clone()).collect(),
            files: f.wide_files.iter().map(|w| w.path.clone()).collect(),
        }),
    ]
}

/// The fix: directories to 0700, files to 0600.
pub(crate) fn narrow(dirs: &[PathBuf], files: &[PathBuf]) -> Result<String, super::DoctorError> {
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
        let w = |p: &str, mode, exposed| Wide {
            path: p.into(),
            mode,
            exposed,
        };
        let shielded = PermFacts {
            wide_files: vec![w("/r/.whilly/runs/a.log", 0o644, false)],
            ..base.clone()
        };
        let ok = &judge(&shielded)[0];
        assert_eq!(ok.severity, Severity::Ok);
        assert!(
            ok.what.contains("1 entries inside are wider"),
            "{}",
            ok.what
        );
        let wide = PermFacts {
            wide_dirs: vec![w("/r/.whilly", 0o755, true)],
            wide_files: vec![
                w("/r/.whilly/events.jsonl", 0o644, true),
                w("/r/.whilly/runs/a.log", 0o644, false),
            ],
            ..base
        };
        let f = &judge(&wide)[0];
        assert_eq!(f.severity, Severity::Problem);
        assert!(f.what.contains("/r/.whilly (0755)"), "{}", f.what);
        assert!(f.what.contains("events.jsonl (0644)"), "{}", f.what);
        assert!(f.fix.contains("chmod"));
        assert!(
            f.what.starts_with("1 directories and 1 files"),
            "{}",
            f.what
        );
        assert!(!f.what.contains("a.log"), "{}", f.what);
        match &f.fixable {
            Some(Fix::NarrowPermissions { files, .. }) => assert_eq!(files.len(), 2),
            other => panic!("{other:?}"),
        }
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
        std::fs::create_dir_all(state.join("runs")).unwrap();
        std::fs::write(state.join("runs/b.log"), "x").unwrap();
        std::fs::set_permissions(state.join("runs"), std::fs::Permissions::from_mode(0o700))
            .unwrap();
        std::fs::set_permissions(
            state.join("runs/b.log"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let f = gather(&state);
        let wide = |v: &[Wide]| -> Vec<(PathBuf, u32, bool)> {
            v.iter()
                .map(|w| (w.path.clone(), w.mode, w.exposed))
                .collect()
        };
        assert_eq!(wide(&f.wide_dirs), vec![(state.clone(), 0o755, true)]);
        assert_eq!(
            wide(&f.wide_files),
            vec![
                (state.join("a.log"), 0o644, true),
                (state.join("runs/b.log"), 0o644, false)
            ]
        );
        narrow(
            std::slice::from_ref(&state),
            &[state.join("a.log"), state.join("runs/b.log")],
        )
        .unwrap();
        let again = gather(&state);
        assert!(again.wide_dirs.is_empty() && again.wide_files.is_empty());
    }
}
