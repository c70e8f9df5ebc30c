//! Where a JSON pointer is in the file's text, so problems found on the parsed value can still be
//! shown as `file:line:col` (what editors and terminals make clickable).
//!
//! Runs only on text serde_json already accepted, so the scanner can be simple; it descends only
//! into parts of the document that lead to a wanted pointer.

use super::diagnostic::pointer_join;
use std::collections::{HashMap, HashSet};

/// 1-based line and column (in characters) of each wanted pointer that exists in `text`: the
/// start of the member's key for object members, the start of the value otherwise.
pub(crate) fn locate_pointers(text: &str, wanted: &[&str]) -> HashMap<String, (usize, usize)> {
    let mut out = HashMap::new();
    if wanted.is_empty() {
        return out;
    }
    let want: HashSet<&str> = wanted.iter().copied().collect();
    // Every ancestor of a wanted pointer (including itself), to prune the walk.
    let mut prefixes: HashSet<&str> = HashSet::new();
    for p in &want {
        prefixes.insert(p);
        let mut end = p.len();
        while let Some(i) = p[..end].rfind('/') {
            prefixes.insert(&p[..i]);
            end = i;
        }
    }
    prefixes.insert("");
    let mut s = Scanner {
        b: text.as_bytes(),
        pos: 0,
        line: 1,
        line_start: 0,
        counted_to: 0,
        col: 1,
    };
    s.ws();
    let mut path = String::new();
    s.value(&mut path, &want, &prefixes, &mut out, true);
    out
}

struct Scanner<'a> {
    b: &'a [u8],
    pos: usize,
    line: usize,
    line_start: usize,
    /// Column cache for `here`: the column of byte `counted_to`.
    counted_to: usize,
    col: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    /// The current line and column. Columns are counted on from the last call on the same line,
    /// so a one-line (minified) file is still scanned in linear time.
    fn here(&mut self) -> (usize, usize) {
        let end = self.pos.min(self.b.len());
        if self.counted_to < self.line_start || self.counted_to > end {
            self.counted_to = self.line_start.min(end);
            self.col = 1;
        }
        self.col += self.b[self.counted_to..end]
            .iter()
            .filter(|&&c| c & 0xC0 != 0x80)
            .count();
        self.counted_to = end;
        (self.line, self.col)
    }

    fn ws(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.line_start = self.pos;
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                _ => break,
            }
        }
    }

    /// Skips a string starting at `"`; returns its raw contents (between the quotes).
    fn string(&mut self) -> &str {
        let start = self.pos + 1;
        self.pos += 1;
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                b'\\' => self.pos += 1,
                b'"' => break,
                _ => {}
            }
        }
        let end = self.pos.saturating_sub(1).max(start).min(self.b.len());
        std::str::from_utf8(&self.b[start.min(end)..end]).unwrap_or("")
    }

    /// Skips one value without tracking paths (a subtree no wanted pointer goes into).
    fn skip_value(&mut self) {
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.string();
                    if depth == 0 {
                        return;
                    }
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if depth == 0 {
                        self.pos += 1;
                        return;
                    }
                }
                b',' if depth == 0 => return,
                b'\n' => {
                    self.pos += 1;
                    self.line += 1;
                    self.line_start = self.pos;
                    continue;
                }
                b' ' | b'\t' | b'\r' if depth == 0 => return,
                _ => {}
            }
            self.pos += 1;
        }
    }

    fn value(
        &mut self,
        path: &mut String,
        want: &HashSet<&str>,
        prefixes: &HashSet<&str>,
        out: &mut HashMap<String, (usize, usize)>,
        record: bool,
    ) {
        if record && want.contains(path.as_str()) {
            out.entry(path.clone()).or_insert_with(|| self.here());
        }
        if out.len() >= want.len() {
            // Everything found: stop reading (every caller sees the end of input and returns).
            self.pos = self.b.len();
            return;
        }
        let descend = prefixes.contains(path.as_str());
        match self.peek() {
            Some(b'{') => {
                self.pos += 1;
                loop {
                    self.ws();
                    match self.peek() {
                        Some(b'"') => {}
                        Some(b'}') | None => {
                            self.pos += 1;
                            return;
                        }
                        Some(_) => self.pos += 1,
                    }
                    if self.peek() != Some(b'"') {
                        continue;
                    }
                    let key_at = if descend { Some(self.here()) } else { None };
                    let raw = self.string().to_string();
                    let key = if raw.contains('\\') {
                        serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap_or(raw)
                    } else {
                        raw
                    };
                    self.ws();
                    if self.peek() == Some(b':') {
                        self.pos += 1;
                    }
                    self.ws();
                    if descend {
                        let len = path.len();
                        *path = pointer_join(path, &key);
                        if let Some(at) = key_at
                            && want.contains(path.as_str())
                        {
                            out.entry(path.clone()).or_insert(at);
                        }
                        self.value(path, want, prefixes, out, false);
                        path.truncate(len);
                    } else {
                        self.skip_value();
                    }
                    self.ws();
                    if self.peek() == Some(b',') {
                        self.pos += 1;
                    }
                }
            }
            Some(b'[') => {
                self.pos += 1;
                let mut i = 0usize;
                loop {
                    self.ws();
                    match self.peek() {
                        Some(b']') | None => {
                            self.pos += 1;
                            return;
                        }
                        _ => {}
                    }
                    if descend {
                        let len = path.len();
                        path.push('/');
                        path.push_str(&i.to_string());
                        self.value(path, want, prefixes, out, true);
                        path.truncate(len);
                    } else {
                        self.skip_value();
                    }
                    i += 1;
                    self.ws();
                    if self.peek() == Some(b',') {
                        self.pos += 1;
                    }
                }
            }
            Some(b'"') => {
                self.string();
            }
            Some(_) => {
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n') {
                        break;
                    }
                    self.pos += 1;
                }
            }
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_keys_and_elements() {
        let text = "{\n  \"project\": \"проект\",\n  \"tasks\": [\n    {\"id\": \"A\", \"deps\": [\"x\", 5]},\n    {\"id\": \"B\", \"a/b\": 1}\n  ]\n}";
        let got = locate_pointers(
            text,
            &[
                "",
                "/project",
                "/tasks/0/deps/1",
                "/tasks/1",
                "/tasks/1/id",
                "/tasks/1/a~1b",
                "/nope",
            ],
        );
        assert_eq!(got.get(""), Some(&(1, 1)));
        assert_eq!(got.get("/project"), Some(&(2, 3)));
        assert_eq!(got.get("/tasks/0/deps/1"), Some(&(4, 31)));
        assert_eq!(got.get("/tasks/1"), Some(&(5, 5)));
        assert_eq!(got.get("/tasks/1/id"), Some(&(5, 6)));
        assert_eq!(got.get("/tasks/1/a~1b"), Some(&(5, 17)));
        assert_eq!(got.get("/nope"), None);
    }

    #[test]
    fn columns_count_characters_after_cyrillic() {
        let text = "{\"описание\": 1, \"x\": 2}";
        let got = locate_pointers(text, &["/x"]);
        assert_eq!(got.get("/x"), Some(&(1, 17)));
    }

    #[test]
    fn escaped_keys_are_decoded() {
        let text = r#"{"a\"b": {"c": 1}}"#;
        let got = locate_pointers(text, &["/a\"b/c"]);
        assert_eq!(got.get("/a\"b/c"), Some(&(1, 11)));
    }
}
