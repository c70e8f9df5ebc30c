//! Reading a plan file (v3 `tasks.json` or v4 plan JSON) into the shared model.
//!
//! The bytes are parsed to a `serde_json::Value` first and then walked by hand, so every problem
//! is collected with a JSON pointer instead of stopping at the first one, and a plan whose shape
//! is readable is produced even when it has errors (the TRIZ report runs on broken plans).

use super::diagnostic::{Diagnostic, Location, pointer_index, pointer_join};
use crate::domain::{
    PlanFormat, PlanSpec, Priority, RepoTarget, Status, TaskSpec, Usd, VerificationCommand,
};
use serde_json::{Map, Value};

/// What parsing produced: the plan when the file had a readable shape, every problem found, and
/// where each task came from so later checks can point into the file.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    pub file: String,
    pub plan: Option<PlanSpec>,
    pub diagnostics: Vec<Diagnostic>,
    pub source: SourceMap,
}

/// Positions of plan parts in the file, for pointers in later diagnostics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceMap {
    /// `/plan_id`, or `/project` when the id came from the project name.
    pub plan_id_pointer: String,
    /// For each task of `plan.tasks`, its index in the file's `tasks` array (tasks with no
    /// usable id are left out of the plan, so the two can differ).
    pub task_index: Vec<usize>,
    /// Same for `plan.repo_targets`.
    pub repo_target_index: Vec<usize>,
}

impl SourceMap {
    pub fn task_pointer(&self, task: usize) -> String {
        pointer_index("/tasks", self.task_index.get(task).copied().unwrap_or(task))
    }

    pub fn repo_target_pointer(&self, target: usize) -> String {
        pointer_index(
            "/repo_targets",
            self.repo_target_index
                .get(target)
                .copied()
                .unwrap_or(target),
        )
    }
}

/// Top-level keys the model holds in its own fields; everything else goes to `extra`.
pub(crate) const PLAN_KEYS: &[&str] = &[
    "project",
    "plan_id",
    "budget_usd",
    "agent",
    "verification_commands",
    "repo_targets",
    "tasks",
];

/// Task keys the model holds in its own fields.
pub(crate) const TASK_KEYS: &[&str] = &[
    "id",
    "status",
    "priority",
    "description",
    "phase",
    "category",
    "dependencies",
    "key_files",
    "acceptance_criteria",
    "test_steps",
    "prd_requirement",
    "repo_target_id",
    "budget_usd",
    "timeout",
    "agent",
    "max_attempts",
    "tags",
];

/// Plan keys kept as they are and read elsewhere, or written by the original and by whilly's
/// own importers: known, so never warned about.
pub(crate) const CARRIED_PLAN_KEYS: &[&str] = &[
    "$schema",
    "$comment",
    "prd_file",
    "created_at",
    "updated_at",
    "agent_instructions",
    "origin",
    "source",
    "description",
    "version",
];

/// Task keys kept as they are (the original's tracker links, whilly's own records).
pub(crate) const CARRIED_TASK_KEYS: &[&str] = &[
    "$comment",
    "github_issue",
    "github_url",
    "jira_key",
    "jira_url",
    "version",
    "verification_commands",
    "source",
    "decomposed_from",
    "created_at",
    "updated_at",
    "notes",
];

pub(crate) const REPO_TARGET_KEYS: &[&str] = &[
    "id",
    "provider",
    "repo_full_name",
    "repo",
    "clone_url",
    "default_branch",
];

pub(crate) const VERIFICATION_KEYS: &[&str] = &[
    "name",
    "command",
    "required",
    "repair_max_attempts",
    "timeout",
];

/// What `status` takes, for messages about a status of the wrong type.
const STATUS_VALUES: &str = "one of \"pending\" (the default), \"done\", \"skipped\", \"failed\", \"blocked\", \"human_loop\", \"claimed\", \"in_progress\"";

/// What `priority` takes.
const PRIORITY_VALUES: &str = "one of \"critical\", \"high\", \"medium\", \"low\" (or p0–p3)";

/// Budgets beyond a billion dollars are typos; refusing them also keeps every accepted amount
/// exactly representable, so the canonical export round-trips.
pub(crate) const MAX_BUDGET_USD: f64 = 1e9;

/// Parses a plan file's bytes. `file` names the file in diagnostics' hints.
pub fn parse_plan(bytes: &[u8], file: &str) -> Parsed {
    let mut out = Parsed {
        file: file.to_string(),
        ..Parsed::default()
    };
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(_) => {
            out.diagnostics = utf8_errors(bytes);
            return out;
        }
    };
    if text.trim().is_empty() {
        out.diagnostics.push(
            Diagnostic::error("empty_file", Location::File, "the file is empty")
                .with_hint("a plan is a JSON object with \"project\" and \"tasks\""),
        );
        return out;
    }
    let root: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            let col = char_column(bytes, e.line(), e.column());
            let msg = strip_position(&e.to_string());
            out.diagnostics.push(
                Diagnostic::error(
                    "json_syntax",
                    Location::LineCol {
                        line: e.line(),
                        col,
                    },
                    msg,
                )
                .with_hint("the file is not valid JSON; fix the syntax at this position"),
            );
            return out;
        }
    };
    // Postgres refuses NUL in text, git in commit messages, exec in arguments: a plan that
    // carries one would fail later and somewhere else, so it is an error here, where it is
    // (reported with the plan's other problems; errors refuse the import).
    let mut nul = Vec::new();
    nul_bytes(&root, "", &mut nul);
    let mut w = Walker { diags: nul };
    let (plan, source) = match w.plan(root) {
        Some((p, s)) => (Some(p), s),
        None => (None, SourceMap::default()),
    };
    out.plan = plan;
    out.source = source;
    out.diagnostics = w.diags;
    out
}

