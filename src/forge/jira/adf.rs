//! Atlassian Document Format (ADF), the JSON trees Jira Cloud keeps descriptions and comments
//! in (`{"type":"doc","version":1,"content":[...]}`), both ways:
//!
//! - [`to_text`] reads any tree as markdown-ish plain text for prompts and plans: headings with
//!   `#`, lists indented, code fenced, quotes and panels with `> `, tables as `| a | b |`, links
//!   as `[text](url)`, mentions as `@Name`, attachments as placeholders. Unknown nodes give their
//!   text; nothing in the JSON (a string, null, a missing `content`) makes it panic.
//! - [`section`] picks the items under one heading ("Acceptance criteria").
//! - [`from_markdown`] builds the small ADF Whilly writes in comments: paragraphs, headings,
//!   lists, fenced code, quotes, rules, links, bold and inline code. Jira rejects empty text
//!   nodes, so it never makes one.
//!
//! Pure: no IO.

use serde_json::{Value, json};

/// Deeper nesting than this is dropped rather than walked: descriptions are never this deep,
/// and a hostile tree must not exhaust the stack.
const MAX_DEPTH: usize = 64;

/// Inline node types: they flow into the paragraph around them.
const INLINE: [&str; 10] = [
    "text",
    "hardBreak",
    "mention",
    "emoji",
    "inlineCard",
    "date",
    "status",
    "mediaInline",
    "placeholder",
    "inlineExtension",
];

fn kind(node: &Value) -> &str {
    node["type"].as_str().unwrap_or_default()
}

fn content(node: &Value) -> &[Value] {
    node["content"].as_array().map_or(&[], Vec::as_slice)
}

fn attr<'a>(node: &'a Value, name: &str) -> Option<&'a str> {
    node["attrs"][name].as_str().filter(|s| !s.is_empty())
}

fn is_inline(node: &Value) -> bool {
    let k = kind(node);
    INLINE.contains(&k) || (!k.is_empty() && node["text"].is_string() && node["content"].is_null())
}

fn is_list(node: &Value) -> bool {
    matches!(
        kind(node),
        "bulletList" | "orderedList" | "taskList" | "decisionList"
    )
}

// ----- ADF → text -----

/// The document as markdown-ish plain text. A JSON string is taken as text already (old
/// descriptions, API v2); anything that is not ADF gives what text it holds, or "".
pub fn to_text(doc: &Value) -> String {
    let text = match doc {
        Value::String(s) => s.clone(),
        Value::Array(nodes) => blocks(nodes, 0),
        Value::Object(_) if is_inline(doc) => inline(std::slice::from_ref(doc), true, 0),
        Value::Object(_) => block(doc, 0),
        _ => String::new(),
    };
    text.trim_end().trim_start_matches('\n').to_string()
}

/// Block nodes rendered and separated by a blank line; runs of inline nodes among them (a
/// malformed or unknown container) read as paragraphs.
fn blocks(nodes: &[Value], depth: usize) -> String {
    join_blocks(nodes, depth, "\n\n")
}

fn join_blocks(nodes: &[Value], depth: usize, sep: &str) -> String {
    if depth > MAX_DEPTH {
        return String::new();
    }
    let mut out: Vec<String> = Vec::new();
    let mut run: Vec<Value> = Vec::new();
    let flush = |run: &mut Vec<Value>, out: &mut Vec<String>| {
        if !run.is_empty() {
            out.push(inline(run, true, depth + 1));
            run.clear();
        }
    };
    for node in nodes {
        if is_inline(node) {
            run.push(node.clone());
        } else {
            flush(&mut run, &mut out);
            out.push(block(node, depth + 1));
        }
    }
    flush(&mut run, &mut out);
    out.iter()
        .map(|b| b.trim_end())
        .filter(|b| !b.trim().is_empty())
        .collect::<Vec<_>>()
        .join(sep)
}

fn block(node: &Value, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return String::new();
    }
    let children = content(node);
    match kind(node) {
        "doc"
        | "layoutSection"
        | "layoutColumn"
        | "bodiedExtension"
        | "extensionFrame"
        | "multiBodiedExtension" => blocks(children, depth),
        "paragraph" | "caption" => inline(children, true, depth),
        "heading" => {
            let level = node["attrs"]["level"].as_u64().unwrap_or(1).clamp(1, 6) as usize;
            let title = inline(children, true, depth);
            if title.trim().is_empty() {
                String::new()
            } else {
                format!("{} {}", "#".repeat(level), title.trim())
            }
        }
        "bulletList" | "orderedList" | "taskList" | "decisionList" => list(node, depth),
        "listItem" | "taskItem" | "decisionItem" => {
            let wrapper = json!({"type": "bulletList", "content": [node]});
            list(&wrapper, depth)
        }
        "codeBlock" => {
            let lang = attr(node, "language").unwrap_or_default();
            let code = plain(children, depth);
            format!("```{lang}\n{}\n```", code.trim_end_matches('\n'))
        }
        "blockquote" => quote(&blocks(children, depth)),
        "rule" => "---".into(),
        "panel" => {
            let label = match attr(node, "panelType").unwrap_or("info") {
                "warning" => "WARNING",
                "error" => "CAUTION",
                "success" => "TIP",
                "note" => "NOTE",
                _ => "NOTE",
            };
            let body = blocks(children, depth);
            quote(&format!("[!{label}]\n{body}"))
        }
        "table" => table(node, depth),
        "mediaSingle" | "mediaGroup" => join_blocks(children, depth, "\n"),
        "media" => media(node),
        "blockCard" | "embedCard" => card_url(node).to_string(),
        "expand" | "nestedExpand" => {
            let body = blocks(children, depth);
            match attr(node, "title") {
                Some(title) => format!("{title}\n\n{body}"),
                None => body,
            }
        }
        "extension" => attr(node, "text").unwrap_or_default().to_string(),
        _ => {
            if let Some(t) = node["text"].as_str() {
                t.to_string()
            } else if let Some(t) = attr(node, "text") {
                t.to_string()
            } else {
                blocks(children, depth)
            }
        }
    }
}

/// Each line prefixed with `> ` (empty ones with `>`).
fn quote(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.is_empty() {
                ">".to_string()
            } else {
                format!("> {l}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `text` with every line but the first indented by `width` spaces (blank lines kept empty).
fn hang(marker: &str, text: &str, width: usize) -> String {
    let pad = " ".repeat(width);
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        if i == 0 {
            out.push_str(marker);
            out.push_str(line);
        } else {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(&pad);
                out.push_str(line);
            }
        }
    }
    if out.is_empty() {
        out.push_str(marker.trim_end());
    }
    out
}

fn list(node: &Value, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return String::new();
    }
    let ordered = kind(node) == "orderedList";
    let mut number = node["attrs"]["order"].as_u64().unwrap_or(1);
    let mut lines: Vec<String> = Vec::new();
    // The indent of the last item's text, for lists nested straight in the list (taskList
    // nests that way).
    let mut last_width = 2;
    for child in content(node) {
        match kind(child) {
            "listItem" | "taskItem" | "decisionItem" => {
                let (marker, width) = if ordered {
                    let m = format!("{number}. ");
                    let w = m.len();
                    (m, w)
                } else if kind(child) == "taskItem" {
                    let done = attr(child, "state").is_some_and(|s| s.eq_ignore_ascii_case("DONE"));
                    (if done { "- [x] " } else { "- [ ] " }.to_string(), 2)
                } else {
                    ("- ".to_string(), 2)
                };
                number = number.saturating_add(1);
                last_width = width;
                let body = join_blocks(content(child), depth + 1, "\n");
                lines.push(hang(&marker, &body, width));
            }
            _ if is_list(child) => {
                let nested = list(child, depth + 1);
                let pad = " ".repeat(last_width);
                lines.extend(nested.lines().map(|l| {
                    if l.is_empty() {
                        String::new()
                    } else {
                        format!("{pad}{l}")
                    }
                }));
            }
            _ => {
                let text = if is_inline(child) {
                    inline(std::slice::from_ref(child), true, depth + 1)
                } else {
                    block(child, depth + 1)
                };
                if !text.trim().is_empty() {
                    lines.push(hang("- ", &text, 2));
                }
            }
        }
    }
    lines.join("\n")
}

