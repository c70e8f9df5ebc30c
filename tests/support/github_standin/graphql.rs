//! `POST /graphql`. First, as GitHub does before running anything, the document is validated
//! against GitHub's published schema and the variables are coerced to the operation's variable
//! types ([`super::schema`], apollo-compiler): a field, argument or input field GitHub does not
//! have (an `id` in a `ProjectV2SingleSelectFieldOptionInput`) is refused with `errors` and no
//! `data`, so a test of a document GitHub would refuse fails here too.
//!
//! Then, without a GraphQL parser of its own: an operation is recognised by the field names in
//! the query text, at the nesting depth where they belong (inline fragments do not count as a
//! level), and arguments are read from the text, `$variables` resolved from `variables`. Errors
//! are HTTP 200 with an `errors` array, as GitHub answers them: a missing node is `NOT_FOUND`
//! with `null` data at its path; a query GitHub would refuse before running it (pagination
//! limits, bad arguments) has no `data` at all.
//!
//! The Projects v2 answers carry every field of a node, whatever the selection asks for, except
//! those that need arguments (`field`, `fields`, `items`, `fieldValueByName`, `fieldValues`,
//! `issue`, `pullRequest`, `projectV2`), which appear when selected. Top-level mutations may be
//! aliased (several in one request, run in order, each answered under its alias); other aliases
//! and named fragments are not played.

use super::model::{Model, OPTION_COLORS, Project, ProjectItem, iso};
use super::wire::Answer;
use serde_json::{Map, Value, json};

/// Whether a query text is a mutation (`mutation ...`, after comments and whitespace).
pub fn is_mutation(query: &str) -> bool {
    query
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect::<Vec<_>>()
        .join(" ")
        .starts_with("mutation")
}

fn errors(list: Vec<Value>) -> Answer {
    Answer::ok(json!({"errors": list}))
}

fn unsupported(what: &str) -> Answer {
    errors(vec![json!({
        "message": format!("the GitHub stand-in does not support this operation: {what}"),
        "extensions": {"code": "undefinedField"},
    })])
}

pub fn answer(m: &mut Model, body: Option<&Value>) -> Answer {
    let Some(query) = body.and_then(|b| b["query"].as_str()) else {
        return errors(vec![
            json!({"message": "A query attribute must be specified and must be a string."}),
        ]);
    };
    let vars = body.map(|b| b["variables"].clone()).unwrap_or(Value::Null);
    let operation = body.and_then(|b| b["operationName"].as_str());
    if let Err(refused) = super::schema::check(query, operation, &vars) {
        return errors(refused.iter().map(|r| r.to_json()).collect());
    }
    for (field, draft) in [
        ("markPullRequestReadyForReview", false),
        ("convertPullRequestToDraft", true),
    ] {
        if query.contains(field) {
            return set_draft(m, query, &vars, field, draft);
        }
    }
    let result = if is_mutation(query) {
        mutations(m, query, &vars)
    } else {
        queries(m, query, &vars)
    };
    match result {
        Err(fatal) => errors(vec![fatal]),
        Ok(out) if out.data.is_empty() => unsupported(query),
        Ok(out) => {
            let mut body = json!({"data": out.data});
            if !out.errors.is_empty() {
                body["errors"] = Value::Array(out.errors);
            }
            Answer::ok(body)
        }
    }
}

/// The top-level fields answered so far and the errors beside them.
#[derive(Default)]
struct Out {
    data: Map<String, Value>,
    errors: Vec<Value>,
}

/// An error that stops the whole request (`{"errors": [..]}` without `data`).
type Fatal = Value;

fn queries(m: &Model, query: &str, vars: &Value) -> Result<Out, Fatal> {
    let mut out = Out::default();
    if find_field(query, "rateLimit", 1, vars)?.is_some() {
        let b = &m.graphql;
        out.data.insert(
            "rateLimit".into(),
            json!({
                "limit": b.limit, "cost": 1, "used": b.used, "remaining": b.remaining(),
                "resetAt": chrono::DateTime::from_timestamp(b.reset, 0).map(iso), "nodeCount": 0,
            }),
        );
    }
    if let Some(f) = find_field(query, "viewer", 1, vars)? {
        let mut v = owner_ref(m, &m.login, false);
        if let Some(pf) = find_field(f.sel, "projectV2", 0, vars)? {
            let path = ["viewer", "projectV2"];
            v["projectV2"] = project_by_number(m, &m.login, &pf, vars, &path, &mut out.errors)?;
        }
        out.data.insert("viewer".into(), v);
    }
    for (name, is_org) in [("organization", true), ("user", false)] {
        if let Some(f) = find_field(query, name, 1, vars)? {
            let v = owner(m, name, is_org, &f, vars, &mut out.errors)?;
            out.data.insert(name.into(), v);
        }
    }
    if let Some(f) = find_field(query, "repository", 1, vars)? {
        let v = repository(m, &f, vars, &mut out.errors)?;
        out.data.insert("repository".into(), v);
    }
    if let Some(f) = find_field(query, "node", 1, vars)? {
        let v = node(m, &f, vars, &mut out.errors)?;
        out.data.insert("node".into(), v);
    }
    Ok(out)
}