/// Every string (and key) of the document that holds a NUL character, by JSON pointer.
fn nul_bytes(v: &Value, at: &str, out: &mut Vec<Diagnostic>) {
    let refuse = |pointer: &str, what: &str| {
        Diagnostic::at(
            "nul_byte",
            pointer,
            format!("{what} contains a NUL character (\\u0000)"),
        )
        .with_hint("remove it: no field of a plan may hold NUL characters")
    };
    match v {
        Value::String(s) if s.contains('\0') => out.push(refuse(at, "this text")),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                nul_bytes(item, &pointer_index(at, i), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let here = pointer_join(at, k);
                if k.contains('\0') {
                    out.push(refuse(&here, "this key"));
                }
                nul_bytes(item, &here, out);
            }
        }
        _ => {}
    }
}

/// serde_json's message ends in "at line L column C"; we report the position separately.
fn strip_position(msg: &str) -> String {
    match msg.rfind(" at line ") {
        Some(i) => msg[..i].to_string(),
        None => msg.to_string(),
    }
}

/// serde_json counts columns in bytes; editors count characters.
fn char_column(bytes: &[u8], line: usize, byte_col: usize) -> usize {
    let mut start = 0usize;
    let mut current = 1usize;
    if line > 1 {
        for (i, &b) in bytes.iter().enumerate() {
            if b == b'\n' {
                current += 1;
                if current == line {
                    start = i + 1;
                    break;
                }
            }
        }
    }
    let end = start.saturating_add(byte_col).min(bytes.len());
    let chars = bytes[start..end]
        .iter()
        .filter(|&&b| b & 0xC0 != 0x80)
        .count();
    chars.max(1)
}

/// Line:column of each invalid UTF-8 sequence (the first few), counted in characters.
fn utf8_errors(bytes: &[u8]) -> Vec<Diagnostic> {
    const MAX: usize = 10;
    let mut out = Vec::new();
    let mut line = 1usize;
    let mut col = 1usize;
    let mut pos = 0usize;
    while pos < bytes.len() && out.len() < MAX {
        match std::str::from_utf8(&bytes[pos..]) {
            Ok(_) => break,
            Err(e) => {
                let valid = &bytes[pos..pos + e.valid_up_to()];
                for &b in valid {
                    if b == b'\n' {
                        line += 1;
                        col = 1;
                    } else if b & 0xC0 != 0x80 {
                        col += 1;
                    }
                }
                let bad_at = pos + e.valid_up_to();
                let bad_len = e.error_len().unwrap_or(bytes.len() - bad_at);
                let shown: Vec<String> = bytes[bad_at..bad_at + bad_len]
                    .iter()
                    .map(|b| format!("0x{b:02X}"))
                    .collect();
                out.push(
                    Diagnostic::error(
                        "invalid_utf8",
                        Location::LineCol { line, col },
                        format!("invalid UTF-8 (bytes {})", shown.join(" ")),
                    )
                    .with_hint("plan files must be UTF-8; re-save the file with UTF-8 encoding"),
                );
                col += 1;
                pos = bad_at + bad_len;
            }
        }
    }
    out
}

/// Whether `key` is a misspelling of `known`: different, not much shorter or longer, and at most
/// two edits away once case and `-`/`_` are ignored (one edit for short keys).
fn is_typo_of(key: &str, known: &str) -> bool {
    let norm = |s: &str| -> Vec<char> {
        s.chars()
            .map(|c| {
                if c == '-' {
                    '_'
                } else {
                    c.to_ascii_lowercase()
                }
            })
            .collect()
    };
    let (a, b) = (norm(key), norm(known));
    if key == known || a.len().abs_diff(b.len()) > 2 || b.len() < 4 {
        return false;
    }
    let limit = if b.len() <= 5 { 1 } else { 2 };
    edit_distance(&a, &b) <= limit
}

/// Levenshtein distance; keys are short, so the plain two-row version is enough.
fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// "a string", "a number (5)", …: what a value is, for "expected X, got Y" messages.
pub(crate) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let short: String = s.chars().take(40).collect();
            if short.len() < s.len() {
                format!("\"{short}…\"")
            } else {
                format!("\"{s}\"")
            }
        }
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

struct Walker {
    diags: Vec<Diagnostic>,
}