fn table(node: &Value, depth: usize) -> String {
    let mut lines = Vec::new();
    for (i, row) in content(node).iter().enumerate() {
        let cells: Vec<&Value> = content(row).iter().collect();
        if cells.is_empty() {
            continue;
        }
        let texts: Vec<String> = cells
            .iter()
            .map(|c| {
                let t = join_blocks(content(c), depth + 1, " ");
                t.split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .replace('|', "\\|")
            })
            .collect();
        lines.push(format!("| {} |", texts.join(" | ")));
        if i == 0 && cells.iter().all(|c| kind(c) == "tableHeader") {
            lines.push(format!("|{}", " --- |".repeat(cells.len())));
        }
    }
    lines.join("\n")
}

fn media(node: &Value) -> String {
    match attr(node, "alt").or_else(|| attr(node, "url")) {
        Some(what) => format!("[attachment: {what}]"),
        None => "[attachment]".into(),
    }
}

fn card_url(node: &Value) -> &str {
    attr(node, "url")
        .or_else(|| node["attrs"]["data"]["url"].as_str())
        .unwrap_or_default()
}

/// Inline nodes as text; with `marks`, text marks become markdown (`**`, `*`, `~~`, backticks,
/// links). Consecutive text nodes under the same link render as one link.
fn inline(nodes: &[Value], marks: bool, depth: usize) -> String {
    if depth > MAX_DEPTH {
        return String::new();
    }
    let mut out = String::new();
    let mut i = 0;
    while i < nodes.len() {
        let node = &nodes[i];
        if marks && let Some(href) = link_of(node) {
            let mut j = i;
            let mut inner = String::new();
            while j < nodes.len() && link_of(&nodes[j]) == Some(href) {
                inner.push_str(&styled(&nodes[j]));
                j += 1;
            }
            out.push_str(&link(&inner, href));
            i = j;
            continue;
        }
        out.push_str(&match kind(node) {
            "text" if marks => styled(node),
            "text" => node["text"].as_str().unwrap_or_default().to_string(),
            "hardBreak" => "\n".into(),
            "mention" => {
                let name = attr(node, "text")
                    .or_else(|| attr(node, "id"))
                    .unwrap_or("user");
                if name.starts_with('@') {
                    name.to_string()
                } else {
                    format!("@{name}")
                }
            }
            "emoji" => attr(node, "text")
                .or_else(|| attr(node, "shortName"))
                .unwrap_or_default()
                .to_string(),
            "inlineCard" => card_url(node).to_string(),
            "date" => date(node),
            "status" => attr(node, "text").unwrap_or_default().to_string(),
            "mediaInline" => media(node),
            "placeholder" => String::new(),
            _ => {
                if let Some(t) = node["text"].as_str() {
                    t.to_string()
                } else if let Some(t) = attr(node, "text") {
                    t.to_string()
                } else if content(node).iter().any(|c| !is_inline(c)) {
                    blocks(content(node), depth + 1)
                } else {
                    inline(content(node), marks, depth + 1)
                }
            }
        });
        i += 1;
    }
    out
}

/// The text of nodes without any markdown (code blocks, heading names).
fn plain(nodes: &[Value], depth: usize) -> String {
    inline(nodes, false, depth)
}

fn marks_of(node: &Value) -> &[Value] {
    node["marks"].as_array().map_or(&[], Vec::as_slice)
}

fn has_mark(node: &Value, mark: &str) -> bool {
    marks_of(node).iter().any(|m| kind(m) == mark)
}

fn link_of(node: &Value) -> Option<&str> {
    if kind(node) != "text" {
        return None;
    }
    marks_of(node)
        .iter()
        .find(|m| kind(m) == "link")
        .and_then(|m| attr(m, "href"))
}

/// A text node with its formatting marks (not its link) as markdown.
fn styled(node: &Value) -> String {
    let text = node["text"].as_str().unwrap_or_default();
    if has_mark(node, "code") {
        return code_span(text);
    }
    let mut s = text.to_string();
    if has_mark(node, "strong") {
        s = wrap(&s, "**");
    }
    if has_mark(node, "em") {
        s = wrap(&s, "*");
    }
    if has_mark(node, "strike") {
        s = wrap(&s, "~~");
    }
    s
}

/// `text` between `fence`s, with its outer whitespace outside them (`** x**` is not bold).
fn wrap(text: &str, fence: &str) -> String {
    let core = text.trim();
    if core.is_empty() {
        return text.to_string();
    }
    let lead = &text[..text.len() - text.trim_start().len()];
    let trail = &text[text.trim_end().len()..];
    format!("{lead}{fence}{core}{fence}{trail}")
}

/// Backticks around `text`, more of them than any run inside it.
fn code_span(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest + 1);
    // CommonMark strips one space each side, so a span may start or end with a backtick.
    if text.starts_with('`') || text.ends_with('`') {
        format!("{fence} {text} {fence}")
    } else {
        format!("{fence}{text}{fence}")
    }
}

fn link(text: &str, href: &str) -> String {
    if text.is_empty() || text == href {
        href.to_string()
    } else {
        format!("[{text}]({href})")
    }
}

/// A `date` node's day (`attrs.timestamp`: epoch milliseconds, as a string or a number).
fn date(node: &Value) -> String {
    let ts = &node["attrs"]["timestamp"];
    let ms = ts
        .as_i64()
        .or_else(|| ts.as_str().and_then(|s| s.trim().parse::<i64>().ok()));
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

// ----- sections -----

/// The items under the heading named `heading` (any case; a trailing `:` and spacing ignored),
/// up to the next heading of the same or a higher level: each list item (nested ones too, in
/// order; task boxes and markers dropped), a code block whole, and each non-empty line of
/// anything else (with typed `- ` / `1. ` markers dropped). A heading named exactly is
/// preferred to one that only starts with the name ("Acceptance" finds "Acceptance
/// criteria"). Descriptions often use a bold paragraph or a "Name:" line as the heading; such
/// a section ends at the next heading or bold-only paragraph. `None` when no heading matches.
pub fn section(doc: &Value, heading: &str) -> Option<Vec<String>> {
    let mut seq: Vec<&Value> = Vec::new();
    flatten(doc, &mut seq, 0);
    let want = normalize(heading);
    if want.is_empty() {
        return None;
    }
    let found = seq
        .iter()
        .enumerate()
        .find_map(|(i, n)| heading_level(n, &want, false).map(|l| (i, l)))
        .or_else(|| {
            seq.iter()
                .enumerate()
                .find_map(|(i, n)| heading_level(n, &want, true).map(|l| (i, l)))
        });
    let (start, level) = found?;
    let mut items = Vec::new();
    for node in &seq[start + 1..] {
        if let Some(l) = real_heading_level(node) {
            if l <= level {
                break;
            }
        } else if level == PSEUDO_LEVEL && all_bold(node) {
            break;
        }
        section_items(node, &mut items, 0);
    }
    Some(items)
}

/// Where a bold paragraph or a "Name:" line stands as a heading: below every real one.
const PSEUDO_LEVEL: u64 = 7;

/// The top-level blocks, with layout and expand containers opened.
fn flatten<'a>(node: &'a Value, out: &mut Vec<&'a Value>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match node {
        Value::Array(nodes) => nodes.iter().for_each(|n| flatten(n, out, depth + 1)),
        Value::Object(_) => match kind(node) {
            "doc" | "layoutSection" | "layoutColumn" | "expand" | "nestedExpand"
            | "bodiedExtension" => content(node)
                .iter()
                .for_each(|n| flatten(n, out, depth + 1)),
            _ => out.push(node),
        },
        _ => {}
    }
}