/// The mutations of the request, one after the other in the order of the text as on GitHub,
/// each answered under its alias (`card0: updateProjectV2ItemFieldValue(...)`) or its name; an
/// error of one is an error at its path and `null` for it, the others go on.
fn mutations(m: &mut Model, query: &str, vars: &Value) -> Result<Out, Fatal> {
    let mut out = Out::default();
    let names = [
        "addProjectV2ItemById",
        "updateProjectV2ItemFieldValue",
        "updateProjectV2Field",
    ];
    for (name, key, f) in fields_named(query, &names, 1, vars)? {
        let input = match f.args.get("input") {
            Some(Value::Object(o)) => o.clone(),
            _ => return Err(missing_arguments(&name, "input")),
        };
        let before = out.errors.len();
        let v = match name.as_str() {
            "addProjectV2ItemById" => add_item(m, &input, &f, vars, &mut out.errors)?,
            "updateProjectV2ItemFieldValue" => set_value(m, &input, &f, vars, &mut out.errors)?,
            _ => update_field(m, &input, &mut out.errors)?,
        };
        if key != name {
            for e in &mut out.errors[before..] {
                if let Some(first) = e["path"].get_mut(0) {
                    *first = json!(key);
                }
            }
        }
        out.data.insert(key, v);
    }
    Ok(out)
}

fn set_draft(m: &mut Model, query: &str, vars: &Value, field: &str, draft: bool) -> Answer {
    let id = pull_request_id(query, vars).or_else(|| any_pr_node_id(m, vars));
    let not_found = |id: &str| {
        Answer::ok(json!({
            "data": {field: null},
            "errors": [{
                "type": "NOT_FOUND", "path": [field], "locations": [],
                "message": format!("Could not resolve to a node with the global id of '{id}'."),
            }],
        }))
    };
    let Some(id) = id else {
        return not_found("");
    };
    let Some((ri, n)) = m.pr_by_node_id(&id) else {
        return not_found(&id);
    };
    let seq = m.next_seq();
    let r = &mut m.repos[ri];
    let Some(issue) = r.issues.get_mut(&n) else {
        return not_found(&id);
    };
    if let Some(p) = issue.pr.as_mut() {
        p.draft = draft;
    }
    issue.touch(seq);
    let r = &m.repos[ri];
    let i = &r.issues[&n];
    Answer::ok(json!({"data": {field: {
        "clientMutationId": null,
        "pullRequest": {
            "id": i.node_id(r), "number": n, "isDraft": draft, "title": i.title,
            "state": i.state().to_uppercase(),
            "url": format!("{}/{}/pull/{n}", m.base_url, r.full_name()),
        },
    }}}))
}

/// `pullRequestId` from `variables.input`, from `$var` or a string literal in the text, or from
/// a variable holding the whole input (`input: $in`).
fn pull_request_id(query: &str, vars: &Value) -> Option<String> {
    if let Some(s) = vars["input"]["pullRequestId"].as_str() {
        return Some(s.to_string());
    }
    if let Some(v) = argument(query, "pullRequestId") {
        return match v {
            Arg::Literal(s) => Some(s),
            Arg::Var(name) => vars[name.as_str()].as_str().map(str::to_string),
        };
    }
    if let Some(Arg::Var(name)) = argument(query, "input") {
        return vars[name.as_str()]["pullRequestId"]
            .as_str()
            .map(str::to_string);
    }
    None
}

/// The last resort: a variable whose value is some pull request's node id.
fn any_pr_node_id(m: &Model, vars: &Value) -> Option<String> {
    vars.as_object()?
        .values()
        .filter_map(Value::as_str)
        .find(|s| m.is_pr_node_id(s))
        .map(str::to_string)
}

enum Arg {
    Literal(String),
    Var(String),
}

/// The value after `name:` in the query text, when it is a `"literal"` or a `$variable`.
fn argument(query: &str, name: &str) -> Option<Arg> {
    let mut from = 0;
    while let Some(pos) = query[from..].find(name) {
        let after = &query[from + pos + name.len()..];
        from += pos + name.len();
        let Some(rest) = after.trim_start().strip_prefix(':') else {
            continue;
        };
        let rest = rest.trim_start();
        if let Some(lit) = rest.strip_prefix('"') {
            return lit.split('"').next().map(|s| Arg::Literal(s.to_string()));
        }
        if let Some(var) = rest.strip_prefix('$') {
            let name: String = var
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            return Some(Arg::Var(name));
        }
    }
    None
}

// ----- reading the query text -----

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The index after a string literal starting at `i` (plain or block string).
fn skip_string(s: &[u8], i: usize) -> usize {
    if s[i..].starts_with(b"\"\"\"") {
        let mut j = i + 3;
        while j < s.len() {
            if s[j..].starts_with(b"\\\"\"\"") {
                j += 4;
            } else if s[j..].starts_with(b"\"\"\"") {
                return j + 3;
            } else {
                j += 1;
            }
        }
        return s.len();
    }
    let mut j = i + 1;
    while j < s.len() {
        match s[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    s.len()
}

/// Whitespace and commas (insignificant in GraphQL).
fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r' | b',') {
        i += 1;
    }
    i
}

fn ident_end(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && is_ident(s[i]) {
        i += 1;
    }
    i
}

/// An identifier in the query text, outside strings and comments.
struct Token {
    start: usize,
    end: usize,
    /// How many selection sets enclose it (an inline fragment's braces do not count).
    depth: usize,
    /// Inside an argument list or variable definitions.
    in_parens: bool,
    /// A `$variable`.
    variable: bool,
    /// Followed by `:`: an alias or an argument or input field name, not a selected field.
    before_colon: bool,
}