/// The known keys of one task, as found in the file.
#[derive(Default)]
struct TaskFields {
    id: Option<Value>,
    status: Option<Value>,
    priority: Option<Value>,
    description: Option<Value>,
    phase: Option<Value>,
    category: Option<Value>,
    dependencies: Option<Value>,
    key_files: Option<Value>,
    acceptance_criteria: Option<Value>,
    test_steps: Option<Value>,
    prd_requirement: Option<Value>,
    repo_target_id: Option<Value>,
    budget_usd: Option<Value>,
    timeout: Option<Value>,
    agent: Option<Value>,
    max_attempts: Option<Value>,
    tags: Option<Value>,
}

impl Walker {
    fn wrong_type(&mut self, ptr: &str, expected: &str, got: &Value) {
        self.diags.push(Diagnostic::at(
            "wrong_type",
            ptr,
            format!("expected {expected}, got {}", describe(got)),
        ));
    }

    /// Keys outside what we read. One a typo away from a key we read is an error (`dependncies`
    /// would silently drop every dependency, `budjet_usd` the budget); the keys other tools and
    /// whilly itself carry (`prd_file`, `github_issue`, `source`, …) are kept quietly; any
    /// other is kept with a warning, so a key that does nothing never goes unsaid.
    fn unknown_keys(
        &mut self,
        extra: &Map<String, Value>,
        known: &[&str],
        carried: &[&str],
        base: &str,
    ) {
        for key in extra.keys() {
            if carried.contains(&key.as_str()) {
                continue;
            }
            let at = Location::Pointer(pointer_join(base, key));
            let d = match known.iter().find(|k| is_typo_of(key, k)) {
                Some(near) => Diagnostic::error(
                    "misspelled_field",
                    at,
                    format!("unknown key \"{key}\" looks like \"{near}\", which would be ignored"),
                )
                .with_hint(format!("rename it to \"{near}\"")),
                None => Diagnostic::warning(
                    "unknown_field",
                    at,
                    format!("unknown key \"{key}\" is kept but not used"),
                )
                .with_hint(format!("known keys: {}", known.join(", "))),
            };
            self.diags.push(d);
        }
    }

    fn missing(&mut self, parent: &str, key: &str, what: &str) {
        self.diags.push(
            Diagnostic::at("missing_field", parent, format!("{what} has no \"{key}\""))
                .with_hint(format!("add \"{key}\"; it is required")),
        );
    }

    fn plan(&mut self, root: Value) -> Option<(PlanSpec, SourceMap)> {
        let Value::Object(mut map) = root else {
            self.diags.push(
                Diagnostic::at(
                    "wrong_type",
                    "",
                    format!("expected a plan object, got {}", describe(&root)),
                )
                .with_hint("a plan is a JSON object with \"project\" and \"tasks\""),
            );
            return None;
        };
        let v4 = ["plan_id", "verification_commands", "repo_targets", "origin"]
            .iter()
            .any(|k| map.contains_key(*k));
        let format = if v4 { PlanFormat::V4 } else { PlanFormat::V3 };
        let mut plan = PlanSpec {
            format,
            ..PlanSpec::default()
        };
        let mut source = SourceMap::default();

        match map.shift_remove("project") {
            None | Some(Value::Null) => self.missing("", "project", "the plan"),
            Some(Value::String(s)) => {
                if s.trim().is_empty() {
                    self.diags.push(Diagnostic::at(
                        "missing_field",
                        "/project",
                        "\"project\" is empty",
                    ));
                }
                plan.project = s;
            }
            Some(other) => self.wrong_type("/project", "a string", &other),
        }
        match map.shift_remove("plan_id") {
            None | Some(Value::Null) => {
                plan.id = plan.project.clone();
                source.plan_id_pointer = "/project".to_string();
            }
            Some(Value::String(s)) => {
                plan.id = s;
                source.plan_id_pointer = "/plan_id".to_string();
            }
            Some(other) => {
                self.wrong_type("/plan_id", "a string", &other);
                plan.id = plan.project.clone();
                source.plan_id_pointer = "/plan_id".to_string();
            }
        }
        if let Some(v) = map.shift_remove("budget_usd") {
            plan.budget_usd = self.usd(&v, "/budget_usd");
        }
        if let Some(v) = map.shift_remove("agent") {
            plan.agent = self.opt_string(&v, "/agent");
        }
        if let Some(v) = map.shift_remove("verification_commands") {
            plan.verification_commands = self.verification_commands(v);
        }
        if let Some(v) = map.shift_remove("repo_targets") {
            let (targets, index) = self.repo_targets(v);
            plan.repo_targets = targets;
            source.repo_target_index = index;
        }
        match map.shift_remove("tasks") {
            None | Some(Value::Null) => self.missing("", "tasks", "the plan"),
            Some(Value::Array(items)) => {
                for (i, item) in items.into_iter().enumerate() {
                    if let Some(task) = self.task(item, i, v4) {
                        plan.tasks.push(task);
                        source.task_index.push(i);
                    }
                }
            }
            Some(other) => self.wrong_type("/tasks", "an array of tasks", &other),
        }
        self.unknown_keys(&map, PLAN_KEYS, CARRIED_PLAN_KEYS, "");
        plan.extra = map;
        Some((plan, source))
    }

