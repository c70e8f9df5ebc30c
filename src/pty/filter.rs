//! An optional display filter between the child's raw output and the emulator: the log and the
//! result parser keep the raw bytes, while the screen shows what the filter makes of each line
//! (Claude's stream-json rendered as a readable transcript).
//!
//! Only lines that start like JSON (`{` after optional blanks) are held back until complete and
//! handed to the filter. Everything else streams through as it arrives: CLI errors stay visible,
//! spinners keep spinning, and a terminal query written without a newline reaches the emulator
//! at once and is answered. A line stops being treated as JSON the moment it shows a byte JSON
//! text cannot hold (a raw control character such as ESC), or grows past [`MAX_HELD_LINE`].
//! CSI sequences at the start of a line (cursor, colour) pass through without deciding it.

use std::fmt;

/// A JSON line longer than this is shown raw rather than held (bounds memory on floods).
pub const MAX_HELD_LINE: usize = 8 * 1024 * 1024;

/// Turns one complete JSON-looking output line into what the screen shows.
pub trait LineFilter: Send {
    /// `line` is the raw line without its terminator (`\n`, and a `\r` before it). Append to
    /// `out` the terminal bytes to display, with `\r\n` line ends; append nothing to hide it.
    fn line(&mut self, line: &[u8], out: &mut Vec<u8>);
}

impl fmt::Debug for dyn LineFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LineFilter")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// At the start of a line, only blanks seen so far (held in `held`).
    Start,
    /// A JSON-looking line, held until its newline.
    Json,
    /// Anything else, streamed through up to and including its newline.
    Raw,
    /// Just after an ESC at the start of a line.
    Escape,
    /// Inside a CSI sequence at the start of a line (cursor and colour codes a CLI may print
    /// before a JSON line): passed on, then the line is looked at again.
    Csi,
}

/// Splits raw output into lines for a [`LineFilter`], passing non-JSON output through.
pub(crate) struct DisplayPipe {
    filter: Box<dyn LineFilter>,
    mode: Mode,
    held: Vec<u8>,
}

impl DisplayPipe {
    pub(crate) fn new(filter: Box<dyn LineFilter>) -> Self {
        Self {
            filter,
            mode: Mode::Start,
            held: Vec::new(),
        }
    }

