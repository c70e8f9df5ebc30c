//! `whilly bench panes`: remote panes between two processes on one Postgres. A real `whilly
//! worker` (this binary) runs the agents; this process is the viewer. It measures how long an
//! agent's line takes to reach the viewer's emulator (each tick carries the clock it was
//! printed at, read on the same machine), and how long a flood takes with nobody watching
//! (the baseline), with a viewer that reads, and with a viewer that never reads.

use crate::bench::console::scratch::BenchRepo;
use crate::bench::git;
use crate::bench::queue::Scratch;
use crate::domain::{PlanSpec, Status};
use crate::engine::panes::RemotePanes;
use crate::store::Store;
use crate::store::postgres::PgStore;
use anyhow::{Context as _, bail};
use std::collections::BTreeSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub(crate) struct PanesBenchOptions {
    pub whilly: PathBuf,
    /// Postgres server the scratch database is made on.
    pub postgres: String,
    /// Ticks timed for the latency.
    pub ticks: usize,
    /// Megabytes each flood prints.
    pub mb: u64,
}

pub(crate) struct PanesFigures {
    pub samples: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mb: u64,
    pub unwatched: Duration,
    pub live_viewer: Duration,
    pub stalled_viewer: Duration,
}

impl PanesFigures {
    fn ratio(&self, d: Duration) -> f64 {
        d.as_secs_f64() / self.unwatched.as_secs_f64().max(f64::MIN_POSITIVE)
    }
}

impl fmt::Display for PanesFigures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Remote panes — worker process → this process, one Postgres"
        )?;
        writeln!(
            f,
            "  latency, agent line → viewer's screen: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} ticks)",
            self.p50_ms, self.p99_ms, self.max_ms, self.samples
        )?;
        writeln!(
            f,
            "  {} MB flood, nobody watching (baseline): {:>7.2} s",
            self.mb,
            self.unwatched.as_secs_f64()
        )?;
        writeln!(
            f,
            "  {} MB flood, a viewer reading:           {:>7.2} s  ratio {:.2}",
            self.mb,
            self.live_viewer.as_secs_f64(),
            self.ratio(self.live_viewer)
        )?;
        write!(
            f,
            "  {} MB flood, a viewer that never reads:  {:>7.2} s  ratio {:.2}",
            self.mb,
            self.stalled_viewer.as_secs_f64(),
            self.ratio(self.stalled_viewer)
        )
    }
}

/// How the flood is watched.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Viewer {
    None,
    Reading,
    Stalled,
}

pub(crate) async fn run(opts: &PanesBenchOptions) -> anyhow::Result<PanesFigures> {
    let scratch = Scratch::create(&opts.postgres).await?;
    let result = measure(opts, &scratch.url).await;
    scratch.drop_db().await;
    result
}

async fn measure(opts: &PanesBenchOptions, url: &str) -> anyhow::Result<PanesFigures> {
    let dir = tempfile::Builder::new()
        .prefix("whilly-bench-panes-")
        .tempdir()
        .context("cannot create a scratch directory in the temp dir")?;
    let project = Project::create(dir.path(), &opts.whilly, url, opts)?;
    let store: Arc<dyn Store> = Arc::new(PgStore::connect(url, None).await?);

    // Latency: every tick's clock against this process's clock when it shows.
    project.import(&plan("lat", "ticker"))?;
    let mut worker = project.worker()?;
    let pk = running(&*store, "lat").await?;
    let panes = RemotePanes::start(store.clone(), "bench-viewer".into());
    panes.want(BTreeSet::from([pk]));
    let changed = panes.changed();
    let mut seen: Option<u64> = None;
    let mut lat: Vec<f64> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60 + opts.ticks as u64 / 10);
    while lat.len() < opts.ticks {
        if Instant::now() > deadline {
            bail!("only {} ticks reached the viewer in time", lat.len());
        }
        let _ = tokio::time::timeout(Duration::from_millis(200), changed.notified()).await;
        let Some((n, ns)) = panes.screen_text(pk).as_deref().and_then(last_tick) else {
            continue;
        };
        // The first screen is a snapshot of what was printed before anyone watched.
        if seen.is_some_and(|s| n > s) {
            lat.push(now_ns().saturating_sub(ns) as f64 / 1e6);
        }
        seen = Some(n);
    }
    drop(panes);
    finish(&mut worker).await?;
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[(((lat.len() - 1) as f64) * p).round() as usize];

    let mut floods = Vec::new();
    for (i, viewer) in [Viewer::None, Viewer::Reading, Viewer::Stalled]
        .into_iter()
        .enumerate()
    {
        let id = format!("flood{i}");
        project.import(&plan(&id, "flood"))?;
        let mut worker = project.worker()?;
        let pk = running(&*store, &id).await?;
        let started = Instant::now();
        let panes = (viewer == Viewer::Reading).then(|| {
            let p = RemotePanes::start(store.clone(), "bench-viewer".into());
            p.want(BTreeSet::from([pk]));
            p
        });
        let mut refreshed: Option<Instant> = None;
        loop {
            if viewer == Viewer::Stalled && refreshed.is_none_or(|r| r.elapsed().as_secs() >= 1) {
                // A watch kept fresh whose chunks nobody reads.
                store.watch_pane(pk, "bench-stalled").await?;
                refreshed = Some(Instant::now());
            }
            let t = store.get_task(&id, TASK).await?;
            if t.status.is_terminal() {
                if t.status != Status::Done {
                    bail!("the flood task ended {:?}", t.status);
                }
                break;
            }
            if started.elapsed() > Duration::from_secs(600) {
                bail!("the flood did not end in 10 minutes");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        floods.push(started.elapsed());
        drop(panes);
        finish(&mut worker).await?;
    }
    store.close().await;
    Ok(PanesFigures {
        samples: lat.len(),
        p50_ms: pct(0.5),
        p99_ms: pct(0.99),
        max_ms: lat.last().copied().unwrap_or(0.0),
        mb: opts.mb,
        unwatched: floods[0],
        live_viewer: floods[1],
        stalled_viewer: floods[2],
    })
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The newest `TICK n ns` on a screen.
fn last_tick(text: &str) -> Option<(u64, u128)> {
    text.lines().rev().find_map(|l| {
        let mut w = l[l.find("TICK ")?..].split_whitespace().skip(1);
        Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?))
    })
}

