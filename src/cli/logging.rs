//! Logs go to a daily-rotated file under `.whilly/logs/`, never to the terminal (a TUI owns it).

use std::path::Path;
use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;

/// Where logs go and at what level: `[logging] dir` (relative to the repository root) and
/// `level`; the defaults (`.whilly/logs`, `info`) when the configuration does not load (the
/// command says why on its own).
pub(crate) fn settings(ctx: &super::context::Context) -> (std::path::PathBuf, String) {
    let default = crate::config::LoggingConfig::default();
    let logging = ctx.config().map(|c| c.logging).unwrap_or(default);
    let dir = if logging.dir.is_absolute() {
        logging.dir
    } else {
        ctx.repo_root.join(logging.dir)
    };
    (dir, logging.level)
}

/// Starts file logging. `WHILLY_LOG` (an env-filter directive such as `debug` or
/// `whilly=trace`) overrides `default_level`. Returns the guard that flushes on drop; `None` when
/// the log directory cannot be created (logging is then off rather than failing the command).
pub(crate) fn init(dir: &Path, default_level: &str) -> Option<WorkerGuard> {
    if crate::fsutil::private_dir(dir).is_err() {
        return None;
    }
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("whilly")
        .filename_suffix("log")
        .max_log_files(14)
        .build(dir)
        .ok()?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let filter = std::env::var("WHILLY_LOG")
        .ok()
        .and_then(|v| EnvFilter::try_new(v).ok())
        .or_else(|| EnvFilter::try_new(default_level).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let installed = tracing_subscriber::fmt()
        .with_writer(writer)
        .with_ansi(false)
        .with_env_filter(filter)
        .try_init()
        .is_ok();
    installed.then_some(guard)
}
