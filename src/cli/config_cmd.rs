//! `whilly config show|path|edit|set`.

use crate::config::schema::{Kind, join_key, kind_of, split_key};
use crate::config::{
    ConfigError, ConfigFiles, KEYRING_SERVICE, LoadOptions, Origin, Source, edit, flatten,
    keyring_set, load, load_files,
};
use clap::Subcommand;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

const OK: i32 = 0;
const INVALID: i32 = 1;

#[derive(Debug, Clone, Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration and where each value came from (secrets redacted).
    #[command(
        after_help = "Each value is followed by its source: default, user file PATH:LINE, repo file PATH:LINE, \
env WHILLY_…, or flag.\n\nExamples:\n  whilly config show\n  whilly config show queue\n  \
whilly config show --json | jq '.values[\"queue.lease_secs\"]'\n  WHILLY_RUN_PARALLEL=8 whilly config show run.parallel"
    )]
    Show {
        /// Only keys equal to or under this dotted prefix (e.g. `queue`, `agents.claude`).
        prefix: Option<String>,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Print the user and repository config file paths and whether each exists.
    #[command(
        after_help = "The user file is $XDG_CONFIG_HOME/whilly/config.toml (default ~/.config/whilly/config.toml); \
the repository file is whilly.toml at the repository root and overrides it.\n\nExamples:\n  whilly config path\n  whilly config path --json"
    )]
    Path {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Open the repository config (or the user config) in $VISUAL / $EDITOR, then check it.
    #[command(
        after_help = "The editor is $VISUAL, else $EDITOR, else vi. The file is created if missing. After the \
editor exits the whole configuration is validated; problems are listed with file, key and line, and the exit \
status is 1.\n\nExamples:\n  whilly config edit\n  whilly config edit --user\n  EDITOR=nano whilly config edit"
    )]
    Edit {
        /// Edit the user file instead of the repository's whilly.toml.
        #[arg(long)]
        user: bool,
    },
    /// Set one key in the repository config (or the user config), keeping comments and layout.
    #[command(
        after_help = "The value is checked against the key's type before the file is replaced (atomically). \
Lists are comma-separated or TOML arrays. With --secret the value goes to the OS keyring (service `whilly`, \
user = the key) and the file gets a keyring:whilly/KEY reference; pass `-` as VALUE to read it from stdin so it \
stays out of shell history.\n\nExamples:\n  whilly config set queue.lease_secs 60\n  \
whilly config set run.timeout '2h 30m' --user\n  whilly config set worktrees.include .env,.envrc\n  \
whilly config set agents.claude.model claude-sonnet-4-5\n  whilly config set 'prices.\"gpt-4.1\".input_per_mtok' 2.0\n  \
whilly config set github.token - --secret --user < token.txt\n  \
whilly config set database.url env:DATABASE_URL"
    )]
    Set {
        /// Dotted key, e.g. `queue.lease_secs`.
        key: String,
        /// The new value (`-` reads it from stdin).
        value: String,
        /// Store the value in the OS keyring and write a keyring: reference (secret keys only).
        #[arg(long)]
        secret: bool,
        /// Change the user file instead of the repository's whilly.toml.
        #[arg(long)]
        user: bool,
    },
}

/// Runs a config command, printing to stdout/stderr; returns the exit code (0 ok, 1 invalid input).
pub fn run(cmd: &ConfigCommand, opts: &LoadOptions) -> anyhow::Result<i32> {
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut io = Io {
        out: &mut stdout.lock(),
        err: &mut stderr.lock(),
        stdin: &mut std::io::stdin(),
    };
    run_with(cmd, opts, &mut io)
}

/// Where a command reads and writes; tests pass buffers.
pub struct Io<'a> {
    pub out: &'a mut dyn Write,
    pub err: &'a mut dyn Write,
    pub stdin: &'a mut dyn Read,
}

