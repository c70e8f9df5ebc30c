//! What an agent's output says the sandbox refused: the absolute paths on lines that report a
//! denied write ("Permission denied", "Read-only file system", EACCES, EPERM). Pure.

/// The absolute paths named on lines that report a refused write, in order, each once.
pub fn refused_paths(output: &str) -> Vec<String> {
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
        for word in line.split(|c: char| c.is_whitespace() || "'\"`,;()[]{}".contains(c)) {
            let word = word.trim_end_matches([':', '.']);
            if word.starts_with('/') && word.len() > 1 && !out.iter().any(|p| p == word) {
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
    }
}