fn tokens(text: &str) -> Vec<Token> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    // One entry per open brace: whether it opens a selection set (false: an inline fragment).
    let mut braces: Vec<bool> = Vec::new();
    let mut parens = 0usize;
    let mut fragment_brace = false;
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'"' => {
                i = skip_string(s, i);
                continue;
            }
            b'#' => {
                while i < s.len() && s[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'{' => {
                braces.push(!fragment_brace);
                fragment_brace = false;
            }
            b'}' => {
                braces.pop();
            }
            b'(' => parens += 1,
            b')' => parens = parens.saturating_sub(1),
            b'.' if s[i..].starts_with(b"...") => {
                // `... on Type {` or `... {`: the brace that follows is a fragment's; a named
                // spread (`...Name`) is left to be read as a token.
                let mut j = skip_ws(s, i + 3);
                let word_end = ident_end(s, j);
                if &s[j..word_end] == b"on" {
                    j = skip_ws(s, word_end);
                    j = skip_ws(s, ident_end(s, j));
                }
                if s.get(j) == Some(&b'{') {
                    fragment_brace = true;
                    i = j;
                    continue;
                }
                i += 3;
                continue;
            }
            b if is_ident(b) && !b.is_ascii_digit() => {
                let start = i;
                i = ident_end(s, i);
                out.push(Token {
                    start,
                    end: i,
                    depth: braces.iter().filter(|sel| **sel).count(),
                    in_parens: parens > 0,
                    variable: start > 0 && s[start - 1] == b'$',
                    before_colon: s.get(skip_ws(s, i)) == Some(&b':'),
                });
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the query text uses `name` as a whole word (an operation, field or argument name)
/// outside strings and comments.
pub fn mentions(query: &str, name: &str) -> bool {
    tokens(query).iter().any(|t| &query[t.start..t.end] == name)
}

/// A selected field: its arguments (variables resolved) and the inside of its selection set
/// (empty without one).
struct Field<'a> {
    args: Map<String, Value>,
    sel: &'a str,
}

/// The first field `name` selected at `depth` of `text` (1 for a top-level field of an
/// operation; 0 for a direct child within a field's `sel`).
fn find_field<'a>(
    text: &'a str,
    name: &str,
    depth: usize,
    vars: &Value,
) -> Result<Option<Field<'a>>, Fatal> {
    let Some(tok) = tokens(text).into_iter().find(|t| {
        t.depth == depth
            && !t.in_parens
            && !t.variable
            && !t.before_colon
            && &text[t.start..t.end] == name
    }) else {
        return Ok(None);
    };
    field_after(text, name, tok.end, vars).map(Some)
}

/// Every selection of one of `names` at `depth` of `text`, in the order of the text: its name,
/// the key it is answered under (its alias, else its name) and the field.
fn fields_named<'a>(
    text: &'a str,
    names: &[&str],
    depth: usize,
    vars: &Value,
) -> Result<Vec<(String, String, Field<'a>)>, Fatal> {
    let toks = tokens(text);
    let mut out = Vec::new();
    for (k, t) in toks.iter().enumerate() {
        let name = &text[t.start..t.end];
        if t.depth != depth || t.in_parens || t.variable || t.before_colon || !names.contains(&name)
        {
            continue;
        }
        // `alias: name`: the token before, followed by the colon right before this one.
        let alias = k
            .checked_sub(1)
            .map(|j| &toks[j])
            .filter(|a| a.depth == depth && !a.in_parens && !a.variable && a.before_colon)
            .filter(|a| text[a.end..t.start].trim() == ":")
            .map(|a| text[a.start..a.end].to_string());
        let field = field_after(text, name, t.end, vars)?;
        out.push((
            name.to_string(),
            alias.unwrap_or_else(|| name.to_string()),
            field,
        ));
    }
    Ok(out)
}

/// The arguments and selection of field `name`, whose name ends at `end`.
fn field_after<'a>(
    text: &'a str,
    name: &str,
    end: usize,
    vars: &Value,
) -> Result<Field<'a>, Fatal> {
    let s = text.as_bytes();
    let mut p = Parser { s, i: end, vars };
    p.ws();
    let args = if s.get(p.i) == Some(&b'(') {
        p.args().map_err(|what| parse_error(name, &what))?
    } else {
        Map::new()
    };
    p.ws();
    let sel = if s.get(p.i) == Some(&b'{') {
        let close = matching_brace(s, p.i);
        &text[p.i + 1..close]
    } else {
        ""
    };
    Ok(Field { args, sel })
}

