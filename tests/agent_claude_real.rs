//! The real Claude Code CLI against the scripted model server: argv from our backend, real tool
//! execution in a temporary git repository, and our parser/classifier on its real output.
//!
//! The binary comes from `WHILLY_CLAUDE_BIN`, the install `.ci/run` makes
//! (`~/.cache/whilly-ci/claude-cli`), `/work/claude-cli/node_modules/.bin/claude`, or `claude` on
//! PATH. Without one these tests fail (set `WHILLY_SKIP_REAL_AGENT=1` to skip them).

#[path = "support/claude_bin.rs"]
mod claude_bin;
#[path = "support/model_server.rs"]
mod model_server;

use claude_bin::claude_bin;

use model_server::{INPUT_TOKENS, MARKER, ModelServer, OUTPUT_TOKENS, Scenario};
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use whilly::agent::backend::{AgentSettings, BackendKind, Invocation, OutputMode, PermissionMode};
use whilly::agent::{AgentResult, CostSource, ErrorClass, PriceTable, build_backend};
use whilly::domain::Usd;

/// Generous for a shared debug-build machine; a healthy run takes a few seconds.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

struct Run {
    raw: Vec<u8>,
    exit: Option<i32>,
    result: AgentResult,
    class: Option<ErrorClass>,
    elapsed: Duration,
}

impl Run {
    fn output(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }
}

/// Runs the CLI once with our backend's argv and env, against `server`, in `repo`.
fn run_claude(
    bin: &Path,
    server: &ModelServer,
    repo: &Path,
    home: &Path,
    prompt: &str,
    permission: PermissionMode,
) -> Run {
    let mut settings = AgentSettings::new(BackendKind::Claude);
    settings.bin = bin.to_string_lossy().into_owned();
    settings.permission = permission;
    settings.output = OutputMode::Stream;
    settings.model = Some("claude-sonnet-4-5".into());
    let backend = build_backend(&settings).expect("backend");
    let prompt_file = repo.join(".whilly-prompt.md");
    std::fs::write(&prompt_file, prompt).expect("prompt file");
    let inv = Invocation {
        prompt,
        prompt_file: &prompt_file,
        workdir: repo,
        task_id: "TASK-1",
    };
    let cmd = backend.command(&inv).expect("command");

    let mut child = Command::new(&cmd.program);
    child
        .args(&cmd.args)
        .current_dir(&cmd.cwd)
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CONFIG_DIR", home.join(".claude"))
        .env("HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = child.spawn().expect("spawn claude");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_thread = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err_thread = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = started + RUN_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let out = out_thread.join().unwrap_or_default();
            let err = err_thread.join().unwrap_or_default();
            panic!(
                "claude did not finish within {} s; server log:\n{}\nstdout:\n{}\nstderr:\n{}",
                RUN_TIMEOUT.as_secs(),
                server.log(),
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut raw = out_thread.join().expect("stdout thread");
    // In a PTY both streams arrive interleaved; here stderr follows stdout.
    raw.extend(err_thread.join().expect("stderr thread"));
    let result = backend.parse_result(&raw, &PriceTable::new());
    let class = backend.classify(status.code(), &result, &raw);
    Run {
        raw,
        exit: status.code(),
        result,
        class,
        elapsed: started.elapsed(),
    }
}

/// A temporary git repository and a separate temporary home for the CLI's config.
fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let repo = tempfile::tempdir().expect("repo dir");
    git2::Repository::init(repo.path()).expect("git init");
    let home = tempfile::tempdir().expect("home dir");
    (repo, home)
}

#[test]
fn writes_a_file_prints_the_marker_and_reports_exact_cost() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().expect("canonical repo");
    let target = repo_path.join("hello.txt");
    let server = ModelServer::start(Scenario::WriteFile {
        path: Some(target.clone()),
        content: "hello from the model\n".into(),
    });
    let run = run_claude(
        &bin,
        &server,
        &repo_path,
        home.path(),
        "Create hello.txt. Print the marker when done.",
        PermissionMode::Full,
    );
    let ctx = format!(
        "exit {:?}\nserver:\n{}\noutput:\n{}",
        run.exit,
        server.log(),
        run.output()
    );

    assert_eq!(run.exit, Some(0), "{ctx}");
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("hello from the model\n"),
        "{ctx}"
    );
    let r = &run.result;
    assert!(
        r.marker_found && !r.is_error && r.subtype == "success",
        "{r:?}\n{ctx}"
    );
    assert!(r.text.ends_with(MARKER), "{r:?}");
    assert_eq!(run.class, None);
    // Two model calls: the tool call, then the answer to the tool result.
    assert_eq!(server.main_request_count(), 2, "{ctx}");
    assert_eq!(r.num_turns, 2, "{r:?}");
    assert_eq!(r.usage.input_tokens, 2 * INPUT_TOKENS, "{r:?}");
    assert_eq!(r.usage.output_tokens, 2 * OUTPUT_TOKENS, "{r:?}");
    // The cost is the CLI's own figure, to the micro-dollar: Sonnet at $3 / $15 per Mtok.
    let raw_cost = r
        .raw_json
        .as_ref()
        .and_then(|j| j["total_cost_usd"].as_f64())
        .expect("total_cost_usd");
    assert_eq!(r.cost, Usd::from_f64(raw_cost));
    assert_eq!(r.cost_source, CostSource::Reported);
    let expected = (2 * INPUT_TOKENS) as f64 * 3.0 / 1e6 + (2 * OUTPUT_TOKENS) as f64 * 15.0 / 1e6;
    assert_eq!(r.cost, Usd::from_f64(expected), "{r:?}");
    // The pane renderer turns every line of the real stream into something readable.
    let rendered: Vec<String> = String::from_utf8_lossy(&run.raw)
        .lines()
        .filter_map(whilly::agent::render_stream_line)
        .collect();
    assert!(
        rendered
            .iter()
            .any(|l| l.starts_with("▶ Write ") && l.contains("hello.txt")),
        "{rendered:#?}"
    );
    assert!(
        rendered.iter().any(|l| l.starts_with("✔ finished")),
        "{rendered:#?}"
    );
}