pub fn run_with(cmd: &ConfigCommand, opts: &LoadOptions, io: &mut Io<'_>) -> anyhow::Result<i32> {
    match cmd {
        ConfigCommand::Show { prefix, json } => show(opts, prefix.as_deref(), *json, io),
        ConfigCommand::Path { json } => path(opts, *json, io),
        ConfigCommand::Edit { user } => edit_file(opts, *user, io),
        ConfigCommand::Set {
            key,
            value,
            secret,
            user,
        } => set(opts, key, value, *secret, *user, io),
    }
}

/// Prints a configuration error; anything that is not about the user's input propagates.
fn report(err: ConfigError, io: &mut Io<'_>) -> anyhow::Result<i32> {
    match err {
        ConfigError::Io { .. } => Err(err.into()),
        other => {
            writeln!(io.err, "error: {other}")?;
            Ok(INVALID)
        }
    }
}

fn in_prefix(key: &str, prefix: Option<&str>) -> bool {
    prefix.is_none_or(|p| {
        let p = p.trim_end_matches('.');
        key == p
            || key
                .strip_prefix(p)
                .is_some_and(|rest| rest.starts_with('.'))
    })
}

fn show(
    opts: &LoadOptions,
    prefix: Option<&str>,
    json: bool,
    io: &mut Io<'_>,
) -> anyhow::Result<i32> {
    let loaded = match load(opts) {
        Ok(l) => l,
        Err(e) => return report(e, io),
    };
    for w in &loaded.warnings {
        writeln!(io.err, "warning: {w}")?;
    }
    // Serializing a Config redacts its secrets (see config::Secret), so nothing below can leak one.
    let tree = toml::Table::try_from(&loaded.config)?;
    let leaves: Vec<(String, toml::Value)> = flatten(&tree)
        .into_iter()
        .filter(|(k, _)| in_prefix(k, prefix))
        .collect();
    if let Some(p) = prefix
        && leaves.is_empty()
    {
        writeln!(
            io.err,
            "error: no setting `{p}` (see whilly.example.toml for every key)"
        )?;
        return Ok(INVALID);
    }
    let source_of = |key: &str| loaded.sources.get(key).cloned().unwrap_or(Source::Default);
    let notes = notes(&loaded, prefix, &source_of);
    if json {
        let mut values = serde_json::Map::new();
        for (key, value) in &leaves {
            let source = source_of(key);
            let mut entry = serde_json::Map::new();
            entry.insert("value".into(), serde_json::to_value(value)?);
            entry.insert("source".into(), source.kind().into());
            match &source {
                Source::UserFile(pos) | Source::RepoFile(pos) => {
                    entry.insert("file".into(), pos.path.display().to_string().into());
                    entry.insert("line".into(), pos.line.into());
                }
                Source::Env(var) => {
                    entry.insert("env".into(), var.clone().into());
                }
                Source::Default | Source::Flag => {}
            }
            values.insert(key.clone(), entry.into());
        }
        let doc = serde_json::json!({
            "files": loaded.files,
            "values": values,
            "warnings": loaded.warnings,
            "notes": notes,
        });
        writeln!(io.out, "{}", serde_json::to_string_pretty(&doc)?)?;
        return Ok(OK);
    }
    writeln!(
        io.out,
        "# user file: {}",
        describe_file(&loaded.files.user, loaded.files.user_exists)
    )?;
    writeln!(
        io.out,
        "# repo file: {}",
        describe_file(&loaded.files.repo, loaded.files.repo_exists)
    )?;
    let lines: Vec<(String, Source)> = leaves
        .iter()
        .map(|(k, v)| (format!("{k} = {v}"), source_of(k)))
        .collect();
    let width = lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .filter(|w| *w <= 60)
        .max()
        .unwrap_or(0);
    for (line, source) in lines {
        writeln!(io.out, "{line:<width$}  # {source}")?;
    }
    for n in &notes {
        writeln!(io.out, "# {n}")?;
    }
    Ok(OK)
}