/// The index of the `}` closing the brace at `open` (the end of the text when unbalanced).
fn matching_brace(s: &[u8], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < s.len() {
        match s[i] {
            b'"' => {
                i = skip_string(s, i);
                continue;
            }
            b'#' => {
                while i < s.len() && s[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s.len()
}

/// GraphQL input values: literals, lists, input objects, and `$variables` from `vars`.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    vars: &'a Value,
}

impl Parser<'_> {
    fn ws(&mut self) {
        loop {
            self.i = skip_ws(self.s, self.i);
            if self.s.get(self.i) != Some(&b'#') {
                return;
            }
            while self.i < self.s.len() && self.s[self.i] != b'\n' {
                self.i += 1;
            }
        }
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.s.get(self.i) == Some(&b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn name(&mut self) -> Result<String, String> {
        self.ws();
        let start = self.i;
        self.i = ident_end(self.s, self.i);
        if start == self.i {
            return Err(format!("a name at offset {start}"));
        }
        Ok(String::from_utf8_lossy(&self.s[start..self.i]).into_owned())
    }

    fn args(&mut self) -> Result<Map<String, Value>, String> {
        if !self.eat(b'(') {
            return Err("(".into());
        }
        let mut out = Map::new();
        loop {
            if self.eat(b')') {
                return Ok(out);
            }
            let key = self.name()?;
            if !self.eat(b':') {
                return Err(format!(": after {key}"));
            }
            let value = self.value()?;
            out.insert(key, value);
        }
    }

    fn value(&mut self) -> Result<Value, String> {
        self.ws();
        match self.s.get(self.i).copied() {
            Some(b'$') => {
                self.i += 1;
                let name = self.name()?;
                Ok(self.vars.get(&name).cloned().unwrap_or(Value::Null))
            }
            Some(b'"') => self.string().map(Value::String),
            Some(b'[') => {
                self.i += 1;
                let mut list = Vec::new();
                loop {
                    if self.eat(b']') {
                        return Ok(Value::Array(list));
                    }
                    if self.i >= self.s.len() {
                        return Err("]".into());
                    }
                    list.push(self.value()?);
                }
            }
            Some(b'{') => {
                self.i += 1;
                let mut obj = Map::new();
                loop {
                    if self.eat(b'}') {
                        return Ok(Value::Object(obj));
                    }
                    let key = self.name()?;
                    if !self.eat(b':') {
                        return Err(format!(": after {key}"));
                    }
                    let value = self.value()?;
                    obj.insert(key, value);
                }
            }
            Some(b) if b == b'-' || b.is_ascii_digit() => {
                let start = self.i;
                while self
                    .s
                    .get(self.i)
                    .is_some_and(|b| matches!(b, b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9'))
                {
                    self.i += 1;
                }
                let text = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
                let number = if text.contains(['.', 'e', 'E']) {
                    text.parse::<f64>().ok().map(|f| json!(f))
                } else {
                    text.parse::<i64>().ok().map(|n| json!(n))
                };
                number.ok_or(format!("a number, not {text}"))
            }
            Some(b) if is_ident(b) => {
                let name = self.name()?;
                Ok(match name.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "null" => Value::Null,
                    // An enum value (`GRAY`); as a string, the way variables carry them.
                    _ => Value::String(name),
                })
            }
            _ => Err(format!("a value at offset {}", self.i)),
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let s = self.s;
        if s[self.i..].starts_with(b"\"\"\"") {
            let end = skip_string(s, self.i);
            let inner = &s[self.i + 3..end.saturating_sub(3).max(self.i + 3)];
            self.i = end;
            return Ok(String::from_utf8_lossy(inner).replace("\\\"\"\"", "\"\"\""));
        }
        let mut out: Vec<u8> = Vec::new();
        let mut i = self.i + 1;
        while i < s.len() {
            match s[i] {
                b'"' => {
                    self.i = i + 1;
                    return Ok(String::from_utf8_lossy(&out).into_owned());
                }
                b'\\' => {
                    let escaped = match s.get(i + 1) {
                        Some(b'n') => '\n',
                        Some(b't') => '\t',
                        Some(b'r') => '\r',
                        Some(b'b') => '\u{8}',
                        Some(b'f') => '\u{c}',
                        Some(b'u') => {
                            let hex = s.get(i + 2..i + 6).ok_or("a \\u escape")?;
                            let code = u32::from_str_radix(&String::from_utf8_lossy(hex), 16)
                                .map_err(|_| "a \\u escape")?;
                            i += 4;
                            char::from_u32(code).unwrap_or('\u{fffd}')
                        }
                        Some(c) => *c as char,
                        None => return Err("an escape".into()),
                    };
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(escaped.encode_utf8(&mut buf).as_bytes());
                    i += 2;
                }
                b => {
                    out.push(b);
                    i += 1;
                }
            }
        }
        Err("a closing quote".into())
    }
}

// ----- errors, as GitHub words them -----

fn parse_error(field: &str, expected: &str) -> Fatal {
    json!({
        "message": format!("Parse error in the arguments of '{field}': expected {expected}"),
        "locations": [],
    })
}

fn missing_arguments(field: &str, args: &str) -> Fatal {
    json!({
        "message": format!("Field '{field}' is missing required arguments: {args}"),
        "locations": [],
        "extensions": {
            "code": "missingRequiredArguments", "className": "Field", "name": field,
            "arguments": args,
        },
    })
}

fn invalid_argument(field: &str, arg: &str, value: &Value, expected: &str) -> Fatal {
    json!({
        "message": format!(
            "Argument '{arg}' on Field '{field}' has an invalid value ({value}). Expected type '{expected}'."
        ),
        "locations": [],
        "extensions": {
            "code": "argumentLiteralsIncompatible", "typeName": "Field", "argumentName": arg,
        },
    })
}

fn invalid_input(input_type: &str, problem: &str) -> Fatal {
    json!({
        "message": format!("Argument 'input' has an invalid value for {input_type}: {problem}"),
        "locations": [],
        "extensions": {"code": "argumentLiteralsIncompatible", "typeName": input_type},
    })
}

fn not_found(path: &[&str], message: String) -> Value {
    json!({
        "type": "NOT_FOUND",
        "path": path,
        "extensions": {"saml_failure": false},
        "locations": [],
        "message": message,
    })
}

fn no_node(path: &[&str], id: &str) -> Value {
    not_found(
        path,
        format!("Could not resolve to a node with the global id of '{id}'."),
    )
}

fn refused(path: &[&str], message: &str) -> Value {
    json!({"path": path, "locations": [], "message": message})
}

/// A string argument; absent or `null` is `None`.
fn str_arg<'a>(
    args: &'a Map<String, Value>,
    field: &str,
    arg: &str,
) -> Result<Option<&'a str>, Fatal> {
    match args.get(arg) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(v) => Err(invalid_argument(field, arg, v, "String")),
    }
}

fn req_str<'a>(args: &'a Map<String, Value>, field: &str, arg: &str) -> Result<&'a str, Fatal> {
    str_arg(args, field, arg)?.ok_or_else(|| missing_arguments(field, arg))
}

/// An integer argument; absent or `null` is `None`.
fn int_arg(args: &Map<String, Value>, field: &str, arg: &str) -> Result<Option<i64>, Fatal> {
    match args.get(arg) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| invalid_argument(field, arg, v, "Int")),
    }
}

fn req_int(args: &Map<String, Value>, field: &str, arg: &str) -> Result<i64, Fatal> {
    int_arg(args, field, arg)?.ok_or_else(|| missing_arguments(field, arg))
}

/// A required `ID!` of a mutation's input object.
fn input_id<'a>(
    input: &'a Map<String, Value>,
    input_type: &str,
    key: &str,
) -> Result<&'a str, Fatal> {
    input.get(key).and_then(Value::as_str).ok_or_else(|| {
        invalid_input(
            input_type,
            &format!("{key} (Expected value to not be null)"),
        )
    })
}

