//! What keys exist and what type each holds: used to read environment variables and flags (which
//! arrive as raw strings), to check `config set`, and to map keys to `WHILLY_*` variable names.

use super::secret::Secret;

/// The shape of a setting's value, as far as raw-string input is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Float,
    Bool,
    Str,
    Path,
    StrList,
    IntList,
    Duration,
    Secret,
    Enum(&'static [&'static str]),
}

const MERGE_MODES: &[&str] = &["ff", "cherry-pick", "none"];
const PERMISSION_MODES: &[&str] = &["full", "accept-edits", "read-only"];
const PROFILE_MODES: &[&str] = &["auto", "off"];
const SANDBOX_MODES: &[&str] = &["enforce", "off"];
const DELIVERY_MODES: &[&str] = &["merge", "branch", "pr"];
const BACKENDS: &[&str] = &["claude", "opencode", "codex", "gemini", "command"];

/// Every key of the fixed sections. Maps (`agents`, `prices`, `keys`) are handled by [`kind_of`].
pub const FIXED_KEYS: &[(&str, Kind)] = &[
    ("database.url", Kind::Secret),
    ("queue.heartbeat_secs", Kind::Int),
    ("queue.lease_secs", Kind::Int),
    ("queue.reaper_interval_secs", Kind::Int),
    ("queue.poll_interval_ms", Kind::Int),
    ("queue.notify", Kind::Bool),
    ("queue.notify_debounce_ms", Kind::Int),
    ("queue.default_max_attempts", Kind::Int),
    ("queue.default_task_estimate_usd", Kind::Float),
    ("queue.outage_secs", Kind::Int),
    ("queue.worker_offline_secs", Kind::Int),
    ("run.parallel", Kind::Int),
    ("run.agent", Kind::Str),
    ("run.budget_usd", Kind::Float),
    ("run.timeout", Kind::Duration),
    ("run.grace_period_secs", Kind::Int),
    ("run.headless", Kind::Bool),
    ("worktrees.dir", Kind::Path),
    ("worktrees.include", Kind::StrList),
    ("worktrees.setup_command", Kind::Str),
    ("worktrees.merge", Kind::Enum(MERGE_MODES)),
    ("worktrees.keep_failed", Kind::Bool),
    ("worktrees.max_disk", Kind::Str),
    ("worktrees.pool", Kind::Int),
    ("worktrees.keep_build_cache", Kind::Bool),
    ("worktrees.cache_dirs", Kind::StrList),
    ("verification.timeout_secs", Kind::Int),
    ("verification.env_allowlist", Kind::StrList),
    ("verification.test_steps", Kind::Bool),
    ("verification.profile", Kind::Enum(PROFILE_MODES)),
    ("retry.backoff_secs", Kind::IntList),
    ("retry.rate_limit_cooldown_secs", Kind::Int),
    ("handoff.timeout_secs", Kind::Int),
    ("guards.injection_patterns", Kind::StrList),
    ("guards.secret_lint", Kind::Bool),
    ("notifications.desktop", Kind::Bool),
    ("notifications.terminal", Kind::Bool),
    ("notifications.bell", Kind::Bool),
    ("tui.fps", Kind::Int),
    ("tui.ssh_fps", Kind::Int),
    ("tui.scrollback_lines", Kind::Int),
    ("tui.theme", Kind::Str),
    ("logging.level", Kind::Str),
    ("logging.dir", Kind::Path),
    ("logging.attempt_log_max_mb", Kind::Int),
    ("delivery.mode", Kind::Enum(DELIVERY_MODES)),
    ("delivery.merge", Kind::Enum(MERGE_MODES)),
    ("delivery.remote", Kind::Str),
    ("delivery.push", Kind::Bool),
    ("delivery.draft", Kind::Bool),
    ("delivery.base", Kind::Str),
    ("delivery.ready_when_verified", Kind::Bool),
    ("delivery.max_file_mb", Kind::Int),
    ("sandbox.mode", Kind::Enum(SANDBOX_MODES)),
    ("sandbox.allow_write", Kind::StrList),
    ("github.token", Kind::Secret),
    ("github.api_url", Kind::Str),
    ("github.repo", Kind::Str),
    ("github.max_wait", Kind::Duration),
    ("github.timeout_secs", Kind::Int),
    ("github.label_ready", Kind::Str),
    ("github.label_in_progress", Kind::Str),
    ("github.label_in_review", Kind::Str),
    ("github.label_failed", Kind::Str),
    ("github.project.owner", Kind::Str),
    ("github.project.number", Kind::Int),
    ("github.project.status_field", Kind::Str),
    ("github.project.columns.todo", Kind::Str),
    ("github.project.columns.in_progress", Kind::Str),
    ("github.project.columns.in_review", Kind::Str),
    ("github.project.columns.done", Kind::Str),
    ("github.project.columns.failed", Kind::Str),
    ("github.project.columns.refused", Kind::Str),
    ("github.project.columns.on_hold", Kind::Str),
    ("github.project.columns.human_loop", Kind::Str),
    ("jira.url", Kind::Str),
    ("jira.user", Kind::Str),
    ("jira.token", Kind::Secret),
    ("http.addr", Kind::Str),
    ("http.token", Kind::Secret),
    ("http.max_connections", Kind::Int),
    ("http.header_timeout_secs", Kind::Int),
    ("remote.publish", Kind::Bool),
    ("remote.takeover", Kind::Bool),
    ("gate.llm", Kind::Bool),
    ("gate.agent", Kind::Str),
    ("jira.api", Kind::Int),
    ("jira.page_size", Kind::Int),
    ("jira.acceptance_field", Kind::Str),
    ("jira.transition_on", Kind::Enum(&["pr_opened", "merged"])),
    ("jira.max_wait", Kind::Duration),
    ("jira.timeout_secs", Kind::Int),
    ("jira.statuses.todo", Kind::Str),
    ("jira.statuses.in_progress", Kind::Str),
    ("jira.statuses.in_review", Kind::Str),
    ("jira.statuses.done", Kind::Str),
    ("jira.statuses.failed", Kind::Str),
    ("jira.statuses.cancelled", Kind::Str),
    ("jira.statuses.blocked", Kind::Str),
    ("jira.statuses.waiting", Kind::Str),
];