#[test]
fn runs_a_bash_command() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().expect("canonical repo");
    let server = ModelServer::start(Scenario::Bash {
        command: "echo bash-ran > bash.txt".into(),
    });
    let run = run_claude(
        &bin,
        &server,
        &repo_path,
        home.path(),
        "Run the command.",
        PermissionMode::Full,
    );
    let ctx = format!(
        "exit {:?}\nserver:\n{}\noutput:\n{}",
        run.exit,
        server.log(),
        run.output()
    );
    assert_eq!(
        std::fs::read_to_string(repo_path.join("bash.txt"))
            .ok()
            .as_deref(),
        Some("bash-ran\n"),
        "{ctx}"
    );
    assert!(run.result.marker_found, "{ctx}");
}

#[test]
fn answer_without_marker_is_not_complete() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let server = ModelServer::start(Scenario::NoMarker);
    // The prompt itself mentions the marker: echoed in the transcript, it must not count.
    let prompt = format!("Do the task and end with {MARKER} only on success.");
    let run = run_claude(
        &bin,
        &server,
        repo.path(),
        home.path(),
        &prompt,
        PermissionMode::AcceptEdits,
    );
    let ctx = format!(
        "exit {:?}\nserver:\n{}\noutput:\n{}",
        run.exit,
        server.log(),
        run.output()
    );
    assert_eq!(run.exit, Some(0), "{ctx}");
    assert!(
        !run.result.marker_found && !run.result.is_error,
        "{:?}\n{ctx}",
        run.result
    );
    assert!(run.result.text.contains("did not finish"), "{ctx}");
    assert_eq!(run.class, None);
}

#[test]
fn overloaded_once_then_success() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let server = ModelServer::start(Scenario::Overloaded { failures: 1 });
    let run = run_claude(
        &bin,
        &server,
        repo.path(),
        home.path(),
        "Say done.",
        PermissionMode::AcceptEdits,
    );
    let ctx = format!(
        "exit {:?} after {:?}\nserver:\n{}\noutput:\n{}",
        run.exit,
        run.elapsed,
        server.log(),
        run.output()
    );
    eprintln!("{ctx}");
    // The CLI retries a 529 by itself: two main requests, one success.
    assert_eq!(server.main_request_count(), 2, "{ctx}");
    assert!(run.result.marker_found && !run.result.is_error, "{ctx}");
    let rendered: Vec<String> = run
        .output()
        .lines()
        .filter_map(whilly::agent::render_stream_line)
        .collect();
    assert!(
        rendered
            .iter()
            .any(|l| l.starts_with("● API retry 1/") && l.contains("529")),
        "{rendered:#?}"
    );
    assert_eq!(run.class, None);
}