// ----- connections -----

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 without padding, as GitHub's cursors look (`MQ` for the first item).
fn b64(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (k, b)| n | (u32::from(*b) << (16 - 8 * k)));
        for k in 0..=chunk.len() {
            out.push(B64[((n >> (18 - 6 * k)) & 63) as usize] as char);
        }
    }
    out
}

fn cursor(position: usize) -> String {
    b64(position.to_string().as_bytes())
}

/// The position a cursor of [`cursor`] stands for; `None` for anything else.
fn cursor_position(c: &str) -> Option<usize> {
    let mut bits = 0u32;
    let mut nbits = 0;
    let mut bytes = Vec::new();
    for ch in c.bytes() {
        let v = B64.iter().position(|b| *b == ch)? as u32;
        bits = ((bits << 6) | v) & 0xffff;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            bytes.push((bits >> nbits) as u8);
        }
    }
    let position = String::from_utf8(bytes).ok()?.parse::<usize>().ok()?;
    // Only the cursors handed out, not any base64 that happens to decode to digits.
    (cursor(position) == c).then_some(position)
}

/// The selection for one node of a connection: inside `nodes`, else inside `edges { node }`.
fn node_selection<'a>(f: &Field<'a>, vars: &Value) -> Result<&'a str, Fatal> {
    if let Some(n) = find_field(f.sel, "nodes", 0, vars)? {
        return Ok(n.sel);
    }
    if let Some(e) = find_field(f.sel, "edges", 0, vars)?
        && let Some(n) = find_field(e.sel, "node", 0, vars)?
    {
        return Ok(n.sel);
    }
    Ok("")
}

/// A page of `nodes` for `first`/`after` as GitHub pages connections: `first` is required and
/// at most 100; cursors are opaque. `edges` are answered when selected.
fn connection(
    name: &str,
    nodes: Vec<Value>,
    f: &Field,
    vars: &Value,
    path: &[&str],
) -> Result<Value, Fatal> {
    let first = int_arg(&f.args, name, "first")?;
    if int_arg(&f.args, name, "last")?.is_some() || str_arg(&f.args, name, "before")?.is_some() {
        return Err(json!({
            "path": path, "locations": [],
            "message": format!("the GitHub stand-in pages `{name}` with `first` and `after` only"),
        }));
    }
    let Some(first) = first else {
        return Err(json!({
            "type": "MISSING_PAGINATION_BOUNDARIES", "path": path, "locations": [],
            "message": format!("You must provide a `first` or `last` value to properly paginate the `{name}` connection."),
        }));
    };
    if first > 100 {
        return Err(json!({
            "type": "EXCESSIVE_PAGINATION", "path": path, "locations": [],
            "message": format!("Requesting {first} records on the `{name}` connection exceeds the `first` limit of 100 records."),
        }));
    }
    if first < 0 {
        return Err(json!({
            "path": path, "locations": [],
            "message": format!("`first` on the `{name}` connection cannot be less than zero."),
        }));
    }
    let total = nodes.len();
    let start = match str_arg(&f.args, name, "after")? {
        None => 0,
        Some(c) => cursor_position(c).filter(|p| *p <= total).ok_or_else(|| {
            json!({
                "type": "INVALID_CURSOR_ARGUMENTS", "path": path, "locations": [],
                "message": format!("`{c}` does not appear to be a valid cursor."),
            })
        })?,
    };
    let end = start.saturating_add(first as usize).min(total);
    let page: Vec<Value> = nodes.into_iter().skip(start).take(end - start).collect();
    let cursor_at = |k: usize| (k < end).then(|| cursor(k + 1));
    let mut v = json!({
        "totalCount": total,
        "pageInfo": {
            "hasNextPage": end < total,
            "hasPreviousPage": start > 0,
            "startCursor": cursor_at(start),
            "endCursor": end.checked_sub(1).filter(|k| *k >= start).and_then(cursor_at),
        },
    });
    if find_field(f.sel, "edges", 0, vars)?.is_some() {
        v["edges"] = page
            .iter()
            .enumerate()
            .map(|(k, n)| json!({"cursor": cursor(start + k + 1), "node": n}))
            .collect();
    }
    v["nodes"] = Value::Array(page);
    Ok(v)
}

// ----- Projects v2 queries -----

fn owner_ref(m: &Model, login: &str, is_org: bool) -> Value {
    let (kind, prefix) = if is_org {
        ("Organization", "O")
    } else {
        ("User", "U")
    };
    json!({
        "__typename": kind,
        "id": format!("{prefix}_standin_{login}"),
        "login": login,
        "url": format!("{}/{login}", m.base_url),
    })
}

/// `organization(login:)` or `user(login:)`.
fn owner(
    m: &Model,
    name: &str,
    is_org: bool,
    f: &Field,
    vars: &Value,
    errors: &mut Vec<Value>,
) -> Result<Value, Fatal> {
    let login = req_str(&f.args, name, "login")?;
    let Some((login, _)) = m.owner_kind(login).filter(|(_, org)| *org == is_org) else {
        let what = if is_org { "an Organization" } else { "a User" };
        errors.push(not_found(
            &[name],
            format!("Could not resolve to {what} with the login of '{login}'."),
        ));
        return Ok(Value::Null);
    };
    let mut v = owner_ref(m, &login, is_org);
    if let Some(pf) = find_field(f.sel, "projectV2", 0, vars)? {
        v["projectV2"] = project_by_number(m, &login, &pf, vars, &[name, "projectV2"], errors)?;
    }
    Ok(v)
}

