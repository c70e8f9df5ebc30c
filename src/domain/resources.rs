//! Whether an error says the system ran out of something a spawn or a git write needs (file
//! descriptors, processes, memory, pseudo-terminals): nothing a task did, so not one of its
//! attempts (see `engine::attempt`, `domain::reap::resource_refusal_ends`). Pure.

/// EMFILE, ENFILE, EAGAIN, ENOMEM.
const ERRNOS: [i32; 4] = [libc::EMFILE, libc::ENFILE, libc::EAGAIN, libc::ENOMEM];

/// How those errors read once a library turned them into text.
const TEXTS: [&str; 5] = [
    "Too many open files",
    "Resource temporarily unavailable",
    "Cannot allocate memory",
    "out of pty devices",
    "out of memory",
];

pub(crate) fn is_resource_errno(errno: i32) -> bool {
    ERRNOS.contains(&errno)
}

pub(crate) fn is_resource_text(text: &str) -> bool {
    TEXTS.iter().any(|t| text.contains(t))
}

pub(crate) fn is_resource_io(e: &std::io::Error) -> bool {
    e.raw_os_error().is_some_and(is_resource_errno)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descriptors_processes_and_memory_are_resources_a_missing_file_is_not() {
        assert!(is_resource_io(&std::io::Error::from_raw_os_error(
            libc::EMFILE
        )));
        assert!(!is_resource_io(&std::io::Error::from_raw_os_error(
            libc::ENOENT
        )));
        assert!(is_resource_text(
            "could not open '.git/packed-refs': Too many open files; class=Os (2)"
        ));
        assert!(!is_resource_text("No such file or directory (os error 2)"));
    }
}