    fn task(&mut self, item: Value, i: usize, v4: bool) -> Option<TaskSpec> {
        let ptr = pointer_index("/tasks", i);
        let Value::Object(map) = item else {
            self.wrong_type(&ptr, "a task object", &item);
            return None;
        };
        let at = |key: &str| pointer_join(&ptr, key);
        // One pass over the keys: known ones into slots, the rest into extra in file order.
        // (Removing known keys one by one from the map costs a hash and a shift each, which
        // showed up on 10,000-task plans.)
        let mut f = TaskFields::default();
        let mut extra = Map::new();
        for (k, v) in map {
            let slot = match k.as_str() {
                "id" => &mut f.id,
                "status" => &mut f.status,
                "priority" => &mut f.priority,
                "description" => &mut f.description,
                "phase" => &mut f.phase,
                "category" => &mut f.category,
                "dependencies" => &mut f.dependencies,
                "key_files" => &mut f.key_files,
                "acceptance_criteria" => &mut f.acceptance_criteria,
                "test_steps" => &mut f.test_steps,
                "prd_requirement" => &mut f.prd_requirement,
                "repo_target_id" => &mut f.repo_target_id,
                "budget_usd" => &mut f.budget_usd,
                "timeout" => &mut f.timeout,
                "agent" => &mut f.agent,
                "max_attempts" => &mut f.max_attempts,
                "tags" => &mut f.tags,
                _ => {
                    extra.insert(k, v);
                    continue;
                }
            };
            *slot = Some(v);
        }
        let mut task = TaskSpec::default();
        let mut usable = true;
        match f.id {
            None | Some(Value::Null) => {
                self.missing(&ptr, "id", "the task");
                usable = false;
            }
            Some(Value::String(s)) => task.id = s,
            Some(other) => {
                self.wrong_type(&at("id"), "a string", &other);
                usable = false;
            }
        }
        // A new task is pending, so a plan need not say it: `status` is for marking work
        // already done (or skipped) when a plan is written after the fact.
        task.status = Some(Status::Pending);
        match f.status {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match s.parse::<Status>() {
                Ok(st) => task.status = Some(st),
                Err(e) => {
                    self.diags
                        .push(Diagnostic::at("bad_status", &at("status"), e.to_string()))
                }
            },
            Some(other) => self.wrong_type(&at("status"), STATUS_VALUES, &other),
        }
        match f.priority {
            None | Some(Value::Null) if v4 => self.diags.push(
                Diagnostic::at("missing_field", &ptr, "the task has no \"priority\"")
                    .with_hint(format!("add \"priority\": {PRIORITY_VALUES}")),
            ),
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => match s.parse::<Priority>() {
                Ok(p) => task.priority = p,
                Err(e) => self.diags.push(Diagnostic::at(
                    "bad_priority",
                    &at("priority"),
                    e.to_string(),
                )),
            },
            Some(other) => self.wrong_type(&at("priority"), PRIORITY_VALUES, &other),
        }
        match f.description {
            None | Some(Value::Null) if v4 => self.missing(&ptr, "description", "the task"),
            None | Some(Value::Null) => {
                // v3 files were read leniently; the decision gate flags the empty description.
                self.diags.push(Diagnostic::warning(
                    "missing_field",
                    Location::Pointer(ptr.clone()),
                    "the task has no \"description\"",
                ));
            }
            Some(Value::String(s)) => task.description = s,
            Some(other) => self.wrong_type(&at("description"), "a string", &other),
        }
        task.phase = f.phase.and_then(|v| self.lenient_string(v, &at("phase")));
        task.category = f
            .category
            .and_then(|v| self.lenient_string(v, &at("category")));
        task.prd_requirement = f
            .prd_requirement
            .and_then(|v| self.lenient_string(v, &at("prd_requirement")));
        task.dependencies = self.string_list(f.dependencies, &ptr, "dependencies");
        task.key_files = self.string_list(f.key_files, &ptr, "key_files");
        task.acceptance_criteria =
            self.string_list(f.acceptance_criteria, &ptr, "acceptance_criteria");
        task.test_steps = self.string_list(f.test_steps, &ptr, "test_steps");
        task.tags = self.string_list(f.tags, &ptr, "tags");
        if let Some(v) = f.repo_target_id {
            task.repo_target_id = self.opt_string(&v, &at("repo_target_id"));
        }
        if let Some(v) = f.budget_usd {
            task.budget_usd = self.usd(&v, &at("budget_usd"));
        }
        if let Some(v) = f.timeout {
            task.timeout_secs = self.timeout(&v, &at("timeout"));
        }
        if let Some(v) = f.agent {
            task.agent = self.opt_string(&v, &at("agent"));
        }
        if let Some(v) = f.max_attempts {
            task.max_attempts = self.max_attempts(&v, &at("max_attempts"));
        }
        self.unknown_keys(&extra, TASK_KEYS, CARRIED_TASK_KEYS, &ptr);
        task.extra = extra;
        usable.then_some(task)
    }

