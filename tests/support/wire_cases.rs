//! The real-CLI cases every non-Claude agent passes (Codex, OpenCode, Gemini CLI), each against
//! [`WireServer`] speaking that CLI's own API. `tests/agent_<name>_real.rs` runs them per CLI.
//!
//! Two ways in: [`run_direct`] runs the CLI once with our backend's argv and env in a temporary
//! git repository (read-only checks, parsing of its real output, the pane transcript); the
//! engine cases run `whilly run` with the CLI as the agent (a task lands, an auth error fails at
//! once, overload is retried, a hang is killed at the task timeout).
//!
//! Everything the CLI reads is in a temporary home (HOME, XDG dirs, CODEX_HOME, the OpenCode
//! config, Gemini's settings), and its model provider is the server on 127.0.0.1.

#![allow(dead_code)]

#[path = "agent_bin.rs"]
mod agent_bin;
#[path = "engine.rs"]
pub mod engine;
#[path = "wire_server.rs"]
pub mod wire_server;

use engine::{Output, Repo, plan, task, toml_str};
use serde_json::{Value, json};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use whilly::agent::backend::{AgentSettings, BackendKind, Invocation, OutputMode, PermissionMode};
use whilly::agent::{AgentResult, ErrorClass, ModelPrice, PriceTable, Usage, build_backend};
use whilly::domain::Usd;
use wire_server::{
    CACHED_TOKENS, MARKER, OUTPUT_TOKENS, PROMPT_TOKENS, Scenario, Wire, WireServer,
};

/// A generous limit for one CLI run on a loaded two-core machine; a healthy run takes seconds.
const RUN_LIMIT: Duration = Duration::from_secs(90);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    Codex,
    OpenCode,
    Gemini,
}