/// Fields of an `[agents.<name>]` table.
pub const AGENT_FIELDS: &[(&str, Kind)] = &[
    ("backend", Kind::Enum(BACKENDS)),
    ("bin", Kind::Str),
    ("model", Kind::Str),
    ("permission_mode", Kind::Enum(PERMISSION_MODES)),
    ("extra_args", Kind::StrList),
    ("template", Kind::Str),
    ("max_parallel", Kind::Int),
];

/// Fields of a `[prices."<model>"]` table.
pub const PRICE_FIELDS: &[(&str, Kind)] = &[
    ("input_per_mtok", Kind::Float),
    ("output_per_mtok", Kind::Float),
];

/// Environment aliases applied before the regular `WHILLY_<SECTION>_<KEY>` names (which win).
pub const ENV_ALIASES: &[(&str, &str)] = &[("WHILLY_GH_TOKEN", "github.token")];

/// The sections, for telling a mistyped `WHILLY_QUEUE_…` variable from one that is not ours.
pub const SECTIONS: &[&str] = &[
    "database",
    "queue",
    "run",
    "worktrees",
    "agents",
    "prices",
    "verification",
    "retry",
    "handoff",
    "guards",
    "notifications",
    "tui",
    "keys",
    "logging",
    "delivery",
    "github",
    "jira",
    "http",
    "remote",
    "gate",
];

/// The kind of value at `path`, or `None` when no such key exists.
pub fn kind_of(path: &[String]) -> Option<Kind> {
    match path {
        [section, name, field] if section == "agents" && !name.is_empty() => {
            lookup(AGENT_FIELDS, field)
        }
        [section, model, field] if section == "prices" && !model.is_empty() => {
            lookup(PRICE_FIELDS, field)
        }
        [section, chord] if section == "keys" && !chord.is_empty() => Some(Kind::Str),
        // Fixed keys, also those of nested tables (`github.project.columns.todo`).
        _ if path.len() >= 2 => FIXED_KEYS
            .iter()
            .find(|(k, _)| k.split('.').eq(path.iter().map(String::as_str)))
            .map(|(_, kind)| *kind),
        _ => None,
    }
}

fn lookup(fields: &[(&str, Kind)], field: &str) -> Option<Kind> {
    fields.iter().find(|(f, _)| *f == field).map(|(_, k)| *k)
}