fn project_by_number(
    m: &Model,
    owner: &str,
    f: &Field,
    vars: &Value,
    path: &[&str],
    errors: &mut Vec<Value>,
) -> Result<Value, Fatal> {
    let number = req_int(&f.args, "projectV2", "number")?;
    let found = u64::try_from(number)
        .ok()
        .and_then(|n| m.project_index(owner, n));
    match found {
        Some(pi) => project_json(m, &m.projects[pi], f.sel, vars, path),
        None => {
            errors.push(not_found(
                path,
                format!("Could not resolve to a ProjectV2 with the number {number}."),
            ));
            Ok(Value::Null)
        }
    }
}

fn project_json(
    m: &Model,
    p: &Project,
    sel: &str,
    vars: &Value,
    path: &[&str],
) -> Result<Value, Fatal> {
    let mut v = json!({
        "__typename": "ProjectV2",
        "id": p.id,
        "number": p.number,
        "title": p.title,
        "url": p.url(&m.base_url),
        "closed": false,
        "public": false,
        "shortDescription": null,
        "owner": owner_ref(m, &p.owner, p.owner_is_org),
    });
    if let Some(f) = find_field(sel, "field", 0, vars)? {
        v["field"] = field_by_name(p, req_str(&f.args, "field", "name")?);
    }
    if let Some(f) = find_field(sel, "fields", 0, vars)? {
        let nodes = vec![title_field_json(p), status_field_json(p)];
        v["fields"] = connection("fields", nodes, &f, vars, &[path, &["fields"]].concat())?;
    }
    if let Some(f) = find_field(sel, "items", 0, vars)? {
        let path = [path, &["items"]].concat();
        let node_sel = node_selection(&f, vars)?;
        let nodes = p
            .items
            .iter()
            .map(|i| item_json(m, p, i, node_sel, vars, &path))
            .collect::<Result<Vec<_>, _>>()?;
        v["items"] = connection("items", nodes, &f, vars, &path)?;
    }
    Ok(v)
}

fn field_by_name(p: &Project, name: &str) -> Value {
    if name.eq_ignore_ascii_case("Status") {
        status_field_json(p)
    } else if name.eq_ignore_ascii_case("Title") {
        title_field_json(p)
    } else {
        Value::Null
    }
}

fn status_field_json(p: &Project) -> Value {
    json!({
        "__typename": "ProjectV2SingleSelectField",
        "id": p.status_field_id,
        "name": "Status",
        "dataType": "SINGLE_SELECT",
        "options": p.options.iter().map(|o| json!({
            "id": o.id, "name": o.name, "color": o.color, "description": o.description,
        })).collect::<Vec<_>>(),
    })
}

fn title_field_json(p: &Project) -> Value {
    json!({
        "__typename": "ProjectV2Field",
        "id": p.title_field_id,
        "name": "Title",
        "dataType": "TITLE",
    })
}

fn item_json(
    m: &Model,
    p: &Project,
    item: &ProjectItem,
    sel: &str,
    vars: &Value,
    path: &[&str],
) -> Result<Value, Fatal> {
    let content = item
        .content
        .map_or(Value::Null, |(repo_id, n)| content_json(m, repo_id, n));
    let kind = match content["__typename"].as_str() {
        Some("PullRequest") => "PULL_REQUEST",
        Some(_) => "ISSUE",
        None => "REDACTED",
    };
    let mut v = json!({
        "__typename": "ProjectV2Item",
        "id": item.id,
        "type": kind,
        "isArchived": false,
        "project": {"id": p.id, "number": p.number},
    });
    if let Some(f) = find_field(sel, "fieldValueByName", 0, vars)? {
        let name = req_str(&f.args, "fieldValueByName", "name")?;
        v["fieldValueByName"] = field_value(p, item, &content, name);
    }
    if let Some(f) = find_field(sel, "fieldValues", 0, vars)? {
        let nodes: Vec<Value> = ["Title", "Status"]
            .iter()
            .map(|name| field_value(p, item, &content, name))
            .filter(|v| !v.is_null())
            .collect();
        let path = [path, &["nodes", "fieldValues"]].concat();
        v["fieldValues"] = connection("fieldValues", nodes, &f, vars, &path)?;
    }
    v["content"] = content;
    Ok(v)
}

/// The item's value of field `name` (any case), `null` when it has none.
fn field_value(p: &Project, item: &ProjectItem, content: &Value, name: &str) -> Value {
    let field = |f: Value| json!({"__typename": f["__typename"], "id": f["id"], "name": f["name"]});
    if name.eq_ignore_ascii_case("Status") {
        let Some(o) = item.status.as_deref().and_then(|id| p.option(id)) else {
            return Value::Null;
        };
        json!({
            "__typename": "ProjectV2ItemFieldSingleSelectValue",
            "id": format!("PVTFSV_standin_{}", item.id),
            "name": o.name,
            "optionId": o.id,
            "color": o.color,
            "field": field(status_field_json(p)),
        })
    } else if name.eq_ignore_ascii_case("Title") && !content.is_null() {
        json!({
            "__typename": "ProjectV2ItemFieldTextValue",
            "id": format!("PVTFTV_standin_{}", item.id),
            "text": content["title"],
            "field": field(title_field_json(p)),
        })
    } else {
        Value::Null
    }
}

