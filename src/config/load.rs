//! Layering: built-in defaults < user file < repository file < `WHILLY_*` environment < flags.
//! Layers are merged as TOML trees (so each leaf remembers which layer set it) and the result is
//! deserialized once into [`Config`].

use super::error::{ConfigError, Origin, Problem};
use super::locate::{ParsedFile, parse_config_file};
use super::model::Config;
use super::paths::{ConfigFiles, default_worktrees_dir, process_env};
use super::schema::{ENV_ALIASES, join_key, key_for_env, kind_of, looks_like_setting, split_key};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What to load and from where. Tests inject `env` and `user_file` so the real home is never read.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    pub repo_root: PathBuf,
    /// Use this user file instead of `$XDG_CONFIG_HOME/whilly/config.toml`.
    pub user_file: Option<PathBuf>,
    pub env: BTreeMap<String, String>,
    /// Command-line overrides as (dotted key, raw value), applied last.
    pub overrides: Vec<(String, String)>,
}

impl LoadOptions {
    /// Options for `repo_root` with the real process environment and no overrides.
    pub fn from_process_env(repo_root: impl Into<PathBuf>) -> Self {
        LoadOptions {
            repo_root: repo_root.into(),
            user_file: None,
            env: process_env(),
            overrides: Vec::new(),
        }
    }

    pub fn files(&self) -> ConfigFiles {
        ConfigFiles::locate(&self.repo_root, self.user_file.as_deref(), &self.env)
    }
}

/// Parses a `-c KEY=VALUE` flag into an override pair.
pub fn parse_override(flag: &str) -> Result<(String, String), ConfigError> {
    match flag.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_string(), v.to_string())),
        _ => Err(ConfigError::Usage(format!(
            "`-c {flag}` must look like KEY=VALUE, e.g. -c queue.lease_secs=60"
        ))),
    }
}

/// A position in a config file (1-based).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FilePos {
    pub path: PathBuf,
    pub line: usize,
    pub col: usize,
}

/// The layer an effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    UserFile(FilePos),
    RepoFile(FilePos),
    Env(String),
    Flag,
}

impl Source {
    fn origin(&self) -> Origin {
        match self {
            Source::Default => Origin::Default,
            Source::UserFile(p) | Source::RepoFile(p) => Origin::File {
                path: p.path.clone(),
                line: p.line,
                col: p.col,
            },
            Source::Env(var) => Origin::Env(var.clone()),
            Source::Flag => Origin::Flag,
        }
    }

    /// `default`, `user`, `repo`, `env` or `flag`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::UserFile(_) => "user",
            Source::RepoFile(_) => "repo",
            Source::Env(_) => "env",
            Source::Flag => "flag",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => f.write_str("default"),
            Source::UserFile(p) => write!(f, "user file {}:{}", p.path.display(), p.line),
            Source::RepoFile(p) => write!(f, "repo file {}:{}", p.path.display(), p.line),
            Source::Env(var) => write!(f, "env {var}"),
            Source::Flag => f.write_str("flag"),
        }
    }
}

/// The effective configuration and where each value came from.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    /// Dotted key of every leaf value → the layer that set it.
    pub sources: BTreeMap<String, Source>,
    pub files: ConfigFiles,
    /// Things worth telling the user that are not errors (a `WHILLY_QUEUE_…` variable that
    /// matches no key).
    pub warnings: Vec<String>,
}

impl Config {
    /// The built-in defaults, with directories taken from `env` (XDG / HOME).
    pub fn defaults_for(env: &BTreeMap<String, String>) -> Config {
        let mut c = Config::default();
        c.worktrees.dir = default_worktrees_dir(env);
        c
    }
}

/// Accumulates layers: the merged tree, each leaf's source, and every problem found.
struct Layers {
    tree: toml::Table,
    sources: BTreeMap<String, Source>,
    problems: Vec<Problem>,
}

impl Layers {
    fn merge(&mut self, layer: &toml::Table, source: &dyn Fn(&[String]) -> Source) {
        merge_into(&mut self.tree, layer, &mut Vec::new(), &mut |path| {
            self.sources.insert(join_key(path), source(path));
        });
    }