impl Agent {
    pub fn name(self) -> &'static str {
        match self {
            Agent::Codex => "codex",
            Agent::OpenCode => "opencode",
            Agent::Gemini => "gemini",
        }
    }

    fn kind(self) -> BackendKind {
        match self {
            Agent::Codex => BackendKind::Codex,
            Agent::OpenCode => BackendKind::OpenCode,
            Agent::Gemini => BackendKind::Gemini,
        }
    }

    pub fn wire(self) -> Wire {
        match self {
            Agent::Codex => Wire::Responses,
            Agent::OpenCode => Wire::Chat,
            Agent::Gemini => Wire::Gemini,
        }
    }

    /// The installed CLI, `None` when `WHILLY_SKIP_REAL_AGENT=1`.
    pub fn bin(self) -> Option<PathBuf> {
        agent_bin::agent_bin(match self {
            Agent::Codex => agent_bin::CODEX,
            Agent::OpenCode => agent_bin::OPENCODE,
            Agent::Gemini => agent_bin::GEMINI,
        })
    }

    /// `agents.<name>.model`: what whilly passes and prices. Codex never names its model and
    /// OpenCode reports cost 0 for a model without prices, so both are priced from `[prices]`;
    /// Gemini pinned to one model skips its router.
    pub fn model(self) -> &'static str {
        match self {
            Agent::Codex => "gpt-5",
            Agent::OpenCode => "mock/mock-model",
            Agent::Gemini => "gemini-2.5-pro",
        }
    }

    /// The price whilly's config gives [`Agent::model`] (for `mock-model` in the test config,
    /// the built-in defaults for the others).
    pub fn price(self) -> ModelPrice {
        match self {
            Agent::Codex => ModelPrice::new(1.25, 10.0),
            Agent::OpenCode => ModelPrice::new(1.0, 10.0),
            Agent::Gemini => ModelPrice::new(1.25, 10.0),
        }
    }

    /// Writes the CLI's configuration under `home`, pointing at `server`, and returns the
    /// environment the CLI needs (the home variables included).
    pub fn setup(self, home: &Path, server: &WireServer) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = vec![
            ("HOME".into(), path_str(home)),
            ("XDG_CONFIG_HOME".into(), path_str(&home.join(".config"))),
            ("XDG_DATA_HOME".into(), path_str(&home.join(".local/share"))),
            (
                "XDG_STATE_HOME".into(),
                path_str(&home.join(".local/state")),
            ),
            ("XDG_CACHE_HOME".into(), path_str(&home.join(".cache"))),
        ];
        // Gemini CLI writes error reports to the temp dir: keep them in the test's home.
        let tmp = home.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        env.push(("TMPDIR".into(), path_str(&tmp)));
        match self {
            Agent::Codex => {
                let codex_home = home.join(".codex");
                std::fs::create_dir_all(&codex_home).unwrap();
                // No retries inside Codex: a failed request ends the attempt, so whilly's own
                // classification and backoff are what the overload test exercises.
                std::fs::write(
                    codex_home.join("config.toml"),
                    format!(
                        r#"model = "mock-model"
model_provider = "mock"

[model_providers.mock]
name = "mock"
base_url = "{}/v1"
env_key = "MOCK_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
"#,
                        server.base_url()
                    ),
                )
                .unwrap();
                env.push(("CODEX_HOME".into(), path_str(&codex_home)));
                env.push(("MOCK_KEY".into(), "test-key".into()));
            }
            Agent::OpenCode => {
                let config = home.join("opencode.json");
                let body = json!({
                    "$schema": "https://opencode.ai/config.json",
                    "autoupdate": false,
                    "share": "disabled",
                    "model": "mock/mock-model",
                    "small_model": "mock/mock-model",
                    "provider": {"mock": {
                        "npm": "@ai-sdk/openai-compatible",
                        "name": "Mock",
                        "options": {"baseURL": format!("{}/v1", server.base_url()), "apiKey": "test-key"},
                        "models": {"mock-model": {"name": "Mock Model",
                            "limit": {"context": 128000, "output": 8192}}}
                    }}
                });
                std::fs::write(&config, serde_json::to_string_pretty(&body).unwrap()).unwrap();
                env.push(("OPENCODE_CONFIG".into(), path_str(&config)));
                // Offline: the model comes from the config, not models.dev.
                env.push(("OPENCODE_DISABLE_MODELS_FETCH".into(), "1".into()));
            }
            Agent::Gemini => {
                let dir = home.join(".gemini");
                std::fs::create_dir_all(&dir).unwrap();
                let settings = json!({
                    "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
                    "privacy": {"usageStatisticsEnabled": false},
                    "telemetry": {"enabled": false},
                    "security": {"auth": {"selectedType": "gemini-api-key"}}
                });
                std::fs::write(dir.join("settings.json"), settings.to_string()).unwrap();
                env.push(("GEMINI_API_KEY".into(), "test-key".into()));
                env.push(("GOOGLE_GEMINI_BASE_URL".into(), server.base_url()));
            }
        }
        env
    }

    /// What `answered` main requests cost at [`Agent::price`]: the usage summed, then priced
    /// (as the parsers do), in micro-dollars.
    pub fn cost_micros(self, answered: usize) -> i64 {
        let n = answered as u64;
        let usage = Usage {
            input_tokens: n * (PROMPT_TOKENS - CACHED_TOKENS),
            output_tokens: n * OUTPUT_TOKENS,
            cache_read_input_tokens: n * CACHED_TOKENS,
            cache_creation_input_tokens: 0,
        };
        self.price().cost(&usage).0
    }
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

// ----------------------------------------------------------------------------------------------
// One run of the CLI, outside the engine.

pub struct Run {
    pub raw: Vec<u8>,
    pub exit: Option<i32>,
    pub result: AgentResult,
    pub class: Option<ErrorClass>,
    /// The raw output through the backend's pane filter.
    pub pane: String,
    /// The backend's live meter after every line of the output.
    pub live: Usd,
}

impl Run {
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.raw).into_owned()
    }
}