/// `WHILLY_QUEUE_LEASE_SECS` for `queue.lease_secs`; `WHILLY_AGENTS_CLAUDE_MODEL` for
/// `agents.claude.model`. `prices` and `keys` have no variables (their keys are not identifiers).
pub fn env_var_for(path: &[String]) -> Option<String> {
    let ok = match path {
        [section, ..] if section == "prices" || section == "keys" => false,
        [section, name, _] if section == "agents" => {
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        _ => true,
    };
    (ok && kind_of(path).is_some())
        .then(|| format!("WHILLY_{}", path.join("_").to_ascii_uppercase()))
}

/// The key a `WHILLY_*` variable sets, if it names one.
pub fn key_for_env(var: &str) -> Option<Vec<String>> {
    let rest = var.strip_prefix("WHILLY_")?;
    if let Some(agent) = rest.strip_prefix("AGENTS_") {
        // The agent name may itself contain underscores, so match the field from the end.
        return AGENT_FIELDS.iter().find_map(|(field, _)| {
            let name = agent.strip_suffix(&format!("_{}", field.to_ascii_uppercase()))?;
            (!name.is_empty())
                .then(|| vec!["agents".into(), name.to_ascii_lowercase(), (*field).into()])
        });
    }
    FIXED_KEYS.iter().find_map(|(key, _)| {
        let path: Vec<String> = key.split('.').map(String::from).collect();
        (env_var_for(&path).as_deref() == Some(var)).then_some(path)
    })
}

/// True for a `WHILLY_<SECTION>_…` variable (one that looks meant for the config even if no key
/// matches it), so a typo can be reported instead of ignored.
pub fn looks_like_setting(var: &str) -> bool {
    var.strip_prefix("WHILLY_").is_some_and(|rest| {
        SECTIONS.iter().any(|s| {
            rest.strip_prefix(&s.to_ascii_uppercase())
                .is_some_and(|r| r.starts_with('_'))
        })
    })
}

impl Kind {
    /// What the user must write, for error messages.
    pub fn describe(self) -> String {
        match self {
            Kind::Int => "a whole number".into(),
            Kind::Float => "a number".into(),
            Kind::Bool => "true or false".into(),
            Kind::Str => "a string".into(),
            Kind::Path => "a path".into(),
            Kind::StrList => {
                "a list of strings (comma-separated, or a TOML array like [\"a\", \"b\"])".into()
            }
            Kind::IntList => {
                "a list of whole numbers (comma-separated, or a TOML array like [5, 10])".into()
            }
            Kind::Duration => "a duration like 90s, 45m or 2h 30m".into(),
            Kind::Secret => {
                "a secret or a reference (env:NAME, keyring:SERVICE[/USER], file:/path)".into()
            }
            Kind::Enum(options) => format!("one of {}", options.join(", ")),
        }
    }

    /// Reads a raw string (environment variable, flag, `config set` argument) as this kind.
    /// The error message never repeats a secret's value.
    pub fn parse_raw(self, raw: &str) -> Result<toml::Value, String> {
        let bad = || format!("expected {}, got {raw:?}", self.describe());
        let t = raw.trim();
        match self {
            Kind::Int => t
                .parse::<i64>()
                .map(toml::Value::Integer)
                .map_err(|_| bad()),
            Kind::Float => match t.parse::<f64>() {
                Ok(f) if f.is_finite() => Ok(toml::Value::Float(f)),
                _ => Err(bad()),
            },
            Kind::Bool => match t.to_ascii_lowercase().as_str() {
                "true" | "1" | "yes" | "on" => Ok(toml::Value::Boolean(true)),
                "false" | "0" | "no" | "off" => Ok(toml::Value::Boolean(false)),
                _ => Err(bad()),
            },
            Kind::Str | Kind::Path => Ok(toml::Value::String(raw.to_string())),
            Kind::Secret => match Secret::parse(raw) {
                Ok(_) => Ok(toml::Value::String(raw.to_string())),
                Err(e) => Err(e),
            },
            Kind::Duration => match humantime::parse_duration(t) {
                Ok(_) => Ok(toml::Value::String(t.to_string())),
                Err(_) => Err(bad()),
            },
            Kind::Enum(options) => match options.contains(&t) {
                true => Ok(toml::Value::String(t.to_string())),
                false => Err(bad()),
            },
            Kind::StrList | Kind::IntList => {
                let want_int = self == Kind::IntList;
                let items = parse_list(t, want_int).ok_or_else(bad)?;
                let ok = items
                    .iter()
                    .all(|v| if want_int { v.is_integer() } else { v.is_str() });
                ok.then_some(toml::Value::Array(items)).ok_or_else(bad)
            }
        }
    }
}

fn parse_list(t: &str, want_int: bool) -> Option<Vec<toml::Value>> {
    if t.starts_with('[') {
        let table: toml::Table = toml::from_str(&format!("v = {t}")).ok()?;
        return match table.get("v") {
            Some(toml::Value::Array(items)) => Some(items.clone()),
            _ => None,
        };
    }
    t.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match want_int {
            true => s.parse::<i64>().ok().map(toml::Value::Integer),
            false => Some(toml::Value::String(s.into())),
        })
        .collect()
}

