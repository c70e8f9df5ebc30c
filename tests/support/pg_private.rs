//! A private throwaway Postgres server for a test binary, started when no server answers at the
//! default test URL (a fresh machine): `initdb` + `pg_ctl` on a temporary directory and a free
//! port, as the pgtemp crate does, stopped and removed when the test binary exits.
//! `WHILLY_TEST_PG_PRIVATE=1` forces it (to test this path on a machine that has a server).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The URL of this binary's private server, started on first use.
pub fn url() -> String {
    static URL: OnceLock<String> = OnceLock::new();
    URL.get_or_init(|| match start() {
        Ok(url) => url,
        Err(e) => panic!(
            "\n\n==== no Postgres for the tests ====\n\
             nothing answers at 127.0.0.1:5432 and a private server could not be started: {e}\n\
             Install PostgreSQL (Debian: apt-get install postgresql), start the local server with\n    \
             pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n\
             or point WHILLY_TEST_PG_URL at a server (trust auth, a user allowed to CREATE DATABASE).\n\
             ===================================\n"
        ),
    })
    .clone()
}

/// Whether a server answers on the default port (a TCP connect, within half a second).
pub fn default_answers() -> bool {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 5432));
    std::net::TcpStream::connect_timeout(&addr, std::time::Duration::from_millis(500)).is_ok()
}

/// The newest installed server's binaries.
fn bin_dir() -> Result<PathBuf, String> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|e| format!("/usr/lib/postgresql: {e}"))?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(_, b)| b)
        .ok_or_else(|| "no initdb under /usr/lib/postgresql/*/bin".to_string())
}

/// Runs `program args` as the `postgres` user when we are root (initdb refuses root).
fn run(program: &Path, args: &[&str]) -> Result<(), String> {
    // SAFETY: getuid cannot fail.
    let root = unsafe { libc::getuid() } == 0;
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    };
    let out = cmd
        .args(args)
        .output()
        .map_err(|e| format!("{}: {e}", program.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} {args:?}: {}{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

static DATA_DIR: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();

extern "C" fn stop_at_exit() {
    if let Some((bin, dir)) = DATA_DIR.get() {
        let d = dir.to_string_lossy();
        let _ = run(
            &bin.join("pg_ctl"),
            &["-D", &d, "-m", "immediate", "-w", "stop"],
        );
        // The data directory's parent holds the socket and the server's log too.
        let _ = std::fs::remove_dir_all(dir.parent().unwrap_or(dir));
    }
}

fn start() -> Result<String, String> {
    let bin = bin_dir()?;
    let dir = std::env::temp_dir().join(format!("whilly-pgtemp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } == 0 {
        let ok = Command::new("chown")
            .args(["postgres:", &dir.to_string_lossy()])
            .status()
            .map_err(|e| format!("chown: {e}"))?;
        if !ok.success() {
            return Err(format!("chown postgres {} failed", dir.display()));
        }
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let d = dir.to_string_lossy().to_string();
    let data = format!("{d}/data");
    run(
        &bin.join("initdb"),
        &[
            "-D",
            &data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        ],
    )?;
    let opts = format!(
        "-p {port} -k {d} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
    );
    run(
        &bin.join("pg_ctl"),
        &[
            "-D",
            &data,
            "-o",
            &opts,
            "-l",
            &format!("{d}/log"),
            "-w",
            "start",
        ],
    )?;
    if DATA_DIR.set((bin, PathBuf::from(&data))).is_ok() {
        // SAFETY: registering a plain function to run at exit.
        unsafe { libc::atexit(stop_at_exit) };
    }
    Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"))
}
