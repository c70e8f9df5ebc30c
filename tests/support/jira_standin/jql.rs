//! The JQL the stand-in understands: clauses on `project`, `key` (`issuekey`), `status`,
//! `statusCategory`, `labels`, `priority`, `issuetype` (`type`) and `summary`; operators
//! `= != in, not in, ~ !~, is [not] EMPTY|NULL`; `AND`, `OR`, `NOT` and parentheses; `ORDER BY`
//! `key|issuekey|created|updated|priority|status|summary|rank [ASC|DESC]`, comma-separated.
//! Keywords and field names compare case-insensitively; values are bare words or quoted with
//! `"` or `'`. Errors carry Jira's wording.

use super::StatusCategory;
use super::model::{ISSUE_TYPES, Issue, Model, PRIORITIES};
use std::cmp::Ordering;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Project,
    Key,
    Status,
    StatusCategory,
    Labels,
    Priority,
    IssueType,
    Summary,
}

impl Field {
    fn parse(name: &str) -> Option<Field> {
        Some(match name.to_ascii_lowercase().as_str() {
            "project" => Field::Project,
            "key" | "issuekey" | "issue" | "id" => Field::Key,
            "status" => Field::Status,
            "statuscategory" => Field::StatusCategory,
            "labels" | "label" => Field::Labels,
            "priority" => Field::Priority,
            "issuetype" | "type" => Field::IssueType,
            "summary" => Field::Summary,
            _ => return None,
        })
    }

    /// The name Jira's messages use.
    fn name(self) -> &'static str {
        match self {
            Field::Project => "project",
            Field::Key => "key",
            Field::Status => "status",
            Field::StatusCategory => "statusCategory",
            Field::Labels => "labels",
            Field::Priority => "priority",
            Field::IssueType => "issuetype",
            Field::Summary => "summary",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    In,
    NotIn,
    Contains,
    NotContains,
    IsEmpty,
    IsNotEmpty,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::In => "in",
            Op::NotIn => "not in",
            Op::Contains => "~",
            Op::NotContains => "!~",
            Op::IsEmpty => "is",
            Op::IsNotEmpty => "is not",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expr {
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Clause {
        field: Field,
        op: Op,
        values: Vec<String>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderField {
    Key,
    Created,
    Updated,
    Priority,
    Status,
    Summary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub filter: Option<Expr>,
    /// `(field, ascending)`.
    pub order: Vec<(OrderField, bool)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    /// An unquoted word (a keyword, a field name or a value).
    Word(String),
    Quoted(String),
    LParen,
    RParen,
    Comma,
    Op(&'static str),
}

/// `(token, character position from 1)`.
fn lex(jql: &str) -> Result<Vec<(Tok, usize)>, String> {
    let chars: Vec<char> = jql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let pos = i + 1;
        match c {
            _ if c.is_whitespace() => i += 1,
            '(' => {
                out.push((Tok::LParen, pos));
                i += 1;
            }
            ')' => {
                out.push((Tok::RParen, pos));
                i += 1;
            }
            ',' => {
                out.push((Tok::Comma, pos));
                i += 1;
            }
            '=' => {
                out.push((Tok::Op("="), pos));
                i += 1;
            }
            '~' => {
                out.push((Tok::Op("~"), pos));
                i += 1;
            }
            '!' => match chars.get(i + 1) {
                Some('=') => {
                    out.push((Tok::Op("!="), pos));
                    i += 2;
                }
                Some('~') => {
                    out.push((Tok::Op("!~"), pos));
                    i += 2;
                }
                _ => {
                    return Err(syntax(&format!(
                        "Expecting operator but got '!'. (line 1, character {pos})"
                    )));
                }
            },
            '<' | '>' => {
                return Err(syntax(&format!(
                    "The stand-in does not support the operator '{c}'. (line 1, character {pos})"
                )));
            }
            '"' | '\'' => {
                let quote = c;
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(syntax(&format!(
                                "Unterminated string starting at (line 1, character {pos})."
                            )));
                        }
                        Some('\\') if i + 1 < chars.len() => {
                            s.push(chars[i + 1]);
                            i += 2;
                        }
                        Some(&q) if q == quote => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push((Tok::Quoted(s), pos));
            }
            _ => {
                let start = i;
                while i < chars.len()
                    && !chars[i].is_whitespace()
                    && !"()=,!~\"'<>".contains(chars[i])
                {
                    i += 1;
                }
                out.push((Tok::Word(chars[start..i].iter().collect()), pos));
            }
        }
    }
    Ok(out)
}

fn syntax(detail: &str) -> String {
    format!("Error in the JQL Query: {detail}")
}

const RESERVED: [&str; 10] = [
    "and", "or", "not", "in", "is", "empty", "null", "order", "by", "asc",
];

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    len: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.at).map(|(t, _)| t)
    }