    fn verification_commands(&mut self, v: Value) -> Vec<VerificationCommand> {
        let ptr = "/verification_commands";
        let items = match v {
            Value::Null => return Vec::new(),
            Value::Array(items) => items,
            other => {
                self.wrong_type(ptr, "an array of {name, command} objects", &other);
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let p = pointer_index(ptr, i);
            let Value::Object(mut map) = item else {
                self.wrong_type(&p, "a {name, command} object", &item);
                continue;
            };
            let name = match map.shift_remove("name") {
                None | Some(Value::Null) => {
                    self.missing(&p, "name", "the verification command");
                    None
                }
                Some(Value::String(s)) => Some(s),
                Some(other) => {
                    self.wrong_type(&pointer_join(&p, "name"), "a string", &other);
                    None
                }
            };
            let command = match map.shift_remove("command") {
                None | Some(Value::Null) => {
                    self.missing(&p, "command", "the verification command");
                    None
                }
                Some(Value::String(s)) => Some(s),
                Some(other) => {
                    self.wrong_type(
                        &pointer_join(&p, "command"),
                        "a shell command string",
                        &other,
                    );
                    None
                }
            };
            let required = match map.shift_remove("required") {
                None | Some(Value::Null) => true,
                Some(Value::Bool(b)) => b,
                Some(other) => {
                    self.wrong_type(&pointer_join(&p, "required"), "true or false", &other);
                    true
                }
            };
            let repair_max_attempts = match map.shift_remove("repair_max_attempts") {
                None | Some(Value::Null) => 0,
                Some(v) => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                    Some(n) => n,
                    None => {
                        self.wrong_type(
                            &pointer_join(&p, "repair_max_attempts"),
                            "a whole number ≥ 0",
                            &v,
                        );
                        0
                    }
                },
            };
            let timeout_secs = match map.shift_remove("timeout") {
                None => None,
                Some(v) => self.timeout(&v, &pointer_join(&p, "timeout")),
            };
            for key in map.keys().filter(|k| *k != "$comment") {
                self.diags.push(
                    Diagnostic::warning(
                        "unknown_field",
                        Location::Pointer(pointer_join(&p, key)),
                        format!("unknown key \"{key}\" in a verification command is ignored"),
                    )
                    .with_hint(format!("known keys: {}", VERIFICATION_KEYS.join(", "))),
                );
            }
            if let (Some(name), Some(command)) = (name, command) {
                out.push(VerificationCommand {
                    name,
                    command,
                    required,
                    repair_max_attempts,
                    timeout_secs,
                });
            }
        }
        out
    }

    fn repo_targets(&mut self, v: Value) -> (Vec<RepoTarget>, Vec<usize>) {
        let ptr = "/repo_targets";
        let items = match v {
            Value::Null => return (Vec::new(), Vec::new()),
            Value::Array(items) => items,
            other => {
                self.wrong_type(ptr, "an array of repository targets", &other);
                return (Vec::new(), Vec::new());
            }
        };
        let mut out = Vec::new();
        let mut index = Vec::new();
        for (i, item) in items.into_iter().enumerate() {
            let p = pointer_index(ptr, i);
            let Value::Object(mut map) = item else {
                self.wrong_type(&p, "a repository target object", &item);
                continue;
            };
            let id = match map.shift_remove("id") {
                None | Some(Value::Null) => {
                    self.missing(&p, "id", "the repository target");
                    None
                }
                Some(Value::String(s)) => Some(s),
                Some(other) => {
                    self.wrong_type(&pointer_join(&p, "id"), "a string", &other);
                    None
                }
            };
            let mut field = |map: &mut Map<String, Value>, key: &str| {
                map.shift_remove(key)
                    .and_then(|v| self.opt_string(&v, &pointer_join(&p, key)))
            };
            let provider = field(&mut map, "provider");
            // The original wrote `repo_full_name` (or `repo`); a second spelling stays in extra.
            let repo = match field(&mut map, "repo_full_name") {
                Some(r) => Some(r),
                None => field(&mut map, "repo"),
            };
            let clone_url = field(&mut map, "clone_url");
            let default_branch = field(&mut map, "default_branch");
            if let Some(id) = id {
                out.push(RepoTarget {
                    id,
                    provider,
                    repo,
                    clone_url,
                    default_branch,
                    extra: map,
                });
                index.push(i);
            }
        }
        (out, index)
    }

