//! The console at scale, and what idle processes cost the database:
//!
//! - idle on a big plan: the console on a paused 10,000- (and 100,000-) task plan, nothing
//!   running; CPU over the quiet window, RSS at its end, and the first frame that lists the
//!   plan's tasks (from process start).
//! - live panes on a big plan: the drain case with its agents in a 10,000-task plan (the other
//!   tasks DONE already), against the same run's tmux drain.
//! - idle database load: transactions per second that an idle `whilly worker` and an idle
//!   console cause on a fresh Postgres database (`pg_stat_database`, counted from another
//!   database so the counting is not counted).

use super::host::{HostSpec, TermHost};
use super::report::{BigIdle, DbLoad, DrainFigures, TmuxRun};
use super::scratch::{self, BenchRepo, DRAIN_AGENT, IDLE_AGENT};
use super::{ConsoleBenchOptions, end_drain, quiet_window, sample, start_console};
use crate::domain::{PlanSpec, Priority, Status};
use anyhow::{Context as _, bail};
use std::time::{Duration, Instant};

/// The console on a paused plan of `tasks` tasks: first frames, then CPU and memory while idle.
pub(crate) async fn idle_big(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    tasks: usize,
) -> anyhow::Result<BigIdle> {
    let plan_id = format!("big-{tasks}");
    repo.import(&scratch::lean_plan(&plan_id, IDLE_AGENT, tasks))?;
    repo.whilly(&["plan", "pause", &plan_id])?;
    // The first task's id shows once the task list is loaded.
    let mut console = start_console(opts, repo, &plan_id, 1, Some("T-00000".to_string()))?;
    let seen = console
        .wait_until(Duration::from_secs(120), |s| s.needle_frame.is_some())
        .await;
    let (Some(first_frame), Some(tasks_shown)) = (seen.first_frame, seen.needle_frame) else {
        bail!(
            "the console never listed the tasks of {plan_id}; its screen:\n{}",
            seen.screen
        );
    };
    let pid = console.pid();
    let frames_before = std::cell::Cell::new(None);
    let usage = quiet_window(opts, || {
        if frames_before.get().is_none() {
            frames_before.set(Some(console.frames()));
        }
        sample(pid, "the console")
    })
    .await?;
    let frames = console
        .frames()
        .saturating_sub(frames_before.get().unwrap_or(0));
    if !console.running() {
        bail!("the console exited during the idle window");
    }
    console.stop(Duration::from_secs(20)).await;
    Ok(BigIdle {
        tasks,
        first_frame,
        tasks_shown,
        window: Duration::from_secs(opts.idle_secs),
        usage,
        frames,
    })
}

/// A plan of `total` tasks whose first `live` tasks drain (high priority, ready) and whose
/// others are DONE already.
fn live_plan(id: &str, live: usize, total: usize) -> PlanSpec {
    let mut plan = scratch::plan(id, IDLE_AGENT, total.max(live));
    for (i, t) in plan.tasks.iter_mut().enumerate() {
        if i < live {
            t.agent = Some(DRAIN_AGENT.to_string());
            t.priority = Priority::High;
        } else {
            t.status = Some(Status::Done);
        }
    }
    plan
}