/// What the values alone do not say: which GitHub token is in use (never the token itself),
/// and that the older `worktrees.merge` stands in for `delivery.merge`.
fn notes(
    loaded: &crate::config::Loaded,
    prefix: Option<&str>,
    source_of: &dyn Fn(&str) -> Source,
) -> Vec<String> {
    let mut notes = Vec::new();
    if prefix.is_none_or(|p| in_prefix("github.token", Some(p)) || p == "github") {
        let what = match crate::engine::configure::github_token(&loaded.config) {
            Ok(Some((_, source))) => format!("github token: from {source}"),
            Ok(None) => "github token: none found (set WHILLY_GITHUB_TOKEN, [github] token, or `gh auth login`)".to_string(),
            Err(e) => format!("github token: {e}"),
        };
        notes.push(what);
    }
    if prefix.is_none_or(|p| {
        in_prefix("delivery.merge", Some(p)) || in_prefix("worktrees.merge", Some(p))
    }) && loaded.config.delivery.merge.is_none()
        && source_of("worktrees.merge") != Source::Default
    {
        notes.push(format!(
            "delivery.merge: worktrees.merge = {} ({}) is read as delivery.merge; move it to [delivery]",
            toml::Value::try_from(loaded.config.worktrees.merge)
                .map(|v| v.to_string())
                .unwrap_or_default(),
            source_of("worktrees.merge")
        ));
    }
    notes
}

fn describe_file(path: &Path, exists: bool) -> String {
    format!(
        "{} ({})",
        path.display(),
        if exists { "exists" } else { "not found" }
    )
}

fn path(opts: &LoadOptions, json: bool, io: &mut Io<'_>) -> anyhow::Result<i32> {
    let files = opts.files();
    if json {
        writeln!(io.out, "{}", serde_json::to_string_pretty(&files)?)?;
    } else {
        writeln!(
            io.out,
            "user  {}",
            describe_file(&files.user, files.user_exists)
        )?;
        writeln!(
            io.out,
            "repo  {}",
            describe_file(&files.repo, files.repo_exists)
        )?;
    }
    Ok(OK)
}

fn target_file(opts: &LoadOptions, user: bool) -> PathBuf {
    let files = opts.files();
    if user { files.user } else { files.repo }
}

const NEW_FILE_HEADER: &str = "# Whilly configuration. Every key, its default and its WHILLY_* variable are \
documented in whilly.example.toml;\n# `whilly config show` prints the effective values and where each came from.\n";

fn edit_file(opts: &LoadOptions, user: bool, io: &mut Io<'_>) -> anyhow::Result<i32> {
    let file = target_file(opts, user);
    if !file.exists()
        && let Err(e) = edit::write_atomic(&file, NEW_FILE_HEADER, |_| Ok(()))
    {
        return report(e, io);
    }
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .find_map(|v| opts.env.get(*v).filter(|e| !e.trim().is_empty()).cloned())
        .unwrap_or_else(|| "vi".to_string());
    // Through the shell, as git does, so EDITOR="code --wait" works.
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("sh")
        .arg(&file)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            writeln!(
                io.err,
                "error: editor `{editor}` exited with {s}; {} was not checked",
                file.display()
            )?;
            return Ok(INVALID);
        }
        Err(e) => {
            writeln!(
                io.err,
                "error: cannot start editor `{editor}`: {e}; set $VISUAL or $EDITOR"
            )?;
            return Ok(INVALID);
        }
    }
    match load(opts) {
        Ok(_) => {
            writeln!(io.out, "{} is valid", file.display())?;
            Ok(OK)
        }
        Err(e) => {
            report(e, io)?;
            writeln!(
                io.err,
                "fix it with `whilly config edit{}`",
                if user { " --user" } else { "" }
            )?;
            Ok(INVALID)
        }
    }
}

