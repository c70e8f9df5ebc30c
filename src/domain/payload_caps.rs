//! What an event payload may hold: whatever an attempt reports (agent output, lists of files,
//! evidence) is redacted and bounded before it is stored, so one runaway attempt cannot write
//! a megabyte event that every reader of the audit trail then loads. Pure.

use serde_json::Value;

/// The most items a list in a payload keeps; the rest are counted in `<key>_omitted`.
pub(crate) const MAX_ITEMS: usize = 200;
/// The most bytes a text in a payload keeps.
pub(crate) const MAX_TEXT: usize = 64 * 1024;

/// Redacts secrets ([`super::secrets::redact_json`]) and applies the caps, in place: the one
/// step every event payload passes before it is written.
pub(crate) fn prepare(v: &mut Value) {
    super::secrets::redact_json(v);
    cap(v);
}

/// Cuts lists to [`MAX_ITEMS`] (an object member gains `<key>_omitted` with the count; a list
/// inside a list ends in a note) and texts to [`MAX_TEXT`] bytes (ending in a note).
pub(crate) fn cap(v: &mut Value) {
    match v {
        Value::String(s) => cap_text(s),
        Value::Array(items) => {
            items.iter_mut().for_each(cap);
            if items.len() > MAX_ITEMS {
                let dropped = items.len() - MAX_ITEMS;
                items.truncate(MAX_ITEMS);
                items.push(Value::String(format!("… {dropped} more left out")));
            }
        }
        Value::Object(map) => {
            let mut omitted = Vec::new();
            for (k, item) in map.iter_mut() {
                match item {
                    Value::Array(items) if items.len() > MAX_ITEMS => {
                        omitted.push((format!("{k}_omitted"), items.len() - MAX_ITEMS));
                        items.truncate(MAX_ITEMS);
                        items.iter_mut().for_each(cap);
                    }
                    other => cap(other),
                }
            }
            for (k, n) in omitted {
                map.insert(k, Value::from(n));
            }
        }
        _ => {}
    }
}

fn cap_text(s: &mut String) {
    if s.len() <= MAX_TEXT {
        return;
    }
    let mut cut = MAX_TEXT;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    let dropped = s.len() - cut;
    s.truncate(cut);
    s.push_str(&format!("… [{dropped} bytes left out]"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn long_lists_and_texts_are_cut_with_a_count() {
        let files: Vec<String> = (0..30_000).map(|i| format!("src/f{i}.rs")).collect();
        let mut v = json!({"outside_key_files": files, "detail": "é".repeat(MAX_TEXT), "n": 1});
        prepare(&mut v);
        assert_eq!(v["outside_key_files"].as_array().unwrap().len(), MAX_ITEMS);
        assert_eq!(v["outside_key_files_omitted"], 30_000 - MAX_ITEMS);
        let detail = v["detail"].as_str().unwrap();
        assert!(detail.len() < MAX_TEXT + 64 && detail.ends_with("bytes left out]"));
        assert_eq!(v["n"], 1);
        assert!(serde_json::to_vec(&v).unwrap().len() < 2 * MAX_TEXT);
        let mut small = json!({"files": ["a", "b"], "detail": "ok"});
        let before = small.clone();
        prepare(&mut small);
        assert_eq!(small, before);
    }
}
