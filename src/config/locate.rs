//! Maps byte offsets in a config file to the dotted key they belong to (for serde errors, which
//! carry a span but not a key) and keys to the line they are written on (for reporting sources).

use super::error::{Origin, Problem, line_col};
use super::schema::join_key;
use std::ops::Range;
use std::path::Path;
use toml_edit::{Item, TableLike};

#[derive(Debug, Clone)]
struct Entry {
    path: Vec<String>,
    key: Option<Range<usize>>,
    value: Option<Range<usize>>,
}

/// Where each key of one file is written.
#[derive(Debug, Clone, Default)]
pub struct SpanIndex {
    entries: Vec<Entry>,
}

impl SpanIndex {
    pub fn build(doc: &toml_edit::Document<String>) -> Self {
        let mut entries = Vec::new();
        walk(doc.as_table(), &mut Vec::new(), &mut entries);
        SpanIndex { entries }
    }

    /// The innermost key whose name or value covers `offset`.
    pub fn key_at(&self, offset: usize) -> Option<&[String]> {
        self.entries
            .iter()
            .flat_map(|e| {
                [e.key.as_ref(), e.value.as_ref()]
                    .into_iter()
                    .flatten()
                    .map(move |r| (e, r))
            })
            .filter(|(_, r)| r.start <= offset && offset < r.end.max(r.start + 1))
            .min_by_key(|(_, r)| r.end - r.start)
            .map(|(e, _)| e.path.as_slice())
    }

    /// Byte offset of the place `path` is written (its key, else its value).
    pub fn offset_of(&self, path: &[String]) -> Option<usize> {
        let e = self.entries.iter().find(|e| e.path == path)?;
        e.key.as_ref().or(e.value.as_ref()).map(|r| r.start)
    }
}

fn walk(table: &dyn TableLike, prefix: &mut Vec<String>, out: &mut Vec<Entry>) {
    for (name, item) in table.iter() {
        let key_span = table.get_key_value(name).and_then(|(k, _)| k.span());
        prefix.push(name.to_string());
        out.push(Entry {
            path: prefix.clone(),
            key: key_span,
            value: item.span(),
        });
        match item {
            Item::Table(t) => walk(t, prefix, out),
            Item::Value(toml_edit::Value::InlineTable(t)) => walk(t, prefix, out),
            _ => {}
        }
        prefix.pop();
    }
}

/// A file parsed for layering: its TOML table plus where each key is.
#[derive(Debug, Clone)]
pub struct ParsedFile {
    pub table: toml::Table,
    pub index: SpanIndex,
    pub text: String,
}

impl ParsedFile {
    /// 1-based line and column of `path` in this file (1:1 when it cannot be found).
    pub fn position(&self, path: &[String]) -> (usize, usize) {
        self.index
            .offset_of(path)
            .map_or((1, 1), |o| line_col(&self.text, o))
    }
}

/// Parses `text` (the contents of `path`) as a config file and checks it against the typed
/// config, so an unknown key or a wrong type is reported with this file, the key and the line.
pub(super) fn parse_config_file(path: &Path, text: String) -> Result<ParsedFile, Problem> {
    let at = |offset: usize| {
        let (line, col) = line_col(&text, offset);
        Origin::File {
            path: path.to_path_buf(),
            line,
            col,
        }
    };
    let doc = match toml_edit::Document::parse(text.clone()) {
        Ok(doc) => doc,
        Err(e) => {
            let offset = e.span().map_or(0, |s| s.start);
            return Err(Problem {
                origin: at(offset),
                key: String::new(),
                message: first_line(e.message()),
            });
        }
    };
    let index = SpanIndex::build(&doc);
    if let Err(e) = toml::from_str::<super::model::Config>(&text) {
        let offset = e.span().map_or(0, |s| s.start);
        let key = index.key_at(offset).map(join_key).unwrap_or_default();
        return Err(Problem {
            origin: at(offset),
            key,
            message: describe_serde(e.message()),
        });
    }
    let table: toml::Table = toml::from_str(&text).map_err(|e| Problem {
        origin: at(0),
        key: String::new(),
        message: first_line(e.message()),
    })?;
    Ok(ParsedFile { table, index, text })
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or(message).trim().to_string()
}

/// serde's "unknown field `x`, expected one of …" is accurate; add what to do about it.
fn describe_serde(message: &str) -> String {
    let message = first_line(message);
    if message.starts_with("unknown field `max_attempts`") && message.contains("backoff_secs") {
        format!(
            "unknown key: {message} ([retry] max_attempts was read by nothing and is gone: the attempts per task are [queue] default_max_attempts, or a task's max_attempts)"
        )
    } else if message.starts_with("unknown field") {
        format!("unknown key: {message} (see whilly.example.toml for every key)")
    } else {
        message
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_key_at_an_offset() {
        let text = "[queue]\nlease_secs = 30\n\n[agents.claude]\nmodel = \"opus\"\n".to_string();
        let doc = toml_edit::Document::parse(text.clone()).unwrap();
        let index = SpanIndex::build(&doc);
        let at = |needle: &str| text.find(needle).unwrap();
        assert_eq!(
            index.key_at(at("30")).map(join_key).as_deref(),
            Some("queue.lease_secs")
        );
        assert_eq!(
            index.key_at(at("\"opus\"")).map(join_key).as_deref(),
            Some("agents.claude.model")
        );
        let pos = index
            .offset_of(&["agents".into(), "claude".into(), "model".into()])
            .unwrap();
        assert_eq!(line_col(&text, pos), (5, 1));
    }

    #[test]
    fn unknown_key_and_wrong_type_name_key_and_line() {
        let path = Path::new("/r/whilly.toml");
        let err = parse_config_file(path, "[queue]\nlease_secs = 30\nlease_sec = 1\n".into())
            .unwrap_err();
        assert_eq!(err.key, "queue.lease_sec");
        assert!(matches!(err.origin, Origin::File { line: 3, .. }), "{err}");
        assert!(err.message.contains("unknown"), "{err}");

        let err = parse_config_file(path, "[run]\n\nparallel = \"four\"\n".into()).unwrap_err();
        assert_eq!(err.key, "run.parallel");
        assert!(matches!(err.origin, Origin::File { line: 3, .. }), "{err}");

        let err = parse_config_file(path, "[queu]\nx = 1\n".into()).unwrap_err();
        assert_eq!(err.key, "queu");
        assert!(matches!(err.origin, Origin::File { line: 1, .. }), "{err}");

        let err = parse_config_file(path, "[run\n".into()).unwrap_err();
        assert!(matches!(err.origin, Origin::File { line: 1, .. }), "{err}");
    }
}
