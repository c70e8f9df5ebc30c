//! Copies the include-list files (untracked or ignored, like `.env`) from the repository into a
//! worktree, keeping permissions and symlinks as they are.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::error::WorkspaceError;
use super::glob::Pattern;

/// Parses every pattern, naming the first bad one.
pub(super) fn parse_patterns(patterns: &[String]) -> Result<Vec<Pattern>, WorkspaceError> {
    patterns
        .iter()
        .map(|p| {
            Pattern::parse(p).map_err(|reason| WorkspaceError::BadInclude {
                pattern: p.clone(),
                reason,
            })
        })
        .collect()
}

/// Files under `root` matching the patterns, as `/`-separated relative path → absolute path.
/// `.git` and `skip` directories (e.g. a worktrees dir inside the repository) are never entered.
pub(super) fn find_matches(
    root: &Path,
    patterns: &[Pattern],
    skip: &[PathBuf],
) -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    for pat in patterns {
        let prefix = pat.literal_prefix();
        let mut start = root.to_path_buf();
        for seg in &prefix {
            start.push(seg);
        }
        let Ok(md) = fs::symlink_metadata(&start) else {
            continue;
        };
        let rel: Vec<String> = prefix.iter().map(|s| s.to_string()).collect();
        if pat.is_literal() {
            if md.is_dir() {
                collect_all(&start, &rel, skip, &mut out);
            } else {
                out.insert(rel.join("/"), start);
            }
        } else if md.is_dir() {
            walk(&start, rel, pat, skip, &mut out);
        }
    }
    out
}

fn entries(dir: &Path, skip: &[PathBuf]) -> Vec<(String, PathBuf, fs::FileType)> {
    let Ok(rd) = fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_str()?.to_string();
            let ft = e.file_type().ok()?;
            let path = e.path();
            if name == ".git" || skip.iter().any(|s| s == &path) {
                return None;
            }
            // A nested repository or worktree is not this repository's business.
            if ft.is_dir() && path.join(".git").exists() {
                return None;
            }
            Some((name, path, ft))
        })
        .collect()
}

fn walk(
    dir: &Path,
    rel: Vec<String>,
    pat: &Pattern,
    skip: &[PathBuf],
    out: &mut BTreeMap<String, PathBuf>,
) {
    for (name, path, ft) in entries(dir, skip) {
        let mut child = rel.clone();
        child.push(name);
        let segs: Vec<&str> = child.iter().map(String::as_str).collect();
        if pat.matches(&segs) {
            if ft.is_dir() {
                collect_all(&path, &child, skip, out);
            } else {
                out.insert(child.join("/"), path);
            }
        } else if ft.is_dir() && pat.may_match_below(&segs) {
            walk(&path, child, pat, skip, out);
        }
    }
}

fn collect_all(dir: &Path, rel: &[String], skip: &[PathBuf], out: &mut BTreeMap<String, PathBuf>) {
    for (name, path, ft) in entries(dir, skip) {
        let mut child = rel.to_vec();
        child.push(name);
        if ft.is_dir() {
            collect_all(&path, &child, skip, out);
        } else {
            out.insert(child.join("/"), path);
        }
    }
}

/// Copies each file to the same relative place under `dest`. Refuses to write through a symlinked
/// directory of the worktree, which could point anywhere.
pub(super) fn copy_files(
    files: &BTreeMap<String, PathBuf>,
    dest: &Path,
) -> Result<Vec<String>, WorkspaceError> {
    let mut copied = Vec::new();
    for (rel, src) in files {
        let target = dest.join(rel);
        if let Some(parent) = target.parent() {
            check_no_symlinked_dir(dest, parent)?;
            fs::create_dir_all(parent).map_err(WorkspaceError::io("could not create", parent))?;
        }
        let md = fs::symlink_metadata(src).map_err(WorkspaceError::io("could not read", src))?;
        if fs::symlink_metadata(&target)
            .is_ok_and(|m| m.file_type().is_symlink() || md.file_type().is_symlink())
        {
            fs::remove_file(&target).map_err(WorkspaceError::io("could not replace", &target))?;
        }
        if md.file_type().is_symlink() {
            let link =
                fs::read_link(src).map_err(WorkspaceError::io("could not read link", src))?;
            symlink(&link, &target)?;
        } else {
            // fs::copy keeps the permission bits, so an executable helper stays executable.
            fs::copy(src, &target).map_err(WorkspaceError::io(
                "could not copy include file to",
                &target,
            ))?;
        }
        copied.push(rel.clone());
    }
    Ok(copied)
}

fn check_no_symlinked_dir(root: &Path, dir: &Path) -> Result<(), WorkspaceError> {
    let mut cur = dir;
    while cur != root {
        if fs::symlink_metadata(cur).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(WorkspaceError::Io {
                what: "refusing to copy an include file through the symlinked directory",
                path: cur.to_path_buf(),
                source: std::io::Error::other("remove it from the include list"),
            });
        }
        match cur.parent() {
            Some(p) => cur = p,
            None => break,
        }
    }
    Ok(())
}

#[cfg(unix)]
fn symlink(link: &Path, target: &Path) -> Result<(), WorkspaceError> {
    std::os::unix::fs::symlink(link, target)
        .map_err(WorkspaceError::io("could not create symlink", target))
}

#[cfg(not(unix))]
fn symlink(_link: &Path, target: &Path) -> Result<(), WorkspaceError> {
    Err(WorkspaceError::Io {
        what: "symlinks are not supported here",
        path: target.to_path_buf(),
        source: std::io::Error::other("unsupported"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_copies_with_permissions() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        let r = src.path();
        fs::write(r.join(".env"), "A=1").unwrap();
        fs::create_dir_all(r.join("svc/api")).unwrap();
        fs::write(r.join("svc/api/.env"), "B=2").unwrap();
        fs::create_dir_all(r.join(".git")).unwrap();
        fs::write(r.join(".git/.env"), "no").unwrap();
        fs::write(r.join("run.sh"), "#!/bin/sh").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(r.join("run.sh"), fs::Permissions::from_mode(0o750)).unwrap();
        }
        let pats =
            parse_patterns(&["**/.env".into(), "run.sh".into(), "missing.txt".into()]).unwrap();
        let found = find_matches(r, &pats, &[]);
        let keys: Vec<&str> = found.keys().map(String::as_str).collect();
        assert_eq!(keys, vec![".env", "run.sh", "svc/api/.env"]);
        let copied = copy_files(&found, dst.path()).unwrap();
        assert_eq!(copied.len(), 3);
        assert_eq!(
            fs::read_to_string(dst.path().join("svc/api/.env")).unwrap(),
            "B=2"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(dst.path().join("run.sh"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o750);
        }
    }

    #[test]
    fn bad_pattern_is_named() {
        let err = parse_patterns(&[".env".into(), "../secrets".into()]).unwrap_err();
        assert!(err.to_string().contains("../secrets"), "{err}");
    }
}