/// An issue or pull request as a GraphQL node; `null` when it does not exist.
fn content_json(m: &Model, repo_id: u64, number: u64) -> Value {
    let Some(r) = m.repo_index_by_id(repo_id).map(|ri| &m.repos[ri]) else {
        return Value::Null;
    };
    let Some(i) = r.issues.get(&number) else {
        return Value::Null;
    };
    let html = |kind: &str| format!("{}/{}/{kind}/{number}", m.base_url, r.full_name());
    let mut v = json!({
        "id": i.node_id(r),
        "number": number,
        "title": i.title,
        "body": i.body,
        "closed": !i.open,
        "createdAt": iso(i.created_at),
        "updatedAt": iso(i.updated_at),
        "author": {"login": i.user},
        "repository": repo_ref(m, r),
    });
    match &i.pr {
        None => {
            v["__typename"] = json!("Issue");
            v["state"] = json!(if i.open { "OPEN" } else { "CLOSED" });
            v["stateReason"] = json!(i.state_reason.as_deref().map(str::to_uppercase));
            v["url"] = json!(html("issues"));
        }
        Some(pr) => {
            let state = if pr.merged_at.is_some() {
                "MERGED"
            } else if i.open {
                "OPEN"
            } else {
                "CLOSED"
            };
            v["__typename"] = json!("PullRequest");
            v["state"] = json!(state);
            v["isDraft"] = json!(pr.draft);
            v["merged"] = json!(pr.merged_at.is_some());
            v["headRefName"] = json!(pr.head_ref);
            v["baseRefName"] = json!(pr.base_ref);
            v["url"] = json!(html("pull"));
        }
    }
    v
}

fn repo_ref(m: &Model, r: &super::model::Repo) -> Value {
    json!({
        "__typename": "Repository",
        "id": format!("R_standin{}", r.id),
        "name": r.name,
        "nameWithOwner": r.full_name(),
        "owner": {"login": r.owner},
        "url": format!("{}/{}", m.base_url, r.full_name()),
    })
}

/// `repository(owner:, name:)` with `issue(number:)` / `pullRequest(number:)` for node ids.
fn repository(m: &Model, f: &Field, vars: &Value, errors: &mut Vec<Value>) -> Result<Value, Fatal> {
    let owner = req_str(&f.args, "repository", "owner")?;
    let name = req_str(&f.args, "repository", "name")?;
    let Some(ri) = m.repo_index(&format!("{owner}/{name}")) else {
        errors.push(not_found(
            &["repository"],
            format!("Could not resolve to a Repository with the name '{owner}/{name}'."),
        ));
        return Ok(Value::Null);
    };
    let r = &m.repos[ri];
    let mut v = repo_ref(m, r);
    for (field, is_pr, kind) in [
        ("issue", false, "an Issue"),
        ("pullRequest", true, "a PullRequest"),
    ] {
        let Some(f) = find_field(f.sel, field, 0, vars)? else {
            continue;
        };
        let number = req_int(&f.args, field, "number")?;
        let found = u64::try_from(number)
            .ok()
            .filter(|n| r.issues.get(n).is_some_and(|i| i.pr.is_some() == is_pr));
        v[field] = match found {
            Some(n) => content_json(m, r.id, n),
            None => {
                errors.push(not_found(
                    &["repository", field],
                    format!("Could not resolve to {kind} with the number of {number}."),
                ));
                Value::Null
            }
        };
    }
    Ok(v)
}

/// `node(id:)` for a project, one of its fields, a project item, an issue or a pull request.
fn node(m: &Model, f: &Field, vars: &Value, errors: &mut Vec<Value>) -> Result<Value, Fatal> {
    let id = req_str(&f.args, "node", "id")?;
    if let Some(p) = m.projects.iter().find(|p| p.id == id) {
        return project_json(m, p, f.sel, vars, &["node"]);
    }
    if let Some(p) = m.projects.iter().find(|p| p.status_field_id == id) {
        return Ok(status_field_json(p));
    }
    if let Some(p) = m.projects.iter().find(|p| p.title_field_id == id) {
        return Ok(title_field_json(p));
    }
    for p in &m.projects {
        if let Some(item) = p.items.iter().find(|i| i.id == id) {
            return item_json(m, p, item, f.sel, vars, &["node"]);
        }
    }
    if let Some((ri, n)) = m.issue_by_node_id(id) {
        return Ok(content_json(m, m.repos[ri].id, n));
    }
    errors.push(no_node(&["node"], id));
    Ok(Value::Null)
}

// ----- Projects v2 mutations -----

fn client_mutation_id(input: &Map<String, Value>) -> Value {
    input
        .get("clientMutationId")
        .cloned()
        .unwrap_or(Value::Null)
}

/// `addProjectV2ItemById`: an issue already on the board answers its existing item.
fn add_item(
    m: &mut Model,
    input: &Map<String, Value>,
    f: &Field,
    vars: &Value,
    errors: &mut Vec<Value>,
) -> Result<Value, Fatal> {
    const NAME: &str = "addProjectV2ItemById";
    let project_id = input_id(input, "AddProjectV2ItemByIdInput", "projectId")?;
    let content_id = input_id(input, "AddProjectV2ItemByIdInput", "contentId")?;
    let Some(pi) = m.projects.iter().position(|p| p.id == project_id) else {
        errors.push(no_node(&[NAME], project_id));
        return Ok(Value::Null);
    };
    let Some((ri, n)) = m.issue_by_node_id(content_id) else {
        errors.push(no_node(&[NAME], content_id));
        return Ok(Value::Null);
    };
    let content = Some((m.repos[ri].id, n));
    let k = match m.projects[pi]
        .items
        .iter()
        .position(|i| i.content == content)
    {
        Some(k) => k,
        None => {
            let id = m.new_item_id();
            let items = &mut m.projects[pi].items;
            items.push(ProjectItem {
                id,
                content,
                status: None,
                status_changes: Vec::new(),
            });
            items.len() - 1
        }
    };
    let item_sel = find_field(f.sel, "item", 0, vars)?.map_or("", |f| f.sel);
    let p = &m.projects[pi];
    Ok(json!({
        "clientMutationId": client_mutation_id(input),
        "item": item_json(m, p, &p.items[k], item_sel, vars, &[NAME, "item"])?,
    }))
}