    fn opt_string(&mut self, v: &Value, ptr: &str) -> Option<String> {
        match v {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong_type(ptr, "a string", other);
                None
            }
        }
    }

    /// Informational text fields: the original accepted any JSON there, so numbers and booleans
    /// are taken as text with a warning rather than refused.
    fn lenient_string(&mut self, v: Value, ptr: &str) -> Option<String> {
        match v {
            Value::Null => None,
            Value::String(s) => Some(s),
            Value::Number(_) | Value::Bool(_) => {
                let s = v.to_string();
                self.diags.push(
                    Diagnostic::warning(
                        "coerced_type",
                        Location::Pointer(ptr.to_string()),
                        format!("expected a string, got {s}; read as \"{s}\""),
                    )
                    .with_hint("quote the value"),
                );
                Some(s)
            }
            other => {
                self.wrong_type(ptr, "a string", &other);
                None
            }
        }
    }

    /// A list of strings at `base/key`; pointers are only built when something is wrong.
    fn string_list(&mut self, v: Option<Value>, base: &str, key: &str) -> Vec<String> {
        match v {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.into_iter().enumerate() {
                    match item {
                        Value::String(s) => out.push(s),
                        other => {
                            let ptr = pointer_index(&pointer_join(base, key), i);
                            self.wrong_type(&ptr, "a string", &other)
                        }
                    }
                }
                out
            }
            Some(Value::String(s)) => {
                let got = describe(&Value::String(s.clone()));
                self.diags.push(
                    Diagnostic::at(
                        "wrong_type",
                        &pointer_join(base, key),
                        format!("expected an array of strings, got {got}"),
                    )
                    .with_hint(format!("wrap it in a list: [{}]", Value::String(s))),
                );
                Vec::new()
            }
            Some(other) => {
                self.wrong_type(&pointer_join(base, key), "an array of strings", &other);
                Vec::new()
            }
        }
    }

    /// Dollars as a JSON number. Negative amounts are kept (as negative micro-dollars) so that
    /// validation can point at them.
    fn usd(&mut self, v: &Value, ptr: &str) -> Option<Usd> {
        match v {
            Value::Null => None,
            Value::Number(n) => {
                match n.as_f64() {
                    Some(f) if f.is_finite() && f.abs() <= MAX_BUDGET_USD => {
                        Some(Usd((f * 1_000_000.0).round() as i64))
                    }
                    Some(f) if f.is_finite() => {
                        self.diags.push(Diagnostic::at(
                        "out_of_range",
                        ptr,
                        format!("budget {n} is beyond the largest accepted, {MAX_BUDGET_USD} US dollars"),
                    ));
                        None
                    }
                    _ => {
                        self.wrong_type(ptr, "a number of US dollars", v);
                        None
                    }
                }
            }
            other => {
                self.diags.push(
                    Diagnostic::at(
                        "wrong_type",
                        ptr,
                        format!("expected a number of US dollars, got {}", describe(other)),
                    )
                    .with_hint("write a plain number, e.g. 2.5"),
                );
                None
            }
        }
    }

    fn timeout(&mut self, v: &Value, ptr: &str) -> Option<u64> {
        match parse_timeout(v) {
            Ok(t) => t,
            Err(msg) => {
                self.diags
                    .push(Diagnostic::at("bad_timeout", ptr, msg).with_hint(
                    "write seconds as a number (900) or a duration such as \"30m\" or \"1h30m\"",
                ));
                None
            }
        }
    }

    fn max_attempts(&mut self, v: &Value, ptr: &str) -> Option<u32> {
        match v {
            Value::Null => None,
            _ => match v.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) if n >= 1 => Some(n),
                _ => {
                    self.wrong_type(ptr, "a whole number ≥ 1", v);
                    None
                }
            },
        }
    }
}

