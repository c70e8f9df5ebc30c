//! The throwaway project the console is measured in: a git repository with a `whilly.toml`
//! whose agents are shell scripts (the `command` backend), plans written as files and imported
//! with the real binary, and the environment scrubbed so no user setting leaks in.

use crate::bench::git;
use crate::domain::{PlanSpec, Priority, Status, TaskSpec};
use crate::store::open::{DatabaseTarget, open, state_dir};
use crate::store::{Store, TaskRecord};
use anyhow::{Context as _, bail};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Agent names in the bench's config.
pub(crate) const DRAIN_AGENT: &str = "drain";
pub(crate) const IDLE_AGENT: &str = "idle";

pub(crate) struct BenchRepo {
    /// Scratch root (removed on drop): repo/, agents/, worktrees/, xdg/, streams.
    root: tempfile::TempDir,
    whilly: PathBuf,
}

impl BenchRepo {
    /// `drain_stream` is what each drain agent prints; `idle_stream` what each idle agent
    /// prints before it waits (up to `hold_secs`) with its pane open.
    pub(crate) fn create(
        whilly: &Path,
        drain_stream: &Path,
        idle_stream: &Path,
        hold_secs: u64,
    ) -> anyhow::Result<BenchRepo> {
        let root = tempfile::Builder::new()
            .prefix("whilly-bench-console-")
            .tempdir()
            .context("cannot create a scratch directory in the temp dir")?;
        let r = BenchRepo {
            root,
            whilly: whilly.to_path_buf(),
        };
        let repo = r.repo();
        for dir in [
            &repo,
            &r.agents_dir(),
            &r.ready_dir(),
            &r.root().join("xdg"),
        ] {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
        }
        let q = |p: &Path| super::tmux::sh_quote(&p.to_string_lossy());
        let drain = r.agents_dir().join("drain.sh");
        std::fs::write(
            &drain,
            format!(
                "cat {}\necho '<promise>COMPLETE</promise>'\n",
                q(drain_stream)
            ),
        )?;
        let idle = r.agents_dir().join("idle.sh");
        std::fs::write(
            &idle,
            format!(
                "cat {}\n: > {}/\"$1\"\nexec sleep {hold_secs}\n",
                q(idle_stream),
                q(&r.ready_dir())
            ),
        )?;
        let config = format!(
            "# Written by `whilly bench console`.\n\
             [run]\nagent = \"{DRAIN_AGENT}\"\ngrace_period_secs = 2\n\n\
             [queue]\ndefault_max_attempts = 1\n\n\
             [retry]\nbackoff_secs = [1]\n\n\
             [worktrees]\ndir = \"{}\"\ninclude = []\n\n\
             [sandbox]\nallow_write = [\"{}\"]\n\n\
             [tui]\nscrollback_lines = 5000\n\n\
             [notifications]\ndesktop = false\nbell = false\n\n\
             [agents.{DRAIN_AGENT}]\nbackend = \"command\"\ntemplate = \"sh {}\"\n\n\
             [agents.{IDLE_AGENT}]\nbackend = \"command\"\ntemplate = \"sh {} {{task_id}}\"\n",
            r.root().join("worktrees").display(),
            // The idle agents mark themselves ready there, outside their worktrees.
            r.ready_dir().display(),
            drain.display(),
            idle.display(),
        );
        std::fs::write(repo.join("whilly.toml"), config)?;
        std::fs::write(repo.join(".gitignore"), ".whilly/\n")?;
        std::fs::write(repo.join("README.md"), "console benchmark project\n")?;
        git(&repo, &["init", "-q"])?;
        git(&repo, &["config", "user.name", "whilly bench"])?;
        git(&repo, &["config", "user.email", "bench@whilly.invalid"])?;
        git(&repo, &["add", "-A"])?;
        git(&repo, &["commit", "-q", "-m", "bench base"])?;
        Ok(r)
    }

    /// Leaves the scratch directory in place (to read its logs) and returns its path.
    pub(crate) fn keep(self) -> PathBuf {
        self.root.keep()
    }

    pub(crate) fn root(&self) -> &Path {
        self.root.path()
    }

    pub(crate) fn repo(&self) -> PathBuf {
        self.root().join("repo")
    }

    fn agents_dir(&self) -> PathBuf {
        self.root().join("agents")
    }

    /// Idle agents create `<task id>` here once their output is printed.
    pub(crate) fn ready_dir(&self) -> PathBuf {
        self.root().join("ready")
    }

    /// Variables removed from every whilly started here: remote-session and colour hints that
    /// would change the frame rate or palette, and any WHILLY_* setting of the caller's.
    pub(crate) fn env_remove() -> Vec<OsString> {
        let mut out: Vec<OsString> = [
            "SSH_CONNECTION",
            "SSH_CLIENT",
            "SSH_TTY",
            "TMUX",
            "NO_COLOR",
            "RUST_LOG",
        ]
        .into_iter()
        .map(OsString::from)
        .collect();
        out.extend(
            std::env::vars_os()
                .map(|(k, _)| k)
                .filter(|k| k.to_string_lossy().starts_with("WHILLY_")),
        );
        out
    }

