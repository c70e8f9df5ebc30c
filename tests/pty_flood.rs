//! 100 MB through a real PTY: the log keeps every byte, memory stays bounded. Its own test binary
//! so the RSS figures are not mixed with other tests.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use whilly::pty::{PtySession, SpawnSpec};

const MIB: u64 = 1024 * 1024;
const TAIL: &[u8] = b"\x1b[0mFLOOD-DONE\r\n";

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mb_flood_keeps_memory_bounded_and_the_log_complete() {
    // WHILLY_FLOOD_MB shortens local runs; the default is the 100 MB the module promises.
    let mb: u64 = std::env::var("WHILLY_FLOOD_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("logs/flood.log");
    let agent: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "fake_agents",
        "flood.py",
    ]
    .iter()
    .collect();
    let rss_before = status_kib("VmRSS:");
    let started = Instant::now();
    let spec = SpawnSpec::new([agent.into_os_string(), mb.to_string().into()])
        .size(50, 200)
        .log_path(&log);
    let session = PtySession::spawn(spec).unwrap();

    // Sample RSS while the flood runs.
    let mut rss_max = rss_before;
    let exit = loop {
        rss_max = rss_max.max(status_kib("VmRSS:"));
        match tokio::time::timeout(Duration::from_millis(200), session.wait()).await {
            Ok(exit) => break exit,
            Err(_) if started.elapsed() > Duration::from_secs(600) => {
                panic!("flood did not finish")
            }
            Err(_) => {}
        }
    };
    rss_max = rss_max.max(status_kib("VmRSS:"));
    let took = started.elapsed();
    let expected = mb * MIB + TAIL.len() as u64;
    let log_len = std::fs::metadata(&log).unwrap().len();
    let stats = session.stats();
    let grew_mib = rss_max.saturating_sub(rss_before) / 1024;
    println!(
        "flood {mb} MiB: {took:?} ({:.1} MB/s), log {log_len} bytes, RSS before {} MiB, max {} MiB (+{grew_mib} MiB), VmHWM {} MiB",
        expected as f64 / took.as_secs_f64() / 1e6,
        rss_before / 1024,
        rss_max / 1024,
        status_kib("VmHWM:") / 1024,
    );
    assert_eq!(exit.code, Some(0), "{exit:?}");
    assert_eq!(log_len, expected, "the log must hold every byte");
    assert_eq!(stats.total_bytes, expected);
    assert!(
        session.screen_text().contains("FLOOD-DONE"),
        "{}",
        session.screen_text()
    );
    assert!(grew_mib < 100, "RSS grew by {grew_mib} MiB");
    // The log tail is the real end of the stream.
    let bytes = std::fs::read(&log).unwrap();
    assert!(bytes.ends_with(TAIL));
}
