//! Small file-system helpers shared by commands.

use std::io::Write;
use std::path::Path;

/// Creates `dir` (and missing parents) readable by this user only (0700), and narrows it to
/// 0700 when it exists wider: what whilly keeps under `.whilly/` (the queue, its events, attempt
/// logs, prompts, handoffs, logs) is the user's alone, whatever each file's own mode.
pub(crate) fn private_dir(dir: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let meta = std::fs::metadata(dir)?;
        if meta.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)
    }
}

/// Opens `path` for appending, creating it readable by this user only (0600).
pub(crate) fn private_append(path: &Path) -> std::io::Result<std::fs::File> {
    let mut o = std::fs::OpenOptions::new();
    o.create(true).append(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)
}

/// Narrows an existing file to 0600 (files made by libraries that do not take a mode).
pub(crate) fn make_private(path: &Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(())
}

/// Writes `bytes` to `path` atomically: a temporary file in the same directory, fsync, rename.
/// A crash leaves either the old file or the new one, never half of either.
pub(crate) fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/out.json");
        atomic_write(&p, b"first").unwrap();
        atomic_write(&p, b"second").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "second");
        assert_eq!(std::fs::read_dir(p.parent().unwrap()).unwrap().count(), 1);
    }
}

/// Why a file written by someone else was not read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UntrustedRead {
    #[error("not found")]
    Missing,
    #[error("it is not a regular file (a {0}); only a regular file is read")]
    NotRegular(&'static str),
    #[error("it is {size} bytes, over the {max}-byte limit")]
    TooLarge { size: u64, max: u64 },
    #[error("cannot read it: {0}")]
    Io(std::io::Error),
}

/// Reads a file that another person or program writes (a handoff answer, a CLI's session file)
/// without trusting it: opened without blocking (a FIFO in its place cannot hang the caller),
/// read only when it is a regular file (not a device such as `/dev/zero`, even through a
/// symlink), and never more than `max` bytes.
pub(crate) fn read_untrusted(path: &Path, max: u64) -> Result<Vec<u8>, UntrustedRead> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => UntrustedRead::Missing,
            _ => UntrustedRead::Io(e),
        })?;
    let meta = file.metadata().map_err(UntrustedRead::Io)?;
    let ft = meta.file_type();
    if !ft.is_file() {
        let what = if ft.is_fifo() {
            "FIFO"
        } else if ft.is_char_device() || ft.is_block_device() {
            "device"
        } else if ft.is_socket() {
            "socket"
        } else if ft.is_dir() {
            "directory"
        } else {
            "special file"
        };
        return Err(UntrustedRead::NotRegular(what));
    }
    if meta.len() > max {
        return Err(UntrustedRead::TooLarge {
            size: meta.len(),
            max,
        });
    }
    let mut out = Vec::with_capacity(meta.len() as usize);
    // The file may grow while it is read: the limit holds anyway.
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(UntrustedRead::Io)?;
    if out.len() as u64 > max {
        return Err(UntrustedRead::TooLarge {
            size: out.len() as u64,
            max,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod untrusted_tests {
    use super::*;

    #[test]
    fn fifos_devices_and_huge_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("result.json");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_untrusted(&fifo, 1024),
            Err(UntrustedRead::NotRegular("FIFO"))
        ));
        let link = dir.path().join("zero");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        assert!(matches!(
            read_untrusted(&link, 1024),
            Err(UntrustedRead::NotRegular("device"))
        ));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'x'; 2048]).unwrap();
        assert!(matches!(
            read_untrusted(&big, 1024),
            Err(UntrustedRead::TooLarge {
                size: 2048,
                max: 1024
            })
        ));
        assert!(matches!(
            read_untrusted(&dir.path().join("none"), 1024),
            Err(UntrustedRead::Missing)
        ));
        std::fs::write(&big, b"{}").unwrap();
        assert_eq!(read_untrusted(&big, 1024).unwrap(), b"{}");
    }
}