    /// Applies one raw string value (env var or flag), checking it against the key's type and
    /// against the whole config (so a value out of the field's range is caught here, naming `origin`).
    fn set_raw(&mut self, path: &[String], raw: &str, origin: Origin, source: Source) {
        let key = join_key(path);
        let Some(kind) = kind_of(path) else {
            self.problems.push(Problem {
                origin,
                key,
                message: "unknown key (see whilly.example.toml)".into(),
            });
            return;
        };
        let value = match kind.parse_raw(raw) {
            Ok(v) => v,
            Err(message) => {
                self.problems.push(Problem {
                    origin,
                    key,
                    message,
                });
                return;
            }
        };
        let layer = nest(path, value);
        let mut trial = self.tree.clone();
        merge_into(&mut trial, &layer, &mut Vec::new(), &mut |_| {});
        if let Err(e) = toml::Value::Table(trial).try_into::<Config>() {
            let message = format!("{} (expected {})", first_line(e.message()), kind.describe());
            self.problems.push(Problem {
                origin,
                key,
                message,
            });
            return;
        }
        self.merge(&layer, &|_| source.clone());
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim()
}

/// `a.b.c = v` as a table.
fn nest(path: &[String], value: toml::Value) -> toml::Table {
    let mut value = value;
    for part in path.iter().skip(1).rev() {
        let mut t = toml::Table::new();
        t.insert(part.clone(), value);
        value = toml::Value::Table(t);
    }
    let mut root = toml::Table::new();
    if let Some(first) = path.first() {
        root.insert(first.clone(), value);
    }
    root
}

/// Deep-merges `layer` into `base`; tables merge, anything else (arrays included) replaces.
/// `on_leaf` sees the path of every leaf the layer sets.
fn merge_into(
    base: &mut toml::Table,
    layer: &toml::Table,
    prefix: &mut Vec<String>,
    on_leaf: &mut dyn FnMut(&[String]),
) {
    for (k, v) in layer {
        prefix.push(k.clone());
        match (base.get_mut(k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(l)) => {
                merge_into(b, l, prefix, on_leaf)
            }
            _ => {
                base.insert(k.clone(), v.clone());
                visit_leaves(v, prefix, on_leaf);
            }
        }
        prefix.pop();
    }
}

fn visit_leaves(v: &toml::Value, prefix: &mut Vec<String>, on_leaf: &mut dyn FnMut(&[String])) {
    match v {
        toml::Value::Table(t) => {
            for (k, child) in t {
                prefix.push(k.clone());
                visit_leaves(child, prefix, on_leaf);
                prefix.pop();
            }
        }
        _ => on_leaf(prefix),
    }
}

/// Every leaf of a serialized value as (dotted key, value), in key order.
pub fn flatten(value: &toml::Table) -> Vec<(String, toml::Value)> {
    let mut out = Vec::new();
    let mut prefix = Vec::new();
    for (k, v) in value {
        prefix.push(k.clone());
        flatten_into(v, &mut prefix, &mut out);
        prefix.pop();
    }
    out
}

fn flatten_into(v: &toml::Value, prefix: &mut Vec<String>, out: &mut Vec<(String, toml::Value)>) {
    match v {
        toml::Value::Table(t) => {
            for (k, child) in t {
                prefix.push(k.clone());
                flatten_into(child, prefix, out);
                prefix.pop();
            }
        }
        other => out.push((join_key(prefix), other.clone())),
    }
}

/// The source of `key`, or for a key nobody set (a missing `template`) the source of a sibling,
/// so the problem points at the table the user wrote.
fn source_near<'a>(sources: &'a BTreeMap<String, Source>, key: &str) -> Option<&'a Source> {
    if let Some(s) = sources.get(key) {
        return Some(s);
    }
    let mut path = split_key(key).ok()?;
    while path.len() > 1 {
        path.pop();
        let prefix = format!("{}.", join_key(&path));
        let mut near = sources
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix));
        if let Some((_, s)) = near.find(|(_, s)| **s != Source::Default) {
            return Some(s);
        }
    }
    None
}

