//! Process relations read from `/proc` (Linux): who is whose child, who is in a process group,
//! where a process works.

/// The parent pid (field 4) of a `/proc/<pid>/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parent_pid(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The live direct children of `pid` (zombies included: they still need reaping).
pub fn children_of(pid: u32) -> Vec<u32> {
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

/// True when `pid`'s working directory is `dir` or inside it (false when it cannot be read).
pub fn cwd_within(pid: i32, dir: &std::path::Path) -> bool {
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
