//! The PTY throughput benchmark, next to tmux. Ignored by default (it is a measurement):
//! `cargo test --release --test pty_bench -- --ignored --nocapture`.

use whilly::bench::pty_drain::{bench_drain, write_coloured_stream};

#[test]
fn the_coloured_stream_has_the_size_asked_for() {
    let mut out = Vec::new();
    assert_eq!(write_coloured_stream(&mut out, 1).unwrap(), 1024 * 1024);
    assert_eq!(out.len(), 1024 * 1024);
    assert!(out.starts_with(b"\x1b[31mline 000000 "));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_drain_loses_no_byte() {
    let report = bench_drain(1).await.unwrap();
    println!("{report}");
    assert_eq!(report.bytes, 1024 * 1024);
    // Every byte went through: the PTY read all of the stream, and the emulator shows what
    // the stream replayed straight into an emulator of the same size shows.
    assert!(
        report.whilly_bytes_read >= report.bytes,
        "read {} of {} bytes",
        report.whilly_bytes_read,
        report.bytes
    );
    let mut stream = Vec::new();
    write_coloured_stream(&mut stream, 1).unwrap();
    let (rows, cols) = whilly::bench::pty_drain::BENCH_SIZE;
    let mut direct = whilly::pty::Emulator::new(whilly::pty::TermSize::new(rows, cols), 0);
    direct.process(&stream);
    assert_eq!(report.whilly_screen, direct.screen_text());
    assert!(
        report.whilly_screen.contains("line "),
        "{}",
        report.whilly_screen
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: run with --release --ignored --nocapture"]
async fn bench_30_mb_against_tmux() {
    let report = bench_drain(30).await.unwrap();
    println!("{report}");
    println!(
        "whilly {:.1} MB/s, tmux {:?} MB/s, ratio {:?}",
        report.whilly_bytes_per_sec() / 1e6,
        report
            .tmux_bytes_per_sec()
            .map(|r| (r / 1e6 * 10.0).round() / 10.0),
        report.ratio().map(|r| (r * 100.0).round() / 100.0)
    );
    assert!(report.tmux_error.is_none(), "{:?}", report.tmux_error);
}