#[test]
fn authentication_error_is_classified_auth() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let server = ModelServer::start(Scenario::AuthError);
    let run = run_claude(
        &bin,
        &server,
        repo.path(),
        home.path(),
        "Say done.",
        PermissionMode::AcceptEdits,
    );
    let ctx = format!(
        "exit {:?} after {:?}\nserver:\n{}\noutput:\n{}",
        run.exit,
        run.elapsed,
        server.log(),
        run.output()
    );
    eprintln!("{ctx}");
    assert_ne!(run.exit, Some(0), "{ctx}");
    assert!(
        run.result.is_error && !run.result.marker_found,
        "{:?}\n{ctx}",
        run.result
    );
    assert_eq!(run.class, Some(ErrorClass::Auth), "{:?}\n{ctx}", run.result);
    // The real API marks a 401 `x-should-retry: false`, and the CLI then gives up at once.
    // (Without that header it retries a 401 ten times with backoff, for minutes.)
    assert_eq!(server.main_request_count(), 1, "{ctx}");
    assert!(!ErrorClass::Auth.is_retryable());
}

#[test]
fn long_streamed_answer_arrives_whole() {
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let server = ModelServer::start(Scenario::LongStream { chunks: 400 });
    let run = run_claude(
        &bin,
        &server,
        repo.path(),
        home.path(),
        "Explain at length.",
        PermissionMode::AcceptEdits,
    );
    let ctx = format!("exit {:?}\nserver:\n{}", run.exit, server.log());
    assert_eq!(run.exit, Some(0), "{ctx}");
    let text = &run.result.text;
    assert!(
        text.contains("chunk 0 of") && text.contains("chunk 399 of"),
        "{ctx}\n{text}"
    );
    assert_eq!(
        text.matches("of a long streamed answer").count(),
        400,
        "{ctx}"
    );
    assert!(run.result.marker_found, "{ctx}");
}