/// The one task of each plan (named as the console bench's plans name them).
const TASK: &str = "T-00000";

fn plan(id: &str, agent: &str) -> PlanSpec {
    crate::bench::console::scratch::plan(id, agent, 1)
}

/// The task's pk once the worker runs it.
async fn running(store: &dyn Store, plan: &str) -> anyhow::Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let t = store.get_task(plan, TASK).await?;
        if t.status == Status::InProgress {
            return Ok(t.pk);
        }
        if Instant::now() > deadline {
            bail!("the worker never started {plan}: {:?}", t.status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn finish(worker: &mut Child) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = worker.try_wait()? {
            if !status.success() {
                bail!("the worker ended {status}");
            }
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = worker.kill();
            bail!("the worker did not end after its task");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The scratch repository and its two agents.
struct Project {
    root: PathBuf,
    whilly: PathBuf,
    url: String,
}

impl Project {
    fn create(
        root: &Path,
        whilly: &Path,
        url: &str,
        opts: &PanesBenchOptions,
    ) -> anyhow::Result<Project> {
        let p = Project {
            root: root.to_path_buf(),
            whilly: whilly.to_path_buf(),
            url: url.to_string(),
        };
        let repo = p.repo();
        std::fs::create_dir_all(&repo)?;
        std::fs::create_dir_all(root.join("xdg"))?;
        let ticker = root.join("ticker.sh");
        std::fs::write(
            &ticker,
            format!(
                "i=0\nwhile [ $i -lt {} ]; do echo \"TICK $i $(date +%s%N)\"; sleep 0.05; i=$((i+1)); done\n\
                 echo '<promise>COMPLETE</promise>'\n",
                opts.ticks + 40
            ),
        )?;
        let flood = root.join("flood.sh");
        std::fs::write(
            &flood,
            format!(
                "head -c {} /dev/zero | tr '\\0' 'x' | fold -w 100\necho '<promise>COMPLETE</promise>'\n",
                opts.mb * 1_000_000
            ),
        )?;
        let config = format!(
            "# Written by `whilly bench panes`.\n\
             [run]\nagent = \"ticker\"\ngrace_period_secs = 2\n\n\
             [queue]\ndefault_max_attempts = 1\nheartbeat_secs = 1\npoll_interval_ms = 50\n\n\
             [retry]\nbackoff_secs = [1]\n\n\
             [worktrees]\ndir = \"{}\"\ninclude = []\n\n\
             [notifications]\ndesktop = false\nbell = false\n\n\
             [agents.ticker]\nbackend = \"command\"\ntemplate = \"sh {}\"\n\n\
             [agents.flood]\nbackend = \"command\"\ntemplate = \"sh {}\"\n",
            root.join("worktrees").display(),
            ticker.display(),
            flood.display(),
        );
        std::fs::write(repo.join("whilly.toml"), config)?;
        std::fs::write(repo.join(".gitignore"), ".whilly/\n")?;
        std::fs::write(repo.join("README.md"), "remote panes benchmark project\n")?;
        git(&repo, &["init", "-q"])?;
        git(&repo, &["config", "user.name", "whilly bench"])?;
        git(&repo, &["config", "user.email", "bench@whilly.invalid"])?;
        git(&repo, &["add", "-A"])?;
        git(&repo, &["commit", "-q", "-m", "bench base"])?;
        Ok(p)
    }

    fn repo(&self) -> PathBuf {
        self.root.join("repo")
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.whilly);
        cmd.arg("--repo")
            .arg(self.repo())
            .arg("--database-url")
            .arg(&self.url)
            .args(args)
            .current_dir(self.repo());
        for k in BenchRepo::env_remove() {
            cmd.env_remove(k);
        }
        cmd.env("TERM", "xterm-256color")
            .env("XDG_CONFIG_HOME", self.root.join("xdg"));
        cmd
    }

    fn import(&self, plan: &PlanSpec) -> anyhow::Result<()> {
        let file = self.root.join(format!("{}.json", plan.id));
        std::fs::write(&file, crate::plan::canonical_json(plan))?;
        let out = self
            .command(&["plan", "import", &file.to_string_lossy()])
            .output()
            .with_context(|| format!("cannot run {}", self.whilly.display()))?;
        if !out.status.success() {
            bail!(
                "whilly plan import failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    fn worker(&self) -> anyhow::Result<Child> {
        self.command(&["worker", "--until-idle"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {} worker", self.whilly.display()))
    }
}
