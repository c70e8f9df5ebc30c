//! The module arrows of `docs/architecture.md`, checked on the source: which files of `src/`
//! name which others (`crate::…`, `super::…`, `self::…` paths outside comments and test modules),
//! the import cycles among files (Tarjan's strongly connected components), and the tiers no
//! module may reach back into, and no file imports another that (through others) imports it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// Top-level modules a module must never import (the arrows run one way).
const NEVER: &[(&str, &[&str])] = &[
    (
        "domain",
        &[
            "config",
            "plan",
            "prd",
            "store",
            "agent",
            "workspace",
            "pty",
            "forge",
            "engine",
            "http",
            "tui",
            "cli",
            "bench",
        ],
    ),
    ("store", &["engine", "http", "tui", "cli", "bench"]),
    ("agent", &["engine", "http", "tui", "cli", "bench"]),
    ("workspace", &["engine", "http", "tui", "cli", "bench"]),
    ("pty", &["engine", "http", "tui", "cli", "bench"]),
    ("forge", &["store", "engine", "http", "tui", "cli", "bench"]),
    ("engine", &["http", "tui", "cli", "bench"]),
    ("http", &["cli", "bench"]),
    ("tui", &["cli", "bench"]),
    ("prd", &["engine", "http", "tui", "cli", "bench"]),
    ("config", &["engine", "http", "tui", "cli", "bench"]),
    ("plan", &["engine", "http", "tui", "cli", "bench"]),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn sources(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                out.insert(rel, std::fs::read_to_string(&p).unwrap());
            }
        }
    }
    out
}

/// `engine/attempt/mod.rs` → `["engine", "attempt"]`.
fn module_of(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// Whether `line` opens a test-only item (`#[cfg(test)]`, `#[cfg(any(test, …))]`).
fn is_test_cfg(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("#[cfg(test)]") || l.starts_with("#[cfg(any(test")
}

/// The item after the attributes and comments that follow line `at`.
fn item_after(lines: &[&str], at: usize) -> Option<(usize, String)> {
    (at + 1..lines.len())
        .find(|&k| {
            let t = lines[k].trim();
            !(t.starts_with("#[") || t.starts_with("//") || t.is_empty())
        })
        .map(|k| (k, lines[k].trim().to_string()))
}

/// The code of a file without its inline test module and comments.
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let end = (0..lines.len())
        .find(|&i| {
            is_test_cfg(lines[i])
                && item_after(&lines, i).is_some_and(|(_, item)| {
                    let item = item.trim_start_matches("pub ");
                    item.starts_with("mod ") && item.ends_with('{')
                })
        })
        .unwrap_or(lines.len());
    lines[..end]
        .iter()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Files of `files` that only tests compile: declared `mod x;` under a test cfg (with its
/// `#[path]` when it has one), as paths relative to `src/`.
fn test_only_files(files: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (rel, text) in files {
        let lines: Vec<&str> = text.lines().collect();
        let dir = match rel.rsplit_once('/') {
            Some((d, "mod.rs" | "lib.rs" | "main.rs")) => format!("{d}/"),
            Some((d, f)) => format!("{d}/{}/", f.trim_end_matches(".rs")),
            None if matches!(rel.as_str(), "lib.rs" | "main.rs") => String::new(),
            None => format!("{}/", rel.trim_end_matches(".rs")),
        };
        for i in 0..lines.len() {
            if !is_test_cfg(lines[i]) {
                continue;
            }
            let Some((k, item)) = item_after(&lines, i) else {
                continue;
            };
            let Some(name) = item
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'))
            else {
                continue;
            };
            let path = lines[i..k].iter().find_map(|l| {
                l.trim()
                    .strip_prefix("#[path = \"")
                    .and_then(|r| r.split('"').next())
            });
            match path {
                // `#[path]` is relative to the declaring file's directory.
                Some(p) => {
                    let base = rel
                        .rsplit_once('/')
                        .map_or(String::new(), |(d, _)| format!("{d}/"));
                    out.insert(format!("{base}{p}"));
                }
                None => {
                    out.insert(format!("{dir}{name}.rs"));
                    out.insert(format!("{dir}{name}/mod.rs"));
                }
            }
        }
    }
    out
}

/// Every `crate::a::b`, `super::x`, `self::y` path in `code`, and those inside `use …::{…}`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = ["crate::", "super::", "self::"]
            .iter()
            .find(|p| code_at(&bytes, i, p) && (i == 0 || !is_ident(bytes[i - 1])));
        if let Some(p) = starts {
            let mut j = i;
            let mut segs = Vec::new();
            let mut seg = String::new();
            while j < bytes.len() {
                let c = bytes[j];
                if is_ident(c) {
                    seg.push(c);
                    j += 1;
                } else if code_at(&bytes, j, "::") {
                    segs.push(std::mem::take(&mut seg));
                    j += 2;
                    if j < bytes.len() && bytes[j] == '{' {
                        // A group: each of its items is a path under what came before.
                        let end = group_end(&bytes, j);
                        let inner: String = bytes[j + 1..end].iter().collect();
                        for item in split_top(&inner) {
                            let mut full = segs.clone();
                            full.extend(
                                item.split(" as ")
                                    .next()
                                    .unwrap_or_default()
                                    .split("::")
                                    .map(|s| {
                                        s.trim().trim_matches(|c| c == '{' || c == '}').to_string()
                                    })
                                    .filter(|s| !s.is_empty()),
                            );
                            out.push(full);
                        }
                        j = end + 1;
                        segs.clear();
                        break;
                    }
                } else {
                    break;
                }
            }
            if !seg.is_empty() {
                segs.push(seg);
            }
            if !segs.is_empty() {
                out.push(segs);
            }
            i = j.max(i + p.len());
        } else {
            i += 1;
        }
    }
    out
}

