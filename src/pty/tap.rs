//! A bounded copy of what a session's emulator is fed, for a viewer in another process (remote
//! panes). The reader thread appends under the emulator's lock, so a snapshot of the screen
//! and the bytes after it always fit together. The copy never slows the agent: past its cap it
//! drops everything and says so, and the viewer resyncs from a fresh snapshot.

use super::spec::TermSize;

pub(crate) struct Tap {
    buf: Vec<u8>,
    cap: usize,
    overflowed: bool,
}

impl Tap {
    pub(crate) fn new(cap: usize) -> Tap {
        Tap {
            buf: Vec::new(),
            cap: cap.max(1),
            overflowed: false,
        }
    }

    /// Keeps `bytes`, or drops all once the cap is passed (until the next snapshot).
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if self.overflowed {
            return;
        }
        if self.buf.len() + bytes.len() > self.cap {
            self.overflowed = true;
            self.buf = Vec::new();
            return;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// What the screen did since it was last asked; a viewer needs a snapshot after an overflow.
    pub(crate) fn take(&mut self) -> TapRead {
        TapRead {
            bytes: std::mem::take(&mut self.buf),
            overflowed: std::mem::replace(&mut self.overflowed, false),
        }
    }

    /// Something happened that bytes cannot tell (a resize): the next read asks for a snapshot.
    pub(crate) fn invalidate(&mut self) {
        self.overflowed = true;
        self.buf = Vec::new();
    }
}

/// The bytes fed to the emulator since the last read.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct TapRead {
    pub bytes: Vec<u8>,
    /// Bytes were dropped (the reader fell behind, or the screen was resized): resync.
    pub overflowed: bool,
}

/// The screen as escape sequences that redraw it (contents, attributes, cursor, input modes)
/// on an emulator of `size`; the tap's bytes continue from exactly here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScreenSnapshot {
    pub bytes: Vec<u8>,
    pub size: TermSize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_bytes_until_the_cap_then_asks_for_a_resync() {
        let mut t = Tap::new(8);
        t.push(b"abc");
        t.push(b"def");
        assert_eq!(
            t.take(),
            TapRead {
                bytes: b"abcdef".to_vec(),
                overflowed: false
            }
        );
        t.push(b"12345");
        t.push(b"6789");
        t.push(b"x");
        let r = t.take();
        assert!(r.overflowed && r.bytes.is_empty(), "{r:?}");
        t.push(b"y");
        assert_eq!(t.take().bytes, b"y");
        t.push(b"z");
        t.invalidate();
        let r = t.take();
        assert!(r.overflowed && r.bytes.is_empty());
    }
}
