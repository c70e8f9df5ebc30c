//! What an agent's output says the sandbox refused: the absolute paths on lines that report a
//! denied write ("Permission denied", "Read-only file system", EACCES, EPERM). Pure.

/// `path` as the agent meant it from `dir`: absolute as it is, relative joined to `dir`, with
/// `.` and `..` taken lexically (the path may not exist).
pub(crate) fn resolve(dir: &std::path::Path, path: &str) -> std::path::PathBuf {
    use std::path::{Component, PathBuf};
    let joined = dir.join(path);
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The paths named on lines that report a refused write (absolute, or relative with a `/`),
/// in order, each once.
pub(crate) fn refused_paths(output: &str) -> Vec<String> {
    const DENIED: &[&str] = &[
        "permission denied",
        "read-only file system",
        "eacces",
        "eperm",
        "operation not permitted",
    ];
    let mut out: Vec<String> = Vec::new();
    for line in output.lines() {
        let lower = line.to_ascii_lowercase();
        if !DENIED.iter().any(|d| lower.contains(d)) {
            continue;
        }
        // `/usr/bin/bash: line 1: …`, `sh: 1: …`: the reporting program names itself first.
        let reporter = line
            .split_whitespace()
            .next()
            .filter(|w| w.ends_with(':'))
            .map(|w| w.trim_end_matches(':'));
        for word in line.split(|c: char| c.is_whitespace() || "'\"`,;()[]{}".contains(c)) {
            let word = word.trim_end_matches([':', '.']);
            if Some(word) == reporter {
                continue;
            }
            let pathlike = (word.starts_with('/') && word.len() > 1)
                || word.starts_with("./")
                || word.starts_with("../");
            if pathlike && !out.iter().any(|p| p == word) {
                out.push(word.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_on_denied_lines_are_named_once() {
        let out = "working\n\
            sh: 1: cannot create /repo/README.md: Permission denied\n\
            Error: EACCES: permission denied, open '/home/u/repo/x.txt'\n\
            touch: cannot touch '/repo/README.md': Read-only file system\n\
            wrote /tmp/ok\n";
        assert_eq!(
            refused_paths(out),
            ["/repo/README.md", "/home/u/repo/x.txt"]
        );
        assert!(refused_paths("all good in /repo\n").is_empty());
        let relative = "/usr/bin/bash: line 1: ../../README.md: Permission denied\n";
        assert_eq!(refused_paths(relative), ["../../README.md"]);
        assert_eq!(
            resolve(std::path::Path::new("/wt/p/T-1"), "../../README.md"),
            std::path::PathBuf::from("/wt/README.md")
        );
        assert_eq!(
            resolve(std::path::Path::new("/wt"), "/etc/x"),
            std::path::PathBuf::from("/etc/x")
        );
    }
}