fn code_at(bytes: &[char], i: usize, s: &str) -> bool {
    s.chars()
        .enumerate()
        .all(|(k, c)| bytes.get(i + k) == Some(&c))
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn group_end(bytes: &[char], open: usize) -> usize {
    let mut depth = 0;
    for (k, c) in bytes.iter().enumerate().skip(open) {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k;
                }
            }
            _ => {}
        }
    }
    bytes.len() - 1
}

/// Items of a `{…}` group at its top level.
fn split_top(inner: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = sources(&root);
    let tests = test_only_files(&files);
    files.retain(|rel, _| !tests.contains(rel));
    let modules: HashMap<Vec<String>, String> = files
        .keys()
        .map(|rel| (module_of(rel), rel.clone()))
        .collect();
    let mut g = Graph::new();
    for (rel, text) in &files {
        let here = module_of(rel);
        let deps = g.entry(rel.clone()).or_default();
        for path in paths(&code(text)) {
            let (mut base, rest) = match path[0].as_str() {
                "crate" => (Vec::new(), &path[1..]),
                "self" => (here.clone(), &path[1..]),
                "super" => {
                    let mut b = here.clone();
                    let mut k = 0;
                    while path.get(k).map(String::as_str) == Some("super") {
                        b.pop();
                        k += 1;
                    }
                    (b, &path[k..])
                }
                _ => continue,
            };
            base.extend(rest.iter().cloned());
            // The longest prefix that is a file of ours.
            let target = (1..=base.len()).rev().find_map(|k| modules.get(&base[..k]));
            if let Some(t) = target
                && t != rel
            {
                deps.insert(t.clone());
            }
        }
    }
    g
}

/// Strongly connected components with more than one file.
fn cycles(g: &Graph) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        let g = t.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_import_cycle_between_files() {
    let g = graph();
    let found = cycles(&g);
    let mut shown = String::new();
    for c in &found {
        // The edges inside each cycle, for whoever breaks it.
        for from in c {
            let inside: Vec<&String> = g[from].iter().filter(|t| c.contains(*t)).collect();
            shown.push_str(&format!("  {from} → {inside:?}\n"));
        }
        shown.push('\n');
    }
    assert!(
        found.is_empty(),
        "import cycles among files of src/ (break each: move what both sides need into a \
         module of its own):\n{shown}"
    );
}

#[test]
fn the_arrows_run_one_way() {
    let g = graph();
    let top = |f: &str| {
        f.split('/')
            .next()
            .unwrap_or_default()
            .trim_end_matches(".rs")
            .to_string()
    };
    let mut wrong = Vec::new();
    for (from, deps) in &g {
        let a = top(from);
        let Some((_, never)) = NEVER.iter().find(|(m, _)| *m == a) else {
            continue;
        };
        for to in deps {
            if never.contains(&top(to).as_str()) {
                wrong.push(format!("{from} → {to}"));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the arrows: {wrong:#?}");
}

#[test]
fn the_checker_sees_paths_groups_and_supers() {
    let p = paths("use crate::engine::{worker::Engine, schedule};\nlet x = super::super::y::z();");
    let v = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<String>>();
    assert!(p.contains(&v(&["crate", "engine", "worker", "Engine"])));
    assert!(p.contains(&v(&["crate", "engine", "schedule"])));
    assert!(
        p.iter()
            .any(|q| q[..2] == ["super".to_string(), "super".to_string()])
    );
    let mut g = Graph::new();
    g.entry("a.rs".into()).or_default().insert("b.rs".into());
    g.entry("b.rs".into()).or_default().insert("a.rs".into());
    g.entry("c.rs".into()).or_default().insert("a.rs".into());
    assert_eq!(cycles(&g).len(), 1);
    assert_eq!(cycles(&g)[0].len(), 2);
    // Test-only files and inline test modules are not part of the graph.
    let mut files = BTreeMap::new();
    files.insert(
        "tui/mod.rs".to_string(),
        "#[cfg(any(test, feature = \"testkit\"))]\npub mod testkit;\npub mod state;".to_string(),
    );
    files.insert(
        "tui/state.rs".to_string(),
        "use crate::x;\n#[cfg(test)]\n#[path = \"state_tests.rs\"]\nmod tests;".to_string(),
    );
    let tests = test_only_files(&files);
    assert!(tests.contains("tui/testkit.rs") && tests.contains("tui/state_tests.rs"));
    assert!(!tests.contains("tui/state.rs"));
    let c = code(
        "use crate::a;\n#[cfg(test)]\n#[allow(clippy::unwrap_used)]\nmod tests {\n use crate::b;\n}",
    );
    assert!(c.contains("crate::a") && !c.contains("crate::b"));
}
