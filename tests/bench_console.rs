//! `whilly bench console` in miniature: the real binary's console over 2 panes × 1 MB, a short
//! idle window and a small plan, with tmux as the baseline when it is installed.
//! The full measurement: `target/release/whilly bench console` (see docs/benchmarks.md).

use std::time::Duration;
use whilly::bench::console::{ConsoleBenchOptions, run};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_console_bench_drains_everything_and_reports_every_figure() {
    let mut opts = ConsoleBenchOptions::new(env!("CARGO_BIN_EXE_whilly").into());
    opts.panes = 2;
    opts.mb = 1;
    opts.idle_secs = 1;
    opts.first_frame_tasks = 300;
    opts.first_frame_runs = 1;
    let tmux = whilly::bench::console::tmux::available();
    if !tmux {
        eprintln!("tmux is not installed: the console is measured without its tmux baselines");
    }
    let report = run(&opts).await.unwrap();
    let text = report.to_string();
    println!("{text}");

    let drain = report.drain.as_ref().unwrap();
    assert_eq!(drain.bytes_per_pane, 1024 * 1024);
    assert_eq!(drain.done, 2, "both drain tasks DONE");
    assert!(
        drain.drained_all(2),
        "every byte reached the panes: {:?}",
        drain.logged
    );
    assert!(drain.whilly > Duration::ZERO && drain.whilly_wall >= drain.whilly);
    assert!(
        drain.frames > 0 && drain.terminal_bytes > 0,
        "the console drew"
    );
    assert_eq!(drain.tmux_detached.is_some(), tmux);
    assert_eq!(drain.tmux_attached.is_some(), tmux);
    for t in drain.tmux_detached.iter().chain(&drain.tmux_attached) {
        assert!(t.took > Duration::ZERO);
    }
    assert_eq!(report.tmux_note.is_none(), tmux, "{:?}", report.tmux_note);

    let idle = report.idle.as_ref().unwrap();
    assert!(
        idle.lines_per_pane > idle.scrollback,
        "the scrollback is full"
    );
    assert!(idle.whilly.rss_kib > 1000 && idle.spare_slot.rss_kib > 1000);
    assert_eq!(idle.tmux.is_some(), tmux);

    let ff = report.first_frame.as_ref().unwrap();
    assert_eq!((ff.tasks, ff.runs.len(), ff.floor.len()), (300, 1, 1));
    for r in ff.runs.iter().chain(&ff.floor) {
        assert!(r.first > Duration::ZERO && r.plan_shown >= r.first, "{r:?}");
    }

    for needle in [
        "drain: 2 × 1.0 MB",
        "each ≥ 1048576 bytes: yes",
        "% of a core",
        "MB RSS",
        "median",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    if tmux {
        assert!(text.contains("whilly/tmux"), "{text}");
    }
}

#[tokio::test]
async fn bad_sizes_are_refused_before_anything_starts() {
    let mut opts = ConsoleBenchOptions::new(env!("CARGO_BIN_EXE_whilly").into());
    opts.panes = 0;
    let err = run(&opts).await.unwrap_err().to_string();
    assert!(err.contains("--panes"), "{err}");
    opts.panes = 2;
    opts.mb = 0;
    let err = run(&opts).await.unwrap_err().to_string();
    assert!(err.contains("--mb"), "{err}");
}