fn normalize(name: &str) -> String {
    name.trim()
        .trim_end_matches(':')
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

fn real_heading_level(node: &Value) -> Option<u64> {
    (kind(node) == "heading").then(|| node["attrs"]["level"].as_u64().unwrap_or(1).clamp(1, 6))
}

/// A paragraph whose every piece of text is bold (and there is some).
fn all_bold(node: &Value) -> bool {
    if kind(node) != "paragraph" {
        return false;
    }
    let texts: Vec<&Value> = content(node)
        .iter()
        .filter(|n| kind(n) == "text" && n["text"].as_str().is_some_and(|t| !t.trim().is_empty()))
        .collect();
    !texts.is_empty()
        && texts.iter().all(|n| has_mark(n, "strong"))
        && content(node)
            .iter()
            .all(|n| matches!(kind(n), "text" | "hardBreak"))
}

/// The level of `node` as a heading named `want` (exactly, or starting with it as whole words
/// when `prefix`).
fn heading_level(node: &Value, want: &str, prefix: bool) -> Option<u64> {
    let matches = |text: &str| {
        let have = normalize(text);
        if prefix {
            have.starts_with(want) && have[want.len()..].starts_with(' ')
        } else {
            have == want
        }
    };
    if let Some(level) = real_heading_level(node) {
        return matches(&plain(content(node), 0)).then_some(level);
    }
    if kind(node) == "paragraph" {
        let text = plain(content(node), 0);
        let text = text.trim();
        if text.lines().count() == 1 && (all_bold(node) || text.ends_with(':')) && matches(text) {
            return Some(PSEUDO_LEVEL);
        }
    }
    None
}

fn section_items(node: &Value, items: &mut Vec<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if is_list(node) {
        for child in content(node) {
            if is_list(child) {
                section_items(child, items, depth + 1);
                continue;
            }
            let own: Vec<&Value> = content(child).iter().filter(|c| !is_list(c)).collect();
            let own: Vec<Value> = own.into_iter().cloned().collect();
            let text = join_blocks(&own, depth + 1, " ");
            let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
            if !text.is_empty() {
                items.push(text);
            }
            for nested in content(child).iter().filter(|c| is_list(c)) {
                section_items(nested, items, depth + 1);
            }
        }
        return;
    }
    match kind(node) {
        "codeBlock" => {
            let code = plain(content(node), depth);
            if !code.trim().is_empty() {
                items.push(code.trim_end().to_string());
            }
        }
        "rule" => {}
        "heading" => {
            let title = inline(content(node), true, depth);
            if !title.trim().is_empty() {
                items.push(title.trim().to_string());
            }
        }
        _ => {
            for line in block(node, depth).lines() {
                let line = strip_marker(line.trim().trim_start_matches('>').trim());
                if !line.is_empty() && !line.starts_with("| ---") && !line.starts_with("[!") {
                    items.push(line.to_string());
                }
            }
        }
    }
}

/// A line without a typed list marker or task box: `- `, `* `, `• `, `+ `, `1. `, `1) `,
/// `[ ] `, `[x] `.
fn strip_marker(line: &str) -> &str {
    let mut s = line;
    for m in ["- ", "* ", "• ", "+ "] {
        if let Some(rest) = s.strip_prefix(m) {
            s = rest.trim_start();
            break;
        }
    }
    let digits = s.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits < 4 {
        let rest = &s[digits..];
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            s = r.trim_start();
        }
    }
    for b in ["[ ] ", "[x] ", "[X] "] {
        if let Some(rest) = s.strip_prefix(b) {
            s = rest.trim_start();
            break;
        }
    }
    s
}

// ----- markdown → ADF -----

/// A valid ADF doc for the markdown Whilly writes: paragraphs (single newlines become
/// `hardBreak`s), `#`–`######` headings, `-`/`*` and `1.` lists (nested by indentation),
/// fenced code with its language, `>` quotes, `---` rules; inline `**bold**`, `` `code` ``,
/// `[text](url)` and bare http(s) URLs as links, `\` escapes. Nothing else is interpreted.
/// Empty input gives a doc with no content (which Jira refuses as a comment).
pub fn from_markdown(text: &str) -> Value {
    let lines: Vec<&str> = text.lines().collect();
    json!({"type": "doc", "version": 1, "content": md_blocks(&lines, 0)})
}

fn md_blocks(lines: &[&str], depth: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim();
        if trimmed.is_empty() {
            i += 1;
        } else if let Some((fence, lang)) = fence_open(line) {
            let mut code: Vec<&str> = Vec::new();
            i += 1;
            while i < lines.len() && !lines[i].trim().starts_with(fence) {
                code.push(lines[i]);
                i += 1;
            }
            i += 1; // the closing fence, if any
            let mut node = json!({"type": "codeBlock", "content": []});
            if !lang.is_empty() {
                node["attrs"] = json!({"language": lang});
            }
            let code = code.join("\n");
            if !code.is_empty() {
                node["content"] = json!([{"type": "text", "text": code}]);
            }
            out.push(node);
        } else if let Some((level, title)) = heading(line) {
            let content = md_inline(title);
            if depth > 0 {
                // ADF allows no headings in quotes: the title stays, as a bold paragraph.
                out.push(paragraph(add_mark(content, &json!({"type": "strong"}))));
            } else {
                out.push(json!({"type": "heading", "attrs": {"level": level}, "content": content}));
            }
            i += 1;
        } else if is_rule(trimmed) && depth == 0 {
            out.push(json!({"type": "rule"}));
            i += 1;
        } else if trimmed.starts_with('>') && depth == 0 {
            // ADF has no quotes in quotes: `> > x` joins the one quote.
            let mut inner: Vec<&str> = Vec::new();
            while i < lines.len() && lines[i].trim().starts_with('>') {
                let mut l = lines[i].trim_start();
                while let Some(rest) = l.strip_prefix('>') {
                    l = rest.strip_prefix(' ').unwrap_or(rest);
                }
                inner.push(l);
                i += 1;
            }
            let content = md_blocks(&inner, depth + 1);
            if !content.is_empty() {
                out.push(json!({"type": "blockquote", "content": content}));
            }
        } else if list_marker(line).is_some() {
            let (lists, next) = md_list(lines, i);
            out.extend(lists);
            i = next;
        } else {
            // The first line is this paragraph's whatever it looks like (a rule or a quote
            // marker inside a quote), so every turn of the loop moves on.
            let mut para: Vec<&str> = vec![trimmed];
            i += 1;
            while i < lines.len() {
                let l = lines[i];
                let t = l.trim();
                if t.is_empty()
                    || fence_open(l).is_some()
                    || heading(l).is_some()
                    || is_rule(t)
                    || t.starts_with('>')
                    || list_marker(l).is_some()
                {
                    break;
                }
                para.push(t);
                i += 1;
            }
            let content = md_lines(&para);
            if !content.is_empty() {
                out.push(paragraph(content));
            }
        }
    }
    out
}

