//! The figures of `whilly bench console`, their ratios to the baselines and the targets.

use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// Targets from the issue (2-core machine).
pub(crate) const TARGET_DRAIN_RATIO: f64 = 1.0;
pub(crate) const TARGET_IDLE_CPU_PCT: f64 = 1.0;
pub(crate) const TARGET_RSS_MB: f64 = 150.0;
pub(crate) const TARGET_FIRST_FRAME_MS: f64 = 200.0;
/// Issue 11: the console idle on a paused 10,000-task plan, and on a 100,000-task one.
pub(crate) const TARGET_BIG_IDLE_CPU_PCT: f64 = 1.0;
pub(crate) const TARGET_BIG_IDLE_RSS_MB: f64 = 80.0;
pub(crate) const TARGET_HUGE_IDLE_CPU_PCT: f64 = 2.0;
pub(crate) const TARGET_HUGE_FIRST_FRAME_MS: f64 = 300.0;
/// Issue 11: 8 live panes in a 10,000-task plan drain at least this much faster than tmux.
pub(crate) const TARGET_LIVE_BIG_RATIO: f64 = 1.5;
/// Issue 11: transactions per second of an idle worker, and of an idle console.
pub(crate) const TARGET_IDLE_DB_TX_PER_S: f64 = 1.0;