/// `updateProjectV2ItemFieldValue` with `value: {singleSelectOptionId}` on the Status field.
fn set_value(
    m: &mut Model,
    input: &Map<String, Value>,
    f: &Field,
    vars: &Value,
    errors: &mut Vec<Value>,
) -> Result<Value, Fatal> {
    const NAME: &str = "updateProjectV2ItemFieldValue";
    const INPUT: &str = "UpdateProjectV2ItemFieldValueInput";
    let project_id = input_id(input, INPUT, "projectId")?;
    let item_id = input_id(input, INPUT, "itemId")?;
    let field_id = input_id(input, INPUT, "fieldId")?;
    let Some(value) = input.get("value").and_then(Value::as_object) else {
        return Err(invalid_input(
            INPUT,
            "value (Expected value to not be null)",
        ));
    };
    let Some(pi) = m.projects.iter().position(|p| p.id == project_id) else {
        errors.push(no_node(&[NAME], project_id));
        return Ok(Value::Null);
    };
    let p = &m.projects[pi];
    let Some(k) = p.items.iter().position(|i| i.id == item_id) else {
        errors.push(no_node(&[NAME], item_id));
        return Ok(Value::Null);
    };
    if field_id == p.title_field_id {
        errors.push(refused(
            &[NAME],
            "The Title field cannot be updated with this mutation.",
        ));
        return Ok(Value::Null);
    }
    if field_id != p.status_field_id {
        errors.push(no_node(&[NAME], field_id));
        return Ok(Value::Null);
    }
    let Some(option_id) = value.get("singleSelectOptionId").and_then(Value::as_str) else {
        errors.push(refused(
            &[NAME],
            "The GitHub stand-in sets single-select values only (value: {singleSelectOptionId}).",
        ));
        return Ok(Value::Null);
    };
    let Some(option) = p.option(option_id).map(|o| o.name.clone()) else {
        errors.push(refused(
            &[NAME],
            "The single select option Id does not belong to the field",
        ));
        return Ok(Value::Null);
    };
    let item = &mut m.projects[pi].items[k];
    item.status = Some(option_id.to_string());
    item.status_changes.push(option);
    let item_sel = find_field(f.sel, "projectV2Item", 0, vars)?.map_or("", |f| f.sel);
    let p = &m.projects[pi];
    Ok(json!({
        "clientMutationId": client_mutation_id(input),
        "projectV2Item": item_json(m, p, &p.items[k], item_sel, vars, &[NAME, "projectV2Item"])?,
    }))
}

/// `updateProjectV2Field` with `singleSelectOptions` on the Status field: as on GitHub the list
/// replaces the options. An option input is a name, a color and a description (there is no way
/// to name an existing option), so every option gets a new id and every item loses its status.
fn update_field(
    m: &mut Model,
    input: &Map<String, Value>,
    errors: &mut Vec<Value>,
) -> Result<Value, Fatal> {
    const NAME: &str = "updateProjectV2Field";
    const INPUT: &str = "UpdateProjectV2FieldInput";
    let field_id = input_id(input, INPUT, "fieldId")?;
    let Some(pi) = m
        .projects
        .iter()
        .position(|p| p.status_field_id == field_id)
    else {
        let title = m.projects.iter().any(|p| p.title_field_id == field_id);
        errors.push(if title {
            refused(
                &[NAME],
                "The GitHub stand-in changes the Status field only.",
            )
        } else {
            no_node(&[NAME], field_id)
        });
        return Ok(Value::Null);
    };
    if input
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.eq_ignore_ascii_case("Status"))
    {
        errors.push(refused(
            &[NAME],
            "The GitHub stand-in does not rename fields.",
        ));
        return Ok(Value::Null);
    }
    let list = match input.get("singleSelectOptions") {
        None | Some(Value::Null) => None,
        Some(Value::Array(list)) => Some(list.clone()),
        Some(_) => {
            return Err(invalid_input(
                INPUT,
                "singleSelectOptions (Expected [ProjectV2SingleSelectFieldOptionInput!])",
            ));
        }
    };
    if let Some(list) = list.filter(|l| !l.is_empty()) {
        let mut wanted: Vec<(String, String, String)> = Vec::new();
        for (k, o) in list.iter().enumerate() {
            let problem =
                |what: &str| invalid_input(INPUT, &format!("singleSelectOptions.{k}.{what}"));
            if let Some(key) = o.as_object().and_then(|o| {
                o.keys()
                    .find(|k| !["name", "color", "description"].contains(&k.as_str()))
            }) {
                return Err(problem(&format!(
                    "{key} (Field is not defined on ProjectV2SingleSelectFieldOptionInput)"
                )));
            }
            let name = match o.get("name").and_then(Value::as_str) {
                Some(n) if !n.trim().is_empty() => n.to_string(),
                _ => return Err(problem("name (Expected value to not be null)")),
            };
            let color = match o.get("color").and_then(Value::as_str) {
                Some(c) if OPTION_COLORS.contains(&c) => c.to_string(),
                Some(c) => {
                    return Err(problem(&format!(
                        "color (Expected \"{c}\" to be one of: {})",
                        OPTION_COLORS.join(", ")
                    )));
                }
                None => return Err(problem("color (Expected value to not be null)")),
            };
            let Some(description) = o.get("description").and_then(Value::as_str) else {
                return Err(problem("description (Expected value to not be null)"));
            };
            if wanted.iter().any(|w| w.0.eq_ignore_ascii_case(&name)) {
                errors.push(refused(
                    &[NAME],
                    &format!("Option name '{name}' is used twice."),
                ));
                return Ok(Value::Null);
            }
            wanted.push((name, color, description.to_string()));
        }
        let mut options = Vec::new();
        for (name, color, description) in wanted {
            options.push(super::model::StatusOption {
                id: m.option_id(field_id, &name),
                name,
                color,
                description,
            });
        }
        let p = &mut m.projects[pi];
        p.options = options;
        for item in &mut p.items {
            item.status = None;
        }
    }
    Ok(json!({
        "clientMutationId": client_mutation_id(input),
        "projectV2Field": status_field_json(&m.projects[pi]),
    }))
}
