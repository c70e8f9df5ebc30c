//! Process relations read from `/proc` (Linux): who is whose child.

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