/// Reads a config file if it exists. A missing file is simply an absent layer.
pub fn read_config_file(path: &Path) -> Result<Option<ParsedFile>, ConfigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(ConfigError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    parse_config_file(path, text)
        .map(Some)
        .map_err(|p| ConfigError::Invalid(vec![p]))
}

/// Loads the effective configuration. Every invalid value in every layer is reported at once.
pub fn load(opts: &LoadOptions) -> Result<Loaded, ConfigError> {
    load_files(opts, opts.files())
}

/// [`load`] reading the given files instead of the usual paths (`config set` checks a candidate
/// file this way before it replaces the real one).
pub fn load_files(opts: &LoadOptions, files: ConfigFiles) -> Result<Loaded, ConfigError> {
    let defaults = Config::defaults_for(&opts.env);
    let tree = match toml::Table::try_from(&defaults) {
        Ok(t) => t,
        Err(e) => return Err(ConfigError::problem(Origin::Default, "", e.to_string())),
    };
    let mut layers = Layers {
        tree: toml::Table::new(),
        sources: BTreeMap::new(),
        problems: Vec::new(),
    };
    layers.merge(&tree, &|_| Source::Default);

    type MakeSource = fn(FilePos) -> Source;
    let file_layers: [(&Path, MakeSource); 2] = [
        (&files.user, Source::UserFile),
        (&files.repo, Source::RepoFile),
    ];
    for (path, make) in file_layers {
        match read_config_file(path) {
            Ok(Some(parsed)) => {
                let source = |p: &[String]| {
                    let (line, col) = parsed.position(p);
                    make(FilePos {
                        path: path.to_path_buf(),
                        line,
                        col,
                    })
                };
                layers.merge(&parsed.table, &source);
            }
            Ok(None) => {}
            Err(ConfigError::Invalid(ps)) => layers.problems.extend(ps),
            Err(other) => return Err(other),
        }
    }

    let mut warnings = Vec::new();
    let aliases = ENV_ALIASES
        .iter()
        .map(|(var, key)| (*var, split_key(key).unwrap_or_default()));
    let regular = opts
        .env
        .keys()
        .filter_map(|var| Some((var.as_str(), key_for_env(var)?)));
    let env_layer: Vec<(&str, Vec<String>)> = aliases.chain(regular).collect();
    for (var, path) in env_layer {
        // An empty variable means "unset", as most tools treat it.
        let Some(raw) = opts.env.get(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        layers.set_raw(
            &path,
            raw,
            Origin::Env(var.to_string()),
            Source::Env(var.to_string()),
        );
    }
    for var in opts.env.keys() {
        let known = key_for_env(var).is_some() || ENV_ALIASES.iter().any(|(a, _)| a == var);
        if !known && looks_like_setting(var) {
            warnings.push(format!(
                "environment variable {var} does not match any setting; ignored"
            ));
        }
    }

    for (key, raw) in &opts.overrides {
        match split_key(key) {
            Ok(path) => layers.set_raw(&path, raw, Origin::Flag, Source::Flag),
            Err(msg) => layers.problems.push(Problem {
                origin: Origin::Flag,
                key: key.clone(),
                message: msg,
            }),
        }
    }

    if !layers.problems.is_empty() {
        return Err(ConfigError::Invalid(layers.problems));
    }
    let config: Config =
        toml::Value::Table(layers.tree)
            .try_into()
            .map_err(|e: toml::de::Error| {
                ConfigError::problem(Origin::Default, "", e.message().to_string())
            })?;

    let problems: Vec<Problem> = super::validate::check(&config)
        .into_iter()
        .map(|(key, message)| {
            let origin = source_near(&layers.sources, &key).map_or(Origin::Default, Source::origin);
            Problem {
                origin,
                key,
                message,
            }
        })
        .collect();
    if !problems.is_empty() {
        return Err(ConfigError::Invalid(problems));
    }
    Ok(Loaded {
        config,
        sources: layers.sources,
        files,
        warnings,
    })
}
