//! Strangers on the network cost no work (issue 26, item 1): a run with `--http` beside it,
//! under a tight descriptor limit, while a slowloris client holds hundreds of connections open
//! sending a partial header line now and then. The server drops each slow client after the
//! header timeout, keeps at most `[http] max_connections` open, and every task is DONE.

#[path = "support/engine.rs"]
mod engine;
#[path = "support/http_serve.rs"]
mod http_serve;

use engine::{Repo, plan, task, wait_for};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[test]
fn a_slowloris_client_beside_a_run_fails_no_task() {
    let work = r#"sh -c 'sleep 2; mkdir -p files; echo done > "files/$WHILLY_TASK_ID.txt"; echo "<promise>COMPLETE</promise>"'"#;
    let tasks = (1..=6).map(|i| task(&format!("T-{i}"))).collect();
    let repo = Repo::new(&plan("p", tasks), work);
    let mut cmd = repo.whilly(&[
        "-c",
        "run.parallel=3",
        "-c",
        "http.max_connections=32",
        "-c",
        "http.header_timeout_secs=2",
        "-c",
        "http.token=t0ken-for-the-test",
        "run",
        "plan.json",
        "--headless",
        "--http",
        "127.0.0.1:0",
    ]);
    let out_dir = repo.home.join("outputs");
    std::fs::create_dir_all(&out_dir).unwrap();
    let stderr_path = out_dir.join("run.err");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap());
    // 256 descriptors in all: the 400 connections below would take every one of them.
    // SAFETY: only setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let url = wait_for(Duration::from_secs(20), "the server's address", || {
        http_serve::url_after(
            &std::fs::read_to_string(&stderr_path).unwrap_or_default(),
            "serving ",
        )
    });
    let addr = url.trim_start_matches("http://").to_string();
    // The slowloris: many connections, each sending a few header bytes every half second.
    let mut slow: Vec<TcpStream> = Vec::new();
    let started = Instant::now();
    let mut closed_by_server = 0usize;
    let mut opened = 0usize;
    while child.try_wait().unwrap().is_none() && started.elapsed() < Duration::from_secs(60) {
        while slow.len() < 400 {
            match TcpStream::connect(&addr) {
                Ok(s) => {
                    s.set_nonblocking(true).unwrap();
                    let mut s = s;
                    let _ = s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n");
                    slow.push(s);
                    opened += 1;
                }
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_millis(500));
        slow.retain_mut(|s| {
            let _ = s.write_all(b"X-Slow: 1\r\n");
            let mut b = [0u8; 64];
            match s.read(&mut b) {
                Ok(0) => {
                    closed_by_server += 1;
                    false
                }
                Ok(_) => true,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => true,
                Err(_) => {
                    closed_by_server += 1;
                    false
                }
            }
        });
    }
    let status = wait_for(Duration::from_secs(60), "the run to end", || {
        child.try_wait().unwrap()
    });
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    assert_eq!(status.code(), Some(0), "{stderr}");
    for t in repo.tasks("p") {
        assert_eq!(t["status"], "DONE", "{t}\n{stderr}");
    }
    assert!(
        opened > 400,
        "the client kept opening connections: {opened}"
    );
    assert!(
        closed_by_server > 100,
        "the server dropped slow and surplus clients: {closed_by_server} of {opened}"
    );
}