#[derive(Debug, Clone, Serialize)]
pub struct ConsoleBenchReport {
    pub panes: usize,
    pub rows: u16,
    pub cols: u16,
    pub drain: Option<DrainFigures>,
    pub idle: Option<IdleFigures>,
    pub first_frame: Option<FirstFrameFigures>,
    /// The console idle on big paused plans (smaller first).
    pub big_idle: Vec<BigIdle>,
    /// The drain with its agents in a plan of `live_big_tasks` tasks.
    pub live_big: Option<DrainFigures>,
    pub live_big_tasks: usize,
    pub db_load: Option<DbLoad>,
    /// Why the database load was not measured, when it was not.
    pub db_note: Option<String>,
    /// Why tmux was not measured, when it was not.
    pub tmux_note: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DrainFigures {
    pub bytes_per_pane: u64,
    /// First TASK_STARTED → last TASK_DONE in the audit trail: worktrees, PTYs, draining
    /// through the panes' emulators, commit and merge included.
    pub whilly: Duration,
    /// From starting the binary until every task was seen DONE.
    pub whilly_wall: Duration,
    pub whilly_cpu: Duration,
    /// Frames the console drew, and bytes it wrote to its terminal.
    pub frames: u64,
    pub terminal_bytes: u64,
    /// Tasks DONE (must equal the pane count).
    pub done: usize,
    /// Size of each agent's raw output log (all it printed, as read from its PTY).
    pub logged: Vec<u64>,
    pub tmux_detached: Option<TmuxRun>,
    pub tmux_attached: Option<TmuxRun>,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct TmuxRun {
    /// Releasing the panes' `cat` → every pane's `cat` ended.
    pub took: Duration,
    /// CPU of the tmux server (and client, when attached) over that time.
    pub cpu: Duration,
}

#[derive(Debug, Clone, Serialize)]
pub struct IdleFigures {
    /// Lines each agent printed before going quiet (more than the scrollback holds).
    pub lines_per_pane: usize,
    pub scrollback: usize,
    pub window: Duration,
    pub whilly: Usage,
    /// Frames drawn during the window.
    pub frames: u64,
    /// The same with one slot more than agents (`-j panes+1`): the engine then waits for work
    /// instead of polling the queue, so this is the console's own idle cost.
    pub spare_slot: Usage,
    pub tmux: Option<Usage>,
}

/// The console idle on a big paused plan.
#[derive(Debug, Clone, Serialize)]
pub struct BigIdle {
    pub tasks: usize,
    /// From process start: the first complete frame, and the first listing the plan's tasks.
    pub first_frame: Duration,
    pub tasks_shown: Duration,
    pub window: Duration,
    pub usage: Usage,
    /// Frames drawn during the window.
    pub frames: u64,
}

/// Transactions per second of idle processes on their own database.
#[derive(Debug, Clone, Serialize)]
pub struct DbLoad {
    pub window: Duration,
    /// `whilly worker` with nothing to claim.
    pub worker_tx_per_s: f64,
    /// `whilly tui` on a paused plan.
    pub console_tx_per_s: f64,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Usage {
    /// CPU used during the window.
    pub cpu: Duration,
    pub rss_kib: u64,
    pub peak_rss_kib: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct FirstFrameFigures {
    pub tasks: usize,
    pub runs: Vec<FirstFrame>,
    /// The same with a one-task plan: the console's start-up floor.
    pub floor: Vec<FirstFrame>,
}

/// Since the binary was started.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FirstFrame {
    /// The first complete frame (drawn before the queue has answered).
    pub first: Duration,
    /// The first frame showing the plan (its id in the header, its tasks listed).
    pub plan_shown: Duration,
}

impl DrainFigures {
    pub fn total_bytes(&self) -> u64 {
        self.bytes_per_pane * self.logged.len().max(self.done) as u64
    }

    /// Every task DONE and every agent's log holding at least the stream.
    pub fn drained_all(&self, panes: usize) -> bool {
        self.done == panes
            && self.logged.len() == panes
            && self.logged.iter().all(|b| *b >= self.bytes_per_pane)
    }

    /// tmux's time over whilly's (above 1: the console drained faster).
    pub fn ratio(&self, tmux: &TmuxRun) -> f64 {
        ratio(tmux.took.as_secs_f64(), self.whilly.as_secs_f64())
    }
}

impl Usage {
    pub fn cpu_pct(&self, window: Duration) -> f64 {
        ratio(self.cpu.as_secs_f64(), window.as_secs_f64()) * 100.0
    }

    pub fn rss_mb(&self) -> f64 {
        self.rss_kib as f64 * 1024.0 / 1e6
    }

    pub fn peak_mb(&self) -> f64 {
        self.peak_rss_kib as f64 * 1024.0 / 1e6
    }
}

impl FirstFrameFigures {
    pub fn median(runs: &[FirstFrame]) -> Option<FirstFrame> {
        let mid = |mut v: Vec<Duration>| {
            v.sort();
            v.get(v.len() / 2).copied()
        };
        Some(FirstFrame {
            first: mid(runs.iter().map(|r| r.first).collect())?,
            plan_shown: mid(runs.iter().map(|r| r.plan_shown).collect())?,
        })
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { f64::INFINITY }
}

fn met(ok: bool) -> &'static str {
    if ok { "met" } else { "NOT met" }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mb_s(bytes: u64, d: Duration) -> f64 {
    ratio(bytes as f64, d.as_secs_f64()) / 1e6
}

impl fmt::Display for ConsoleBenchReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "console bench: the real `whilly tui` in a {}×{} terminal, {} panes",
            self.cols, self.rows, self.panes
        )?;
        if let Some(note) = &self.tmux_note {
            writeln!(f, "  (tmux not measured: {note})")?;
        }
        if let Some(d) = &self.drain {
            d.write(f, self.panes)?;
        }
        if let Some(i) = &self.idle {
            i.write(f, self.panes)?;
        }
        if let Some(t) = &self.first_frame {
            t.write(f)?;
        }
        for (i, b) in self.big_idle.iter().enumerate() {
            write_big_idle(f, b, i > 0)?;
        }
        if let Some(d) = &self.live_big {
            write_live_big(f, d, self.panes, self.live_big_tasks)?;
        }
        if let Some(l) = &self.db_load {
            write_db_load(f, l)?;
        } else if let Some(note) = &self.db_note {
            writeln!(f, "  idle database load: not measured ({note})")?;
        }
        Ok(())
    }
}

/// `huge`: the 100,000-task case, with its own targets.
fn write_big_idle(f: &mut fmt::Formatter<'_>, b: &BigIdle, huge: bool) -> fmt::Result {
    let cpu = b.usage.cpu_pct(b.window);
    let rss = b.usage.rss_mb();
    writeln!(
        f,
        "  idle on a paused {}-task plan, nothing running; {:.0} s window",
        b.tasks,
        b.window.as_secs_f64()
    )?;
    let (cpu_target, rss_target) = if huge {
        (TARGET_HUGE_IDLE_CPU_PCT, None)
    } else {
        (TARGET_BIG_IDLE_CPU_PCT, Some(TARGET_BIG_IDLE_RSS_MB))
    };
    writeln!(
        f,
        "    CPU:    whilly {cpu:.2} % of a core ({} frames)   (target < {cpu_target} %: {})",
        b.frames,
        met(cpu < cpu_target)
    )?;
    write!(
        f,
        "    memory: whilly {rss:.1} MB RSS (peak {:.1} MB)",
        b.usage.peak_mb()
    )?;
    match rss_target {
        Some(t) => writeln!(f, "   (target < {t} MB: {})", met(rss < t))?,
        None => writeln!(f)?,
    }
    write!(
        f,
        "    start → first frame {:.0} ms, → tasks listed {:.0} ms",
        ms(b.first_frame),
        ms(b.tasks_shown)
    )?;
    if huge {
        writeln!(
            f,
            "   (target < {TARGET_HUGE_FIRST_FRAME_MS} ms for the first frame: {})",
            met(ms(b.first_frame) < TARGET_HUGE_FIRST_FRAME_MS)
        )
    } else {
        writeln!(f)
    }
}

fn write_live_big(
    f: &mut fmt::Formatter<'_>,
    d: &DrainFigures,
    panes: usize,
    tasks: usize,
) -> fmt::Result {
    let total = d.bytes_per_pane * panes as u64;
    writeln!(
        f,
        "  live panes on a big plan: {panes} drain agents in a {tasks}-task plan (the rest DONE)"
    )?;
    writeln!(
        f,
        "    whilly console  first start → last DONE {:>7.2} s {:>6.1} MB/s  (cpu {:.1} s; {} frames)",
        d.whilly.as_secs_f64(),
        mb_s(total, d.whilly),
        d.whilly_cpu.as_secs_f64(),
        d.frames
    )?;
    for (name, run) in [
        ("tmux detached", d.tmux_detached),
        ("tmux attached", d.tmux_attached),
    ] {
        if let Some(t) = run {
            let r = d.ratio(&t);
            writeln!(
                f,
                "    {name} (same run) {:>7.2} s  whilly/tmux {r:.2}× (target ≥ {TARGET_LIVE_BIG_RATIO}×: {})",
                t.took.as_secs_f64(),
                met(r >= TARGET_LIVE_BIG_RATIO)
            )?;
        }
    }
    writeln!(
        f,
        "    drained: {} of {panes} tasks DONE (each log ≥ {} bytes: {})",
        d.done,
        d.bytes_per_pane,
        if d.drained_all(panes) { "yes" } else { "NO" }
    )
}

fn write_db_load(f: &mut fmt::Formatter<'_>, l: &DbLoad) -> fmt::Result {
    writeln!(
        f,
        "  idle database load (Postgres, fresh database, transactions from pg_stat_database over {:.0} s)",
        l.window.as_secs_f64()
    )?;
    for (who, v) in [
        ("`whilly worker`, nothing to claim", l.worker_tx_per_s),
        ("`whilly tui` on a paused plan  ", l.console_tx_per_s),
    ] {
        writeln!(
            f,
            "    {who} {v:.2} transactions/s   (target < {TARGET_IDLE_DB_TX_PER_S}/s: {})",
            met(v < TARGET_IDLE_DB_TX_PER_S)
        )?;
    }
    Ok(())
}

impl DrainFigures {
    fn write(&self, f: &mut fmt::Formatter<'_>, panes: usize) -> fmt::Result {
        let total = self.bytes_per_pane * panes as u64;
        writeln!(
            f,
            "  drain: {panes} × {:.1} MB coloured stream ({:.1} MB), one agent per pane",
            self.bytes_per_pane as f64 / 1e6,
            total as f64 / 1e6
        )?;
        writeln!(
            f,
            "    whilly console  first start → last DONE {:>7.2} s {:>6.1} MB/s  (cpu {:.1} s; {} frames, {:.1} MB to the terminal; {:.2} s from launch)",
            self.whilly.as_secs_f64(),
            mb_s(total, self.whilly),
            self.whilly_cpu.as_secs_f64(),
            self.frames,
            self.terminal_bytes as f64 / 1e6,
            self.whilly_wall.as_secs_f64()
        )?;
        let runs = [
            ("tmux detached  ", self.tmux_detached),
            ("tmux attached  ", self.tmux_attached),
        ];
        for (name, run) in runs {
            if let Some(t) = run {
                let r = self.ratio(&t);
                writeln!(
                    f,
                    "    {name} all `cat`s ended      {:>7.2} s {:>6.1} MB/s  (cpu {:.1} s)  whilly/tmux {r:.2}× (target ≥ {TARGET_DRAIN_RATIO}×: {})",
                    t.took.as_secs_f64(),
                    mb_s(total, t.took),
                    t.cpu.as_secs_f64(),
                    met(r >= TARGET_DRAIN_RATIO)
                )?;
            }
        }
        writeln!(
            f,
            "    drained: {} of {panes} tasks DONE; agent output logs {} (each ≥ {} bytes: {})",
            self.done,
            self.logged
                .iter()
                .map(|b| format!("{:.1} MB", *b as f64 / 1e6))
                .collect::<Vec<_>>()
                .join(", "),
            self.bytes_per_pane,
            if self.drained_all(panes) { "yes" } else { "NO" }
        )
    }
}

impl IdleFigures {
    fn write(&self, f: &mut fmt::Formatter<'_>, panes: usize) -> fmt::Result {
        writeln!(
            f,
            "  idle: {panes} panes, each agent printed {} lines (scrollback {}) then waits; {:.0} s window",
            self.lines_per_pane,
            self.scrollback,
            self.window.as_secs_f64()
        )?;
        let w = &self.whilly;
        let cpu = w.cpu_pct(self.window);
        write!(
            f,
            "    CPU:    whilly {cpu:.2} % of a core ({} frames)",
            self.frames
        )?;
        if let Some(t) = &self.tmux {
            write!(f, "   tmux {:.2} %", t.cpu_pct(self.window))?;
        }
        writeln!(
            f,
            "   (target < {TARGET_IDLE_CPU_PCT} %: {})",
            met(cpu < TARGET_IDLE_CPU_PCT)
        )?;
        writeln!(
            f,
            "            with a spare slot (-j {}): whilly {:.2} % of a core, {:.1} MB RSS",
            panes + 1,
            self.spare_slot.cpu_pct(self.window),
            self.spare_slot.rss_mb()
        )?;
        write!(
            f,
            "    memory: whilly {:.1} MB RSS (peak {:.1} MB)",
            w.rss_mb(),
            w.peak_mb()
        )?;
        if let Some(t) = &self.tmux {
            write!(
                f,
                "   tmux {:.1} MB (peak {:.1} MB), whilly/tmux {:.2}×",
                t.rss_mb(),
                t.peak_mb(),
                ratio(w.rss_mb(), t.rss_mb())
            )?;
        }
        writeln!(
            f,
            "   (target < {TARGET_RSS_MB} MB: {})",
            met(w.rss_mb() < TARGET_RSS_MB)
        )
    }
}

impl FirstFrameFigures {
    fn write(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |runs: &[FirstFrame]| {
            runs.iter()
                .map(|r| format!("{:.0}/{:.0}", ms(r.first), ms(r.plan_shown)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "  start → first frame, {}-task plan (paused), ms first frame / plan on screen:",
            self.tasks
        )?;
        let (Some(m), floor) = (
            FirstFrameFigures::median(&self.runs),
            FirstFrameFigures::median(&self.floor),
        ) else {
            return writeln!(f, "    not measured");
        };
        writeln!(
            f,
            "    median {:.0} / {:.0} ms (runs: {})   (target < {TARGET_FIRST_FRAME_MS} ms for the plan on screen: {})",
            ms(m.first),
            ms(m.plan_shown),
            list(&self.runs),
            met(ms(m.plan_shown) < TARGET_FIRST_FRAME_MS)
        )?;
        if let Some(fl) = floor {
            writeln!(
                f,
                "    1-task plan: median {:.0} / {:.0} ms (runs: {}); {}-task / 1-task {:.2}×",
                ms(fl.first),
                ms(fl.plan_shown),
                list(&self.floor),
                self.tasks,
                ratio(ms(m.plan_shown), ms(fl.plan_shown))
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(whilly_ms: u64, tmux_ms: u64, logged: Vec<u64>) -> DrainFigures {
        DrainFigures {
            bytes_per_pane: 1000,
            whilly: Duration::from_millis(whilly_ms),
            whilly_wall: Duration::from_millis(whilly_ms + 300),
            whilly_cpu: Duration::from_millis(900),
            frames: 40,
            terminal_bytes: 50_000,
            done: logged.len(),
            logged,
            tmux_detached: Some(TmuxRun {
                took: Duration::from_millis(tmux_ms),
                cpu: Duration::from_millis(tmux_ms),
            }),
            tmux_attached: None,
        }
    }

    #[test]
    fn drain_ratio_and_completeness() {
        let d = drain(1000, 2500, vec![1100, 1200]);
        let t = d.tmux_detached.unwrap();
        assert!((d.ratio(&t) - 2.5).abs() < 1e-9);
        assert!(d.drained_all(2));
        assert!(!d.drained_all(3), "a task missing");
        assert!(
            !drain(1000, 900, vec![1100, 999]).drained_all(2),
            "a short log"
        );
    }

    #[test]
    fn medians_take_the_middle_run() {
        let r = |a, b| FirstFrame {
            first: Duration::from_millis(a),
            plan_shown: Duration::from_millis(b),
        };
        let m = FirstFrameFigures::median(&[r(30, 90), r(10, 300), r(20, 100)]).unwrap();
        assert_eq!(m.first, Duration::from_millis(20));
        assert_eq!(m.plan_shown, Duration::from_millis(100));
        assert!(FirstFrameFigures::median(&[]).is_none());
    }

    #[test]
    fn the_report_shows_figures_baselines_and_targets() {
        let report = ConsoleBenchReport {
            panes: 2,
            rows: 60,
            cols: 200,
            drain: Some(drain(1000, 2500, vec![1100, 1200])),
            idle: Some(IdleFigures {
                lines_per_pane: 9000,
                scrollback: 5000,
                window: Duration::from_secs(10),
                whilly: Usage {
                    cpu: Duration::from_millis(50),
                    rss_kib: 80_000,
                    peak_rss_kib: 90_000,
                },
                frames: 10,
                spare_slot: Usage {
                    cpu: Duration::from_millis(20),
                    rss_kib: 70_000,
                    peak_rss_kib: 70_000,
                },
                tmux: Some(Usage {
                    cpu: Duration::from_millis(1),
                    rss_kib: 20_000,
                    peak_rss_kib: 20_000,
                }),
            }),
            first_frame: Some(FirstFrameFigures {
                tasks: 10_000,
                runs: vec![FirstFrame {
                    first: Duration::from_millis(40),
                    plan_shown: Duration::from_millis(150),
                }],
                floor: vec![FirstFrame {
                    first: Duration::from_millis(30),
                    plan_shown: Duration::from_millis(50),
                }],
            }),
            big_idle: vec![super::BigIdle {
                tasks: 10_000,
                first_frame: Duration::from_millis(30),
                tasks_shown: Duration::from_millis(90),
                window: Duration::from_secs(10),
                usage: Usage {
                    cpu: Duration::from_millis(30),
                    rss_kib: 50_000,
                    peak_rss_kib: 60_000,
                },
                frames: 10,
            }],
            live_big: Some(drain(1000, 2000, vec![1100, 1200])),
            live_big_tasks: 10_000,
            db_load: Some(super::DbLoad {
                window: Duration::from_secs(30),
                worker_tx_per_s: 0.4,
                console_tx_per_s: 0.6,
            }),
            db_note: None,
            tmux_note: None,
        };
        let text = report.to_string();
        for needle in [
            "whilly/tmux 2.50×",
            "0.50 % of a core",
            "spare slot (-j 3): whilly 0.20 %",
            "81.9 MB RSS",
            "whilly/tmux 4.00×",
            "median 40 / 150 ms",
            "10000-task / 1-task 3.00×",
            "each ≥ 1000 bytes: yes",
            "paused 10000-task plan",
            "whilly 0.30 % of a core (10 frames)",
            "whilly/tmux 2.00× (target ≥ 1.5×: met)",
            "0.40 transactions/s",
            "0.60 transactions/s",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
        }
        assert!(!text.contains("NOT met"), "{text}");
    }
}