fn set(
    opts: &LoadOptions,
    key: &str,
    raw: &str,
    secret: bool,
    user: bool,
    io: &mut Io<'_>,
) -> anyhow::Result<i32> {
    let path = match split_key(key) {
        Ok(p) => p,
        Err(msg) => {
            writeln!(io.err, "error: {msg}")?;
            return Ok(INVALID);
        }
    };
    let key = join_key(&path);
    let Some(kind) = kind_of(&path) else {
        writeln!(
            io.err,
            "error: unknown key `{key}` (see whilly.example.toml or `whilly config show`)"
        )?;
        return Ok(INVALID);
    };
    let mut raw = raw.to_string();
    if raw == "-" {
        raw.clear();
        io.stdin.read_to_string(&mut raw)?;
        raw.truncate(raw.trim_end_matches(['\n', '\r']).len());
    }
    let file = target_file(opts, user);
    if secret {
        if kind != Kind::Secret {
            writeln!(
                io.err,
                "error: `{key}` is not a secret setting; --secret works for database.url, github.token, jira.token"
            )?;
            return Ok(INVALID);
        }
        // WHILLY_KEYRING_SERVICE keeps separate profiles (and tests) apart from the real entries.
        let service = opts
            .env
            .get("WHILLY_KEYRING_SERVICE")
            .map_or(KEYRING_SERVICE, String::as_str);
        if let Err(e) = keyring_set(service, &key, &raw) {
            return report(e, io);
        }
        raw = format!("keyring:{service}/{key}");
    } else if kind == Kind::Secret
        && crate::config::Secret::parse(&raw).is_ok_and(|s| s.is_literal())
    {
        writeln!(
            io.err,
            "warning: `{key}` is written to {} in plain text; use --secret (keyring), env:NAME or file:/path",
            file.display()
        )?;
    }
    let value = match kind.parse_raw(&raw) {
        Ok(v) => v,
        Err(msg) => {
            writeln!(io.err, "error: `{key}`: {msg}")?;
            return Ok(INVALID);
        }
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return report(
                ConfigError::Io {
                    path: file.clone(),
                    source,
                },
                io,
            );
        }
    };
    let new_text = match edit::set_value(&text, &path, &value) {
        Ok(t) => t,
        Err(msg) => {
            writeln!(io.err, "error: {}: `{key}`: {msg}", file.display())?;
            return Ok(INVALID);
        }
    };
    let written = edit::write_atomic(&file, &new_text, |candidate| {
        check_candidate(opts, user, &file, candidate)
    });
    if let Err(e) = written {
        return report(e, io);
    }
    let shown = if kind == Kind::Secret {
        crate::config::Secret::parse(&raw)
            .map(|s| s.to_string())
            .unwrap_or_default()
    } else {
        value.to_string()
    };
    writeln!(io.out, "{key} = {shown}  (written to {})", file.display())?;
    Ok(OK)
}

/// Validates the files with `candidate` standing in for the file being changed. Only problems in
/// the candidate block the write (a broken other file is not this command's business); the
/// environment and flags are left out for the same reason.
fn check_candidate(
    opts: &LoadOptions,
    user: bool,
    real: &Path,
    candidate: &Path,
) -> Result<(), ConfigError> {
    let mut files: ConfigFiles = opts.files();
    if user {
        files.user = candidate.to_path_buf();
        files.user_exists = true;
    } else {
        files.repo = candidate.to_path_buf();
        files.repo_exists = true;
    }
    let paths_only: BTreeMap<String, String> = opts
        .env
        .iter()
        .filter(|(k, _)| matches!(k.as_str(), "HOME" | "XDG_CONFIG_HOME" | "XDG_DATA_HOME"))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let bare = LoadOptions {
        env: paths_only,
        overrides: Vec::new(),
        ..opts.clone()
    };
    match load_files(&bare, files) {
        Ok(_) => Ok(()),
        Err(ConfigError::Invalid(problems)) => {
            let mine: Vec<_> = problems
                .into_iter()
                .filter_map(|mut p| match &mut p.origin {
                    Origin::File { path, .. } if path == candidate => {
                        *path = real.to_path_buf();
                        Some(p)
                    }
                    _ => None,
                })
                .collect();
            if mine.is_empty() {
                Ok(())
            } else {
                Err(ConfigError::Invalid(mine))
            }
        }
        Err(other) => Err(other),
    }
}