/// The drain case with its agents in a plan of `total` tasks; `tmux` is the same run's
/// baseline (the panes do not know how big the plan is).
pub(crate) async fn live_big(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    bytes_per_pane: u64,
    total: usize,
    tmux: (Option<TmuxRun>, Option<TmuxRun>),
) -> anyhow::Result<DrainFigures> {
    let plan_id = "live-big";
    repo.import(&live_plan(plan_id, opts.panes, total))?;
    let store = repo.store().await?;
    let mut console = start_console(opts, repo, plan_id, opts.panes, None)?;
    let limit = Duration::from_secs(60 + opts.mb * opts.panes as u64);
    // Counts, not the task list: the bench must not load 10,000 tasks every poll beside the
    // console it measures.
    loop {
        let c = store.counts(plan_id).await?;
        let bad = c.get(Status::Failed) + c.get(Status::Blocked) + c.get(Status::HumanLoop);
        if bad > 0 {
            bail!("{bad} drain task(s) of {plan_id} did not end DONE");
        }
        if c.get(Status::Done) == c.total {
            break;
        }
        if !console.running() {
            bail!("the console exited before the drain ended");
        }
        if console.started().elapsed() > limit {
            bail!("the drain did not end within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let end = end_drain(console, store.as_ref(), plan_id).await?;
    store.close().await;
    Ok(DrainFigures {
        bytes_per_pane,
        whilly: end.span,
        whilly_wall: end.wall,
        whilly_cpu: end.cpu,
        frames: end.frames,
        terminal_bytes: end.terminal_bytes,
        done: end.done,
        logged: repo.output_log_sizes_of(plan_id),
        tmux_detached: tmux.0,
        tmux_attached: tmux.1,
    })
}

/// Warm-up before counting: start-up, registration, the first reaper pass, and the server's
/// statistics catching up with them: an idle backend reports its transactions to
/// `pg_stat_database` only up to 10 s later (PGSTAT_IDLE_INTERVAL), so a shorter settle counts
/// the start-up's migrations and registration in the window.
const DB_SETTLE: Duration = Duration::from_secs(12);

/// Transactions of idle processes on a fresh database of the Postgres server at `server`.
pub(crate) async fn db_load(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    server: &str,
) -> anyhow::Result<DbLoad> {
    let db = crate::bench::queue::Scratch::create(server).await?;
    let result = db_load_on(opts, repo, server, &db.name, &db.url).await;
    db.drop_db().await;
    result
}

async fn db_load_on(
    opts: &ConsoleBenchOptions,
    repo: &BenchRepo,
    server: &str,
    db_name: &str,
    url: &str,
) -> anyhow::Result<DbLoad> {
    use sqlx::Connection;
    let plan_id = "idle-db";
    // Through the binary measured: its migrations are the ones on the database.
    let file = repo.root().join(format!("{plan_id}.json"));
    std::fs::write(
        &file,
        crate::plan::canonical_json(&scratch::plan(plan_id, IDLE_AGENT, 100)),
    )
    .with_context(|| format!("cannot write {}", file.display()))?;
    repo.whilly(&[
        "--database-url",
        url,
        "plan",
        "import",
        &file.to_string_lossy(),
    ])?;
    repo.whilly(&["--database-url", url, "plan", "pause", plan_id])?;
    let mut admin = sqlx::PgConnection::connect(server)
        .await
        .with_context(|| format!("cannot reach {}", crate::store::redact_url(server)))?;
    let window = Duration::from_secs(opts.db_secs.max(1));
    let mut count = async || -> anyhow::Result<i64> {
        Ok(sqlx::query_scalar(
            "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
        )
        .bind(db_name)
        .fetch_one(&mut admin)
        .await?)
    };

    // An idle worker: nothing to claim (the only plan is paused).
    let argv = repo.argv(&["--database-url", url, "worker"]);
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(repo.repo())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for k in BenchRepo::env_remove() {
        cmd.env_remove(k);
    }
    cmd.envs(repo.env());
    let mut worker = cmd.spawn().context("cannot start `whilly worker`")?;
    tokio::time::sleep(DB_SETTLE).await;
    if worker.try_wait()?.is_some() {
        bail!("`whilly worker` exited before the window");
    }
    let before = count().await?;
    tokio::time::sleep(window).await;
    let after = count().await?;
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(worker.id()).unwrap_or(0)),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = worker.wait();
    let worker_tx_per_s = (after - before) as f64 / window.as_secs_f64();

    // An idle console on the paused plan.
    let dir = repo.repo();
    let mut console = TermHost::spawn(HostSpec {
        argv: repo.argv(&["--database-url", url, "tui", "--plan", plan_id, "-j", "1"]),
        cwd: &dir,
        env: repo.env(),
        env_remove: BenchRepo::env_remove(),
        rows: opts.rows,
        cols: opts.cols,
        needle: Some("T-00000".to_string()),
    })
    .context("cannot start the console")?;
    let seen = console
        .wait_until(Duration::from_secs(60), |s| s.needle_frame.is_some())
        .await;
    if seen.needle_frame.is_none() {
        bail!(
            "the console on Postgres never listed its tasks:\n{}",
            seen.screen
        );
    }
    tokio::time::sleep(DB_SETTLE).await;
    let started = Instant::now();
    let before = count().await?;
    tokio::time::sleep(window).await;
    let after = count().await?;
    let took = started.elapsed();
    if !console.running() {
        bail!("the console exited during the window");
    }
    console.stop(Duration::from_secs(20)).await;
    let console_tx_per_s = (after - before) as f64 / took.as_secs_f64();
    Ok(DbLoad {
        window,
        worker_tx_per_s,
        console_tx_per_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_plan_has_its_drain_tasks_first_and_the_rest_done() {
        let p = live_plan("p", 3, 10);
        assert_eq!(p.tasks.len(), 10);
        let drains: Vec<_> = p
            .tasks
            .iter()
            .filter(|t| t.agent.as_deref() == Some(DRAIN_AGENT))
            .collect();
        assert_eq!(drains.len(), 3);
        assert!(drains.iter().all(|t| t.status.is_none()));
        assert!(p.tasks[3..].iter().all(|t| t.status == Some(Status::Done)));
    }
}
