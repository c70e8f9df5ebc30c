//! The dependency graph of a plan: cycles, topological order, the ready set and key_files batching.
//!
//! Edges point from a task to the tasks it depends on, so a cycle reads `A → B → A` as "A waits
//! for B, which waits for A". Dependencies naming unknown ids are not edges here (validation
//! reports them); a duplicated id is one node, its first occurrence, so every function stays
//! total on broken plans (the TRIZ report runs on plans that failed validation).

use super::model::TaskSpec;
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;

/// What the scheduler needs to know about a task, so the store's rows can use these helpers too.
pub(crate) trait Schedulable {
    fn task_id(&self) -> &str;
    fn task_dependencies(&self) -> &[String];
}

impl Schedulable for TaskSpec {
    fn task_id(&self) -> &str {
        &self.id
    }
    fn task_dependencies(&self) -> &[String] {
        &self.dependencies
    }
}

impl<T: Schedulable + ?Sized> Schedulable for &T {
    fn task_id(&self) -> &str {
        (**self).task_id()
    }
    fn task_dependencies(&self) -> &[String] {
        (**self).task_dependencies()
    }
}

/// One dependency cycle, closed: the first id is repeated at the end (`[A, B, A]`, `[A, A]`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub(crate) struct Cycle {
    pub path: Vec<String>,
}

impl Cycle {
    /// The distinct tasks on the cycle, in path order.
    pub(crate) fn members(&self) -> &[String] {
        &self.path[..self.path.len().saturating_sub(1)]
    }

    pub(crate) fn is_self_loop(&self) -> bool {
        self.path.len() == 2
    }
}

impl fmt::Display for Cycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.path.join(" → "))
    }
}

/// At most this many cycles are reported: past that a plan is broken beyond what a longer list
/// would help with, and pathological graphs must not make the check slow.
pub(crate) const MAX_REPORTED_CYCLES: usize = 1000;

/// The graph, indexed: node `i` is the first task with id `ids[i]`.
#[derive(Debug, Clone)]
pub(crate) struct DepGraph<'a> {
    ids: Vec<&'a str>,
    /// Known dependencies of each node, without repeats, in node (file) order.
    deps: Vec<Vec<usize>>,
}