    fn peek_word(&self, kw: &str) -> bool {
        matches!(self.peek(), Some(Tok::Word(w)) if w.eq_ignore_ascii_case(kw))
    }

    fn word_at(&self, offset: usize, kw: &str) -> bool {
        matches!(self.toks.get(self.at + offset), Some((Tok::Word(w), _)) if w.eq_ignore_ascii_case(kw))
    }

    fn pos(&self) -> usize {
        self.toks.get(self.at).map_or(self.len + 1, |(_, p)| *p)
    }

    fn describe(&self) -> String {
        match self.peek() {
            None => "the end of the query".into(),
            Some(Tok::Word(w)) => format!("'{w}'"),
            Some(Tok::Quoted(q)) => format!("'\"{q}\"'"),
            Some(Tok::LParen) => "'('".into(),
            Some(Tok::RParen) => "')'".into(),
            Some(Tok::Comma) => "','".into(),
            Some(Tok::Op(o)) => format!("'{o}'"),
        }
    }

    fn expected(&self, what: &str) -> String {
        syntax(&format!(
            "Expecting {what} but got {}. (line 1, character {})",
            self.describe(),
            self.pos()
        ))
    }

    fn bump(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.at).map(|(t, _)| t.clone());
        self.at += 1;
        t
    }

    fn or_expr(&mut self) -> Result<Expr, String> {
        let mut left = self.and_expr()?;
        while self.peek_word("or") {
            self.at += 1;
            let right = self.and_expr()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, String> {
        let mut left = self.not_expr()?;
        while self.peek_word("and") {
            self.at += 1;
            let right = self.not_expr()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn not_expr(&mut self) -> Result<Expr, String> {
        if self.peek_word("not") {
            self.at += 1;
            return Ok(Expr::Not(Box::new(self.not_expr()?)));
        }
        if self.peek() == Some(&Tok::LParen) {
            self.at += 1;
            let e = self.or_expr()?;
            if self.peek() != Some(&Tok::RParen) {
                return Err(self.expected("')'"));
            }
            self.at += 1;
            return Ok(e);
        }
        self.clause()
    }

    fn clause(&mut self) -> Result<Expr, String> {
        let name = match self.peek() {
            Some(Tok::Word(w)) if !RESERVED.contains(&w.to_ascii_lowercase().as_str()) => w.clone(),
            Some(Tok::Quoted(q)) => q.clone(),
            _ => return Err(self.expected("a field name")),
        };
        self.at += 1;
        let field = Field::parse(&name).ok_or_else(|| {
            format!("Field '{name}' does not exist or you do not have permission to view it.")
        })?;
        let op = match self.peek() {
            Some(Tok::Op("=")) => Op::Eq,
            Some(Tok::Op("!=")) => Op::Ne,
            Some(Tok::Op("~")) => Op::Contains,
            Some(Tok::Op("!~")) => Op::NotContains,
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("in") => Op::In,
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("not") && self.word_at(1, "in") => {
                self.at += 1;
                Op::NotIn
            }
            Some(Tok::Word(w)) if w.eq_ignore_ascii_case("is") => {
                if self.word_at(1, "not") {
                    self.at += 1;
                    Op::IsNotEmpty
                } else {
                    Op::IsEmpty
                }
            }
            _ => return Err(self.expected("operator")),
        };
        self.at += 1;
        let values = match op {
            Op::In | Op::NotIn => self.list()?,
            Op::IsEmpty | Op::IsNotEmpty => {
                if self.peek_word("empty") || self.peek_word("null") {
                    self.at += 1;
                    Vec::new()
                } else {
                    return Err(self.expected("'EMPTY'"));
                }
            }
            _ => vec![self.value()?],
        };
        let allowed: &[Op] = match field {
            Field::Summary => &[Op::Contains, Op::NotContains, Op::IsEmpty, Op::IsNotEmpty],
            _ => &[
                Op::Eq,
                Op::Ne,
                Op::In,
                Op::NotIn,
                Op::IsEmpty,
                Op::IsNotEmpty,
            ],
        };
        if !allowed.contains(&op) {
            return Err(format!(
                "The operator '{}' is not supported by the '{}' field.",
                op.text(),
                field.name()
            ));
        }
        Ok(Expr::Clause { field, op, values })
    }

    fn value(&mut self) -> Result<String, String> {
        match self.peek() {
            Some(Tok::Word(w)) if !RESERVED.contains(&w.to_ascii_lowercase().as_str()) => {
                let w = w.clone();
                self.at += 1;
                Ok(w)
            }
            Some(Tok::Quoted(q)) => {
                let q = q.clone();
                self.at += 1;
                Ok(q)
            }
            _ => Err(self.expected("either a value, list or function")),
        }
    }

    fn list(&mut self) -> Result<Vec<String>, String> {
        if self.peek() != Some(&Tok::LParen) {
            return Err(self.expected("'('"));
        }
        self.at += 1;
        let mut values = vec![self.value()?];
        loop {
            match self.bump() {
                Some(Tok::Comma) => values.push(self.value()?),
                Some(Tok::RParen) => return Ok(values),
                _ => {
                    self.at -= 1;
                    return Err(self.expected("')'"));
                }
            }
        }
    }

    fn order(&mut self) -> Result<Vec<(OrderField, bool)>, String> {
        let mut out = Vec::new();
        loop {
            let name = match self.bump() {
                Some(Tok::Word(w)) | Some(Tok::Quoted(w)) => w,
                _ => {
                    self.at -= 1;
                    return Err(self.expected("a field name"));
                }
            };
            let field = match name.to_ascii_lowercase().as_str() {
                "key" | "issuekey" | "id" => OrderField::Key,
                "created" | "createddate" | "rank" => OrderField::Created,
                "updated" | "updateddate" => OrderField::Updated,
                "priority" => OrderField::Priority,
                "status" => OrderField::Status,
                "summary" => OrderField::Summary,
                _ => {
                    return Err(format!(
                        "Field '{name}' does not exist or you do not have permission to view it."
                    ));
                }
            };
            let asc = if self.peek_word("asc") {
                self.at += 1;
                true
            } else if self.peek_word("desc") {
                self.at += 1;
                false
            } else {
                true
            };
            out.push((field, asc));
            if self.peek() == Some(&Tok::Comma) {
                self.at += 1;
                continue;
            }
            return Ok(out);
        }
    }
}

/// Parses `jql`; the error is one of Jira's messages.
pub fn parse(jql: &str) -> Result<Query, String> {
    let toks = lex(jql)?;
    let mut p = Parser {
        toks,
        at: 0,
        len: jql.chars().count(),
    };
    let starts_with_order = p.peek_word("order") && p.word_at(1, "by");
    let filter = if p.peek().is_none() || starts_with_order {
        None
    } else {
        Some(p.or_expr()?)
    };
    let mut order = Vec::new();
    if p.peek_word("order") {
        if !p.word_at(1, "by") {
            p.at += 1;
            return Err(p.expected("'by'"));
        }
        p.at += 2;
        order = p.order()?;
    }
    if p.peek().is_some() {
        return Err(p.expected(if filter.is_some() {
            "either 'OR' or 'AND'"
        } else {
            "a field name"
        }));
    }
    Ok(Query { filter, order })
}

/// Jira's 400s for values that name nothing: projects, statuses, keys, categories, priorities,
/// issue types. All of them, as Jira lists every one.
pub fn check(q: &Query, m: &Model) -> Vec<String> {
    let mut errors = Vec::new();
    if let Some(e) = &q.filter {
        check_expr(e, m, &mut errors);
    }
    errors
}

fn check_expr(e: &Expr, m: &Model, errors: &mut Vec<String>) {
    match e {
        Expr::And(a, b) | Expr::Or(a, b) => {
            check_expr(a, m, errors);
            check_expr(b, m, errors);
        }
        Expr::Not(a) => check_expr(a, m, errors),
        Expr::Clause { field, values, .. } => {
            for v in values {
                let missing = || {
                    format!(
                        "The value '{v}' does not exist for the field '{}'.",
                        field.name()
                    )
                };
                match field {
                    Field::Project if m.project(v).is_none() => errors.push(missing()),
                    Field::Status if m.status_def(v).is_none() => errors.push(missing()),
                    Field::StatusCategory if category(v).is_none() => errors.push(missing()),
                    Field::Priority
                        if !PRIORITIES
                            .iter()
                            .any(|(p, id)| p.eq_ignore_ascii_case(v) || id == v)
                            && !m.issues.iter().any(|i| i.priority.eq_ignore_ascii_case(v)) =>
                    {
                        errors.push(missing())
                    }
                    Field::IssueType
                        if !ISSUE_TYPES
                            .iter()
                            .any(|(t, id)| t.eq_ignore_ascii_case(v) || id == v)
                            && !m.issues.iter().any(|i| i.issuetype.eq_ignore_ascii_case(v)) =>
                    {
                        errors.push(missing())
                    }
                    Field::Key if !looks_like_key(v) && v.parse::<u64>().is_err() => {
                        errors.push(format!("The issue key '{v}' for field 'key' is invalid."))
                    }
                    Field::Key if m.issue_index(v).is_none() => errors.push(format!(
                        "An issue with key '{v}' does not exist for field 'key'."
                    )),
                    _ => {}
                }
            }
        }
    }
}

fn looks_like_key(v: &str) -> bool {
    v.split_once('-').is_some_and(|(p, n)| {
        p.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
            && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !n.is_empty()
            && n.chars().all(|c| c.is_ascii_digit())
    })
}

/// A category by JQL's name (`To Do`), key (`new`) or id (`2`).
fn category(v: &str) -> Option<StatusCategory> {
    StatusCategory::ALL.into_iter().find(|c| {
        c.name().eq_ignore_ascii_case(v)
            || c.key().eq_ignore_ascii_case(v)
            || c.id().to_string() == v
    })
}

pub fn matches(e: &Expr, issue: &Issue, m: &Model) -> bool {
    match e {
        Expr::And(a, b) => matches(a, issue, m) && matches(b, issue, m),
        Expr::Or(a, b) => matches(a, issue, m) || matches(b, issue, m),
        Expr::Not(a) => !matches(a, issue, m),
        Expr::Clause { field, op, values } => clause_matches(*field, *op, values, issue, m),
    }
}

fn clause_matches(field: Field, op: Op, values: &[String], issue: &Issue, m: &Model) -> bool {
    // What the issue holds for the field; a value matches when any held one equals it.
    let held: Vec<String> = match field {
        Field::Project => match m.project(&issue.project) {
            Some(p) => vec![p.key.clone(), p.name.clone(), p.id.to_string()],
            None => vec![issue.project.clone()],
        },
        Field::Key => vec![issue.key.clone(), issue.id.to_string()],
        Field::Status => {
            let mut v = vec![issue.status.clone()];
            if let Some(s) = m.status_def(&issue.status) {
                v.push(s.id.clone());
            }
            v
        }
        Field::StatusCategory => {
            let c = m.category_of(&issue.status);
            vec![c.name().into(), c.key().into(), c.id().to_string()]
        }
        Field::Labels => issue.labels.clone(),
        Field::Priority => {
            let mut v = vec![issue.priority.clone()];
            if let Some((_, id)) = PRIORITIES
                .iter()
                .find(|(p, _)| p.eq_ignore_ascii_case(&issue.priority))
            {
                v.push(id.to_string());
            }
            v
        }
        Field::IssueType => vec![issue.issuetype.clone()],
        Field::Summary => vec![issue.summary.clone()],
    };
    let any = |v: &String| held.iter().any(|h| h.eq_ignore_ascii_case(v));
    // Jira's `!=` and `not in` never match an empty field (labels): "is EMPTY" must be asked.
    let empty = held.is_empty();
    match op {
        Op::Eq | Op::In => values.iter().any(any),
        Op::Ne | Op::NotIn => !empty && !values.iter().any(any),
        Op::Contains => values.iter().all(|v| contains_words(&issue.summary, v)),
        Op::NotContains => !values.iter().all(|v| contains_words(&issue.summary, v)),
        Op::IsEmpty => empty,
        Op::IsNotEmpty => !empty,
    }
}

/// Jira's text search, roughly: every word of the term occurs in the text, any case.
fn contains_words(text: &str, term: &str) -> bool {
    let text = text.to_lowercase();
    term.split_whitespace()
        .all(|w| text.contains(&w.trim_matches('*').to_lowercase()))
}

/// Orders issues by the query's ORDER BY, then by key ascending.
pub fn compare(order: &[(OrderField, bool)], a: &Issue, b: &Issue, m: &Model) -> Ordering {
    let key = |i: &Issue| (i.project.clone(), i.number);
    let priority_rank = |i: &Issue| {
        PRIORITIES
            .iter()
            .position(|(p, _)| p.eq_ignore_ascii_case(&i.priority))
            .unwrap_or(PRIORITIES.len())
    };
    for (field, asc) in order {
        let o = match field {
            OrderField::Key => key(a).cmp(&key(b)),
            OrderField::Created => (a.created, a.created_seq).cmp(&(b.created, b.created_seq)),
            OrderField::Updated => (a.updated, a.updated_seq).cmp(&(b.updated, b.updated_seq)),
            // Jira's ASC puts the highest priority first.
            OrderField::Priority => priority_rank(a).cmp(&priority_rank(b)),
            OrderField::Status => {
                let sid = |i: &Issue| m.status_def(&i.status).map(|s| s.id.clone());
                sid(a).cmp(&sid(b))
            }
            OrderField::Summary => a.summary.to_lowercase().cmp(&b.summary.to_lowercase()),
        };
        let o = if *asc { o } else { o.reverse() };
        if o != Ordering::Equal {
            return o;
        }
    }
    key(a).cmp(&key(b))
}