/// Runs `agent` once with our backend's argv and env for `permission`, against `server`, in a
/// fresh git repository `repo`, with `home` as its home.
pub fn run_direct(
    agent: Agent,
    bin: &Path,
    server: &WireServer,
    repo: &Path,
    home: &Path,
    permission: PermissionMode,
) -> Run {
    let mut settings = AgentSettings::new(agent.kind());
    settings.bin = path_str(bin);
    settings.permission = permission;
    settings.output = OutputMode::Stream;
    settings.model = Some(agent.model().into());
    let backend = build_backend(&settings).expect("backend");
    let prompt = "Write the file, then print the marker.";
    let prompt_file = home.join("prompt.md");
    std::fs::write(&prompt_file, prompt).unwrap();
    let inv = Invocation {
        prompt,
        prompt_file: &prompt_file,
        workdir: repo,
        task_id: "TASK-1",
    };
    let cmd = backend.command(&inv).expect("command");
    let mut child = Command::new(&cmd.program);
    child.args(&cmd.args).current_dir(&cmd.cwd).env_clear();
    for keep in ["PATH", "LANG", "USER"] {
        if let Ok(v) = std::env::var(keep) {
            child.env(keep, v);
        }
    }
    child
        .envs(agent.setup(home, server))
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = child.spawn().expect("spawn the CLI");
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{} did not finish within {RUN_LIMIT:?}\nserver:\n{}\nstdout:\n{}\nstderr:\n{}",
                agent.name(),
                server.log(),
                String::from_utf8_lossy(&out.join().unwrap_or_default()),
                String::from_utf8_lossy(&err.join().unwrap_or_default())
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut raw = out.join().unwrap();
    // In a PTY both streams arrive interleaved; here stderr follows stdout.
    raw.extend(err.join().unwrap());
    let mut prices = PriceTable::new();
    prices.insert(
        agent.model().rsplit('/').next().unwrap_or_default(),
        agent.price(),
    );
    let result = backend.parse_result(&raw, &prices);
    let class = backend.classify(status.code(), &result, &raw);
    let mut pane = Vec::new();
    if let Some(mut filter) = backend.display_filter() {
        for line in raw.split(|b| *b == b'\n') {
            filter.line(line, &mut pane);
        }
    }
    let mut live = Usd::ZERO;
    if let Some(mut meter) = backend.usage_meter(&prices) {
        for line in String::from_utf8_lossy(&raw).lines() {
            if let Some(cost) = meter.feed_line(line) {
                assert!(cost >= live, "the running cost fell: {live} → {cost}");
                live = cost;
            }
        }
    }
    Run {
        raw,
        exit: status.code(),
        result,
        class,
        pane: String::from_utf8_lossy(&pane).into_owned(),
        live,
    }
}

