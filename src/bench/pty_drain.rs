//! `whilly bench pty`: how fast a coloured stream drains through PTY + emulator, next to tmux
//! draining the same file, so a slow emulator shows up as a number rather than a feeling.

use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::pty::{PtyError, PtySession, SpawnSpec};

/// Both measurements of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchReport {
    /// Size of the stream drained, in bytes.
    pub bytes: u64,
    pub whilly: Duration,
    /// `None` when tmux is missing or failed (see `tmux_error`).
    pub tmux: Option<Duration>,
    pub tmux_error: Option<String>,
    /// What whilly's emulator showed once the stream was drained: a lost or reordered byte
    /// shows here (compare with the stream replayed straight into an emulator).
    pub whilly_screen: String,
    /// Bytes whilly read from the PTY (the stream plus the `\r` the line discipline adds).
    pub whilly_bytes_read: u64,
}

impl BenchReport {
    pub fn whilly_bytes_per_sec(&self) -> f64 {
        rate(self.bytes, self.whilly)
    }

    pub fn tmux_bytes_per_sec(&self) -> Option<f64> {
        self.tmux.map(|t| rate(self.bytes, t))
    }

    /// whilly's throughput divided by tmux's (above 1: whilly is faster).
    pub fn ratio(&self) -> Option<f64> {
        self.tmux_bytes_per_sec()
            .filter(|t| *t > 0.0)
            .map(|t| self.whilly_bytes_per_sec() / t)
    }
}

impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mb = |r: f64| r / 1e6;
        write!(
            f,
            "{:.1} MB drained: whilly {:.2}s ({:.1} MB/s)",
            self.bytes as f64 / 1e6,
            self.whilly.as_secs_f64(),
            mb(self.whilly_bytes_per_sec())
        )?;
        match (
            self.tmux,
            self.tmux_bytes_per_sec(),
            self.ratio(),
            &self.tmux_error,
        ) {
            (Some(t), Some(r), Some(ratio), _) => {
                write!(
                    f,
                    ", tmux {:.2}s ({:.1} MB/s), whilly/tmux {ratio:.2}x",
                    t.as_secs_f64(),
                    mb(r)
                )
            }
            (_, _, _, Some(err)) => write!(f, ", tmux not measured: {err}"),
            _ => Ok(()),
        }
    }
}

fn rate(bytes: u64, took: Duration) -> f64 {
    let secs = took.as_secs_f64();
    if secs > 0.0 { bytes as f64 / secs } else { 0.0 }
}

/// Writes `mb` MiB of SGR-coloured lines (the kind of output agents produce) to `out`.
pub fn write_coloured_stream(out: &mut impl Write, mb: u64) -> std::io::Result<u64> {
    let mut block = Vec::with_capacity(70 * 1024);
    let mut i = 0u64;
    while block.len() < 64 * 1024 {
        let colour = 31 + i % 6;
        write!(
            block,
            "\x1b[{colour}mline {i:06} \x1b[1;38;5;{}mbold\x1b[0m filler text \x1b[48;5;236m with a background\x1b[0m ....\r\n",
            i % 256
        )?;
        i += 1;
    }
    let total = mb * 1024 * 1024;
    let mut written = 0u64;
    while written < total {
        let n = usize::try_from((total - written).min(block.len() as u64)).unwrap_or(block.len());
        out.write_all(&block[..n])?;
        written += n as u64;
    }
    out.flush()?;
    Ok(written)
}

/// The bench's terminal size, rows × columns.
pub const BENCH_SIZE: (u16, u16) = (50, 200);

/// What draining a stream through whilly took and left.
pub struct Drained {
    pub took: Duration,
    pub screen: String,
    pub bytes_read: u64,
}

/// Drains `file` through a PTY + emulator (`cat file` at 50×200), returning the wall time.
pub async fn drain_through_whilly(file: &Path) -> Result<Drained, PtyError> {
    let started = Instant::now();
    let spec = SpawnSpec::new([std::ffi::OsStr::new("cat"), file.as_os_str()])
        .size(BENCH_SIZE.0, BENCH_SIZE.1);
    let session = PtySession::spawn(spec)?;
    let exit = session.wait().await;
    let took = started.elapsed();
    if exit.code != Some(0) {
        return Err(PtyError::InvalidSpec(format!(
            "cat {} ended with {exit}",
            file.display()
        )));
    }
    Ok(Drained {
        took,
        screen: session.screen_text(),
        bytes_read: session.stats().total_bytes,
    })
}

/// Drains `file` through a private tmux server (`cat file` in a detached 200×50 session),
/// timed until the session signals it is done.
pub async fn drain_through_tmux(file: &Path) -> Result<Duration, String> {
    let socket = format!("whilly-bench-{}", std::process::id());
    let tmux = |args: &[&str]| {
        let mut cmd = tokio::process::Command::new("tmux");
        cmd.args(["-L", &socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .kill_on_drop(true);
        cmd
    };
    let quoted = format!("'{}'", file.display().to_string().replace('\'', r"'\''"));
    let inner = format!("cat {quoted}; tmux -L {socket} wait-for -S done");
    let started = Instant::now();
    let run = async {
        let status = tmux(&["new-session", "-d", "-x", "200", "-y", "50", &inner])
            .status()
            .await
            .map_err(|e| format!("cannot run tmux: {e}"))?;
        if !status.success() {
            return Err(format!("tmux new-session failed: {status}"));
        }
        let status = tmux(&["wait-for", "done"])
            .status()
            .await
            .map_err(|e| format!("tmux wait-for: {e}"))?;
        if !status.success() {
            return Err(format!("tmux wait-for failed: {status}"));
        }
        Ok(started.elapsed())
    };
    let result = run.await;
    // Cleanup of the bench's private tmux server: the measurement is already taken.
    let _ = tmux(&["kill-server"])
        .stderr(std::process::Stdio::null())
        .status()
        .await;
    // kill-server leaves the socket file behind.
    let tmpdir = std::env::var_os("TMUX_TMPDIR").unwrap_or_else(|| "/tmp".into());
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let _ = std::fs::remove_file(Path::new(&tmpdir).join(format!("tmux-{uid}")).join(&socket));
    result
}

/// Generates an `mb` MiB coloured stream once, then drains it through whilly and through tmux.
pub async fn bench_drain(mb: u64) -> Result<BenchReport, PtyError> {
    let io = |what: &str| {
        let what = what.to_string();
        move |source| PtyError::Io { what, source }
    };
    let mut file =
        tempfile::NamedTempFile::new().map_err(io("cannot create the bench stream file"))?;
    let bytes = write_coloured_stream(file.as_file_mut(), mb)
        .map_err(io("cannot write the bench stream"))?;
    let whilly = drain_through_whilly(file.path()).await?;
    let (tmux, tmux_error) = match drain_through_tmux(file.path()).await {
        Ok(t) => (Some(t), None),
        Err(e) => (None, Some(e)),
    };
    Ok(BenchReport {
        bytes,
        whilly: whilly.took,
        tmux,
        tmux_error,
        whilly_screen: whilly.screen,
        whilly_bytes_read: whilly.bytes_read,
    })
}
