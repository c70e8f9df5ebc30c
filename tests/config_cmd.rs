//! `whilly config show|path|edit|set` end to end, against temp dirs (never the real ~/.config).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use whilly::cli::config_cmd::{ConfigCommand, Io, run_with};
use whilly::config::LoadOptions;

struct Env {
    _tmp: tempfile::TempDir,
    repo: PathBuf,
    user_file: PathBuf,
}

fn env() -> Env {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let user_file = tmp.path().join("xdg/whilly/config.toml");
    Env {
        repo,
        user_file,
        _tmp: tmp,
    }
}

fn opts(e: &Env, vars: &[(&str, &str)]) -> LoadOptions {
    let mut env: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.insert(
        "HOME".into(),
        e.repo.parent().unwrap().join("home").display().to_string(),
    );
    LoadOptions {
        repo_root: e.repo.clone(),
        user_file: Some(e.user_file.clone()),
        env,
        overrides: Vec::new(),
    }
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(cmd: ConfigCommand, o: &LoadOptions, stdin: &str) -> Out {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut input = stdin.as_bytes();
    let code = run_with(
        &cmd,
        o,
        &mut Io {
            out: &mut out,
            err: &mut err,
            stdin: &mut input,
        },
    )
    .unwrap();
    Out {
        code,
        stdout: String::from_utf8(out).unwrap(),
        stderr: String::from_utf8(err).unwrap(),
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn show_lists_values_with_sources_and_redacts_secrets() {
    let e = env();
    write(&e.user_file, "[github]\ntoken = \"ghp_literalsecret123\"\n");
    write(&e.repo.join("whilly.toml"), "[queue]\nlease_secs = 45\n");
    let o = opts(
        &e,
        &[
            ("WHILLY_DATABASE_URL", "postgres://me:hunter2pw@db/whilly"),
            ("WHILLY_RUN_PARALLEL", "7"),
        ],
    );
    let out = run(
        ConfigCommand::Show {
            prefix: None,
            json: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stdout.contains("ghp_literalsecret123"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("hunter2pw"), "{}", out.stdout);
    let line = |key: &str| {
        out.stdout
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or("")
            .to_string()
    };
    assert!(
        line("github.token").contains("\"***\"") && line("github.token").contains("user file"),
        "{}",
        out.stdout
    );
    assert!(
        line("database.url").contains("postgres://me:***@db/whilly"),
        "{}",
        out.stdout
    );
    assert!(
        line("database.url").ends_with("# env WHILLY_DATABASE_URL"),
        "{}",
        out.stdout
    );
    assert!(
        line("queue.lease_secs").contains("# repo file")
            && line("queue.lease_secs").contains("whilly.toml:2")
    );
    assert!(
        line("run.parallel").starts_with("run.parallel = 7")
            && line("run.parallel").ends_with("# env WHILLY_RUN_PARALLEL")
    );
    assert!(
        line("queue.heartbeat_secs").ends_with("# default"),
        "{}",
        out.stdout
    );

    let json = run(
        ConfigCommand::Show {
            prefix: None,
            json: true,
        },
        &o,
        "",
    );
    assert_eq!(json.code, 0);
    assert!(!json.stdout.contains("ghp_literalsecret123") && !json.stdout.contains("hunter2pw"));
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(doc["values"]["queue.lease_secs"]["value"], 45);
    assert_eq!(doc["values"]["queue.lease_secs"]["source"], "repo");
    assert_eq!(doc["values"]["queue.lease_secs"]["line"], 2);
    assert_eq!(doc["values"]["run.parallel"]["env"], "WHILLY_RUN_PARALLEL");
    assert_eq!(doc["values"]["tui.fps"]["source"], "default");
    assert_eq!(doc["files"]["repo_exists"], true);

    let only = run(
        ConfigCommand::Show {
            prefix: Some("queue".into()),
            json: false,
        },
        &o,
        "",
    );
    assert!(only.stdout.contains("queue.lease_secs") && !only.stdout.contains("run.parallel"));
}

#[test]
fn show_reports_invalid_files_with_exit_1() {
    let e = env();
    write(
        &e.repo.join("whilly.toml"),
        "[run]\nparallel = 2\nparalel = 3\n",
    );
    let out = run(
        ConfigCommand::Show {
            prefix: None,
            json: false,
        },
        &opts(&e, &[]),
        "",
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("whilly.toml:3:1") && out.stderr.contains("`run.paralel`"),
        "{}",
        out.stderr
    );
}

#[test]
fn path_prints_both_files_and_whether_they_exist() {
    let e = env();
    write(&e.repo.join("whilly.toml"), "");
    let out = run(ConfigCommand::Path { json: false }, &opts(&e, &[]), "");
    assert_eq!(out.code, 0);
    assert!(
        out.stdout
            .contains(&format!("user  {} (not found)", e.user_file.display())),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(&format!(
        "repo  {} (exists)",
        e.repo.join("whilly.toml").display()
    )));
}

#[test]
fn set_keeps_comments_and_replaces_the_file_atomically() {
    let e = env();
    let file = e.repo.join("whilly.toml");
    let original =
        "# team settings\n[queue]\n# claims\nlease_secs = 30 # seconds\n\n[run]\nparallel = 2\n";
    write(&file, original);
    let o = opts(&e, &[]);
    let out = run(
        ConfigCommand::Set {
            key: "queue.lease_secs".into(),
            value: "60".into(),
            secret: false,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        original.replace("30 #", "60 #")
    );

    // A value of the wrong type is refused and the file is untouched.
    let before = std::fs::read_to_string(&file).unwrap();
    let out = run(
        ConfigCommand::Set {
            key: "queue.lease_secs".into(),
            value: "soon".into(),
            secret: false,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("queue.lease_secs") && out.stderr.contains("whole number"),
        "{}",
        out.stderr
    );
    // A value that breaks a cross-field rule is refused after the candidate file is checked.
    let out = run(
        ConfigCommand::Set {
            key: "queue.lease_secs".into(),
            value: "5".into(),
            secret: false,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("whilly.toml:4") && out.stderr.contains("heartbeat"),
        "{}",
        out.stderr
    );
    let out = run(
        ConfigCommand::Set {
            key: "queue.lease".into(),
            value: "5".into(),
            secret: false,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("unknown key `queue.lease`"),
        "{}",
        out.stderr
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(&e.repo)
        .unwrap()
        .map(|d| d.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["whilly.toml".to_string()]);

    // --user creates the user file (and its directory).
    let out = run(
        ConfigCommand::Set {
            key: "worktrees.include".into(),
            value: ".env,.envrc".into(),
            secret: false,
            user: true,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let user = std::fs::read_to_string(&e.user_file).unwrap();
    assert!(
        user.contains("[worktrees]\ninclude = [\".env\", \".envrc\"]"),
        "{user}"
    );
}

#[test]
fn set_warns_about_plain_text_secrets_and_never_echoes_them() {
    let e = env();
    let o = opts(&e, &[]);
    let out = run(
        ConfigCommand::Set {
            key: "github.token".into(),
            value: "ghp_plainvalue".into(),
            secret: false,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("plain text"), "{}", out.stderr);
    assert!(!out.stdout.contains("ghp_plainvalue") && !out.stderr.contains("ghp_plainvalue"));
    let out = run(
        ConfigCommand::Set {
            key: "run.parallel".into(),
            value: "2".into(),
            secret: true,
            user: false,
        },
        &o,
        "",
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("not a secret setting"),
        "{}",
        out.stderr
    );
}

#[test]
fn edit_runs_the_editor_then_validates() {
    let e = env();
    let file = e.repo.join("whilly.toml");
    // The "editor" appends a line; the shell passes the file as $1.
    let o = opts(
        &e,
        &[(
            "VISUAL",
            "f() { printf '[tui]\\nfps = 30\\n' >> \"$1\"; }; f",
        )],
    );
    let out = run(ConfigCommand::Edit { user: false }, &o, "");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(std::fs::read_to_string(&file).unwrap().contains("fps = 30"));

    let o = opts(
        &e,
        &[("EDITOR", "f() { printf 'fpss = 1\\n' >> \"$1\"; }; f")],
    );
    let out = run(ConfigCommand::Edit { user: false }, &o, "");
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("`tui.fpss`") && out.stderr.contains("whilly.toml:"),
        "{}",
        out.stderr
    );

    let o = opts(&e, &[("EDITOR", "false")]);
    let out = run(ConfigCommand::Edit { user: true }, &o, "");
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains("exited"), "{}", out.stderr);
}

#[test]
fn set_secret_goes_to_the_keyring_and_the_file_gets_a_reference() {
    let e = env();
    let service = format!("whilly-test-{}", std::process::id());
    let o = opts(&e, &[("WHILLY_KEYRING_SERVICE", service.as_str())]);
    let cmd = ConfigCommand::Set {
        key: "github.token".into(),
        value: "-".into(),
        secret: true,
        user: true,
    };
    let out = run(cmd, &o, "ghp_fromstdin_secret\n");
    if out.stderr.contains("keyring unavailable") {
        assert_eq!(out.code, 1);
        assert!(
            out.stderr.contains("use env: or file: instead"),
            "{}",
            out.stderr
        );
        return;
    }
    assert_eq!(out.code, 0, "{}", out.stderr);
    let file = std::fs::read_to_string(&e.user_file).unwrap();
    assert!(
        file.contains(&format!("token = \"keyring:{service}/github.token\"")),
        "{file}"
    );
    assert!(!file.contains("ghp_fromstdin_secret") && !out.stdout.contains("ghp_fromstdin_secret"));
    let loaded = whilly::config::load(&o).unwrap();
    let token = loaded.config.github.token.unwrap().resolve().unwrap();
    assert_eq!(token.expose(), "ghp_fromstdin_secret");
    let shown = run(
        ConfigCommand::Show {
            prefix: Some("github".into()),
            json: false,
        },
        &o,
        "",
    );
    assert!(
        shown
            .stdout
            .contains(&format!("keyring:{service}/github.token"))
            && !shown.stdout.contains("ghp_")
    );
    whilly::config::keyring_delete(&service, "github.token").unwrap();
}

/// Every `whilly …` command whilly.example.toml sends a reader to exists (it once pointed at a
/// `whilly doctor` there never was).
#[test]
fn the_example_config_names_only_commands_that_exist() {
    use clap::CommandFactory;
    let example =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("whilly.example.toml"))
            .unwrap();
    let root = whilly::cli::args::Cli::command();
    let mut checked = 0;
    for (at, _) in example.match_indices("`whilly ") {
        let quoted = &example[at + 1..];
        let quoted = &quoted[..quoted.find('`').unwrap()];
        // The command path is the leading lower-case words; KEY, --flags, values and
        // redirections come after it.
        let words = quoted.split_whitespace().skip(1).take_while(|w| {
            w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-')
        });
        let mut cmd = &root;
        for w in words {
            // A command without subcommands takes arguments from here on (`plan show demo`).
            if cmd.get_subcommands().next().is_none() {
                break;
            }
            cmd = cmd
                .find_subcommand(w)
                .unwrap_or_else(|| panic!("whilly.example.toml: `{quoted}`: no command {w:?}"));
        }
        checked += 1;
    }
    assert!(checked > 5, "only {checked} commands found");
}