    /// Feeds one chunk of raw output; appends the bytes to display to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<u8>) {
        let mut rest = chunk;
        while !rest.is_empty() {
            match self.mode {
                Mode::Start => {
                    let b = rest[0];
                    match b {
                        b' ' | b'\t' | b'\r' => {
                            self.held.push(b);
                            rest = &rest[1..];
                        }
                        b'{' => self.mode = Mode::Json,
                        0x1b => {
                            out.append(&mut self.held);
                            out.push(b);
                            rest = &rest[1..];
                            self.mode = Mode::Escape;
                        }
                        _ => {
                            out.append(&mut self.held);
                            self.mode = Mode::Raw;
                        }
                    }
                }
                Mode::Escape => {
                    let b = rest[0];
                    out.push(b);
                    rest = &rest[1..];
                    self.mode = match b {
                        b'[' => Mode::Csi,
                        // OSC and the like can be long: the rest of this line goes through raw.
                        b']' | b'P' | b'_' | b'^' | b'X' => Mode::Raw,
                        _ => Mode::Start,
                    };
                }
                Mode::Csi => match rest.iter().position(|b| (0x40..=0x7e).contains(b)) {
                    Some(i) => {
                        out.extend_from_slice(&rest[..=i]);
                        rest = &rest[i + 1..];
                        self.mode = Mode::Start;
                    }
                    None => {
                        out.extend_from_slice(rest);
                        rest = &[];
                    }
                },
                Mode::Raw => match rest.iter().position(|&b| b == b'\n') {
                    Some(i) => {
                        out.extend_from_slice(&rest[..=i]);
                        rest = &rest[i + 1..];
                        self.mode = Mode::Start;
                    }
                    None => {
                        out.extend_from_slice(rest);
                        rest = &[];
                    }
                },
                Mode::Json => {
                    // Up to the newline, or to the first byte JSON text cannot contain.
                    let stop = rest
                        .iter()
                        .position(|&b| b == b'\n' || (b < 0x20 && b != b'\t' && b != b'\r'));
                    match stop {
                        Some(i) if rest[i] == b'\n' => {
                            self.held.extend_from_slice(&rest[..i]);
                            rest = &rest[i + 1..];
                            self.emit_line(out);
                        }
                        Some(i) => {
                            self.held.extend_from_slice(&rest[..i]);
                            rest = &rest[i..];
                            self.give_up(out);
                        }
                        None => {
                            self.held.extend_from_slice(rest);
                            rest = &[];
                            if self.held.len() > MAX_HELD_LINE {
                                self.give_up(out);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The output has ended: a held partial line is filtered as if complete.
    pub(crate) fn finish(&mut self, out: &mut Vec<u8>) {
        match self.mode {
            Mode::Json => self.emit_line(out),
            Mode::Start | Mode::Raw | Mode::Escape | Mode::Csi => {
                out.append(&mut self.held);
                self.mode = Mode::Start;
            }
        }
    }

    fn emit_line(&mut self, out: &mut Vec<u8>) {
        let mut line = std::mem::take(&mut self.held);
        while matches!(line.last(), Some(b'\r')) {
            line.pop();
        }
        let start = line
            .iter()
            .position(|b| !matches!(b, b' ' | b'\t' | b'\r'))
            .unwrap_or(line.len());
        self.filter.line(&line[start..], out);
        line.clear();
        self.held = line;
        self.mode = Mode::Start;
    }

    /// Not JSON after all: show what was held, stream the rest of the line.
    fn give_up(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.held);
        self.mode = Mode::Raw;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Shows each JSON line as `<len>` so tests see exactly what reached the filter.
    struct Lengths;
    impl LineFilter for Lengths {
        fn line(&mut self, line: &[u8], out: &mut Vec<u8>) {
            out.extend_from_slice(format!("<{}>\r\n", String::from_utf8_lossy(line)).as_bytes());
        }
    }

    fn run(chunks: &[&[u8]]) -> String {
        let mut p = DisplayPipe::new(Box::new(Lengths));
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        p.finish(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn json_lines_are_filtered_whole_across_chunks() {
        assert_eq!(
            run(&[b"{\"a\":", b"1}\r\n  {\"b\"", b":2}\r\n"]),
            "<{\"a\":1}>\r\n<{\"b\":2}>\r\n"
        );
    }

    #[test]
    fn other_output_streams_through_unchanged() {
        assert_eq!(
            run(&[b"error: no", b" key\r\n", b"{\"x\":1}\r\n", b"tail"]),
            "error: no key\r\n<{\"x\":1}>\r\ntail"
        );
        // A query without a newline is passed on at once, not held.
        let mut p = DisplayPipe::new(Box::new(Lengths));
        let mut out = Vec::new();
        p.feed(b"\x1b[6n", &mut out);
        assert_eq!(out, b"\x1b[6n");
    }

    #[test]
    fn control_bytes_end_the_json_guess() {
        assert_eq!(
            run(&[b"{not json\x1b[6n", b"more\r\n"]),
            "{not json\x1b[6nmore\r\n"
        );
        // Escape sequences before a JSON line pass through; the line is still filtered.
        assert_eq!(
            run(&[b"\x1b[?25l\x1b", b"[2K\x1b7{\"a\":1}\r\n"]),
            "\x1b[?25l\x1b[2K\x1b7<{\"a\":1}>\r\n"
        );
        assert_eq!(run(&[b"\x1b]0;t\x07{x\n"]), "\x1b]0;t\x07{x\n");
        // A partial JSON line at the end is still filtered.
        assert_eq!(run(&[b"{\"end\":true}"]), "<{\"end\":true}>\r\n");
    }

    #[test]
    fn overlong_lines_are_shown_raw() {
        let mut p = DisplayPipe::new(Box::new(Lengths));
        let mut out = Vec::new();
        let big = vec![b'x'; MAX_HELD_LINE + 1];
        p.feed(b"{", &mut out);
        p.feed(&big, &mut out);
        assert_eq!(out.len(), MAX_HELD_LINE + 2);
        p.feed(b"y\n{}\n", &mut out);
        assert!(out.ends_with(b"y\n<{}>\r\n"));
    }
}
