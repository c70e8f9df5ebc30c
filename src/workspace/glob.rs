//! The include-list patterns: a small, predictable glob over `/`-separated relative paths.
//!
//! `*` and `?` match within one path segment, a `**` segment matches any number of segments, and
//! everything else is literal. Patterns are anchored at the repository root (`.env` is only the
//! root `.env`; `**/.env` is every `.env`), unlike .gitignore, so a pattern copies what it says.

/// A checked pattern, split into segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Pattern {
    segs: Vec<String>,
}

impl Pattern {
    /// Refuses patterns that could reach outside the repository: absolute, `..`, empty.
    pub(super) fn parse(text: &str) -> Result<Pattern, String> {
        let trimmed = text.trim().trim_end_matches('/');
        if trimmed.is_empty() {
            return Err("the pattern is empty".into());
        }
        if trimmed.starts_with('/') || trimmed.starts_with('\\') {
            return Err(
                "patterns are relative to the repository root; remove the leading '/'".into(),
            );
        }
        if trimmed.contains('\0') {
            return Err("the pattern contains a NUL byte".into());
        }
        let segs: Vec<String> = trimmed
            .split('/')
            .filter(|s| !s.is_empty() && *s != ".")
            .map(str::to_string)
            .collect();
        if segs.iter().any(|s| s == "..") {
            return Err("'..' would leave the repository; name files inside it".into());
        }
        if segs.iter().any(|s| s.contains("**") && s != "**") {
            return Err("'**' must be a whole path segment, as in `**/.env`".into());
        }
        if segs.is_empty() {
            return Err("the pattern names the repository root itself".into());
        }
        Ok(Pattern { segs })
    }

    /// The leading segments without wildcards: the walk can start there.
    pub(super) fn literal_prefix(&self) -> Vec<&str> {
        self.segs
            .iter()
            .take_while(|s| !has_wildcard(s))
            .map(String::as_str)
            .collect()
    }

    /// True when the pattern has no wildcard: it names one path.
    pub(super) fn is_literal(&self) -> bool {
        self.segs.iter().all(|s| !has_wildcard(s))
    }

    /// Whether the relative path (segments) matches the whole pattern.
    pub(super) fn matches(&self, path: &[&str]) -> bool {
        match_segs(&self.segs, path)
    }

    /// Whether something below the directory `dir` (segments) could still match: prunes the walk.
    pub(super) fn may_match_below(&self, dir: &[&str]) -> bool {
        viable(&self.segs, dir)
    }
}

fn has_wildcard(seg: &str) -> bool {
    seg.contains('*') || seg.contains('?')
}

fn match_segs(pat: &[String], path: &[&str]) -> bool {
    match pat.split_first() {
        None => path.is_empty(),
        Some((first, rest)) if first == "**" => {
            (0..=path.len()).any(|skip| match_segs(rest, &path[skip..]))
        }
        Some((first, rest)) => match path.split_first() {
            Some((seg, path_rest)) => match_seg(first, seg) && match_segs(rest, path_rest),
            None => false,
        },
    }
}

fn viable(pat: &[String], dir: &[&str]) -> bool {
    match (pat.split_first(), dir.split_first()) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some((first, _)), Some(_)) if first == "**" => true,
        (Some((first, rest)), Some((seg, dir_rest))) => {
            match_seg(first, seg) && viable(rest, dir_rest)
        }
    }
}

/// `*` and `?` within one segment.
fn match_seg(pat: &str, s: &str) -> bool {
    let p: Vec<char> = pat.chars().collect();
    let t: Vec<char> = s.chars().collect();
    // Iterative matcher with single-star backtracking: linear-ish, no recursion blow-up.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn m(p: &str, path: &str) -> bool {
        let segs: Vec<&str> = path.split('/').collect();
        Pattern::parse(p).map(|p| p.matches(&segs)).unwrap_or(false)
    }

    #[test]
    fn matching() {
        assert!(m(".env", ".env"));
        assert!(!m(".env", "sub/.env"));
        assert!(m("**/.env", ".env"));
        assert!(m("**/.env", "a/b/.env"));
        assert!(m(".env*", ".env.local"));
        assert!(m("config/*.toml", "config/local.toml"));
        assert!(!m("config/*.toml", "config/sub/local.toml"));
        assert!(m("config/**/*.toml", "config/sub/x/local.toml"));
        assert!(m("a?c", "abc"));
        assert!(!m("a?c", "ac"));
        assert!(m("*a*b*", "xxaxxbxx"));
        assert!(!m("*a*b", "xxaxxbxx"));
        assert!(m("secrets/", "secrets"));
    }

    #[test]
    fn pruning_and_prefix() {
        let p = Pattern::parse("config/*/x.toml").unwrap();
        assert_eq!(p.literal_prefix(), vec!["config"]);
        assert!(p.may_match_below(&["config"]));
        assert!(p.may_match_below(&["config", "a"]));
        assert!(!p.may_match_below(&["config", "a", "x.toml"]));
        assert!(!p.may_match_below(&["src"]));
        let any = Pattern::parse("**/.env").unwrap();
        assert!(any.may_match_below(&["deep", "dir"]));
        assert!(Pattern::parse(".env").unwrap().is_literal());
    }

    #[test]
    fn refuses_escapes() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a**/b", ".", "./"] {
            assert!(Pattern::parse(bad).is_err(), "{bad:?}");
        }
        assert!(Pattern::parse("./.env").is_ok());
    }
}
