//! Finding JSON objects inside agent output that also holds plain text.
//!
//! Agents print JSON Lines (Claude stream-json, Codex, OpenCode) or one pretty-printed object
//! (Gemini), mixed with warnings and banners. Every object that starts at the beginning of a line
//! (after optional spaces) is collected; anything else is skipped.

use serde_json::Value;

/// The top-level JSON objects in `text`, in order.
pub fn json_objects(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut pos = 0;
    let bytes = text.as_bytes();
    while pos < bytes.len() {
        let line_end = text[pos..].find('\n').map_or(text.len(), |i| pos + i);
        let start = pos + (text[pos..line_end].len() - text[pos..line_end].trim_start().len());
        if start < line_end && bytes[start] == b'{' {
            let mut stream =
                serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
            if let Some(Ok(value)) = stream.next() {
                let consumed = start + stream.byte_offset();
                out.push(value);
                // Continue at the line after the object so pretty-printed objects are not rescanned.
                pos = text[consumed..]
                    .find('\n')
                    .map_or(text.len(), |i| consumed + i + 1);
                continue;
            }
        }
        pos = line_end + 1;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_lines_and_pretty_objects_among_noise() {
        let text = "warning: x\n{\"a\":1}\nnot json {\"b\":2}\n  {\"c\":\n  {\"d\": 3}\n}\n{broken\n{\"e\":5}";
        let got = json_objects(text);
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0]["a"], 1);
        assert_eq!(got[1]["c"]["d"], 3);
        assert_eq!(got[2]["e"], 5);
    }

    #[test]
    fn empty_and_plain_text() {
        assert!(json_objects("").is_empty());
        assert!(json_objects("hello\nworld\n").is_empty());
    }
}
