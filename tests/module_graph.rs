//! The module arrows of `docs/architecture.md`, checked on the source: which files of `src/`
//! name which others (`crate::…`, `super::…`, `self::…` paths outside comments and test modules),
//! the import cycles among files (Tarjan's strongly connected components), and the tiers no
//! module may reach back into. Cycles are a ratchet: the groups listed in [`KNOWN_CYCLES`] may
//! shrink or go, no other may appear.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

/// The file-level cycles left when this test was written (issue 27), each as its files.
const KNOWN_CYCLES: &[&[&str]] = &[
    &[
        "tui/derived.rs",
        "tui/feed.rs",
        "tui/inbox.rs",
        "tui/msg.rs",
        "tui/split.rs",
        "tui/state.rs",
        "tui/testkit.rs",
        "tui/views.rs",
    ],
];

/// Top-level modules a module must never import (the arrows run one way).
const NEVER: &[(&str, &[&str])] = &[
    (
        "domain",
        &[
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

/// The code of a file without its test module and comments.
fn code(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod ")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
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
    let files = sources(&root);
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
fn no_new_import_cycle_between_files() {
    let g = graph();
    let found = cycles(&g);
    for c in &found {
        // The edges inside each cycle, for whoever breaks it next (`--nocapture`).
        for from in c {
            let inside: Vec<&String> = g[from].iter().filter(|t| c.contains(*t)).collect();
            println!("{from} → {inside:?}");
        }
        println!();
    }
    let known: Vec<BTreeSet<String>> = KNOWN_CYCLES
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect();
    for c in &found {
        assert!(
            known.iter().any(|k| c.is_subset(k)),
            "a new import cycle among files of src/: {c:?} (break it: move what both sides need \
             into a module of its own)"
        );
    }
    println!(
        "{} cycles of {} files (known when written: {} of {})",
        found.len(),
        found.iter().map(BTreeSet::len).sum::<usize>(),
        known.len(),
        known.iter().map(BTreeSet::len).sum::<usize>()
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
}
