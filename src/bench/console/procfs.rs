//! CPU time and memory of a process, read from `/proc` (Linux), so the console is measured as
//! the operating system sees it rather than by instrumenting it.

use std::time::Duration;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ProcSample {
    /// User + system CPU time since the process started (all its threads).
    pub cpu: Duration,
    /// Resident set size now, in KiB.
    pub rss_kib: u64,
    /// Peak resident set size, in KiB.
    pub peak_rss_kib: u64,
}

impl ProcSample {
    /// Adds another process's reading (a tmux server and its client count together).
    pub(crate) fn plus(self, other: ProcSample) -> ProcSample {
        ProcSample {
            cpu: self.cpu + other.cpu,
            rss_kib: self.rss_kib + other.rss_kib,
            peak_rss_kib: self.peak_rss_kib + other.peak_rss_kib,
        }
    }
}

/// Reads `/proc/<pid>/stat` and `/proc/<pid>/status`.
pub(crate) fn sample(pid: u32) -> std::io::Result<ProcSample> {
    let bad = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("/proc/{pid}/{what}: unexpected format"),
        )
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let ticks = cpu_ticks(&stat).ok_or_else(|| bad("stat"))?;
    Ok(ProcSample {
        cpu: ticks_to_duration(ticks, clock_ticks_per_sec()),
        rss_kib: status_kib(&status, "VmRSS").ok_or_else(|| bad("status VmRSS"))?,
        peak_rss_kib: status_kib(&status, "VmHWM").ok_or_else(|| bad("status VmHWM"))?,
    })
}

/// `pid` plus its direct children that run the same program (`comm`): the console is the
/// launcher's child (`cli::launcher`), and both are what the operator pays for; the agents
/// (the console's children) are not counted.
pub(crate) fn sample_with_same_children(pid: u32) -> std::io::Result<ProcSample> {
    let mut total = sample(pid)?;
    for child in same_program_children(pid)? {
        if let Ok(s) = sample(child) {
            total = total.plus(s);
        }
    }
    Ok(total)
}

/// The direct children of `pid` whose `comm` is `pid`'s own.
pub(crate) fn same_program_children(pid: u32) -> std::io::Result<Vec<u32>> {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))?;
    Ok(crate::procinfo::children_of(pid)
        .into_iter()
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/comm")).is_ok_and(|c| c == comm)
        })
        .collect())
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in clock ticks. The command
/// name (field 2) may hold spaces and parentheses, so fields are counted after its last `)`.
pub(crate) fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state is field 3, so utime (14) is the 12th field of the rest.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// A `Key:   1234 kB` line of `/proc/<pid>/status`, in KiB.
pub(crate) fn status_kib(status: &str, key: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let value = line.strip_prefix(key)?.strip_prefix(':')?;
        let mut words = value.split_whitespace();
        let n = words.next()?.parse().ok()?;
        (words.next() == Some("kB")).then_some(n)
    })
}

fn clock_ticks_per_sec() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|h| *h > 0).unwrap_or(100)
}

fn ticks_to_duration(ticks: u64, hz: u64) -> Duration {
    Duration::from_nanos(ticks.saturating_mul(1_000_000_000) / hz.max(1))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An idle `sh` whose child runs `child`; the caller kills and reaps both.
    #[allow(clippy::zombie_processes)]
    fn sh_with_child(child: &str) -> (std::process::Child, u32) {
        let parent = std::process::Command::new("sh")
            .args(["-c", &format!("{child} & wait")])
            .spawn()
            .unwrap();
        let pid = parent.id();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let kids = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            if let Some(kid) = kids.split_whitespace().next() {
                let kid: u32 = kid.parse().unwrap();
                // The child is ready once it runs its own program.
                let comm = std::fs::read_to_string(format!("/proc/{kid}/comm")).unwrap_or_default();
                let want = if child.starts_with("sh ") {
                    "sh\n"
                } else {
                    "sleep\n"
                };
                if comm == want {
                    return (parent, kid);
                }
            }
            assert!(std::time::Instant::now() < deadline, "no child of sh");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn only_children_of_the_same_program_are_added() {
        let (mut other, _) = sh_with_child("sleep 30");
        assert_eq!(
            same_program_children(other.id()).unwrap(),
            Vec::<u32>::new()
        );
        let (mut same, kid) = sh_with_child("sh -c 'sleep 30; true'");
        assert_eq!(same_program_children(same.id()).unwrap(), [kid]);
        assert!(sample_with_same_children(same.id()).unwrap().rss_kib > 0);
        for c in [&mut other, &mut same] {
            let _ = std::process::Command::new("pkill")
                .args(["-P", &c.id().to_string()])
                .status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    #[test]
    fn cpu_ticks_survive_odd_process_names() {
        let stat = "4242 (tokio (rt) x) S 1 4242 4242 34816 4242 4194560 1200 0 0 0 \
                    150 25 3 4 20 0 9 0 12345 1000000 2000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(175));
        assert_eq!(cpu_ticks("garbage"), None);
        assert_eq!(cpu_ticks("1 (x) S 1 2"), None);
    }

    #[test]
    fn status_values_in_kib() {
        let status = "Name:\twhilly\nVmHWM:\t   90112 kB\nVmRSS:\t   81920 kB\nThreads:\t12\n";
        assert_eq!(status_kib(status, "VmRSS"), Some(81920));
        assert_eq!(status_kib(status, "VmHWM"), Some(90112));
        assert_eq!(status_kib(status, "VmSwap"), None);
        assert_eq!(status_kib(status, "Threads"), None, "no unit: not a size");
    }

    #[test]
    fn ticks_convert_at_the_clock_rate() {
        assert_eq!(ticks_to_duration(250, 100), Duration::from_millis(2500));
        assert_eq!(ticks_to_duration(3, 0), Duration::from_secs(3));
    }

    #[test]
    fn this_process_can_be_sampled() {
        let s = sample(std::process::id()).unwrap();
        assert!(s.rss_kib > 0 && s.peak_rss_kib >= s.rss_kib, "{s:?}");
    }
}
