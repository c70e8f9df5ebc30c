//! Runs the configured setup command in a fresh worktree: `sh -c`, its own process group (so a
//! timeout kills everything it started), stdout and stderr captured together.

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use super::error::WorkspaceError;

/// Only the tail is kept: a chatty `npm ci` must not fill memory, and the end holds the error.
const OUTPUT_LIMIT: usize = 64 * 1024;

/// What a successful run printed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SetupOutput {
    pub output: String,
}

pub(super) fn run_setup(
    command: &str,
    dir: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Result<SetupOutput, WorkspaceError> {
    let (mut reader, writer) =
        std::io::pipe().map_err(WorkspaceError::io("could not create a pipe for", dir))?;
    let writer2 = writer
        .try_clone()
        .map_err(WorkspaceError::io("could not create a pipe for", dir))?;
    // Through the guard: if whilly is killed, the setup's process group goes with it.
    let mut cmd = crate::procguard::std_command("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2);
    for (k, v) in env {
        cmd.env(k, v);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd.spawn().map_err(WorkspaceError::io(
        "could not start `sh` for the setup command in",
        dir,
    ))?;
    // The Command holds the pipe's write ends; dropping it lets the reader see EOF.
    drop(cmd);
    let pid = child.id();

    let (out_tx, out_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            match reader.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.len() > 2 * OUTPUT_LIMIT {
                        buf.drain(..buf.len() - OUTPUT_LIMIT);
                    }
                }
            }
        }
        // The receiver is gone only after it gave up waiting: the output is not wanted then.
        let _ = out_tx.send(buf);
    });
    let (status_tx, status_rx) = mpsc::channel();
    std::thread::spawn(move || {
        // Likewise: nobody waits for the status of a setup that already timed out.
        let _ = status_tx.send(child.wait());
    });

    let status = status_rx.recv_timeout(timeout);
    // Whatever the outcome, nothing the setup started may outlive it holding our pipe open.
    crate::procguard::kill_group(pid);
    let output = tail(
        out_rx
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default(),
    );
    match status {
        Ok(Ok(st)) if st.success() => Ok(SetupOutput { output }),
        Ok(Ok(st)) => Err(WorkspaceError::SetupFailed {
            command: command.to_string(),
            status: st.to_string(),
            dir: dir.to_path_buf(),
            output,
        }),
        Ok(Err(e)) => Err(WorkspaceError::Io {
            what: "could not wait for the setup command in",
            path: dir.to_path_buf(),
            source: e,
        }),
        Err(_) => {
            // The waiter thread reaps the killed shell.
            Err(WorkspaceError::SetupTimedOut {
                command: command.to_string(),
                timeout,
                dir: dir.to_path_buf(),
                output,
            })
        }
    }
}

fn tail(mut buf: Vec<u8>) -> String {
    if buf.len() > OUTPUT_LIMIT {
        buf.drain(..buf.len() - OUTPUT_LIMIT);
    }
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn captures_output_and_env() {
        let dir = tempfile::tempdir().unwrap();
        let out = run_setup(
            "echo out; echo err >&2; echo $WHILLY_X; pwd",
            dir.path(),
            &[("WHILLY_X", "hello")],
            Duration::from_secs(20),
        )
        .unwrap();
        assert!(out.output.contains("out\n"), "{}", out.output);
        assert!(out.output.contains("err\n"), "{}", out.output);
        assert!(out.output.contains("hello\n"), "{}", out.output);
    }

    #[test]
    fn failure_carries_output() {
        let dir = tempfile::tempdir().unwrap();
        let err = run_setup(
            "echo broken-dep; exit 3",
            dir.path(),
            &[],
            Duration::from_secs(20),
        )
        .unwrap_err();
        match err {
            WorkspaceError::SetupFailed { output, status, .. } => {
                assert!(output.contains("broken-dep"));
                assert!(status.contains('3'), "{status}");
            }
            other => panic!("{other}"),
        }
    }

    #[test]
    fn timeout_kills_the_group() {
        let dir = tempfile::tempdir().unwrap();
        let start = std::time::Instant::now();
        let err = run_setup(
            "echo started; sleep 30 & sleep 30",
            dir.path(),
            &[],
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(
            matches!(&err, WorkspaceError::SetupTimedOut { output, .. } if output.contains("started")),
            "{err}"
        );
        assert!(start.elapsed() < Duration::from_secs(10));
    }
}