impl<'a> DepGraph<'a> {
    pub(crate) fn new<T: Schedulable>(tasks: &'a [T]) -> DepGraph<'a> {
        let mut index: HashMap<&'a str, usize> = HashMap::with_capacity(tasks.len());
        let mut ids = Vec::with_capacity(tasks.len());
        let mut owners = Vec::with_capacity(tasks.len());
        for t in tasks {
            let id = t.task_id();
            if !index.contains_key(id) {
                index.insert(id, ids.len());
                ids.push(id);
                owners.push(t);
            }
        }
        let deps = owners
            .iter()
            .map(|t| {
                let mut known: Vec<usize> = Vec::with_capacity(t.task_dependencies().len());
                for d in t.task_dependencies() {
                    if let Some(&n) = index.get(d.as_str()) {
                        known.push(n);
                    }
                }
                // Repeats are dropped without a set per task: lists are short.
                known.sort_unstable();
                known.dedup();
                known
            })
            .collect();
        DepGraph { ids, deps }
    }

    /// Strongly connected components (Tarjan, iterative so a 10,000-task chain cannot overflow
    /// the stack). Each component's nodes are returned in ascending node order.
    pub(crate) fn components(&self) -> Vec<Vec<usize>> {
        let n = self.ids.len();
        const UNSEEN: usize = usize::MAX;
        let mut index = vec![UNSEEN; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack = Vec::new();
        let mut out = Vec::new();
        let mut next = 0usize;
        // (node, position of the next edge to look at)
        let mut work: Vec<(usize, usize)> = Vec::new();
        for root in 0..n {
            if index[root] != UNSEEN {
                continue;
            }
            work.push((root, 0));
            index[root] = next;
            low[root] = next;
            next += 1;
            stack.push(root);
            on_stack[root] = true;
            while let Some(&mut (v, ref mut edge)) = work.last_mut() {
                if let Some(&w) = self.deps[v].get(*edge) {
                    *edge += 1;
                    if index[w] == UNSEEN {
                        index[w] = next;
                        low[w] = next;
                        next += 1;
                        stack.push(w);
                        on_stack[w] = true;
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut comp = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp.push(w);
                        if w == v {
                            break;
                        }
                    }
                    comp.sort_unstable();
                    out.push(comp);
                }
            }
        }
        out
    }

    /// Every cycle, each with a concrete path: self-loops, and for each larger strongly connected
    /// component the shortest cycle through its first uncovered task, until each of its tasks is
    /// on some reported cycle. Ordered by the file position of the cycle's first task.
    pub(crate) fn cycles(&self) -> Vec<Cycle> {
        let mut found: Vec<(usize, Cycle)> = Vec::new();
        for comp in self.components() {
            for &v in &comp {
                if self.deps[v].contains(&v) {
                    let id = self.ids[v].to_string();
                    found.push((
                        v,
                        Cycle {
                            path: vec![id.clone(), id],
                        },
                    ));
                }
            }
            if comp.len() < 2 {
                continue;
            }
            let members: HashSet<usize> = comp.iter().copied().collect();
            let mut covered: HashSet<usize> = HashSet::new();
            for &start in &comp {
                if found.len() >= MAX_REPORTED_CYCLES {
                    break;
                }
                if covered.contains(&start) {
                    continue;
                }
                if let Some(path) = self.shortest_cycle(start, &members) {
                    covered.extend(path.iter().copied());
                    let mut ids: Vec<String> =
                        path.iter().map(|&i| self.ids[i].to_string()).collect();
                    ids.push(self.ids[start].to_string());
                    found.push((start, Cycle { path: ids }));
                }
            }
        }
        found.sort_by_key(|(start, _)| *start);
        found.truncate(MAX_REPORTED_CYCLES);
        found.into_iter().map(|(_, c)| c).collect()
    }

    /// BFS inside one component from `start` back to `start`, skipping self-loops (reported
    /// on their own). Returns the nodes of the path without the closing repeat.
    fn shortest_cycle(&self, start: usize, members: &HashSet<usize>) -> Option<Vec<usize>> {
        let mut parent: HashMap<usize, usize> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(v) = queue.pop_front() {
            for &w in &self.deps[v] {
                if w == v || !members.contains(&w) {
                    continue;
                }
                if w == start {
                    let mut path = vec![v];
                    let mut cur = v;
                    while cur != start {
                        cur = *parent.get(&cur)?;
                        path.push(cur);
                    }
                    path.reverse();
                    return Some(path);
                }
                if w != start && !parent.contains_key(&w) {
                    parent.insert(w, v);
                    queue.push_back(w);
                }
            }
        }
        None
    }
}

/// Key files are compared as paths inside the repository: surrounding whitespace, empty and
/// `.` components and trailing `/` dropped, `..` taken back lexically (`src//a.rs`,
/// `src/./a.rs` and `lib/../src/a.rs` are all `src/a.rs`). A path that climbs out of the
/// repository keeps its leading `..` (the plan check refuses it, see [`key_file_problem`]).
pub(crate) fn normalize_key_file(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.trim().split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    parts.join("/")
}

/// Why a key file cannot name a place in the repository: absolute, or climbing out of it.
pub(crate) fn key_file_problem(path: &str) -> Option<&'static str> {
    let t = path.trim();
    if t.starts_with('/')
        || t.starts_with('\\')
        || t.get(1..3) == Some(":\\")
        || t.get(1..3) == Some(":/")
    {
        Some("is an absolute path; key files are paths inside the repository")
    } else if normalize_key_file(t).split('/').next() == Some("..") {
        Some("climbs out of the repository with `..`")
    } else if normalize_key_file(t).is_empty() {
        Some("names the whole repository; name the files or directories the task changes")
    } else {
        None
    }
}

/// The directories above a claim key (`scope\tsrc/a/b.rs` → `scope\tsrc`, `scope\tsrc/a`): a
/// claimer locks them with the key itself, so two claims of a directory and a file in it, made
/// at the same moment, cannot both pass.
pub(crate) fn claim_key_ancestors(key: &str) -> Vec<String> {
    let (scope, path) = key.split_once('\t').unwrap_or(("", key));
    path.match_indices('/')
        .map(|(i, _)| format!("{scope}\t{}", &path[..i]))
        .collect()
}

/// What a task holds while it runs, as the queue compares them across processes: each key file
/// (normalised) within its repository target. Tasks without a `repo_target_id` share one scope,
/// so two plans run from the same checkout keep apart on `src/main.rs`; a queue shared by many
/// repositories only over-serialises identical paths, never lets two writers meet. Sorted and
/// deduplicated, so stores can lock them in one order.
pub(crate) fn claim_keys(task: &crate::domain::TaskSpec) -> Vec<String> {
    let scope = task.repo_target_id.as_deref().unwrap_or("");
    let mut keys: Vec<String> = task
        .key_files
        .iter()
        .map(|k| normalize_key_file(k))
        .filter(|k| !k.is_empty())
        .map(|k| format!("{scope}\t{k}"))
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Priority;

    fn t(id: &str, prio: Priority, deps: &[&str], keys: &[&str]) -> TaskSpec {
        TaskSpec {
            id: id.into(),
            priority: prio,
            dependencies: deps.iter().map(|s| s.to_string()).collect(),
            key_files: keys.iter().map(|s| s.to_string()).collect(),
            ..TaskSpec::default()
        }
    }

    fn m(id: &str, deps: &[&str]) -> TaskSpec {
        t(id, Priority::Medium, deps, &[])
    }

    fn paths(cycles: &[Cycle]) -> Vec<String> {
        cycles.iter().map(|c| c.to_string()).collect()
    }

    #[test]
    fn acyclic_plan_has_no_cycles() {
        let tasks = vec![m("A", &[]), m("B", &["A"]), m("C", &["A", "B", "missing"])];
        assert!(DepGraph::new(&tasks).cycles().is_empty());
    }

    #[test]
    fn reports_each_cycle_with_its_path() {
        let tasks = vec![
            m("A", &["B"]),
            m("B", &["C"]),
            m("C", &["A"]),
            m("D", &["D"]),
            m("E", &["F"]),
            m("F", &["E"]),
            m("G", &["A"]),
        ];
        assert_eq!(
            paths(&DepGraph::new(&tasks).cycles()),
            ["A → B → C → A", "D → D", "E → F → E"]
        );
        let c = &DepGraph::new(&tasks).cycles()[1];
        assert!(c.is_self_loop());
        assert_eq!(c.members(), ["D"]);
    }

    #[test]
    fn every_member_of_a_tangled_component_is_on_a_reported_cycle() {
        // A ⇄ B and B ⇄ C form one component; both small cycles must be shown.
        let tasks = vec![m("A", &["B"]), m("B", &["A", "C"]), m("C", &["B"])];
        assert_eq!(
            paths(&DepGraph::new(&tasks).cycles()),
            ["A → B → A", "C → B → C"]
        );
    }

    #[test]
    fn self_loop_inside_a_larger_cycle_is_reported_too() {
        let tasks = vec![m("A", &["A", "B"]), m("B", &["A"])];
        assert_eq!(
            paths(&DepGraph::new(&tasks).cycles()),
            ["A → A", "A → B → A"]
        );
    }

    #[test]
    fn long_chain_does_not_overflow_the_stack() {
        let n = 20_000;
        let tasks: Vec<TaskSpec> = (0..n)
            .map(|i| {
                let prev = format!("T{}", (i + n - 1) % n);
                m(&format!("T{i}"), &[prev.as_str()])
            })
            .collect();
        let cycles = DepGraph::new(&tasks).cycles();
        assert_eq!(cycles.len(), 1);
        assert_eq!(cycles[0].members().len(), n);
    }

    #[test]
    fn key_file_normalisation() {
        assert_eq!(normalize_key_file(" ./src/a.rs "), "src/a.rs");
        assert_eq!(normalize_key_file(".//x/"), "x");
        assert_eq!(normalize_key_file("docs/"), "docs");
        for same in [
            "src/a.rs",
            "src//a.rs",
            "src/./a.rs",
            "lib/../src/a.rs",
            "./src/a.rs/",
        ] {
            assert_eq!(normalize_key_file(same), "src/a.rs", "{same}");
        }
        assert_eq!(normalize_key_file("../x"), "../x");
        assert_eq!(normalize_key_file("a/../../x"), "../x");
    }

    #[test]
    fn key_files_outside_the_repository_are_named() {
        assert!(
            key_file_problem("/etc/passwd")
                .unwrap()
                .contains("absolute")
        );
        assert!(
            key_file_problem("../other/x")
                .unwrap()
                .contains("climbs out")
        );
        assert!(
            key_file_problem("src/../../x")
                .unwrap()
                .contains("climbs out")
        );
        assert!(key_file_problem("./").unwrap().contains("whole repository"));
        assert_eq!(key_file_problem("src/../lib/x.rs"), None);
        assert_eq!(key_file_problem("src"), None);
    }

    #[test]
    fn a_directory_covers_the_files_under_it() {
        assert_eq!(
            claim_key_ancestors("p\tsrc/a/b.rs"),
            ["p\tsrc".to_string(), "p\tsrc/a".to_string()]
        );
        assert!(claim_key_ancestors("\tREADME.md").is_empty());
        // Every spelling of one file, and the directory above it, is the one claim key or an
        // ancestor of it (the queue's claim locks both; tests/store_contract.rs holds it).
        let spellings = ["src/a.rs", "src//a.rs", "src/./a.rs", "lib/../src/a.rs"];
        for k in spellings {
            assert_eq!(normalize_key_file(k), "src/a.rs", "{k}");
        }
        assert_eq!(claim_key_ancestors("\tsrc/a.rs"), ["\tsrc".to_string()]);
    }

    #[test]
    fn claim_keys_are_normalised_scoped_sorted_and_unique() {
        let mut a = t(
            "A",
            Priority::Medium,
            &[],
            &["./src/b.rs", "src/a.rs", "src/b.rs", " "],
        );
        assert_eq!(claim_keys(&a), vec!["\tsrc/a.rs", "\tsrc/b.rs"]);
        a.repo_target_id = Some("web".into());
        assert_eq!(claim_keys(&a), vec!["web\tsrc/a.rs", "web\tsrc/b.rs"]);
        assert!(claim_keys(&m("B", &[])).is_empty());
    }
}