/// A temporary git repository and a separate temporary home.
pub fn workspace() -> (tempfile::TempDir, tempfile::TempDir) {
    let repo = tempfile::tempdir().unwrap();
    let out = Command::new("git")
        .args(["init", "-q"])
        .current_dir(repo.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    (repo, tempfile::tempdir().unwrap())
}

const FILE: &str = "hello.txt";
const CONTENT: &str = "hello from the model\n";

fn write_scenario() -> Scenario {
    Scenario::WriteFile {
        file: FILE.into(),
        content: CONTENT.into(),
    }
}

/// Full permissions: the CLI runs its own write tool, our parser reads its real output (the
/// marker, usage with cached tokens apart, the cost from `[prices]`), and the pane shows a
/// readable transcript of it.
pub fn writes_parses_prices_and_renders(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().unwrap();
    let server = WireServer::start(agent.wire(), write_scenario());
    let run = run_direct(
        agent,
        &bin,
        &server,
        &repo_path,
        home.path(),
        PermissionMode::Full,
    );
    let out = run.output();
    assert_eq!(run.exit, Some(0), "{out}\nserver:\n{}", server.log());
    assert_eq!(
        std::fs::read_to_string(repo_path.join(FILE))
            .ok()
            .as_deref(),
        Some(CONTENT),
        "the CLI did not write the file\n{out}"
    );
    let r = &run.result;
    assert!(r.marker_found && !r.is_error, "{r:?}\n{out}");
    assert!(r.text.contains(MARKER), "{r:?}");
    assert_eq!(run.class, None);
    assert_eq!(server.answered(), 2, "{}", server.log());
    assert_eq!(
        r.usage,
        Usage {
            input_tokens: 2 * (PROMPT_TOKENS - CACHED_TOKENS),
            output_tokens: 2 * OUTPUT_TOKENS,
            cache_read_input_tokens: 2 * CACHED_TOKENS,
            cache_creation_input_tokens: 0,
        },
        "{out}"
    );
    assert_eq!(
        (r.cost, r.cost_source),
        (Usd(agent.cost_micros(2)), whilly::agent::CostSource::Priced),
        "{r:?}"
    );
    // The live meter, fed the same lines as they came, ends at the parsed cost.
    assert_eq!(run.live, r.cost, "{out}");
    println!("--- the output\n{out}\n--- the pane\n{}", run.pane);
    // The answer reads as one text, however many pieces it streamed in.
    assert!(
        run.pane.contains("The file is written and checked.\r\n"),
        "{}",
        run.pane
    );
    assert!(
        run.pane.contains('▶'),
        "no tool call in the pane:\n{}",
        run.pane
    );
    assert!(run.pane.contains(MARKER), "{}", run.pane);
    assert!(run.pane.contains("✔ finished"), "{}", run.pane);
    assert!(
        !run.pane.contains("{\"type\""),
        "raw JSON in the pane:\n{}",
        run.pane
    );
}

/// Read-only: the model asks for the same write; the CLI must not perform it.
pub fn read_only_prevents_writes(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let (repo, home) = workspace();
    let repo_path = repo.path().canonicalize().unwrap();
    let server = WireServer::start(agent.wire(), write_scenario());
    let run = run_direct(
        agent,
        &bin,
        &server,
        &repo_path,
        home.path(),
        PermissionMode::ReadOnly,
    );
    let out = run.output();
    assert!(
        !repo_path.join(FILE).exists(),
        "read-only {} wrote the file\n{out}",
        agent.name()
    );
    // The model did ask: the CLI answered the tool call (refused) and came back.
    assert_eq!(server.answered(), 2, "{}\n{out}", server.log());
    assert_eq!(run.exit, Some(0), "{out}");
}

// ----------------------------------------------------------------------------------------------
// `whilly run` with the CLI as the agent.

/// whilly.toml running the real CLI: fast queue timings, no retry backoff.
pub fn config(agent: Agent, bin: &Path, repo: &Repo, permission: &str) -> String {
    format!(
        r#"[run]
agent = "{name}"
parallel = 1
grace_period_secs = 1

[agents.{name}]
bin = {bin}
model = "{model}"
permission_mode = "{permission}"

[prices."mock-model"]
input_per_mtok = 1.0
output_per_mtok = 10.0

[queue]
lease_secs = 30
heartbeat_secs = 1
reaper_interval_secs = 1
poll_interval_ms = 100

[retry]
backoff_secs = [0]
# A 429 without a reset time pauses the agent for this long (the default is a minute).
rate_limit_cooldown_secs = 1

[verification]
timeout_secs = 30

[notifications]
desktop = false
terminal = false
bell = false

[worktrees]
dir = {wt}
"#,
        name = agent.name(),
        model = agent.model(),
        bin = toml_str(&path_str(bin)),
        wt = toml_str(&path_str(&repo.wt_dir)),
    )
}

/// A repository holding `plan` and a whilly.toml for the real CLI, committed.
pub fn repo_for(agent: Agent, plan: &Value, bin: &Path, permission: &str) -> Repo {
    let repo = Repo::new(plan, "true");
    repo.write("whilly.toml", &config(agent, bin, &repo, permission));
    repo.git(&["add", "whilly.toml"]);
    repo.git(&["commit", "-q", "-m", "agent config"]);
    repo
}

/// `whilly run plan.json --headless` with the CLI's environment; killed after `limit`.
pub fn run_plan(agent: Agent, repo: &Repo, server: &WireServer, limit: Duration) -> Output {
    run_plan_with(agent, repo, server, &[], limit)
}

/// [`run_plan`] with `-c KEY=VALUE` overrides of the config.
pub fn run_plan_with(
    agent: Agent,
    repo: &Repo,
    server: &WireServer,
    overrides: &[&str],
    limit: Duration,
) -> Output {
    let mut args: Vec<&str> = Vec::new();
    for o in overrides {
        args.extend(["-c", o]);
    }
    args.extend(["run", "plan.json", "--headless"]);
    let mut cmd = repo.whilly(&args);
    cmd.envs(agent.setup(&repo.home, server));
    let out_dir = repo.home.join("outputs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let (stdout, stderr) = (out_dir.join("whilly.out"), out_dir.join("whilly.err"));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "whilly did not exit within {limit:?}\n--- stdout\n{}\n--- stderr\n{}\n--- server\n{}",
                std::fs::read_to_string(&stdout).unwrap_or_default(),
                std::fs::read_to_string(&stderr).unwrap_or_default(),
                server.log()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        code: status.code(),
        stdout: std::fs::read_to_string(&stdout).unwrap_or_default(),
        stderr: std::fs::read_to_string(&stderr).unwrap_or_default(),
    }
}

/// Everything the attempts of T-1 left in `.whilly/runs`, for assertion messages.
fn agent_logs(repo: &Repo) -> String {
    repo.attempt_files("p", "T-1")
        .iter()
        .map(|f| {
            let text = String::from_utf8_lossy(&std::fs::read(f).unwrap_or_default()).into_owned();
            format!("== {}\n{text}", f.display())
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn events_of(repo: &Repo, task_id: &str, kind: &str) -> Vec<Value> {
    repo.events(Some(task_id))
        .into_iter()
        .filter(|e| e["event_type"] == kind)
        .collect()
}

/// A task end to end: the model asks the CLI's tool to write a file in the task's worktree, the
/// answer carries the marker, the check passes, the work is merged, the spend is booked.
pub fn task_lands(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let repo = repo_for(agent, &plan("p", vec![task("T-1")]), &bin, "full");
    let content = format!("written by {}\n", agent.name());
    let server = WireServer::start(
        agent.wire(),
        Scenario::WriteFile {
            file: "out-T-1.txt".into(),
            content: content.clone(),
        },
    );
    let out = run_plan(agent, &repo, &server, Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    assert_eq!(repo.task("p", "T-1")["status"], "DONE");
    // Merged: the file is in the main branch's HEAD.
    assert_eq!(repo.git(&["show", "HEAD:out-T-1.txt"]), content);
    let done = events_of(&repo, "T-1", "task.done");
    assert_eq!(done.len(), 1, "{done:?}");
    assert!(done[0]["payload"]["commit"].is_string(), "{}", done[0]);
    assert_eq!(server.answered(), 2, "{}", server.log());
    let spent = repo.plan_record("p")["spent"].as_i64().unwrap();
    assert_eq!(spent, agent.cost_micros(2), "{}", server.log());
}

/// The workspace root the CLI told its model, from the text of a main request: OpenCode's
/// "Workspace root folder:", Codex's `<cwd>`, the line after Gemini's "Workspace Directories".
fn workspace_root_told(agent: Agent, body: &Value) -> Option<String> {
    let text = body.to_string().replace("\\n", "\n");
    let after = |marker: &str, end: &str| {
        text.find(marker).map(|i| {
            let rest = &text[i + marker.len()..];
            rest[..rest.find(end).unwrap_or(rest.len())]
                .trim()
                .to_string()
        })
    };
    match agent {
        Agent::OpenCode => after("Workspace root folder:", "\n"),
        Agent::Codex => after("<cwd>", "</cwd>"),
        Agent::Gemini => text
            .lines()
            .collect::<Vec<_>>()
            .windows(2)
            .find(|w| w[0].contains("Workspace Directories"))
            .map(|w| w[1].trim().trim_start_matches("- ").to_string()),
    }
}

/// The operator has used the CLI in their checkout before (it remembers that project); whilly
/// then runs a task in its default worktree location (under the user's data directory, outside
/// the repository). The CLI's project root must be the task's worktree: the model is told that
/// root, never the operator's checkout, and the work lands while the checkout stays clean.
pub fn project_root_is_the_task_worktree(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let repo = Repo::new(&plan("p", vec![task("T-1")]), "true");
    // The default worktree location: no `[worktrees] dir`.
    let cfg = config(agent, &bin, &repo, "full");
    let cfg = cfg[..cfg.find("[worktrees]").unwrap()].to_string();
    repo.write("whilly.toml", &cfg);
    repo.git(&["add", "whilly.toml"]);
    repo.git(&["commit", "-q", "-m", "agent config"]);
    // A GitHub remote: OpenCode names the project after it, the same in every worktree.
    repo.git(&["remote", "add", "origin", "https://github.com/o/r.git"]);
    let before = WireServer::start(agent.wire(), Scenario::Complete);
    let used = run_direct(
        agent,
        &bin,
        &before,
        &repo.repo,
        &repo.home,
        PermissionMode::Full,
    );
    assert_eq!(used.exit, Some(0), "{}", used.output());
    let roots = |server: &WireServer| -> Vec<String> {
        server
            .requests()
            .iter()
            .filter(|r| r.main)
            .filter_map(|r| r.body.as_ref().and_then(|b| workspace_root_told(agent, b)))
            .collect()
    };
    let canonical = |p: &str| {
        std::path::Path::new(p.trim_end_matches('/'))
            .canonicalize()
            .ok()
    };
    // What the CLI tells its model when it runs in the checkout: the checkout.
    let in_checkout = roots(&before);
    assert!(
        !in_checkout.is_empty(),
        "no workspace root in {}",
        before.log()
    );
    for root in &in_checkout {
        assert_eq!(canonical(root), repo.repo.canonicalize().ok(), "{root}");
    }
    let content = format!("written by {}\n", agent.name());
    let server = WireServer::start(
        agent.wire(),
        Scenario::WriteFile {
            file: "out-T-1.txt".into(),
            content: content.clone(),
        },
    );
    let out = run_plan(agent, &repo, &server, Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    let started = events_of(&repo, "T-1", "task.done");
    let worktree = started[0]["payload"]["worktree"]
        .as_str()
        .unwrap_or_else(|| panic!("no worktree in {}", started[0]))
        .to_string();
    assert!(
        worktree.starts_with(&path_str(&repo.home.join(".local/share/whilly/worktrees"))),
        "the default location: {worktree}"
    );
    let told = roots(&server);
    assert!(!told.is_empty(), "no workspace root in the requests");
    for root in &told {
        assert_eq!(
            canonical(root),
            canonical(&worktree),
            "the model was told {root:?}, the task's worktree is {worktree}"
        );
    }
    assert_eq!(repo.git(&["show", "HEAD:out-T-1.txt"]), content);
    let status = repo.git(&["status", "--porcelain"]);
    assert!(status.trim().is_empty(), "the checkout changed:\n{status}");
}

/// A 401: FAILED auth_error at once (one claim, no retry) with the CLI's own message.
pub fn auth_error_fails_at_once(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let mut t = task("T-1");
    t["max_attempts"] = 3.into();
    let repo = repo_for(agent, &plan("p", vec![t]), &bin, "full");
    let server = WireServer::start(agent.wire(), Scenario::AuthError);
    let out = run_plan(agent, &repo, &server, Duration::from_secs(120));
    assert_eq!(out.code, Some(1), "{out}");
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "auth_error", "{rec}");
    assert_eq!(events_of(&repo, "T-1", "task.claimed").len(), 1);
    assert_eq!(server.main_requests(), 1, "{}", server.log());
    let failed = events_of(&repo, "T-1", "task.failed");
    let detail = failed
        .last()
        .and_then(|e| e["payload"]["detail"].as_str())
        .unwrap_or_default()
        .to_string();
    // The CLI's message, carrying the provider's words.
    assert!(
        detail.contains("API key") || detail.contains("api key"),
        "unclear detail: {failed:?}"
    );
}

/// The provider answers `status` once: retried (by the CLI or by whilly's backoff) and DONE.
pub fn overload_retried_then_done(agent: Agent, status: u16) {
    let Some(bin) = agent.bin() else { return };
    // A CLI that gives up (Codex here, configured without retries of its own) leaves the
    // retry to whilly: an overload to the backoff, which uses up an attempt (hence two); a
    // rate limit to a pause of the agent, which uses none.
    let mut t = task("T-1");
    t["max_attempts"] = 2.into();
    let repo = repo_for(agent, &plan("p", vec![t]), &bin, "full");
    let server = WireServer::start(
        agent.wire(),
        Scenario::Fail {
            status,
            failures: 1,
        },
    );
    let out = run_plan(agent, &repo, &server, Duration::from_secs(120));
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    let done = repo.task("p", "T-1");
    assert_eq!(done["status"], "DONE");
    if status == 429 {
        assert_eq!(done["attempts"], 1, "a rate limit burns no attempt: {done}");
    }
    let seen = server.requests();
    assert!(
        seen.iter().any(|r| r.main && r.status == status),
        "{}",
        server.log()
    );
    assert!(server.answered() >= 1, "{}", server.log());
}

/// The provider's rate limit names its reset 5 s ahead, in its own words, through the real CLI:
/// the agent is paused until then (the parsed reset, not the minute-long default cooldown), no
/// attempt is used up, nothing is claimed for the agent during the pause, and both tasks end
/// DONE. One slot, so the second task waits out the pause too.
pub fn rate_limit_reset_pauses_the_agent(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    const RESET_MS: i64 = 5_000;
    // One attempt each: a rate limit that used one up would fail the task.
    let tasks = ["T-1", "T-2"]
        .iter()
        .map(|id| {
            let mut t = task(id);
            t["max_attempts"] = 1.into();
            t
        })
        .collect();
    let repo = repo_for(agent, &plan("p", tasks), &bin, "full");
    let server = WireServer::start(
        agent.wire(),
        Scenario::RateLimited {
            reset_secs: 5,
            failures: 1,
        },
    );
    let out = run_plan_with(
        agent,
        &repo,
        &server,
        &["run.parallel=1", "retry.rate_limit_cooldown_secs=60"],
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(0), "{out}\n--- server\n{}", server.log());
    assert!(
        server.requests().iter().any(|r| r.main && r.status == 429),
        "{}",
        server.log()
    );

    let paused = repo.events_of_type("agent.paused");
    assert_eq!(paused.len(), 1, "{paused:?}");
    let p = &paused[0]["payload"];
    assert_eq!(p["agent"], agent.name(), "{p}");
    assert_eq!(p["reason"], "rate limit", "{p}");
    assert_eq!(p["parsed"], true, "the reset was not read: {p}");
    let paused_at = ts(&paused[0]["ts"]);
    let until = ts(&p["until"]);
    // The reset is counted from when whilly read it, a moment before the event was written.
    assert!(
        (RESET_MS - 3_000..=RESET_MS).contains(&(until - paused_at)),
        "paused for {} ms, not the 5 s asked for: {p}",
        until - paused_at
    );
    let limited = paused[0]["task_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let released = events_of(&repo, &limited, "task.released");
    assert!(
        released
            .iter()
            .any(|e| e["payload"]["reason"] == "rate_limited"),
        "{released:?}"
    );
    // Nothing was claimed on the agent (the only one) while it was paused.
    let claims = repo.events_of_type("task.claimed");
    let after: Vec<(String, i64)> = claims
        .iter()
        .map(|e| {
            (
                e["task_id"].as_str().unwrap_or_default().to_string(),
                ts(&e["ts"]),
            )
        })
        .filter(|(_, t)| *t >= paused_at)
        .collect();
    assert!(!after.is_empty(), "{claims:?}");
    for (id, t) in &after {
        assert!(
            *t >= until,
            "{id} was claimed {} ms into a 5 s pause: {claims:?}",
            t - paused_at
        );
    }
    for id in ["T-1", "T-2"] {
        let rec = repo.task("p", id);
        assert_eq!(rec["status"], "DONE", "{rec}");
        assert_eq!(rec["attempts"], 1, "a rate limit used up an attempt: {rec}");
    }
    assert_eq!(server.answered(), 2, "{}", server.log());
}

/// An RFC 3339 time as epoch milliseconds.
fn ts(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
        .unwrap_or_else(|e| panic!("not a time: {v}: {e}"))
        .timestamp_millis()
}

/// The provider never answers: the CLI is killed at the task's timeout, FAILED task_timeout.
pub fn hang_is_killed_at_the_timeout(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    // Long enough for a slow start on a loaded machine (OpenCode's first request can take
    // seconds), so the CLI is really waiting on the provider when the timeout ends it.
    let mut t = task("T-1");
    t["timeout"] = 20.into();
    t["max_attempts"] = 1.into();
    let repo = repo_for(agent, &plan("p", vec![t]), &bin, "full");
    let server = WireServer::start(agent.wire(), Scenario::Hang);
    let started = Instant::now();
    let out = run_plan(agent, &repo, &server, Duration::from_secs(90));
    let elapsed = started.elapsed();
    assert_eq!(out.code, Some(1), "{out}\n--- server\n{}", server.log());
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}");
    assert_eq!(rec["reason"], "task_timeout", "{rec}");
    assert!(
        server.main_requests() >= 1,
        "{}\n--- agent output\n{}",
        server.log(),
        agent_logs(&repo)
    );
    assert!(
        elapsed >= Duration::from_secs(20) && elapsed < Duration::from_secs(60),
        "{elapsed:?}"
    );
    // Nothing of the CLI outlived the run.
    engine::wait_for(Duration::from_secs(10), "the CLI to be gone", || {
        repo.marked_pids(&[]).is_empty().then_some(())
    });
}

/// A task budget lower than what the first model request costs: the live meter prices the
/// CLI's first step as it is printed, and the engine stops the agent for budget while it waits
/// on its second request (which the server never answers): FAILED task_budget_exceeded, the
/// first request's spend booked, long before the task timeout. Only for CLIs that print usage
/// per request (OpenCode); Codex and Gemini CLI print it only as the run ends.
pub fn task_budget_stops_the_agent_mid_run(agent: Agent) {
    let Some(bin) = agent.bin() else { return };
    let first = agent.cost_micros(1);
    let mut t = task("T-1");
    // Half of what the first request costs; the timeout is the fallback if nothing stops it.
    t["budget_usd"] = (first as f64 / 2e6).into();
    t["timeout"] = 90.into();
    t["max_attempts"] = 1.into();
    let repo = repo_for(agent, &plan("p", vec![t]), &bin, "full");
    let server = WireServer::start(
        agent.wire(),
        Scenario::WriteThenHang {
            file: "out-T-1.txt".into(),
            content: "partial\n".into(),
        },
    );
    let started = Instant::now();
    let out = run_plan(agent, &repo, &server, Duration::from_secs(150));
    let elapsed = started.elapsed();
    let logs = agent_logs(&repo);
    assert_eq!(
        out.code,
        Some(1),
        "{out}\n--- server\n{}\n{logs}",
        server.log()
    );
    let rec = repo.task("p", "T-1");
    assert_eq!(rec["status"], "FAILED", "{rec}\n{logs}");
    assert_eq!(rec["reason"], "task_budget_exceeded", "{rec}\n{logs}");
    let failed = events_of(&repo, "T-1", "task.failed");
    let detail = failed[0]["payload"]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains("budget_usd") && detail.contains("is spent"),
        "{detail}"
    );
    // Stopped before its second request was answered (it never is): one answered. Whether the
    // CLI had sent the second yet is a race with the budget check, so either count is fine.
    assert_eq!(server.answered(), 1, "{}", server.log());
    assert!(
        (1..=2).contains(&server.main_requests()),
        "{}",
        server.log()
    );
    assert!(elapsed < Duration::from_secs(60), "{elapsed:?}");
    let spent = repo.plan_record("p")["spent"].as_i64().unwrap();
    assert_eq!(spent, first, "{logs}");
    println!(
        "task budget {} µ$, first request {first} µ$: stopped after {elapsed:?}",
        first / 2
    );
    engine::wait_for(Duration::from_secs(10), "the CLI to be gone", || {
        repo.marked_pids(&[]).is_empty().then_some(())
    });
}
