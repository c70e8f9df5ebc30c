//! Layering, sources, error locations and secret references of `whilly::config`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use whilly::config::{Config, ConfigError, LoadOptions, Origin, Secret, Source, load, schema};

struct Dirs {
    tmp: tempfile::TempDir,
    repo: PathBuf,
    user_file: PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let user_file = tmp.path().join("xdg/whilly/config.toml");
    Dirs {
        repo,
        user_file,
        tmp,
    }
}

fn opts(d: &Dirs, vars: &[(&str, &str)], flags: &[(&str, &str)]) -> LoadOptions {
    let mut env: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.insert(
        "HOME".into(),
        d.tmp.path().join("home").display().to_string(),
    );
    LoadOptions {
        repo_root: d.repo.clone(),
        user_file: Some(d.user_file.clone()),
        env,
        overrides: flags
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn problems(err: ConfigError) -> Vec<whilly::config::Problem> {
    match err {
        ConfigError::Invalid(p) => p,
        other => panic!("expected invalid configuration, got {other}"),
    }
}

#[test]
fn five_layers_in_order_each_reporting_its_source() {
    let d = dirs();
    // Each layer sets one more of these keys than the layer above it, so every key shows who won.
    write(
        &d.user_file,
        "[queue]\nlease_secs = 40\nheartbeat_secs = 12\nreaper_interval_secs = 6\npoll_interval_ms = 900\n",
    );
    let repo_file = d.repo.join("whilly.toml");
    write(
        &repo_file,
        "[queue]\n\nlease_secs = 41\nheartbeat_secs = 13\nreaper_interval_secs = 7\n",
    );
    let o = opts(
        &d,
        &[
            ("WHILLY_QUEUE_LEASE_SECS", "42"),
            ("WHILLY_QUEUE_HEARTBEAT_SECS", "14"),
            ("UNRELATED", "x"),
        ],
        &[("queue.lease_secs", "43")],
    );
    let loaded = load(&o).unwrap();
    let q = &loaded.config.queue;
    assert_eq!(
        (
            q.lease_secs,
            q.heartbeat_secs,
            q.reaper_interval_secs,
            q.poll_interval_ms,
            q.notify_debounce_ms
        ),
        (43, 14, 7, 900, 20)
    );
    let src = |k: &str| loaded.sources.get(k).cloned().unwrap();
    assert_eq!(src("queue.lease_secs"), Source::Flag);
    assert_eq!(
        src("queue.heartbeat_secs"),
        Source::Env("WHILLY_QUEUE_HEARTBEAT_SECS".into())
    );
    match src("queue.reaper_interval_secs") {
        Source::RepoFile(pos) => assert_eq!(
            (pos.path.as_path(), pos.line, pos.col),
            (repo_file.as_path(), 5, 1)
        ),
        other => panic!("{other:?}"),
    }
    match src("queue.poll_interval_ms") {
        Source::UserFile(pos) => {
            assert_eq!((pos.path.as_path(), pos.line), (d.user_file.as_path(), 5))
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(src("queue.notify_debounce_ms"), Source::Default);
    assert_eq!(src("queue.notify_debounce_ms").to_string(), "default");
    assert_eq!(
        src("queue.heartbeat_secs").to_string(),
        "env WHILLY_QUEUE_HEARTBEAT_SECS"
    );
    assert!(
        src("queue.reaper_interval_secs")
            .to_string()
            .starts_with("repo file ")
    );
    assert!(loaded.files.user_exists && loaded.files.repo_exists);
}

#[test]
fn no_files_means_defaults() {
    let d = dirs();
    let loaded = load(&opts(&d, &[], &[])).unwrap();
    let mut expected = Config::default();
    expected.worktrees.dir = d.tmp.path().join("home/.local/share/whilly/worktrees");
    assert_eq!(loaded.config, expected);
    assert!(loaded.sources.values().all(|s| *s == Source::Default));
    assert!(!loaded.files.user_exists && !loaded.files.repo_exists);
    assert_eq!(loaded.config.agents["claude"].program("claude"), "claude");
}

#[test]
fn maps_merge_across_layers() {
    let d = dirs();
    write(
        &d.user_file,
        "[agents.claude]\nmodel = \"opus\"\n[keys]\n\"ctrl-p\" = \"pause_workers\"\n",
    );
    write(
        &d.repo.join("whilly.toml"),
        "[agents.aider]\nbackend = \"command\"\ntemplate = \"aider --message-file {prompt_file}\"\n\
         [prices.\"gpt-4.1\"]\ninput_per_mtok = 2.0\noutput_per_mtok = 8.0\n",
    );
    let loaded = load(&opts(
        &d,
        &[(
            "WHILLY_AGENTS_CLAUDE_EXTRA_ARGS",
            "--verbose,--max-turns=40",
        )],
        &[],
    ))
    .unwrap();
    let c = &loaded.config;
    assert_eq!(c.agents["claude"].model.as_deref(), Some("opus"));
    assert_eq!(
        c.agents["claude"].bin.as_deref(),
        Some("claude"),
        "default kept beside the user's model"
    );
    assert_eq!(
        c.agents["claude"].extra_args,
        vec!["--verbose", "--max-turns=40"]
    );
    assert!(c.agents.contains_key("aider") && c.agents.contains_key("codex"));
    assert_eq!(c.prices["gpt-4.1"].output_per_mtok, 8.0);
    assert!(c.prices.contains_key("claude-sonnet-4-5"));
    assert_eq!(c.keys["ctrl-p"], "pause_workers");
    assert!(matches!(
        loaded.sources[r#"prices."gpt-4.1".input_per_mtok"#],
        Source::RepoFile(_)
    ));
}

#[test]
fn unknown_key_names_file_key_and_line() {
    let d = dirs();
    let file = d.repo.join("whilly.toml");
    write(
        &file,
        "# mine\n[queue]\nlease_secs = 30\n\nleese_secs = 31\n",
    );
    let err = load(&opts(&d, &[], &[])).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("{}:5:1", file.display())), "{text}");
    assert!(
        text.contains("`queue.leese_secs`") && text.contains("unknown"),
        "{text}"
    );
    let p = problems(err);
    assert_eq!(
        p[0].origin,
        Origin::File {
            path: file,
            line: 5,
            col: 1
        }
    );

    // An unknown section in the user file.
    let d = dirs();
    write(&d.user_file, "[queues]\nlease_secs = 30\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(p[0].key, "queues");
    assert!(
        matches!(&p[0].origin, Origin::File { path, line: 1, .. } if *path == d.user_file),
        "{:?}",
        p[0]
    );
}

#[test]
fn wrong_type_names_file_key_and_line() {
    let d = dirs();
    let file = d.repo.join("whilly.toml");
    write(&file, "[run]\nagent = \"claude\"\nparallel = \"lots\"\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(p[0].key, "run.parallel");
    assert!(
        matches!(&p[0].origin, Origin::File { path, line: 3, col: 12 } if *path == file),
        "{:?}",
        p[0]
    );
    assert!(p[0].message.contains("invalid type"), "{}", p[0].message);

    // Bad enum value, bad duration, and a broken rule across layers all point at their line.
    let d = dirs();
    let file = d.repo.join("whilly.toml");
    write(&file, "[worktrees]\nmerge = \"rebase\"\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(
        (
            p[0].key.as_str(),
            matches!(p[0].origin, Origin::File { line: 2, .. })
        ),
        ("worktrees.merge", true)
    );
    assert!(p[0].message.contains("cherry-pick"), "{}", p[0].message);

    let d = dirs();
    write(&d.repo.join("whilly.toml"), "[run]\ntimeout = \"soon\"\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(p[0].key, "run.timeout");
    assert!(p[0].message.contains("2h 30m"), "{}", p[0].message);

    let d = dirs();
    write(&d.user_file, "[queue]\nheartbeat_secs = 20\n");
    write(&d.repo.join("whilly.toml"), "[queue]\nlease_secs = 15\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(p[0].key, "queue.lease_secs");
    assert!(
        matches!(&p[0].origin, Origin::File { path, line: 2, .. } if path.ends_with("whilly.toml"))
    );
}

#[test]
fn syntax_errors_name_the_line() {
    let d = dirs();
    write(&d.repo.join("whilly.toml"), "[queue]\nlease_secs = = 3\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert!(
        matches!(p[0].origin, Origin::File { line: 2, .. }),
        "{:?}",
        p[0]
    );
}

#[test]
fn bad_env_value_names_the_variable_and_type() {
    let d = dirs();
    let err = load(&opts(
        &d,
        &[
            ("WHILLY_QUEUE_LEASE_SECS", "thirty"),
            ("WHILLY_RUN_HEADLESS", "maybe"),
        ],
        &[],
    ))
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("environment variable WHILLY_QUEUE_LEASE_SECS")
            && text.contains("whole number"),
        "{text}"
    );
    assert!(
        text.contains("environment variable WHILLY_RUN_HEADLESS") && text.contains("true or false"),
        "{text}"
    );
    assert_eq!(
        problems(err).len(),
        2,
        "every bad variable is reported at once"
    );

    // Out of the field's range: caught by the typed config, still naming the variable.
    let err = load(&opts(&d, &[("WHILLY_RUN_PARALLEL", "-2")], &[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("WHILLY_RUN_PARALLEL") && err.contains("run.parallel"),
        "{err}"
    );

    // A valid value that breaks a rule points at the variable that set it.
    let err = load(&opts(&d, &[("WHILLY_RUN_PARALLEL", "0")], &[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(
            "environment variable WHILLY_RUN_PARALLEL: `run.parallel`: must be at least 1"
        ),
        "{err}"
    );

    // A bad flag names the key.
    let err = load(&opts(&d, &[], &[("queue.nope", "1")]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("command-line flag: `queue.nope`: unknown key"),
        "{err}"
    );
}

#[test]
fn env_values_are_parsed_per_type_and_typos_warned() {
    let d = dirs();
    let loaded = load(&opts(
        &d,
        &[
            ("WHILLY_RUN_BUDGET_USD", "12.5"),
            ("WHILLY_RUN_TIMEOUT", "1h 30m"),
            ("WHILLY_RETRY_BACKOFF_SECS", "[1, 2]"),
            ("WHILLY_QUEUE_NOTIFY", "off"),
            ("WHILLY_WORKTREES_MERGE", "cherry-pick"),
            ("WHILLY_GH_TOKEN", "env:MY_GH"),
            ("WHILLY_JIRA_URL", ""),
            ("WHILLY_QUEUE_LEASE_SEC", "3"),
            ("WHILLY_TASK_ID", "T-1"),
        ],
        &[],
    ))
    .unwrap();
    let c = &loaded.config;
    assert_eq!(c.run.budget_usd, Some(12.5));
    assert_eq!(c.run.timeout, Some(std::time::Duration::from_secs(5400)));
    assert_eq!(c.retry.backoff_secs, vec![1, 2]);
    assert!(!c.queue.notify);
    assert_eq!(c.worktrees.merge, whilly::config::MergeMode::CherryPick);
    assert_eq!(c.github.token, Some(Secret::Env("MY_GH".into())));
    assert_eq!(c.jira.url, None, "empty variables count as unset");
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].contains("WHILLY_QUEUE_LEASE_SEC"));
}

#[test]
fn secret_references_resolve() {
    let d = dirs();
    let token_file = d.tmp.path().join("jira-token");
    std::fs::write(&token_file, "jira-s3cret\n").unwrap();
    write(
        &d.repo.join("whilly.toml"),
        &format!(
            "[jira]\ntoken = \"file:{}\"\n[github]\ntoken = \"env:TEST_GH_TOKEN\"\n",
            token_file.display()
        ),
    );
    let loaded = load(&opts(&d, &[], &[])).unwrap();
    let jira = loaded.config.jira.token.clone().unwrap();
    assert_eq!(jira.resolve().unwrap().expose(), "jira-s3cret");
    let gh = loaded.config.github.token.clone().unwrap();
    let env = |name: &str| (name == "TEST_GH_TOKEN").then(|| "ghp_fromenv".to_string());
    assert_eq!(gh.resolve_with(&env).unwrap().expose(), "ghp_fromenv");
    let missing = gh.resolve_with(&|_| None).unwrap_err().to_string();
    assert!(missing.contains("TEST_GH_TOKEN"), "{missing}");
    let gone = Secret::File(d.tmp.path().join("nope"))
        .resolve()
        .unwrap_err()
        .to_string();
    assert!(gone.contains("nope"), "{gone}");
    // `~/` in a file: path is the home directory from the environment.
    std::fs::create_dir_all(d.tmp.path().join("home")).unwrap();
    std::fs::write(d.tmp.path().join("home/t"), "x").unwrap();
    let home = d.tmp.path().join("home").display().to_string();
    let tilde = Secret::parse("file:~/t").unwrap();
    assert_eq!(
        tilde
            .resolve_with(&|n| (n == "HOME").then(|| home.clone()))
            .unwrap()
            .expose(),
        "x"
    );
    // Malformed references are errors at load time, naming the key.
    write(&d.repo.join("whilly.toml"), "[github]\ntoken = \"env:\"\n");
    let p = problems(load(&opts(&d, &[], &[])).unwrap_err());
    assert_eq!(p[0].key, "github.token");
}

/// The real kernel keyring when this machine has one; otherwise the error must say so clearly.
#[test]
fn keyring_round_trip_or_clear_unavailable_error() {
    let user = format!("test.{}.{}", std::process::id(), "token");
    match whilly::config::keyring_set("whilly-test", &user, "kr-s3cret") {
        Ok(()) => {
            let s = Secret::parse(&format!("keyring:whilly-test/{user}")).unwrap();
            assert_eq!(s.resolve().unwrap().expose(), "kr-s3cret");
            // Another thread has its own session keyring, like a later whilly process would.
            let elsewhere = std::thread::spawn({
                let s = s.clone();
                move || {
                    s.resolve()
                        .map(|v| v.expose().to_string())
                        .map_err(|e| e.to_string())
                }
            });
            assert_eq!(elsewhere.join().unwrap(), Ok("kr-s3cret".to_string()));
            whilly::config::keyring_delete("whilly-test", &user).unwrap();
            // keyutils invalidation is asynchronous: the key can be found for a few milliseconds more.
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            let err = loop {
                match s.resolve() {
                    Err(e) => break e.to_string(),
                    Ok(_) if std::time::Instant::now() < deadline => std::thread::yield_now(),
                    Ok(_) => panic!("keyring entry still readable 5 s after delete"),
                }
            };
            assert!(
                err.contains("no keyring entry") && err.contains(&user),
                "{err}"
            );
        }
        Err(ConfigError::KeyringUnavailable { why }) => {
            let err = ConfigError::KeyringUnavailable { why }.to_string();
            assert!(
                err.starts_with("keyring unavailable: ")
                    && err.ends_with("use env: or file: instead")
            );
        }
        Err(other) => panic!("unexpected keyring error: {other}"),
    }
}

/// whilly.example.toml documents every key with its variable, and its uncommented values are the
/// real defaults.
#[test]
fn example_file_documents_every_key_and_matches_defaults() {
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("whilly.example.toml"))
            .unwrap();
    for (key, _) in schema::FIXED_KEYS {
        let path: Vec<String> = key.split('.').map(String::from).collect();
        let field = path[path.len() - 1].as_str();
        let var = schema::env_var_for(&path).unwrap();
        assert!(
            example.contains(&format!("# {field}")),
            "{key} is not documented"
        );
        assert!(example.contains(&var), "{var} is not documented");
    }
    for (field, _) in schema::AGENT_FIELDS.iter().chain(schema::PRICE_FIELDS) {
        assert!(
            example.contains(&format!("# {field}")),
            "agents/prices field {field} is not documented"
        );
    }
    let d = dirs();
    write(&d.repo.join("whilly.toml"), &example);
    let loaded = load(&opts(&d, &[], &[])).unwrap();
    assert_eq!(loaded.config, Config::defaults_for(&opts(&d, &[], &[]).env));
}
