//! Helpers for the engine tests: a throwaway git repository with a plan and a whilly.toml, and the
//! built `whilly` binary run in it with a sealed environment (its own HOME and XDG dirs, no
//! WHILLY_* variables), so nothing of the user's configuration leaks in.
//!
//! Every child whilly gets `ENGINE_TEST_MARKER=<unique>` in its environment; agents inherit it,
//! which is how a test finds agent processes (and their children) that outlived their run.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MARKER_VAR: &str = "ENGINE_TEST_MARKER";
pub const COMPLETE: &str = "<promise>COMPLETE</promise>";

/// A fake agent script shipped with the tests.
pub fn agent(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fake_agents")
        .join(name)
}

/// A valid task (passes the decision gate) with its own key file and a check that passes.
pub fn task(id: &str) -> Value {
    json!({
        "id": id,
        "status": "pending",
        "priority": "medium",
        "description": format!("engine edge test task {id}: the fake agent does its work"),
        "acceptance_criteria": ["the agent finishes and prints the marker"],
        // A command step is a check: with it, a fake agent that changes nothing still ends DONE
        // (a task without checks whose agent changed nothing is FAILED, no_changes).
        "test_steps": ["true"],
        "key_files": [format!("files/{id}.txt")],
        "dependencies": []
    })
}

pub fn plan(plan_id: &str, tasks: Vec<Value>) -> Value {
    json!({ "project": "engine-tests", "plan_id": plan_id, "tasks": tasks })
}

/// `value` as a TOML basic string (JSON string escapes are valid TOML).
pub fn toml_str(value: &str) -> String {
    serde_json::to_string(value).unwrap()
}

/// The base whilly.toml: fast leases and reaper, no retry backoff, grace 1 s, one fake agent
/// named `fake` running `template`. Per-test variations go on the command line (`-c key=value`).
pub fn config(template: &str, wt_dir: &Path) -> String {
    format!(
        r#"[run]
agent = "fake"
parallel = 1
grace_period_secs = 1

[agents.fake]
backend = "command"
template = {template}

[queue]
lease_secs = 6
heartbeat_secs = 1
reaper_interval_secs = 1
poll_interval_ms = 100

[retry]
backoff_secs = [0]

[handoff]
timeout_secs = 120

[verification]
timeout_secs = 30

[notifications]
desktop = false
terminal = false
bell = false

[worktrees]
dir = {wt}

[sandbox]
# The harness's note directories: fake agents leave notes there ([`probe_dir`]).
allow_write = [{shared}, {probes}]
"#,
        template = toml_str(template),
        wt = toml_str(&wt_dir.to_string_lossy()),
        probes = toml_str(&probe_root().to_string_lossy()),
        shared = toml_str(
            &wt_dir
                .parent()
                .map(|p| p.join("shared"))
                .unwrap_or_default()
                .to_string_lossy()
        ),
    )
}

/// whilly.toml lines turning on the decision gate's agent pass (`[gate] llm = true`) with its own
/// agent, `gatekeeper`: the scripted `preflight_agent.sh` in `mode` (`good`, `never`), keeping
/// its prompts in `log`, finding task `vague` too vague and `clear` clear.
pub fn gate_llm_config(mode: &str, log: &Path, vague: &str, clear: &str) -> String {
    let template = format!(
        "sh {} {mode} {} {{prompt_file}} {vague} {clear}",
        agent("preflight_agent.sh").display(),
        log.display()
    );
    format!(
        "\n[gate]\nllm = true\nagent = \"gatekeeper\"\n\n[agents.gatekeeper]\nbackend = \"command\"\ntemplate = {}\n",
        toml_str(&template)
    )
}

/// Where [`probe_dir`]s live: outside every repository, writable to sandboxed fake agents.
pub fn probe_root() -> PathBuf {
    let root = std::env::temp_dir().join("whilly-test-probes");
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// A directory for a fake agent's notes made before its repository exists (the sandbox lets
/// agents write only where the harness's config allows).
pub fn probe_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(probe_root()).unwrap()
}

pub struct Repo {
    _tmp: tempfile::TempDir,
    /// The git repository whilly runs in.
    pub repo: PathBuf,
    /// `[worktrees] dir`.
    pub wt_dir: PathBuf,
    /// HOME and XDG dirs of the child.
    pub home: PathBuf,
    /// A directory outside every repository and worktree, for agents to leave notes in.
    pub shared: PathBuf,
    /// This repo's value of [`MARKER_VAR`].
    pub marker: String,
}

pub struct Output {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The JSON lines of stdout.
    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The final `complete` line of a headless run.
    pub fn complete(&self) -> Value {
        self.lines()
            .into_iter()
            .rev()
            .find(|l| l["event"] == "complete")
            .unwrap_or_else(|| panic!("no complete line in:\n{}\n{}", self.stdout, self.stderr))
    }
}