fn paragraph(content: Vec<Value>) -> Value {
    if content.is_empty() {
        json!({"type": "paragraph"})
    } else {
        json!({"type": "paragraph", "content": content})
    }
}

/// Lines of one paragraph or list item: inline content with `hardBreak`s between them.
fn md_lines(lines: &[&str]) -> Vec<Value> {
    let mut out = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        let nodes = md_inline(l.trim());
        if nodes.is_empty() {
            continue;
        }
        if n > 0 && !out.is_empty() {
            out.push(json!({"type": "hardBreak"}));
        }
        out.extend(nodes);
    }
    out
}

/// ```` ``` ```` or `~~~` with the language after it.
fn fence_open(line: &str) -> Option<(&'static str, &str)> {
    let t = line.trim();
    for fence in ["```", "~~~"] {
        if let Some(rest) = t.strip_prefix(fence) {
            let lang = rest.trim();
            if !lang.contains('`') {
                return Some((fence, lang));
            }
        }
    }
    None
}

/// `## Title` → (2, "Title"); trailing `#`s dropped.
fn heading(line: &str) -> Option<(usize, &str)> {
    let t = line.trim_start();
    let hashes = t.chars().take_while(|c| *c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &t[hashes..];
    if !rest.is_empty() && !rest.starts_with(' ') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim_end();
    Some((hashes, title))
}

fn is_rule(trimmed: &str) -> bool {
    let squeezed: String = trimmed.chars().filter(|c| *c != ' ').collect();
    squeezed.len() >= 3
        && ["-", "*", "_"]
            .iter()
            .any(|c| squeezed.chars().all(|x| x.to_string() == *c))
}

/// A list line's (indent, ordered, number, text).
fn list_marker(line: &str) -> Option<(usize, bool, u64, &str)> {
    let indent = line.len() - line.trim_start().len();
    let t = line.trim_start();
    for m in ["- ", "* ", "+ "] {
        if let Some(rest) = t.strip_prefix(m) {
            return Some((indent, false, 0, rest));
        }
        if t == m.trim_end() {
            return Some((indent, false, 0, ""));
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if (1..=9).contains(&digits) {
        let rest = &t[digits..];
        let number = t[..digits].parse().ok()?;
        if let Some(r) = rest.strip_prefix(". ").or_else(|| rest.strip_prefix(") ")) {
            return Some((indent, true, number, r));
        }
    }
    None
}

struct Entry<'a> {
    indent: usize,
    ordered: bool,
    number: u64,
    /// The item's paragraphs (a blank line and an indented line start another), by line.
    paras: Vec<Vec<&'a str>>,
}

/// Whether `line` is indented under an item at `indent` and continues it.
fn continues(line: &str, indent: usize) -> bool {
    line.len() - line.trim_start().len() > indent
        && fence_open(line).is_none()
        && heading(line).is_none()
}

/// The lists starting at `lines[start]` and the index after them.
fn md_list(lines: &[&str], start: usize) -> (Vec<Value>, usize) {
    let mut entries: Vec<Entry> = Vec::new();
    let mut i = start;
    while i < lines.len() {
        let line = lines[i];
        if let Some((indent, ordered, number, text)) = list_marker(line) {
            entries.push(Entry {
                indent,
                ordered,
                number,
                paras: vec![vec![text]],
            });
            i += 1;
            continue;
        }
        let Some(last) = entries.last_mut() else {
            break;
        };
        if line.trim().is_empty() {
            // A blank line ends the list unless the list goes on after it: another item, or
            // an indented paragraph of the last one.
            let Some(n) = lines[i..].iter().position(|l| !l.trim().is_empty()) else {
                break;
            };
            let next = lines[i + n];
            if list_marker(next).is_some() {
                i += n;
            } else if continues(next, last.indent) {
                last.paras.push(Vec::new());
                i += n;
            } else {
                break;
            }
            continue;
        }
        // An indented line continues the last item; anything else ends the list.
        if !continues(line, last.indent) {
            break;
        }
        if let Some(para) = last.paras.last_mut() {
            para.push(line.trim());
        }
        i += 1;
    }
    let mut pos = 0;
    let mut lists = Vec::new();
    // Lists of different kinds back to back ("- a" then "1. b") come out as separate lists.
    while pos < entries.len() {
        lists.push(build_list(&entries, &mut pos, 0));
    }
    (lists, i)
}

fn build_list(entries: &[Entry], pos: &mut usize, depth: usize) -> Value {
    let first = &entries[*pos];
    let indent = first.indent;
    let ordered = first.ordered;
    let start_number = first.number;
    let mut items: Vec<Value> = Vec::new();
    while *pos < entries.len() {
        let e = &entries[*pos];
        if e.indent < indent {
            break;
        }
        if e.indent > indent && !items.is_empty() && depth < MAX_DEPTH {
            let nested = build_list(entries, pos, depth + 1);
            if let Some(Value::Array(c)) = items.last_mut().map(|it| &mut it["content"]) {
                c.push(nested);
            }
            continue;
        }
        if e.ordered != ordered && !items.is_empty() {
            break;
        }
        // The first paragraph always, even empty: ADF list items start with one.
        let mut paras: Vec<Value> = e
            .paras
            .iter()
            .map(|p| md_lines(p))
            .enumerate()
            .filter(|(n, p)| *n == 0 || !p.is_empty())
            .map(|(_, p)| paragraph(p))
            .collect();
        if paras.is_empty() {
            paras.push(paragraph(Vec::new()));
        }
        items.push(json!({"type": "listItem", "content": paras}));
        *pos += 1;
    }
    if ordered {
        let mut node = json!({"type": "orderedList", "content": items});
        if start_number != 1 {
            node["attrs"] = json!({"order": start_number});
        }
        node
    } else {
        json!({"type": "bulletList", "content": items})
    }
}

/// Inline markdown → ADF inline nodes, adjacent text with the same marks merged, no empty text.
fn md_inline(text: &str) -> Vec<Value> {
    md_inline_at(text, 0)
}

/// [`md_inline`] `depth` links or bolds deep: deeper than [`MAX_DEPTH`] it is all plain text.
fn md_inline_at(text: &str, depth: usize) -> Vec<Value> {
    if text.is_empty() {
        return Vec::new();
    }
    if depth > MAX_DEPTH {
        return vec![json!({"type": "text", "text": text})];
    }
    let mut out: Vec<Value> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut plain = String::new();
    let mut i = 0;
    let flush = |plain: &mut String, out: &mut Vec<Value>| {
        if !plain.is_empty() {
            out.push(json!({"type": "text", "text": std::mem::take(plain)}));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && chars.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) {
            plain.push(chars[i + 1]);
            i += 2;
            continue;
        }
        if c == '`' {
            let run = chars[i..].iter().take_while(|c| **c == '`').count();
            if let Some(end) = find_run(&chars, i + run, '`', run) {
                let code: String = chars[i + run..end].iter().collect();
                let code =
                    if code.starts_with(' ') && code.ends_with(' ') && !code.trim().is_empty() {
                        code[1..code.len() - 1].to_string()
                    } else {
                        code
                    };
                if !code.is_empty() {
                    flush(&mut plain, &mut out);
                    out.push(json!({"type": "text", "text": code, "marks": [{"type": "code"}]}));
                }
                i = end + run;
                continue;
            }
            plain.extend(&chars[i..i + run]);
            i += run;
            continue;
        }
        if c == '*' && chars.get(i + 1) == Some(&'*') {
            if let Some(end) = find_seq(&chars, i + 2, &['*', '*']) {
                let inner: String = chars[i + 2..end].iter().collect();
                if !inner.trim().is_empty() {
                    flush(&mut plain, &mut out);
                    out.extend(add_mark(
                        md_inline_at(&inner, depth + 1),
                        &json!({"type": "strong"}),
                    ));
                    i = end + 2;
                    continue;
                }
            }
            plain.push_str("**");
            i += 2;
            continue;
        }
        if c == '['
            && let Some((label, href, next)) = md_link(&chars, i)
        {
            flush(&mut plain, &mut out);
            let inner = md_inline_at(&label, depth + 1);
            let inner = if inner.is_empty() {
                vec![json!({"type": "text", "text": href})]
            } else {
                inner
            };
            out.extend(add_mark(
                inner,
                &json!({"type": "link", "attrs": {"href": href}}),
            ));
            i = next;
            continue;
        }
        if c == 'h'
            && (i == 0 || !chars[i - 1].is_alphanumeric())
            && let Some(len) = bare_url(&chars[i..])
        {
            flush(&mut plain, &mut out);
            let url: String = chars[i..i + len].iter().collect();
            out.push(json!({"type": "text", "text": url, "marks": [{"type": "link", "attrs": {"href": url}}]}));
            i += len;
            continue;
        }
        plain.push(c);
        i += 1;
    }
    flush(&mut plain, &mut out);
    merge_text(out)
}

/// The index of the next run of exactly `len` `c`s at or after `from`.
fn find_run(chars: &[char], from: usize, c: char, len: usize) -> Option<usize> {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == c {
            let run = chars[i..].iter().take_while(|x| **x == c).count();
            if run == len {
                return Some(i);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

fn find_seq(chars: &[char], from: usize, seq: &[char]) -> Option<usize> {
    (from..chars.len().saturating_sub(seq.len() - 1)).find(|&i| chars[i..].starts_with(seq))
}

/// `[label](url)` at `at`: the label, the url and the index after `)`.
fn md_link(chars: &[char], at: usize) -> Option<(String, String, usize)> {
    let mut depth = 0;
    let mut close = None;
    for (j, c) in chars.iter().enumerate().skip(at) {
        match c {
            '[' => depth += 1,
            ']' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(j);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    if chars.get(close + 1) != Some(&'(') {
        return None;
    }
    let mut parens = 0;
    let mut end = None;
    for (j, c) in chars.iter().enumerate().skip(close + 1) {
        match c {
            '(' => parens += 1,
            ')' => {
                parens -= 1;
                if parens == 0 {
                    end = Some(j);
                    break;
                }
            }
            c if c.is_whitespace() => return None,
            _ => {}
        }
    }
    let end = end?;
    let href: String = chars[close + 2..end].iter().collect();
    if href.is_empty() {
        return None;
    }
    let label: String = chars[at + 1..close].iter().collect();
    Some((label, href, end + 1))
}

/// The length of an `http://` or `https://` URL at the start of `chars`, trailing punctuation
/// (and a `)` without its `(`) left out.
fn bare_url(chars: &[char]) -> Option<usize> {
    let s: String = chars.iter().take(8).collect();
    let scheme = if s.starts_with("https://") {
        8
    } else if s.starts_with("http://") {
        7
    } else {
        return None;
    };
    let mut len = chars
        .iter()
        .position(|c| c.is_whitespace() || matches!(c, '<' | '>' | '"' | '`'))
        .unwrap_or(chars.len());
    loop {
        let last = chars[len - 1];
        let url = &chars[..len];
        let unbalanced_paren = last == ')'
            && url.iter().filter(|c| **c == ')').count()
                > url.iter().filter(|c| **c == '(').count();
        if len > scheme
            && (matches!(last, '.' | ',' | ';' | ':' | '!' | '?' | '\'' | '*') || unbalanced_paren)
        {
            len -= 1;
        } else {
            break;
        }
    }
    (len > scheme).then_some(len)
}

/// `nodes` with `mark` added to each text node; strong is not added to code, which ADF only
/// lets carry a link.
fn add_mark(nodes: Vec<Value>, mark: &Value) -> Vec<Value> {
    nodes
        .into_iter()
        .map(|mut n| {
            if kind(&n) != "text" {
                return n;
            }
            let is_code = has_mark(&n, "code");
            if is_code && kind(mark) != "link" {
                return n;
            }
            if has_mark(&n, kind(mark)) {
                return n;
            }
            match n["marks"].as_array_mut() {
                Some(marks) => marks.push(mark.clone()),
                None => {
                    if let Some(obj) = n.as_object_mut() {
                        obj.insert("marks".into(), json!([mark]));
                    }
                }
            }
            n
        })
        .collect()
}

/// Adjacent text nodes with equal marks as one.
fn merge_text(nodes: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for n in nodes {
        if kind(&n) == "text" && n["text"].as_str().is_some_and(str::is_empty) {
            continue;
        }
        if let Some(prev) = out.last_mut()
            && kind(prev) == "text"
            && kind(&n) == "text"
            && prev["marks"] == n["marks"]
        {
            let joined = format!(
                "{}{}",
                prev["text"].as_str().unwrap_or_default(),
                n["text"].as_str().unwrap_or_default()
            );
            prev["text"] = Value::String(joined);
            continue;
        }
        out.push(n);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(text: &str) -> Value {
        json!({"type": "text", "text": text})
    }

    fn marked(text: &str, marks: Value) -> Value {
        json!({"type": "text", "text": text, "marks": marks})
    }

    fn p(content: Value) -> Value {
        json!({"type": "paragraph", "content": content})
    }

    fn h(level: u64, text: &str) -> Value {
        json!({"type": "heading", "attrs": {"level": level}, "content": [t(text)]})
    }

    fn li(content: Value) -> Value {
        json!({"type": "listItem", "content": content})
    }

    fn doc(content: Value) -> Value {
        json!({"type": "doc", "version": 1, "content": content})
    }

    /// A bug report as Jira's editor stores it: headings, an ordered list with a nested
    /// bullet, code, a mention, an emoji, links, a panel, a table, an attachment, a quote.
    fn bug_report() -> Value {
        doc(json!([
            h(2, "Summary"),
            p(json!([
                t("The uploader gives up on the first "),
                marked("503", json!([{"type": "code"}])),
                t(" from "),
                marked("S3", json!([{"type": "link", "attrs": {"href": "https://aws.amazon.com/s3/"}}])),
                t(". Reported by "),
                {"type": "mention", "attrs": {"id": "557058:f1", "text": "@Dana Dev", "accessLevel": ""}},
                t(" "),
                {"type": "emoji", "attrs": {"shortName": ":fire:", "id": "1f525", "text": "🔥"}},
            ])),
            h(2, "Steps to reproduce"),
            {"type": "orderedList", "attrs": {"order": 1}, "content": [
                li(json!([p(json!([t("Start an upload of a 2 GB file")]))])),
                li(json!([
                    p(json!([t("Kill the network for 5s")])),
                    {"type": "bulletList", "content": [
                        li(json!([p(json!([t("on macOS: "), marked("sudo ifconfig en0 down", json!([{"type": "code"}]))]))])),
                    ]},
                ])),
                li(json!([p(json!([t("Watch the log")]))])),
            ]},
            {"type": "codeBlock", "attrs": {"language": "rust"}, "content": [
                t("fn main() {\n    retry(3);\n}"),
            ]},
            h(2, "Acceptance criteria"),
            {"type": "bulletList", "content": [
                li(json!([p(json!([t("Retries 3 times with "), marked("backoff", json!([{"type": "strong"}]))]))])),
                li(json!([
                    p(json!([t("Gives up after 30 s with a clear error")])),
                    {"type": "bulletList", "content": [li(json!([p(json!([t("exit code 2")]))]))]},
                ])),
            ]},
            p(json!([
                t("See also "),
                {"type": "inlineCard", "attrs": {"url": "https://acme.atlassian.net/browse/ABC-7"}},
            ])),
            h(2, "Notes"),
            {"type": "panel", "attrs": {"panelType": "info"}, "content": [
                p(json!([t("Logs are in "), marked("/var/log/up", json!([{"type": "strong"}]))])),
            ]},
            {"type": "table", "attrs": {"isNumberColumnEnabled": false, "layout": "default"}, "content": [
                {"type": "tableRow", "content": [
                    {"type": "tableHeader", "attrs": {}, "content": [p(json!([marked("Env", json!([{"type": "strong"}]))]))]},
                    {"type": "tableHeader", "attrs": {}, "content": [p(json!([t("Result")]))]},
                ]},
                {"type": "tableRow", "content": [
                    {"type": "tableCell", "attrs": {}, "content": [p(json!([t("staging")]))]},
                    {"type": "tableCell", "attrs": {}, "content": [p(json!([t("fails | flaky")]))]},
                ]},
                {"type": "tableRow", "content": [
                    {"type": "tableCell", "attrs": {}, "content": [p(json!([t("prod")]))]},
                    {"type": "tableCell", "attrs": {}, "content": [p(json!([t("ok")]))]},
                ]},
            ]},
            {"type": "mediaSingle", "attrs": {"layout": "center"}, "content": [
                {"type": "media", "attrs": {"id": "6e7c", "type": "file", "collection": "", "alt": "screenshot.png", "width": 800, "height": 600}},
            ]},
            {"type": "rule"},
            {"type": "blockquote", "content": [p(json!([t("Customer: it happens daily")]))]},
        ]))
    }

    #[test]
    fn a_bug_report_reads_as_markdown() {
        let want = "\
## Summary

The uploader gives up on the first `503` from [S3](https://aws.amazon.com/s3/). Reported by @Dana Dev 🔥

## Steps to reproduce

1. Start an upload of a 2 GB file
2. Kill the network for 5s
   - on macOS: `sudo ifconfig en0 down`
3. Watch the log

```rust
fn main() {
    retry(3);
}
```

## Acceptance criteria

- Retries 3 times with **backoff**
- Gives up after 30 s with a clear error
  - exit code 2

See also https://acme.atlassian.net/browse/ABC-7

## Notes

> [!NOTE]
> Logs are in **/var/log/up**

| **Env** | Result |
| --- | --- |
| staging | fails \\| flaky |
| prod | ok |

[attachment: screenshot.png]

---

> Customer: it happens daily";
        assert_eq!(to_text(&bug_report()), want);
    }

    #[test]
    fn sections_are_the_items_under_a_heading() {
        let d = bug_report();
        let want = [
            "Retries 3 times with **backoff**",
            "Gives up after 30 s with a clear error",
            "exit code 2",
            "See also https://acme.atlassian.net/browse/ABC-7",
        ];
        assert_eq!(
            section(&d, "Acceptance criteria"),
            Some(want.iter().map(|s| s.to_string()).collect())
        );
        assert_eq!(
            section(&d, "  ACCEPTANCE   criteria: "),
            section(&d, "Acceptance criteria")
        );
        // A name that only starts the heading finds it when nothing matches exactly.
        assert_eq!(
            section(&d, "acceptance"),
            section(&d, "Acceptance criteria")
        );
        assert_eq!(
            section(&d, "Steps to reproduce"),
            Some(vec![
                "Start an upload of a 2 GB file".to_string(),
                "Kill the network for 5s".into(),
                "on macOS: `sudo ifconfig en0 down`".into(),
                "Watch the log".into(),
                "fn main() {\n    retry(3);\n}".into(),
            ])
        );
        // The last section runs to the end; quotes and panels give their lines.
        let notes = section(&d, "notes").unwrap();
        assert_eq!(notes[0], "Logs are in **/var/log/up**");
        assert!(notes.contains(&"| prod | ok |".to_string()), "{notes:?}");
        assert_eq!(notes.last().unwrap(), "Customer: it happens daily");
        assert_eq!(section(&d, "Out of scope"), None);
        assert_eq!(section(&d, ""), None);
    }

    #[test]
    fn a_deeper_heading_stays_in_its_section_a_level_up_ends_it() {
        let d = doc(json!([
            h(2, "Acceptance"),
            p(json!([t("Must:")])),
            h(3, "API"),
            {"type": "bulletList", "content": [li(json!([p(json!([t("GET /v1/export")]))]))]},
            h(2, "Design"),
            p(json!([t("not this")])),
        ]));
        assert_eq!(
            section(&d, "acceptance"),
            Some(vec![
                "Must:".to_string(),
                "API".into(),
                "GET /v1/export".into()
            ])
        );
        assert_eq!(section(&d, "api"), Some(vec!["GET /v1/export".to_string()]));
    }

    /// A story written the way many teams do: bold paragraphs as headings, a checklist.
    #[test]
    fn bold_paragraphs_and_checklists_act_as_sections() {
        let d = doc(json!([
            p(json!([t("As a user I want exports so that I can share reports.")])),
            p(json!([marked("Acceptance Criteria:", json!([{"type": "strong"}]))])),
            {"type": "taskList", "attrs": {"localId": "a"}, "content": [
                {"type": "taskItem", "attrs": {"localId": "1", "state": "TODO"}, "content": [t("CSV export")]},
                {"type": "taskItem", "attrs": {"localId": "2", "state": "DONE"}, "content": [t("Excel export")]},
                {"type": "taskList", "attrs": {"localId": "b"}, "content": [
                    {"type": "taskItem", "attrs": {"localId": "3", "state": "TODO"}, "content": [t("with formulas")]},
                ]},
            ]},
            p(json!([marked("Out of scope", json!([{"type": "strong"}]))])),
            p(json!([t("PDF")])),
        ]));
        assert_eq!(
            to_text(&d),
            "As a user I want exports so that I can share reports.\n\n**Acceptance Criteria:**\n\n- [ ] CSV export\n- [x] Excel export\n  - [ ] with formulas\n\n**Out of scope**\n\nPDF"
        );
        assert_eq!(
            section(&d, "acceptance criteria"),
            Some(vec![
                "CSV export".to_string(),
                "Excel export".into(),
                "with formulas".into()
            ])
        );
        assert_eq!(section(&d, "out of scope"), Some(vec!["PDF".to_string()]));

        // "Acceptance:" on its own line, then typed bullets with hard breaks.
        let typed = doc(json!([
            p(json!([t("Acceptance:")])),
            p(
                json!([t("- exports a file"), {"type": "hardBreak"}, t("* names it by date"), {"type": "hardBreak"}, t("3. [x] logs it")])
            ),
            h(1, "Later"),
            p(json!([t("- no")])),
        ]));
        assert_eq!(
            section(&typed, "Acceptance"),
            Some(vec![
                "exports a file".to_string(),
                "names it by date".into(),
                "logs it".into()
            ])
        );
        // A sentence that merely mentions the word is no heading.
        let prose = doc(json!([
            p(json!([t("Acceptance is up to QA.")])),
            p(json!([t("x")]))
        ]));
        assert_eq!(section(&prose, "acceptance"), None);
    }

    #[test]
    fn inline_nodes_marks_and_cards() {
        let d = doc(json!([
            p(json!([
                marked("bold", json!([{"type": "strong"}])),
                t(" "),
                marked("it", json!([{"type": "em"}])),
                t(" "),
                marked("gone", json!([{"type": "strike"}])),
                t(" "),
                marked("under", json!([{"type": "underline"}])),
                t(" "),
                marked("a`b", json!([{"type": "code"}])),
                t(" "),
                marked("https://x.test/a", json!([{"type": "link", "attrs": {"href": "https://x.test/a"}}])),
                t(" "),
                marked("the ", json!([{"type": "link", "attrs": {"href": "https://d.test"}}])),
                marked("docs", json!([{"type": "link", "attrs": {"href": "https://d.test"}}, {"type": "strong"}])),
                t(" "),
                marked("trailing ", json!([{"type": "strong"}])),
                t("x "),
                {"type": "mention", "attrs": {"id": "abc", "text": "Sam"}},
                t(" "),
                {"type": "mention", "attrs": {"id": "557058:zz"}},
                t(" "),
                {"type": "emoji", "attrs": {"shortName": ":rocket:"}},
                t(" "),
                {"type": "date", "attrs": {"timestamp": "1767225600000"}},
                t(" "),
                {"type": "status", "attrs": {"text": "IN REVIEW", "color": "blue"}},
                t(" "),
                {"type": "inlineCard", "attrs": {"data": {"url": "https://card.test"}}},
            ])),
            {"type": "blockCard", "attrs": {"url": "https://block.test/card"}},
            {"type": "mediaGroup", "content": [
                {"type": "media", "attrs": {"id": "1", "type": "file", "collection": ""}},
                {"type": "media", "attrs": {"type": "external", "url": "https://img.test/a.png"}},
            ]},
        ]));
        assert_eq!(
            to_text(&d),
            "**bold** *it* ~~gone~~ under ``a`b`` https://x.test/a [the **docs**](https://d.test) **trailing** x @Sam @557058:zz :rocket: 2026-01-01 IN REVIEW https://card.test\n\nhttps://block.test/card\n\n[attachment]\n[attachment: https://img.test/a.png]"
        );
    }

    #[test]
    fn any_json_reads_without_a_panic() {
        // Deeper than the walk goes (but within what serde_json itself clones and drops on a
        // test thread's stack); built by hand, as `json!` would serialize it recursively.
        let node = |kind: &str, child: Value| {
            let mut m = serde_json::Map::new();
            m.insert("type".into(), Value::String(kind.into()));
            m.insert("content".into(), Value::Array(vec![child]));
            Value::Object(m)
        };
        let deep = (0..150).fold(t("bottom"), |inner, _| {
            node("bulletList", node("listItem", inner))
        });
        let cases = [
            json!(null),
            json!(42),
            json!(true),
            json!("Plain text from API v2"),
            json!([]),
            json!({}),
            json!({"type": "doc"}),
            json!({"type": "doc", "content": "oops"}),
            json!({"type": "doc", "content": [null, 1, "s", [], {}]}),
            json!({"type": "doc", "content": [{"type": "paragraph", "content": [{"type": "text"}]}]}),
            json!({"type": "doc", "content": [{"type": "heading", "attrs": {"level": "two"}, "content": [{"type": "text", "text": "H"}]}]}),
            json!({"type": "doc", "content": [{"type": "heading", "attrs": {"level": 99}}]}),
            json!({"type": "doc", "content": [{"type": "orderedList", "attrs": {"order": u64::MAX}, "content": [{"type": "listItem"}, {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "x"}]}]}]}]}),
            json!({"type": "doc", "content": [{"type": "table", "content": [{"type": "tableRow"}, {"type": "tableRow", "content": [{"type": "tableCell"}]}]}]}),
            json!({"type": "doc", "content": [{"type": "mention"}, {"type": "emoji"}, {"type": "date", "attrs": {"timestamp": "soon"}}, {"type": "media"}]}),
            json!({"type": "doc", "content": [{"type": "codeBlock"}, {"type": "panel"}, {"type": "blockquote", "content": {}}]}),
            json!({"type": "fancyWidget", "content": [{"type": "text", "text": "inside"}]}),
            json!({"content": [{"text": "typeless"}]}),
            json!({"type": "text", "text": "just text", "marks": "bad"}),
            json!({"type": "text", "text": "x", "marks": [{"type": "link"}, {"type": "link", "attrs": {"href": 3}}]}),
            deep,
        ];
        for c in &cases {
            let _ = to_text(c);
            let _ = section(c, "acceptance");
            let _ = section(c, "H");
        }
        assert_eq!(to_text(&json!(null)), "");
        assert_eq!(
            to_text(&json!("Plain text from API v2")),
            "Plain text from API v2"
        );
        assert_eq!(to_text(&cases[16]), "inside");
        assert_eq!(to_text(&cases[18]), "just text");
        assert_eq!(to_text(&cases[10]), "# H");
        assert_eq!(
            to_text(&cases[12]),
            "18446744073709551615.\n18446744073709551615. x"
        );
        let deep = to_text(&cases[20]);
        assert!(
            deep.starts_with("- ") && !deep.contains("bottom"),
            "deep trees are cut: {deep}"
        );
    }

    /// What Jira checks and a bit more: the doc shell, no empty text, inline content only in
    /// paragraphs and headings, list items starting with a paragraph, marks code can carry.
    fn assert_valid(doc: &Value) {
        assert_eq!(doc["type"], "doc", "{doc}");
        assert_eq!(doc["version"], 1, "{doc}");
        assert!(doc["content"].is_array(), "{doc}");
        fn walk(n: &Value, parent: &str) {
            let k = kind(n);
            assert!(!k.is_empty(), "a node without a type: {n}");
            match k {
                "text" => {
                    assert!(
                        n["text"].as_str().is_some_and(|s| !s.is_empty()),
                        "empty text under {parent}"
                    );
                    assert!(
                        matches!(parent, "paragraph" | "heading" | "codeBlock"),
                        "text under {parent}"
                    );
                    let marks: Vec<&str> = marks_of(n).iter().map(kind).collect();
                    if marks.contains(&"code") {
                        assert!(marks.iter().all(|m| matches!(*m, "code" | "link")), "{n}");
                    }
                    if parent == "codeBlock" {
                        assert!(n.get("marks").is_none(), "{n}");
                    }
                    if let Some(link) = marks_of(n).iter().find(|m| kind(m) == "link") {
                        assert!(attr(link, "href").is_some(), "{n}");
                    }
                }
                "hardBreak" => assert!(matches!(parent, "paragraph" | "heading")),
                "heading" => {
                    let l = n["attrs"]["level"].as_u64().unwrap();
                    assert!((1..=6).contains(&l));
                    assert_eq!(parent, "doc");
                }
                "bulletList" | "orderedList" => {
                    assert!(content(n).iter().all(|c| kind(c) == "listItem"), "{n}");
                    assert!(!content(n).is_empty());
                }
                "listItem" => assert_eq!(kind(&content(n)[0]), "paragraph", "{n}"),
                // ADF nests neither quotes nor rules.
                "blockquote" | "rule" => assert_eq!(parent, "doc", "{n}"),
                "paragraph" | "codeBlock" => {}
                other => panic!("unexpected node {other}"),
            }
            for c in content(n) {
                walk(c, k);
            }
        }
        for c in content(doc) {
            walk(c, "doc");
        }
    }

    #[test]
    fn from_markdown_builds_the_adf_jira_wants() {
        let md = "## Whilly finished\n\nDone in **2m 5s**, see https://github.com/acme/w/pull/7.\nBranch `whilly/abc-1`\n\n- tests pass\n- [diff](https://github.com/acme/w/pull/7/files) reviewed\n  - nested\n\n```sh\ncargo test\n```";
        let d = from_markdown(md);
        assert_valid(&d);
        assert_eq!(
            d,
            json!({"type": "doc", "version": 1, "content": [
                {"type": "heading", "attrs": {"level": 2}, "content": [{"type": "text", "text": "Whilly finished"}]},
                {"type": "paragraph", "content": [
                    {"type": "text", "text": "Done in "},
                    {"type": "text", "text": "2m 5s", "marks": [{"type": "strong"}]},
                    {"type": "text", "text": ", see "},
                    {"type": "text", "text": "https://github.com/acme/w/pull/7", "marks": [{"type": "link", "attrs": {"href": "https://github.com/acme/w/pull/7"}}]},
                    {"type": "text", "text": "."},
                    {"type": "hardBreak"},
                    {"type": "text", "text": "Branch "},
                    {"type": "text", "text": "whilly/abc-1", "marks": [{"type": "code"}]},
                ]},
                {"type": "bulletList", "content": [
                    {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "tests pass"}]}]},
                    {"type": "listItem", "content": [
                        {"type": "paragraph", "content": [
                            {"type": "text", "text": "diff", "marks": [{"type": "link", "attrs": {"href": "https://github.com/acme/w/pull/7/files"}}]},
                            {"type": "text", "text": " reviewed"},
                        ]},
                        {"type": "bulletList", "content": [
                            {"type": "listItem", "content": [{"type": "paragraph", "content": [{"type": "text", "text": "nested"}]}]},
                        ]},
                    ]},
                ]},
                {"type": "codeBlock", "attrs": {"language": "sh"}, "content": [{"type": "text", "text": "cargo test"}]},
            ]})
        );
    }

    #[test]
    fn from_markdown_never_makes_an_empty_text_node() {
        let deep_quote = format!("{} x\n> ---\n> # h", "> ".repeat(10_000));
        let deep_links = format!(
            "{}x{}",
            "[".repeat(2_000),
            "](https://n.test)".repeat(2_000)
        );
        let odd = [
            "",
            "\n\n\n",
            "**",
            "****",
            "** **",
            "``",
            "` `",
            "[]()",
            "[](https://x.test)",
            "[x]()",
            "-",
            "- ",
            "1. ",
            "#",
            "## ",
            "> ",
            ">",
            "```",
            "```\n```",
            "\\",
            "https://",
            "http://x",
            "(https://x.test/a_(b))",
            "**bold `code` bold**",
            "- a\n\n\n- b\n1. c",
            "  - starts indented\n- then not",
            "text\n---\nmore",
            "a\u{0}b",
            "**[link](https://l.test)**",
            "[**bold link**](https://l.test)",
            "*** not bold",
            "é**ü**ß `ñ` https://ü.test/ä",
            deep_quote.as_str(),
            "> a\n> > b\n>\n> ---",
            deep_links.as_str(),
        ];
        for md in odd {
            let d = from_markdown(md);
            assert_valid(&d);
            let _ = to_text(&d);
        }
        assert_eq!(
            from_markdown(""),
            json!({"type": "doc", "version": 1, "content": []})
        );
        assert_eq!(to_text(&from_markdown("**")), "**");
        assert_eq!(
            to_text(&from_markdown("(https://x.test/a_(b))")),
            "(https://x.test/a_(b))"
        );
        // Code cannot be bold in ADF: the code stays code, the rest bold.
        let d = from_markdown("**run `x` now**");
        assert_eq!(
            d["content"][0]["content"][1],
            json!({"type": "text", "text": "x", "marks": [{"type": "code"}]})
        );
        assert_eq!(to_text(&d), "**run** `x` **now**");
    }

    #[test]
    fn markdown_round_trips_through_adf() {
        let cases = [
            "Plain paragraph.",
            "First paragraph.\n\nSecond, with a [link](https://acme.test/docs) and **bold** text.",
            "Line one\nLine two\nLine three",
            "# One\n\n## Two\n\n###### Six",
            "- a\n- b\n  - b1\n    - b11\n- c",
            "1. first\n2. second\n   - sub\n3. third",
            "3. from three\n4. on",
            "```rust\nfn main() {\n    println!(\"hi\");\n}\n```",
            "```\nno language\n```",
            "> quoted\n> twice",
            "above\n\n---\n\nbelow",
            "See https://github.com/acme/widgets/pull/12 for `cargo test` output.",
            "## Whilly: ABC-1\n\nStatus: **done** in 3m 2s\nCost: $0.42\n\n- PR: https://github.com/acme/w/pull/9\n- Branch: `whilly/abc-1`\n\n```text\n3 passed\n```",
        ];
        for md in cases {
            let d = from_markdown(md);
            assert_valid(&d);
            assert_eq!(
                to_text(&d),
                md,
                "{}",
                serde_json::to_string_pretty(&d).unwrap()
            );
        }
        // Markdown spelled differently comes back in the canonical spelling.
        assert_eq!(to_text(&from_markdown("* a\n* b")), "- a\n- b");
        assert_eq!(to_text(&from_markdown("## Title ##")), "## Title");
        assert_eq!(to_text(&from_markdown("a \\*\\*b\\*\\*")), "a **b**");
        // Sections of what Whilly wrote read back.
        let d = from_markdown("## Acceptance\n\n- one\n- two\n\n## Next\n\n- three");
        assert_eq!(
            section(&d, "acceptance"),
            Some(vec!["one".to_string(), "two".into()])
        );
    }
}