/// The engine reads the agent from a PTY: `\r\n` line endings, a narrow terminal that wraps long
/// lines on screen, maybe escape sequences. The raw byte stream must still parse.
#[test]
fn parses_the_raw_pty_stream_of_a_narrow_terminal() {
    use portable_pty::{CommandBuilder, PtySize, native_pty_system};
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().expect("canonical repo");
    let target = repo_path.join("hello.txt");
    let server = ModelServer::start(Scenario::WriteFile {
        path: Some(target.clone()),
        content: "from a pty\n".into(),
    });
    let mut settings = AgentSettings::new(BackendKind::Claude);
    settings.bin = bin.to_string_lossy().into_owned();
    settings.model = Some("claude-sonnet-4-5".into());
    let backend = build_backend(&settings).expect("backend");
    let prompt_file = repo_path.join(".whilly-prompt.md");
    std::fs::write(&prompt_file, "Create hello.txt").expect("prompt file");
    let inv = Invocation {
        prompt: "Create hello.txt",
        prompt_file: &prompt_file,
        workdir: &repo_path,
        task_id: "TASK-1",
    };
    let cmd = backend.command(&inv).expect("command");

    let pair = native_pty_system()
        .openpty(PtySize {
            rows: 24,
            cols: 40,
            pixel_width: 0,
            pixel_height: 0,
        })
        .expect("openpty");
    let mut builder = CommandBuilder::new(&cmd.program);
    builder.args(&cmd.args);
    builder.cwd(&cmd.cwd);
    for (k, v) in &cmd.env {
        builder.env(k, v);
    }
    builder.env("ANTHROPIC_BASE_URL", server.base_url());
    builder.env("ANTHROPIC_API_KEY", "test-key");
    builder.env_remove("ANTHROPIC_AUTH_TOKEN");
    builder.env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1");
    builder.env("CLAUDE_CONFIG_DIR", home.path().join(".claude"));
    builder.env("HOME", home.path());
    let mut child = pair.slave.spawn_command(builder).expect("spawn in pty");
    drop(pair.slave);
    let mut reader = pair.master.try_clone_reader().expect("pty reader");
    let reader_thread = std::thread::spawn(move || {
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        // EIO once the child side is closed ends the stream.
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            raw.extend_from_slice(&buf[..n]);
        }
        raw
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(
            started.elapsed() < RUN_TIMEOUT,
            "claude in a pty did not finish; server:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(pair.master);
    let raw = reader_thread.join().expect("reader thread");
    let text = String::from_utf8_lossy(&raw);
    assert!(status.success(), "exit {status:?}\n{text}");
    assert!(text.contains("\r\n"), "a pty turns \\n into \\r\\n");
    let r = backend.parse_result(&raw, &PriceTable::new());
    assert!(r.marker_found && !r.is_error, "{r:?}\n{text}");
    assert_eq!(r.usage.input_tokens, 2 * INPUT_TOKENS, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(&target).ok().as_deref(),
        Some("from a pty\n")
    );
}

/// What the operator reads in the agent's pane: our PTY session with the backend's display
/// filter shows a readable transcript of the real CLI's stream-json while the log keeps the raw
/// JSON the exact cost is read from.
#[tokio::test]
async fn pane_shows_a_readable_transcript_while_the_log_keeps_raw_json() {
    use whilly::pty::{PtySession, SpawnSpec};
    let Some(bin) = claude_bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().expect("canonical repo");
    let server = ModelServer::start(Scenario::Bash {
        command: "echo bash-ran > bash.txt".into(),
    });
    let mut settings = AgentSettings::new(BackendKind::Claude);
    settings.bin = bin.to_string_lossy().into_owned();
    settings.model = Some("claude-sonnet-4-5".into());
    let backend = build_backend(&settings).expect("backend");
    let prompt_file = repo_path.join(".whilly-prompt.md");
    std::fs::write(&prompt_file, "Run the command").expect("prompt file");
    let inv = Invocation {
        prompt: "Run the command",
        prompt_file: &prompt_file,
        workdir: &repo_path,
        task_id: "TASK-1",
    };
    let cmd = backend.command(&inv).expect("command");
    let log = home.path().join("1.log");
    let mut spec = SpawnSpec::new(cmd.argv())
        .cwd(&cmd.cwd)
        .size(40, 160)
        .log_path(&log)
        .display_filter(backend.display_filter().expect("stream-json has a filter"));
    for (k, v) in &cmd.env {
        spec = spec.env(k, v);
    }
    let home_dir = home.path().to_string_lossy().into_owned();
    let claude_dir = home.path().join(".claude").to_string_lossy().into_owned();
    spec = spec
        .env("ANTHROPIC_BASE_URL", server.base_url())
        .env("ANTHROPIC_API_KEY", "test-key")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("CLAUDE_CONFIG_DIR", claude_dir)
        .env("HOME", home_dir);
    let session = PtySession::spawn(spec).expect("spawn claude in a pty");
    // Readable while it runs: the tool call shows before the end.
    assert!(
        session
            .wait_for_text("▶ Bash: echo bash-ran > bash.txt", RUN_TIMEOUT)
            .await,
        "no tool call on screen:\n{}\nserver:\n{}",
        session.contents_with_scrollback(200),
        server.log()
    );
    let exit = tokio::time::timeout(RUN_TIMEOUT, session.wait())
        .await
        .expect("claude finished");
    let screen = session.contents_with_scrollback(500);
    println!("--- the pane\n{screen}");
    assert_eq!(exit.code, Some(0), "{screen}");
    for want in ["● session started", "Running the command.", "✔ finished"] {
        assert!(screen.contains(want), "missing {want:?}:\n{screen}");
    }
    assert!(
        !screen.contains("{\"type\":"),
        "raw JSON on screen:\n{screen}"
    );
    let raw = std::fs::read(&log).expect("log");
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("{\"type\":\"assistant\""), "{text}");
    let r = backend.parse_result(&raw, &PriceTable::new());
    assert!(r.marker_found && !r.is_error, "{r:?}");
    assert_eq!(r.cost_source, CostSource::Reported, "{r:?}");
}