/// Splits a dotted key (`queue.lease_secs`, `prices."gpt-4.1".input_per_mtok`) into its parts.
pub fn split_key(key: &str) -> Result<Vec<String>, String> {
    toml_edit::Key::parse(key.trim())
        .map(|keys| keys.iter().map(|k| k.get().to_string()).collect())
        .map_err(|_| format!("`{key}` is not a valid dotted key (write e.g. queue.lease_secs)"))
}

/// The inverse of [`split_key`]: parts that are not bare TOML keys are quoted.
pub fn join_key(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            let bare = !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if bare {
                p.clone()
            } else {
                toml::Value::String(p.clone()).to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn p(key: &str) -> Vec<String> {
        split_key(key).unwrap()
    }

    #[test]
    fn env_names_round_trip() {
        for (key, _) in FIXED_KEYS {
            let path = p(key);
            let var = env_var_for(&path).unwrap();
            assert_eq!(key_for_env(&var), Some(path), "{var}");
        }
        assert_eq!(
            env_var_for(&p("queue.lease_secs")).as_deref(),
            Some("WHILLY_QUEUE_LEASE_SECS")
        );
        assert_eq!(
            key_for_env("WHILLY_AGENTS_MY_BOT_EXTRA_ARGS"),
            Some(p("agents.my_bot.extra_args"))
        );
        assert_eq!(
            key_for_env("WHILLY_AGENTS_CLAUDE_PERMISSION_MODE"),
            Some(p("agents.claude.permission_mode"))
        );
        assert_eq!(key_for_env("WHILLY_QUEUE_LEASE_SEC"), None);
        assert!(looks_like_setting("WHILLY_QUEUE_LEASE_SEC"));
        assert!(!looks_like_setting("WHILLY_TASK_ID"));
    }

    #[test]
    fn keys_with_dots_are_quoted() {
        let path = p(r#"prices."gpt-4.1".input_per_mtok"#);
        assert_eq!(path, vec!["prices", "gpt-4.1", "input_per_mtok"]);
        assert_eq!(join_key(&path), r#"prices."gpt-4.1".input_per_mtok"#);
        assert_eq!(kind_of(&path), Some(Kind::Float));
        assert_eq!(kind_of(&p("queue.nope")), None);
        assert_eq!(kind_of(&p("keys.ctrl-c")), Some(Kind::Str));
    }

    #[test]
    fn raw_values_follow_the_kind() {
        assert_eq!(Kind::Int.parse_raw(" 42 "), Ok(toml::Value::Integer(42)));
        assert!(
            Kind::Int
                .parse_raw("4x")
                .unwrap_err()
                .contains("whole number")
        );
        assert_eq!(Kind::Bool.parse_raw("off"), Ok(toml::Value::Boolean(false)));
        assert_eq!(
            Kind::StrList.parse_raw(".env, .envrc"),
            Ok(toml::Value::Array(vec![".env".into(), ".envrc".into()]))
        );
        assert_eq!(
            Kind::IntList.parse_raw("[1, 2]"),
            Ok(toml::Value::Array(vec![1.into(), 2.into()]))
        );
        assert!(Kind::IntList.parse_raw("1,x").is_err());
        assert!(
            Kind::Enum(MERGE_MODES)
                .parse_raw("rebase")
                .unwrap_err()
                .contains("cherry-pick")
        );
        assert!(Kind::Duration.parse_raw("2h 30m").is_ok());
        assert!(Kind::Float.parse_raw("NaN").is_err());
    }
}

#[cfg(test)]
mod every_key_is_read {
    use super::FIXED_KEYS;
    use std::path::Path;

    /// Keys read through a binding of their section under another name (`g.label_ready` with
    /// `g = &cfg.github`): the file that reads each, where `.FIELD` must appear in code. Every
    /// other key must be read as `SECTION.FIELD` (`cfg.queue.lease_secs`, `c.logging.level`).
    const READ_THROUGH_A_BINDING: &[(&str, &str)] = &[
        ("worktrees.max_disk", "engine/doctor/worktrees.rs"),
        ("verification.env_allowlist", "engine/configure.rs"),
        ("notifications.desktop", "notify/mod.rs"),
        ("notifications.terminal", "notify/mod.rs"),
        ("notifications.bell", "notify/mod.rs"),
        ("github.label_ready", "engine/configure.rs"),
        ("github.label_in_progress", "engine/configure.rs"),
        ("github.label_in_review", "engine/configure.rs"),
        ("github.label_failed", "engine/configure.rs"),
        ("github.project.number", "engine/board_sync.rs"),
        ("github.project.status_field", "engine/board_sync.rs"),
        ("github.project.columns.in_progress", "forge/board.rs"),
        ("github.project.columns.in_review", "forge/board.rs"),
        ("github.project.columns.done", "forge/board.rs"),
        ("github.project.columns.failed", "forge/board.rs"),
        ("github.project.columns.refused", "forge/board.rs"),
        ("github.project.columns.on_hold", "forge/board.rs"),
        ("github.project.columns.human_loop", "forge/board.rs"),
        ("jira.api", "engine/configure.rs"),
        ("jira.transition_on", "engine/jira_sync.rs"),
        ("jira.max_wait", "engine/configure.rs"),
        ("jira.timeout_secs", "engine/configure.rs"),
        ("jira.statuses.todo", "engine/jira_sync.rs"),
        ("jira.statuses.in_progress", "engine/jira_sync.rs"),
        ("jira.statuses.in_review", "engine/jira_sync.rs"),
        ("jira.statuses.done", "engine/jira_sync.rs"),
        ("jira.statuses.failed", "engine/jira_sync.rs"),
        ("jira.statuses.cancelled", "engine/jira_sync.rs"),
        ("jira.statuses.blocked", "engine/jira_sync.rs"),
        ("jira.statuses.waiting", "engine/jira_sync.rs"),
    ];

    /// Every `.rs` file under `dir` outside `src/config/`, as (path, code): comment lines and
    /// string literals blanked, so a key named in a message or a doc comment is not a read.
    fn code(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                if !path.ends_with("config") {
                    code(&path, out);
                }
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("read source");
                let mut kept = String::with_capacity(text.len());
                for line in text.lines() {
                    if line.trim_start().starts_with("//") {
                        continue;
                    }
                    let (mut in_str, mut prev) = (false, ' ');
                    for c in line.chars() {
                        if c == '"' && prev != '\\' && prev != '\'' {
                            in_str = !in_str;
                        } else if !in_str {
                            kept.push(c);
                        }
                        prev = c;
                    }
                    kept.push('\n');
                }
                out.push((path.display().to_string(), kept));
            }
        }
    }

    /// `word` in `text` as a whole token (nothing word-like on either side; a `word` that
    /// begins with `.` is a field access, whatever precedes it).
    fn has_token(text: &str, word: &str) -> bool {
        let wordy = |c: char| c.is_alphanumeric() || c == '_';
        text.match_indices(word).any(|(i, _)| {
            (word.starts_with('.') || text[..i].chars().next_back().is_none_or(|c| !wordy(c)))
                && text[i + word.len()..]
                    .chars()
                    .next()
                    .is_none_or(|c| !wordy(c))
        })
    }

    /// A documented key that nothing reads is a setting that is accepted and does nothing.
    #[test]
    fn every_documented_key_is_read_outside_the_config_module() {
        let mut files = Vec::new();
        code(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut unread = Vec::new();
        for (key, _) in FIXED_KEYS {
            let parts: Vec<&str> = key.split('.').collect();
            let (section, field) = (parts[parts.len() - 2], parts[parts.len() - 1]);
            let read = match READ_THROUGH_A_BINDING.iter().find(|(k, _)| k == key) {
                Some((_, file)) => files
                    .iter()
                    .any(|(p, text)| p.ends_with(file) && has_token(text, &format!(".{field}"))),
                None => files
                    .iter()
                    .any(|(_, text)| has_token(text, &format!("{section}.{field}"))),
            };
            if !read {
                unread.push(*key);
            }
        }
        assert!(
            unread.is_empty(),
            "documented keys nothing reads (wire them or remove them): {unread:?}"
        );
    }
}