    /// Variables set for every whilly started here (no user config file is read).
    pub(crate) fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("TERM".into(), "xterm-256color".into()),
            ("XDG_CONFIG_HOME".into(), self.root().join("xdg").into()),
        ]
    }

    /// `whilly --repo <repo> <args…>`.
    pub(crate) fn argv(&self, args: &[&str]) -> Vec<OsString> {
        let mut v: Vec<OsString> = vec![self.whilly.clone().into(), "--repo".into()];
        v.push(self.repo().into());
        v.extend(args.iter().map(OsString::from));
        v
    }

    /// Runs a non-interactive whilly command to its end.
    pub(crate) fn whilly(&self, args: &[&str]) -> anyhow::Result<()> {
        let argv = self.argv(args);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]).current_dir(self.repo());
        for k in Self::env_remove() {
            cmd.env_remove(k);
        }
        cmd.envs(self.env());
        let out = cmd
            .output()
            .with_context(|| format!("cannot run {}", self.whilly.display()))?;
        if !out.status.success() {
            bail!(
                "whilly {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// Writes the plan as a file and imports it with `whilly plan import`.
    pub(crate) fn import(&self, plan: &PlanSpec) -> anyhow::Result<()> {
        let file = self.root().join(format!("{}.json", plan.id));
        std::fs::write(&file, crate::plan::canonical_json(plan))
            .with_context(|| format!("cannot write {}", file.display()))?;
        self.whilly(&["plan", "import", &file.to_string_lossy()])
    }

    /// The queue, opened the way whilly opens it here (SQLite under `.whilly/`).
    pub(crate) async fn store(&self) -> anyhow::Result<Arc<dyn Store>> {
        let repo = self.repo();
        Ok(open(
            &DatabaseTarget::Sqlite(state_dir(&repo).join("whilly.db")),
            &repo,
        )
        .await?)
    }

    /// Sizes of the agents' output logs (raw PTY bytes) under `.whilly/runs/`.
    pub(crate) fn output_log_sizes(&self) -> Vec<u64> {
        self.log_sizes(|_| true)
    }

    /// The same for one plan's agents (`runs/<run>/<plan>/<task>/…`).
    pub(crate) fn output_log_sizes_of(&self, plan_id: &str) -> Vec<u64> {
        let runs = state_dir(&self.repo()).join("runs");
        self.log_sizes(|p| {
            p.strip_prefix(&runs)
                .ok()
                .and_then(|rel| rel.components().nth(1))
                .is_some_and(|c| c.as_os_str() == plan_id)
        })
    }

    fn log_sizes(&self, keep: impl Fn(&Path) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        let mut dirs = vec![state_dir(&self.repo()).join("runs")];
        while let Some(dir) = dirs.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.flatten() {
                let path = e.path();
                match e.metadata() {
                    Ok(m) if m.is_dir() => dirs.push(path),
                    Ok(m) if path.extension().is_some_and(|x| x == "log") && keep(&path) => {
                        out.push(m.len())
                    }
                    _ => {}
                }
            }
        }
        out
    }
}

/// A plan of `n` tasks (`T-00000` …) for `agent`, one attempt each.
pub(crate) fn plan(id: &str, agent: &str, n: usize) -> PlanSpec {
    PlanSpec {
        id: id.to_string(),
        project: "whilly-bench-console".to_string(),
        tasks: (0..n)
            .map(|i| TaskSpec {
                id: format!("T-{i:05}"),
                priority: Priority::Medium,
                description: format!("console benchmark task {i}: print the bench stream"),
                acceptance_criteria: vec!["the agent prints the marker".into()],
                // A check that always passes: the agents change nothing, and a task whose
                // agent changed nothing with no check to show the work is there is FAILED.
                test_steps: vec!["true".into()],
                agent: Some(agent.to_string()),
                max_attempts: Some(1),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}

/// [`plan`] with short tasks, so 100,000 of them fit in a plan file (32 MiB at most).
pub(crate) fn lean_plan(id: &str, agent: &str, n: usize) -> PlanSpec {
    let mut p = plan(id, agent, n);
    for (i, t) in p.tasks.iter_mut().enumerate() {
        t.description = format!("bench task {i}");
        t.acceptance_criteria.clear();
    }
    p
}

/// Whether every task has ended, and the first that ended other than DONE.
pub(crate) fn finished(tasks: &[TaskRecord]) -> (bool, Option<&TaskRecord>) {
    let ended = tasks.iter().all(|t| t.status.is_terminal());
    let bad = tasks
        .iter()
        .find(|t| t.status.is_terminal() && t.status != Status::Done);
    (ended, bad)
}
