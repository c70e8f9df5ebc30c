//! Process relations read from `/proc` (Linux): who is whose child, who is in a process group,
//! where a process works.

/// The parent pid (field 4) of a `/proc/<pid>/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub(crate) fn parent_pid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The live direct children of `pid` (zombies included: they still need reaping).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    let Ok(read) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    read.flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .is_ok_and(|stat| parent_pid(&stat) == Some(pid))
        })
        .collect()
}

/// Live (non-zombie) members of process group `pgid`, from /proc. Used to tell whether signals
/// still have something to reach, and by tests to prove nothing was orphaned.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // The command name is in parentheses and may contain anything; fields follow the last ')'.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let group = fields.next().and_then(|s| s.parse::<i32>().ok());
        if group == Some(pgid) && !matches!(state, Some("Z" | "X")) {
            members.push(pid);
        }
    }
    members
}

/// Whether any process this user can see has `path` open (its `/proc/<pid>/fd` links).
pub(crate) fn held_open(path: &std::path::Path) -> bool {
    let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs
        .flatten()
        .filter(|p| {
            p.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|p| std::fs::read_dir(p.path().join("fd")).ok())
        .flat_map(|fds| fds.flatten())
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|target| target == path))
}

/// True when `pid`'s working directory is `dir` or inside it (false when it cannot be read).
pub(crate) fn cwd_within(pid: i32, dir: &std::path::Path) -> bool {
    let Ok(cwd) = std::fs::read_link(format!("/proc/{pid}/cwd")) else {
        return false;
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    cwd.starts_with(&dir)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parent_pid_is_the_fourth_field() {
        let stat = "4242 (what (a) name) S 17 4242 4242 0 -1 0";
        assert_eq!(parent_pid(stat), Some(17));
        assert_eq!(parent_pid("garbage"), None);
    }

    #[test]
    fn an_open_file_is_seen_held_and_a_closed_one_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.lock");
        let f = std::fs::File::create(&path).unwrap();
        assert!(held_open(&path));
        drop(f);
        assert!(!held_open(&path));
    }

    #[test]
    fn a_spawned_child_is_listed() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        assert!(children_of(std::process::id()).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(!children_of(std::process::id()).contains(&child.id()));
    }
}

/// The `read`-family system calls (`read`, `readv`, `pread64`) on this architecture.
#[cfg(target_arch = "x86_64")]
const READ_CALLS: &[i64] = &[0, 19, 17];
#[cfg(target_arch = "aarch64")]
const READ_CALLS: &[i64] = &[63, 65, 67];
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const READ_CALLS: &[i64] = &[];

/// Whether `pid` sleeps in a `read` of `tty`: a program waiting for someone to type. Taken from
/// `/proc/<pid>/syscall` (the call it is blocked in and its first argument, the fd) and the fd's
/// link, never from what is on its screen. A program that waits in `poll`/`select`/`epoll`
/// (readline, event loops) is not seen: which fds those wait for is in its memory, not in /proc.
pub(crate) fn blocked_reading(pid: i32, tty: &std::path::Path) -> bool {
    let Ok(call) = std::fs::read_to_string(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let Some((nr, fd)) = read_call(&call) else {
        return false;
    };
    if !READ_CALLS.contains(&nr) {
        return false;
    }
    std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|target| target == tty)
}

/// The call number and first argument of a `/proc/<pid>/syscall` line (`running` and `-1` for
/// a process not in a call give `None`).
pub(crate) fn read_call(line: &str) -> Option<(i64, u64)> {
    let mut f = line.split_whitespace();
    let nr: i64 = f.next()?.parse().ok()?;
    if nr < 0 {
        return None;
    }
    let arg = f.next()?;
    let fd = u64::from_str_radix(arg.trim_start_matches("0x"), 16).ok()?;
    Some((nr, fd))
}

#[cfg(test)]
mod syscall_tests {
    use super::*;

    #[test]
    fn syscall_lines_parse_or_say_nothing() {
        assert_eq!(
            read_call("0 0x0 0x7ffd1e 0x1 0x0 0x0 0x0 0x7ffd 0x7f12"),
            Some((0, 0))
        );
        assert_eq!(
            read_call("7 0x5 0x1 0xffffffff 0 0 0 0x7ffd 0x7f12"),
            Some((7, 5))
        );
        assert_eq!(read_call("running"), None);
        assert_eq!(read_call("-1 0x7ffd 0x7f12"), None);
        assert_eq!(read_call(""), None);
    }

    /// A real child blocked reading a real terminal is seen; the same child sleeping is not.
    #[test]
    fn a_process_reading_its_terminal_is_seen_from_proc() {
        use std::process::{Command, Stdio};
        let pty = nix::pty::openpty(None, None).expect("openpty");
        let tty = std::fs::read_link(format!(
            "/proc/self/fd/{}",
            std::os::fd::AsRawFd::as_raw_fd(&pty.slave)
        ))
        .expect("tty path");
        let stdin = std::fs::File::from(pty.slave.try_clone().expect("dup"));
        let mut reader = Command::new("head")
            .args(["-c", "1"])
            .stdin(Stdio::from(stdin))
            .stdout(Stdio::null())
            .spawn()
            .expect("head");
        let pid = reader.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !blocked_reading(pid, &tty) {
            assert!(
                std::time::Instant::now() < deadline,
                "never seen reading {tty:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = reader.kill();
        let _ = reader.wait();
        let mut sleeper = Command::new("sleep").arg("5").spawn().expect("sleep");
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(!blocked_reading(sleeper.id() as i32, &tty));
        let _ = sleeper.kill();
        let _ = sleeper.wait();
    }
}