/// A timeout: whole seconds as a number, or a duration string (`"30m"`, `"1h30m"`, `"90"`).
pub(crate) fn parse_timeout(v: &Value) -> Result<Option<u64>, String> {
    let secs = match v {
        Value::Null => return Ok(None),
        Value::Number(n) => {
            if let Some(s) = n.as_u64() {
                s
            } else {
                match n.as_f64() {
                    Some(f) if f.is_finite() && f > 0.0 && f < u64::MAX as f64 => f.ceil() as u64,
                    _ => return Err(format!("expected a positive number of seconds, got {n}")),
                }
            }
        }
        Value::String(s) => {
            let t = s.trim();
            if let Ok(n) = t.parse::<u64>() {
                n
            } else {
                let d = humantime::parse_duration(t)
                    .map_err(|e| format!("cannot read duration \"{s}\": {e}"))?;
                // Round a fraction of a second up, so "500ms" is not read as zero.
                d.as_secs() + u64::from(d.subsec_nanos() > 0)
            }
        }
        other => {
            return Err(format!(
                "expected seconds or a duration string, got {}",
                describe(other)
            ));
        }
    };
    if secs == 0 {
        return Err(
            "a timeout of zero would stop the task at once; it must be at least 1 second".into(),
        );
    }
    Ok(Some(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: Value) -> Parsed {
        parse_plan(v.to_string().as_bytes(), "t.json")
    }

    fn codes(p: &Parsed) -> Vec<(&'static str, String)> {
        p.diagnostics
            .iter()
            .map(|d| (d.code, d.pointer().unwrap_or("").to_string()))
            .collect()
    }

    #[test]
    fn reads_v4_with_additions() {
        let p = parse(json!({
            "project": "demo", "plan_id": "demo-1", "budget_usd": 12.5, "agent": "claude",
            "origin": {"system": "github"},
            "verification_commands": [{"name": "test", "command": "cargo test", "timeout": "10m"}],
            "tasks": [{"id": "T-1", "status": "PENDING", "priority": "High", "description": "d",
                       "timeout": "1h30m", "budget_usd": 0.25, "max_attempts": 2, "tags": ["gpu"],
                       "version": 3, "github_issue": 12}]
        }));
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let plan = p.plan.expect("plan");
        assert_eq!(plan.format, PlanFormat::V4);
        assert_eq!(plan.id, "demo-1");
        assert_eq!(plan.budget_usd, Some(Usd(12_500_000)));
        assert_eq!(plan.verification_commands[0].timeout_secs, Some(600));
        assert!(plan.verification_commands[0].required);
        assert_eq!(plan.extra.keys().collect::<Vec<_>>(), ["origin"]);
        let t = &plan.tasks[0];
        assert_eq!(t.status, Some(Status::Pending));
        assert_eq!(t.priority, Priority::High);
        assert_eq!(t.timeout_secs, Some(5400));
        assert_eq!(t.budget_usd, Some(Usd(250_000)));
        assert_eq!(t.max_attempts, Some(2));
        assert_eq!(
            t.extra.keys().collect::<Vec<_>>(),
            ["version", "github_issue"]
        );
    }

    #[test]
    fn v3_is_lenient_and_takes_project_as_id() {
        let p =
            parse(json!({"project": "p", "tasks": [{"id": "A", "description": "x", "phase": 1}]}));
        let plan = p.plan.as_ref().expect("plan");
        assert_eq!(plan.format, PlanFormat::V3);
        assert_eq!(plan.id, "p");
        assert_eq!(p.source.plan_id_pointer, "/project");
        assert_eq!(plan.tasks[0].status, Some(Status::Pending));
        assert_eq!(plan.tasks[0].priority, Priority::Medium);
        assert_eq!(plan.tasks[0].phase.as_deref(), Some("1"));
        assert_eq!(codes(&p), [("coerced_type", "/tasks/0/phase".to_string())]);
        assert!(!p.diagnostics[0].is_error());
    }

    #[test]
    fn v4_requires_task_fields() {
        let p = parse(
            json!({"project": "p", "plan_id": "p", "tasks": [{"id": "A"}, {"status": "done"}]}),
        );
        assert_eq!(
            codes(&p),
            [
                ("missing_field", "/tasks/0".to_string()),
                ("missing_field", "/tasks/0".to_string()),
                ("missing_field", "/tasks/1".to_string()),
                ("missing_field", "/tasks/1".to_string()),
                ("missing_field", "/tasks/1".to_string()),
            ]
        );
        let plan = p.plan.expect("plan");
        assert_eq!(plan.tasks.len(), 1, "the task without an id is left out");
        assert_eq!(p.source.task_index, [0]);
        assert_eq!(
            plan.tasks[0].status,
            Some(Status::Pending),
            "status defaults"
        );
        let priority = p
            .diagnostics
            .iter()
            .find(|d| d.message.contains("\"priority\""))
            .expect("missing priority said");
        let hint = priority.hint.as_deref().unwrap_or("");
        assert!(hint.contains("critical") && hint.contains("low"), "{hint}");
    }

    #[test]
    fn errors_about_enumerated_fields_say_the_values() {
        let p = parse(json!({"project": "p", "tasks": [
            {"id": "A", "status": 3, "priority": true, "description": "d"},
            {"id": "B", "status": "sleeping", "priority": "urgent", "description": "d"}
        ]}));
        for d in &p.diagnostics {
            let all = format!("{} {}", d.message, d.hint.as_deref().unwrap_or(""));
            if d.pointer().is_some_and(|p| p.ends_with("/status")) {
                assert!(all.contains("pending") && all.contains("done"), "{all}");
            }
            if d.pointer().is_some_and(|p| p.ends_with("/priority")) {
                assert!(all.contains("critical") && all.contains("low"), "{all}");
            }
        }
        assert_eq!(p.diagnostics.len(), 4, "{:?}", p.diagnostics);
    }

    #[test]
    fn schema_and_comment_keys_are_quiet() {
        let p = parse(
            json!({"$schema": "./whilly-plan.schema.json", "$comment": "x",
            "project": "p", "tasks": [{"id": "A", "$comment": "why", "description": "d"}]}),
        );
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
    }

    #[test]
    fn wrong_types_name_the_pointer_and_value() {
        let p = parse(json!({"project": "p", "tasks": [
            {"id": "A", "priority": 5, "dependencies": ["B", 7], "key_files": "a.rs",
             "budget_usd": "5", "timeout": "soon", "max_attempts": 0, "status": "sleeping"}
        ]}));
        let msgs: Vec<String> = p
            .diagnostics
            .iter()
            .map(|d| format!("{}: {}", d.pointer().unwrap_or(""), d.message))
            .collect();
        assert!(
            msgs.contains(&format!(
                "/tasks/0/priority: expected {PRIORITY_VALUES}, got 5"
            )),
            "{msgs:?}"
        );
        assert!(
            msgs.contains(&"/tasks/0/dependencies/1: expected a string, got 7".to_string()),
            "{msgs:?}"
        );
        let c = codes(&p);
        for want in [
            ("wrong_type", "/tasks/0/key_files"),
            ("wrong_type", "/tasks/0/budget_usd"),
            ("bad_timeout", "/tasks/0/timeout"),
            ("wrong_type", "/tasks/0/max_attempts"),
            ("bad_status", "/tasks/0/status"),
        ] {
            assert!(
                c.contains(&(want.0, want.1.to_string())),
                "{want:?} in {c:?}"
            );
        }
        assert_eq!(p.plan.expect("plan").tasks[0].dependencies, ["B"]);
    }

    #[test]
    fn syntax_errors_have_character_columns() {
        let text = "{\n  \"project\": \"проект\" \"tasks\": []\n}";
        let p = parse_plan(text.as_bytes(), "t.json");
        assert!(p.plan.is_none());
        assert_eq!(p.diagnostics.len(), 1);
        let d = &p.diagnostics[0];
        assert_eq!(d.code, "json_syntax");
        // `"tasks"` starts at character 23 of line 2 (the Cyrillic letters count once each).
        assert_eq!(d.location, Location::LineCol { line: 2, col: 23 });
        assert!(!d.message.contains("line"), "{}", d.message);
    }

    #[test]
    fn invalid_utf8_is_located() {
        let mut bytes = b"{\n  \"project\": \"\xD0\xBF".to_vec();
        bytes.push(0xFF);
        bytes.extend_from_slice(b"\"\n}");
        let p = parse_plan(&bytes, "t.json");
        assert_eq!(p.diagnostics.len(), 1);
        assert_eq!(p.diagnostics[0].code, "invalid_utf8");
        assert_eq!(
            p.diagnostics[0].location,
            Location::LineCol { line: 2, col: 16 }
        );
    }

    #[test]
    fn odd_roots_do_not_panic() {
        for text in [
            "",
            "   ",
            "[]",
            "null",
            "5",
            "\"x\"",
            "{}",
            "{\"tasks\": 5}",
            "\u{feff}{}",
        ] {
            let p = parse_plan(text.as_bytes(), "t.json");
            assert!(!p.diagnostics.is_empty(), "{text:?}");
        }
    }

    #[test]
    fn near_miss_keys_are_errors_other_unknown_keys_warn_carried_keys_are_quiet() {
        let p = parse(
            json!({"project": "p", "taks": [], "prd_file": "PRD.md", "tasks": [{"id": "A", "description": "d",
            "dependancies": ["B"], "Key-Files": [], "github_issue": 3, "version": 2, "jira_key": "K",
            "tag": ["x"], "idx": 1, "budjet_usd": 3}]}),
        );
        let got: Vec<(bool, String, String)> = p
            .diagnostics
            .iter()
            .map(|d| {
                (
                    d.is_error(),
                    d.pointer().unwrap_or("").to_string(),
                    d.hint.clone().unwrap_or_default(),
                )
            })
            .collect();
        let typo =
            |ptr: &str, near: &str| (true, ptr.to_string(), format!("rename it to \"{near}\""));
        assert_eq!(got.len(), 6, "{got:#?}");
        assert_eq!(got[0], typo("/tasks/0/dependancies", "dependencies"));
        assert_eq!(got[1], typo("/tasks/0/Key-Files", "key_files"));
        assert_eq!(got[2], typo("/tasks/0/tag", "tags"));
        assert_eq!((got[3].0, got[3].1.as_str()), (false, "/tasks/0/idx"));
        assert_eq!(got[4], typo("/tasks/0/budjet_usd", "budget_usd"));
        assert_eq!(got[5], typo("/taks", "tasks"));
        let t = &p.plan.expect("plan").tasks[0];
        assert!(t.extra.contains_key("dependancies") && t.extra.contains_key("idx"));
    }

    #[test]
    fn every_known_task_key_is_consumed() {
        // TASK_KEYS (used by the export) and the walker's match must agree.
        let mut task = Map::new();
        for k in TASK_KEYS {
            task.insert((*k).to_string(), Value::Null);
        }
        task.insert("id".into(), json!("A"));
        let p = parse(json!({"project": "p", "tasks": [task]}));
        let plan = p.plan.expect("plan");
        assert!(plan.tasks[0].extra.is_empty(), "{:?}", plan.tasks[0].extra);
    }

    #[test]
    fn timeouts() {
        assert_eq!(parse_timeout(&json!(90)), Ok(Some(90)));
        assert_eq!(parse_timeout(&json!(1.5)), Ok(Some(2)));
        assert_eq!(parse_timeout(&json!("90")), Ok(Some(90)));
        assert_eq!(parse_timeout(&json!("30m")), Ok(Some(1800)));
        assert_eq!(parse_timeout(&json!("1h30m")), Ok(Some(5400)));
        assert_eq!(parse_timeout(&json!(null)), Ok(None));
        assert!(parse_timeout(&json!(0)).is_err());
        assert!(parse_timeout(&json!(-5)).is_err());
        assert!(parse_timeout(&json!("soon")).is_err());
        assert!(parse_timeout(&json!([1])).is_err());
    }

    #[test]
    fn repo_targets_read_both_spellings() {
        let p = parse(json!({"project": "p", "plan_id": "p", "tasks": [],
            "repo_targets": [{"id": "main", "repo_full_name": "o/r", "repo": "o/other", "x": 1}, {"provider": "github"}]}));
        let plan = p.plan.as_ref().expect("plan");
        assert_eq!(plan.repo_targets.len(), 1);
        assert_eq!(plan.repo_targets[0].repo.as_deref(), Some("o/r"));
        assert_eq!(
            plan.repo_targets[0].extra.keys().collect::<Vec<_>>(),
            ["repo", "x"]
        );
        assert_eq!(
            codes(&p),
            [("missing_field", "/repo_targets/1".to_string())]
        );
    }
}