impl std::fmt::Display for Output {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A `whilly` started in the background; its output goes to files.
pub struct Running {
    pub child: Child,
    stdout: PathBuf,
    stderr: PathBuf,
}

impl Running {
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    pub fn signal(&self, sig: i32) {
        // SAFETY: kill(2) on our own child's pid.
        let r = unsafe { libc::kill(self.pid(), sig) };
        assert_eq!(r, 0, "kill({}, {sig})", self.pid());
    }

    pub fn stderr_now(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    pub fn stdout_now(&self) -> String {
        std::fs::read_to_string(&self.stdout).unwrap_or_default()
    }

    pub fn exited(&mut self) -> bool {
        self.child.try_wait().unwrap().is_some()
    }

    /// Waits at most `limit` for the exit; kills it (and fails the test) when it does not come.
    pub fn wait(mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "whilly did not exit within {limit:?}\n--- stdout\n{}\n--- stderr\n{}",
                    self.stdout_now(),
                    std::fs::read_to_string(&self.stderr).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        if let Some(signal) = std::os::unix::process::ExitStatusExt::signal(&status) {
            stderr.push_str(&format!("\n[killed by signal {signal}]"));
        }
        Output {
            code: status.code(),
            stdout: std::fs::read_to_string(&self.stdout).unwrap_or_default(),
            stderr,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Repo {
    /// A fresh repository holding `plan.json` and a whilly.toml from [`config`], committed.
    pub fn new(plan: &Value, template: &str) -> Repo {
        let tmp = tempfile::Builder::new()
            .prefix("whilly-engine-")
            .tempdir()
            .unwrap();
        let root = tmp.path().to_path_buf();
        let (repo, wt_dir, home, shared) = (
            root.join("repo"),
            root.join("worktrees"),
            root.join("home"),
            root.join("shared"),
        );
        for d in [&repo, &wt_dir, &home, &shared] {
            std::fs::create_dir_all(d).unwrap();
        }
        let marker = format!(
            "m{}x{}",
            std::process::id(),
            root.file_name().unwrap().to_string_lossy().replace('.', "")
        );
        let r = Repo {
            _tmp: tmp,
            repo,
            wt_dir,
            home,
            shared,
            marker,
        };
        r.git(&["init", "-q"]);
        r.git(&["config", "user.name", "Engine Test"]);
        r.git(&["config", "user.email", "engine@test.invalid"]);
        r.git(&["commit", "-q", "--allow-empty", "-m", "init"]);
        r.write("plan.json", &serde_json::to_string_pretty(plan).unwrap());
        r.write("whilly.toml", &config(template, &r.wt_dir));
        r.write(".gitignore", ".whilly/\n");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-q", "-m", "plan"]);
        r
    }

    pub fn write(&self, rel: &str, text: &str) {
        let p = self.repo.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// A file in the shared directory (outside all repositories).
    pub fn shared_file(&self, name: &str) -> PathBuf {
        self.shared.join(name)
    }

    /// A new bare repository (`api.git` in a temp dir the caller keeps alive) added as
    /// `origin`, the remote a pushed or pull-request delivery goes to; with the repository's
    /// current branch. Nothing is pushed yet.
    pub fn bare_origin(&self) -> (tempfile::TempDir, PathBuf, String) {
        let dir = tempfile::tempdir().unwrap();
        let remote = dir.path().join("api.git");
        let init = Command::new("git")
            .args(["init", "-q", "--bare", "-b", "master"])
            .arg(&remote)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        let branch = self
            .git(&["rev-parse", "--abbrev-ref", "HEAD"])
            .trim()
            .to_string();
        self.git(&["remote", "add", "origin", remote.to_str().unwrap()]);
        (dir, remote, branch)
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.repo)
            .env("HOME", &self.home)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `whilly ARGS` in the repository with the sealed environment.
    pub fn whilly(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_whilly"));
        c.args(args).current_dir(&self.repo).env_clear();
        for keep in ["PATH", "LANG", "USER", "TMPDIR"] {
            if let Ok(v) = std::env::var(keep) {
                c.env(keep, v);
            }
        }
        c.env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_DATA_HOME", self.home.join(".local/share"))
            .env("XDG_STATE_HOME", self.home.join(".local/state"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .env("PYENV_ROOT", pyenv_root())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env(MARKER_VAR, &self.marker);
        c
    }

    /// Runs `whilly ARGS` to its end (at most `limit`).
    pub fn run(&self, args: &[&str], limit: Duration) -> Output {
        self.spawn(args).wait(limit)
    }

    /// Starts `whilly ARGS` in the background.
    pub fn spawn(&self, args: &[&str]) -> Running {
        self.spawn_in(&self.repo, args, &[])
    }

    /// Starts `whilly ARGS` in the background in `dir` (a clone, say), with extra environment.
    pub fn spawn_in(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Running {
        let n = std::fs::read_dir(&self.shared)
            .map(|d| d.count())
            .unwrap_or(0);
        let stamp = format!(
            "{}-{n}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let out_dir = self.home.join("outputs");
        std::fs::create_dir_all(&out_dir).unwrap();
        let stdout = out_dir.join(format!("{stamp}.out"));
        let stderr = out_dir.join(format!("{stamp}.err"));
        let child = self
            .whilly(args)
            .current_dir(dir)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout).unwrap())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// `whilly run plan.json --headless EXTRA…`, with `-c` overrides before the subcommand.
    pub fn run_plan(&self, overrides: &[&str], extra: &[&str]) -> Running {
        let mut args: Vec<&str> = Vec::new();
        for o in overrides {
            args.extend(["-c", o]);
        }
        args.extend(["run", "plan.json", "--headless"]);
        args.extend(extra);
        self.spawn(&args)
    }

    /// Every event (of one task, or all), from `whilly events --json`.
    pub fn events(&self, task: Option<&str>) -> Vec<Value> {
        let mut args = vec!["events", "--json"];
        if let Some(t) = task {
            args.extend(["--task", t]);
        }
        let out = self.whilly(&args).output().unwrap();
        assert!(
            out.status.success(),
            "whilly events: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    pub fn events_of_type(&self, kind: &str) -> Vec<Value> {
        self.events(None)
            .into_iter()
            .filter(|e| e["event_type"] == kind)
            .collect()
    }

    /// The plan's task records, from `whilly plan show --json`.
    pub fn tasks(&self, plan_id: &str) -> Vec<Value> {
        let out = self
            .whilly(&["plan", "show", plan_id, "--json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "whilly plan show: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["tasks"].as_array().cloned().unwrap_or_default()
    }

    pub fn task(&self, plan_id: &str, id: &str) -> Value {
        self.tasks(plan_id)
            .into_iter()
            .find(|t| t["id"] == id)
            .unwrap_or_else(|| panic!("no task {id} in plan {plan_id}"))
    }

    pub fn plan_record(&self, plan_id: &str) -> Value {
        let out = self
            .whilly(&["plan", "show", plan_id, "--json"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["plan"].clone()
    }

    /// Processes (other than `except`) that carry this repo's marker: agents and their children.
    pub fn marked_pids(&self, except: &[i32]) -> Vec<i32> {
        marked_pids(&self.marker, except)
    }

    /// SIGKILLs every marked process, e.g. agents orphaned by a SIGKILLed whilly.
    pub fn kill_marked(&self, except: &[i32]) -> usize {
        let pids = self.marked_pids(except);
        for p in &pids {
            // SAFETY: kill(2) on a pid we found by our own unique marker.
            unsafe { libc::kill(*p, libc::SIGKILL) };
        }
        pids.len()
    }

    /// The attempt logs of one task, across runs: `.whilly/runs/<run>/<plan>/<task>/<file>`.
    pub fn attempt_files(&self, plan_id: &str, task_id: &str) -> Vec<PathBuf> {
        let runs = self.repo.join(".whilly/runs");
        let mut out = Vec::new();
        for run in std::fs::read_dir(runs).into_iter().flatten().flatten() {
            let dir = run.path().join(plan_id).join(task_id);
            for f in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                out.push(f.path());
            }
        }
        out.sort();
        out
    }
}

fn pyenv_root() -> String {
    std::env::var("PYENV_ROOT").unwrap_or_else(|_| "/root/.pyenv".into())
}

/// Pids whose environment holds `ENGINE_TEST_MARKER=<marker>` (zombies are not counted: they
/// run nothing and their environ is unreadable).
pub fn marked_pids(marker: &str, except: &[i32]) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if except.contains(&pid) {
            continue;
        }
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = state
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
            if !zombie {
                out.push(pid);
            }
        }
    }
    out
}

/// Polls `f` every 50 ms until it returns `Some`, for at most `limit`; panics naming `what`.
pub fn wait_for<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Resident set size of a process in KiB (None once it is gone).
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// How many events of `kind` each task has.
pub fn count_by_task(events: &[Value], kind: &str) -> std::collections::BTreeMap<String, usize> {
    let mut out = std::collections::BTreeMap::new();
    for e in events.iter().filter(|e| e["event_type"] == kind) {
        if let Some(t) = e["task_id"].as_str() {
            *out.entry(t.to_string()).or_insert(0) += 1;
        }
    }
    out
}
