//! Fuzzing the parsers of untrusted input (issue 26, item 8): plan files (both shapes),
//! handoff results, each agent CLI's output parser and renderer, ADF, GitHub and Jira payloads
//! and issue bodies, forge answers, the log redactor, and — through the real `whilly serve` —
//! the SSE `Last-Event-ID` header and the query strings of the HTTP surface.
//!
//! Each target mutates seed inputs (its corpus: the built-in seeds, the repository's fixtures
//! and every file in `tests/fixtures/fuzz/<target>/`) with byte flips, insertions of tokens
//! the parser cares about, deletions, repeats, splices and cuts, and requires no panic (and,
//! where there is one, a property: a valid plan re-reads as itself). proptest drives it: it
//! shrinks an input that fails to a small one, which is written to the target's corpus folder
//! so that it is replayed by every later run, fixed or not.
//!
//! In the regular suite each target replays its corpus and runs [`QUICK_CASES`] inputs. For a
//! longer run: `WHILLY_FUZZ_SECS=60 cargo test --release --test fuzz_parsers -- --nocapture
//! --test-threads 1` (each target for 60 s; the counts are printed).

#[path = "support/http_serve.rs"]
mod http_serve;
mod support;

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestError, TestRng, TestRunner};
use serde_json::Value;
use std::io::{Read, Write};
use std::panic::RefUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use support::engine::{self, Repo};

/// Inputs per target in the regular suite (beyond the corpus).
const QUICK_CASES: u32 = 2_000;

/// One edit of a seed. Positions are taken modulo the input's length.
#[derive(Debug, Clone)]
enum Edit {
    Flip {
        at: usize,
        bit: u8,
    },
    Put {
        at: usize,
        byte: u8,
    },
    Token {
        at: usize,
        token: usize,
    },
    Delete {
        at: usize,
        len: usize,
    },
    Repeat {
        at: usize,
        len: usize,
        times: u8,
    },
    Splice {
        seed: usize,
        at: usize,
        from: usize,
        len: usize,
    },
    Cut {
        at: usize,
    },
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<usize>();
    prop_oneof![
        1 => (at, 0u8..8).prop_map(|(at, bit)| Edit::Flip { at, bit }),
        1 => (at, any::<u8>()).prop_map(|(at, byte)| Edit::Put { at, byte }),
        4 => (at, any::<usize>()).prop_map(|(at, token)| Edit::Token { at, token }),
        1 => (at, 1usize..64).prop_map(|(at, len)| Edit::Delete { at, len }),
        1 => (at, 1usize..32, 2u8..40).prop_map(|(at, len, times)| Edit::Repeat {
            at,
            len,
            times
        }),
        1 => (any::<usize>(), at, any::<usize>(), 1usize..256).prop_map(
            |(seed, at, from, len)| Edit::Splice {
                seed,
                at,
                from,
                len
            }
        ),
        1 => at.prop_map(|at| Edit::Cut { at }),
    ]
}

/// Tokens every parser here meets: JSON's punctuation and odd numbers, escapes, unpaired
/// surrogates, control characters, wide characters, markers and secrets.
const COMMON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    "null",
    "true",
    "false",
    "-0",
    "1e999",
    "-1",
    "18446744073709551616",
    "-9223372036854775809",
    "0.0000001",
    "\\u0000",
    "\\ud800",
    "\\\"",
    "\\\\",
    "\n",
    "\r\n",
    "\t",
    "\u{0}",
    "\u{1b}[2J",
    "é",
    "🦀",
    "\u{202e}",
    "<promise>COMPLETE</promise>",
    "sk-ant-api03-",
    "ghp_",
    "-----BEGIN PRIVATE KEY-----",
    "password=",
    "\"type\"",
    "\"text\"",
    "\"content\"",
    "\"id\"",
    "\"message\"",
];

struct Target<'a> {
    name: &'a str,
    seeds: Vec<Vec<u8>>,
    tokens: Vec<Vec<u8>>,
}

impl<'a> Target<'a> {
    fn new(name: &'a str, seeds: Vec<Vec<u8>>, tokens: &[&str]) -> Target<'a> {
        let mut all = seeds;
        all.extend(corpus_files(name).into_iter().map(|(_, b)| b));
        if all.is_empty() {
            all.push(Vec::new());
        }
        let tokens = COMMON_TOKENS
            .iter()
            .chain(tokens)
            .map(|t| t.as_bytes().to_vec())
            .collect();
        Target {
            name,
            seeds: all,
            tokens,
        }
    }

    fn apply(&self, seed: usize, edits: &[Edit]) -> Vec<u8> {
        let mut b = self.seeds[seed % self.seeds.len()].clone();
        for e in edits {
            let pos = |at: usize, b: &Vec<u8>| at % (b.len() + 1);
            match e {
                Edit::Flip { at, bit } if !b.is_empty() => {
                    let i = at % b.len();
                    b[i] ^= 1 << bit;
                }
                Edit::Put { at, byte } if !b.is_empty() => {
                    let i = at % b.len();
                    b[i] = *byte;
                }
                Edit::Token { at, token } => {
                    let i = pos(*at, &b);
                    let t = &self.tokens[token % self.tokens.len()];
                    b.splice(i..i, t.iter().copied());
                }
                Edit::Delete { at, len } => {
                    let i = pos(*at, &b);
                    let end = (i + len).min(b.len());
                    b.drain(i..end);
                }
                Edit::Repeat { at, len, times } => {
                    let i = pos(*at, &b);
                    let end = (i + len).min(b.len());
                    let piece = b[i..end].to_vec();
                    for _ in 1..*times {
                        b.splice(end..end, piece.iter().copied());
                    }
                }
                Edit::Splice {
                    seed,
                    at,
                    from,
                    len,
                } => {
                    let other = &self.seeds[seed % self.seeds.len()];
                    let f = from % (other.len() + 1);
                    let end = (f + len).min(other.len());
                    let i = pos(*at, &b);
                    b.splice(i..i, other[f..end].iter().copied());
                }
                Edit::Cut { at } => {
                    let i = pos(*at, &b);
                    b.truncate(i);
                }
                _ => {}
            }
            // Bounded: a parser is fuzzed on shapes, not on sheer size.
            b.truncate(256 << 10);
        }
        b
    }

    /// Replays the corpus, then runs mutated inputs (see the module's doc for how many).
    fn run(&self, check: impl Fn(&[u8]) + RefUnwindSafe) {
        for (i, seed) in self.seeds.iter().enumerate() {
            if std::panic::catch_unwind(|| check(seed)).is_err() {
                panic!(
                    "fuzz {}: seed {i} panics ({} bytes): {:?}",
                    self.name,
                    seed.len(),
                    String::from_utf8_lossy(&seed[..seed.len().min(300)])
                );
            }
        }
        let secs: Option<u64> = std::env::var("WHILLY_FUZZ_SECS")
            .ok()
            .and_then(|s| s.parse().ok());
        let round = if secs.is_some() { 500 } else { QUICK_CASES };
        let strategy = (any::<usize>(), prop::collection::vec(edit(), 0..10));
        let started = Instant::now();
        let mut cases = 0u64;
        loop {
            // A runner counts the cases it passed over its life: one per round, each from a
            // seed of its own (a fixed one would try the same inputs every run).
            let mut runner = TestRunner::new_with_rng(
                Config {
                    cases: round,
                    failure_persistence: None,
                    max_shrink_iters: 4_000,
                    ..Config::default()
                },
                TestRng::from_seed(RngAlgorithm::ChaCha, &rand_seed()),
            );
            let result = runner.run(&strategy, |(seed, edits)| {
                check(&self.apply(seed, &edits));
                Ok(())
            });
            match result {
                Ok(()) => cases += u64::from(round),
                Err(TestError::Fail(why, (seed, edits))) => {
                    let input = self.apply(seed, &edits);
                    let saved = save_crash(self.name, &input);
                    panic!(
                        "fuzz {}: {why}; the input ({} bytes) is saved as {} and is replayed from now on: {:?}",
                        self.name,
                        input.len(),
                        saved.display(),
                        String::from_utf8_lossy(&input[..input.len().min(500)])
                    );
                }
                Err(e) => panic!("fuzz {}: {e}", self.name),
            }
            match secs {
                Some(s) if started.elapsed() < Duration::from_secs(s) => continue,
                _ => break,
            }
        }
        println!(
            "fuzz {}: {cases} inputs from {} seeds in {:.1} s, no panic",
            self.name,
            self.seeds.len(),
            started.elapsed().as_secs_f64()
        );
    }
}

/// 32 bytes from the clock and a counter: a fresh seed for each round.
fn rand_seed() -> [u8; 32] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default(),
        );
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/fuzz")
        .join(target)
}

fn corpus_files(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files: Vec<_> = std::fs::read_dir(corpus_dir(target))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|p| Some((p.clone(), std::fs::read(&p).ok()?)))
        .collect()
}

fn save_crash(target: &str, input: &[u8]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    input.hash(&mut h);
    let dir = corpus_dir(target);
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("crash-{:016x}", h.finish()));
    let _ = std::fs::write(&path, input);
    path
}

fn fixtures(dir: &str, ext: &[&str]) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| ext.iter().any(|x| n.ends_with(x)))
        })
        .filter_map(|p| Some((p.clone(), std::fs::read(&p).ok()?)))
        .collect();
    out.sort();
    out.into_iter().map(|(_, b)| b).collect()
}

fn agent_fixtures(prefix: &str) -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/agents");
    let mut out: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .filter_map(|p| Some((p.clone(), std::fs::read(&p).ok()?)))
        .collect();
    out.sort();
    out.into_iter().map(|(_, b)| b).collect()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn plan_files_of_both_shapes() {
    let mut seeds = fixtures("tests/fixtures/plans", &[".json"]);
    seeds.extend(fixtures("tests/fixtures/original-plans", &[".json"]));
    let t = Target::new(
        "plan_file",
        seeds,
        &[
            "\"tasks\"",
            "\"id\"",
            "\"dependencies\"",
            "\"status\"",
            "\"priority\"",
            "\"key_files\"",
            "\"test_steps\"",
            "\"acceptance_criteria\"",
            "\"timeout\"",
            "\"max_attempts\"",
            "\"budget_usd\"",
            "\"repo_targets\"",
            "\"agent\"",
            "\"../\"",
            "\"/etc/passwd\"",
            "\"pending\"",
            "\"done\"",
            "\"critical\"",
            "\"30m\"",
        ],
    );
    t.run(|bytes| {
        for strict in [false, true] {
            let report = whilly::plan::check::check_plan(bytes, "plan.json", strict);
            let _ = whilly::plan::render::render_check(&report, false);
            let _ = whilly::plan::render::render_check(&report, true);
            if let Some(plan) = report.valid_plan() {
                // A valid plan written out canonically reads back as itself.
                let json = whilly::plan::export::canonical_json(plan);
                let again = whilly::plan::check::check_plan(json.as_bytes(), "plan.json", strict);
                let back = again.valid_plan().unwrap_or_else(|| {
                    panic!("the canonical form of a valid plan is invalid: {json}")
                });
                assert_eq!(
                    whilly::plan::export::canonical_json(back),
                    json,
                    "the canonical form is stable"
                );
                let _ = whilly::plan::triz::triz_report(plan);
            }
        }
    });
}

#[test]
fn handoff_results() {
    let seeds = [
        r#"{"status": "complete", "message": "done"}"#,
        r#"{"status": "failed", "message": "the build broke", "details": {"log": "x"}}"#,
        r#"{"status": "blocked", "message": "waiting for access", "next": ["ask ops"]}"#,
        r#"{"status": "human_loop", "message": "a decision is needed"}"#,
        r#"{"status": "partial", "message": "half", "cost_usd": 1.5}"#,
        r#"[1, 2]"#,
    ];
    let t = Target::new(
        "handoff_result",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        &[
            "\"status\"",
            "\"complete\"",
            "\"partial\"",
            "\"message\"",
            "\"cost_usd\"",
        ],
    );
    t.run(|bytes| {
        let _ = whilly::agent::handoff::parse_result_json(&text(bytes));
    });
}

/// Each CLI's whole-output parser, its event renderer (the pane's transcript) and the error
/// classifier, on one CLI's kind of output.
fn agent_target(
    name: &str,
    seeds: Vec<Vec<u8>>,
    parse: fn(&str, Option<&str>, &whilly::agent::PriceTable) -> whilly::agent::AgentResult,
    render: Option<fn(&Value) -> Option<String>>,
) {
    let t = Target::new(
        name,
        seeds,
        &[
            "\"usage\"",
            "\"input_tokens\"",
            "\"output_tokens\"",
            "\"cost\"",
            "\"result\"",
            "\"error\"",
            "\"item\"",
            "\"part\"",
            "\"tool\"",
            "\"delta\"",
            "\"stats\"",
            "\"rate_limit\"",
            "429",
            "\"turn.completed\"",
            "\"step_finish\"",
        ],
    );
    let prices = whilly::agent::PriceTable::new();
    t.run(move |bytes| {
        let clean = text(bytes);
        let _ = parse(&clean, None, &prices);
        let _ = parse(&clean, Some("gpt-5"), &prices);
        let _ = whilly::agent::classify_text(&clean);
        for line in clean.lines() {
            let _ = whilly::agent::render_stream_line(line);
        }
        if let Some(render) = render {
            for v in whilly::agent::jsonscan::json_objects(&clean) {
                if let Some(r) = render(&v) {
                    let _ = whilly::agent::transcript::colour(&r);
                }
            }
        }
    });
}

#[test]
fn claude_output() {
    let seeds = [
        r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-sonnet-4-5"}
{"type":"assistant","message":{"content":[{"type":"text","text":"working"},{"type":"tool_use","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","message":{"content":[{"type":"tool_result","content":"a.txt","is_error":false}]}}
{"type":"result","subtype":"success","is_error":false,"result":"done <promise>COMPLETE</promise>","total_cost_usd":0.0123,"num_turns":3,"usage":{"input_tokens":10,"output_tokens":20,"cache_read_input_tokens":5}}"#,
        r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"API Error: 429 rate_limit_error"}"#,
        "Claude AI usage limit reached|1767225600\n",
    ];
    agent_target(
        "claude_output",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        whilly::agent::claude::parse_claude_output,
        None,
    );
}

#[test]
fn codex_output() {
    agent_target(
        "codex_output",
        agent_fixtures("codex-"),
        whilly::agent::codex::parse_codex_output,
        Some(whilly::agent::codex::render_codex_event),
    );
}

#[test]
fn opencode_output() {
    agent_target(
        "opencode_output",
        agent_fixtures("opencode-"),
        whilly::agent::opencode::parse_opencode_output,
        Some(whilly::agent::opencode::render_opencode_event),
    );
}

#[test]
fn gemini_output() {
    agent_target(
        "gemini_output",
        agent_fixtures("gemini-"),
        whilly::agent::gemini::parse_gemini_output,
        Some(whilly::agent::gemini::render_gemini_event),
    );
}

#[test]
fn adf_documents_and_markdown() {
    use whilly::forge::jira::adf;
    let md = "Intro with **bold**, `code` and [a link](https://x.invalid).\n\n## Acceptance\n- one\n- two\n\n## Test\n```\ncargo test\n```\n> quoted\n\n1. first\n2. second\n";
    let mut seeds = vec![md.as_bytes().to_vec()];
    seeds.push(adf::from_markdown(md).to_string().into_bytes());
    seeds.push(
        serde_json::json!({"type": "doc", "version": 1, "content": [
            {"type": "table", "content": [{"type": "tableRow", "content": [
                {"type": "tableCell", "content": [{"type": "paragraph", "content": [
                    {"type": "text", "text": "cell", "marks": [{"type": "strong"}]}]}]}]}]},
            {"type": "mediaSingle", "content": [{"type": "media", "attrs": {"id": "1"}}]},
            {"type": "mention", "attrs": {"text": "@someone"}},
            {"type": "heading", "attrs": {"level": 7}, "content": [{"type": "text", "text": "Acceptance"}]}
        ]})
        .to_string()
        .into_bytes(),
    );
    let t = Target::new(
        "adf",
        seeds,
        &[
            "\"type\"",
            "\"doc\"",
            "\"paragraph\"",
            "\"heading\"",
            "\"bulletList\"",
            "\"listItem\"",
            "\"codeBlock\"",
            "\"marks\"",
            "\"attrs\"",
            "\"level\"",
            "## ",
            "- ",
            "* ",
            "1. ",
            "```",
            "**",
            "`",
            "[",
            "](",
            "> ",
            "|",
        ],
    );
    t.run(|bytes| {
        let s = text(bytes);
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            let _ = adf::to_text(&v);
            let _ = adf::section(&v, "Acceptance");
        }
        let doc = adf::from_markdown(&s);
        let _ = adf::to_text(&doc);
        let _ = adf::section(&doc, "Acceptance");
    });
}

#[test]
fn github_payloads_and_issue_bodies() {
    use whilly::forge::github::{Comment, Issue, PullRequest};
    let seeds = [
        r#"{"number": 7, "title": "Write report 7", "body": "The export must be written.\n\n## Acceptance\n- the file exists\n\n## Test\n- test -f out.txt\n", "state": "open", "html_url": "https://github.com/o/r/issues/7", "labels": [{"name": "whilly:ready"}, {"name": "priority:high"}], "user": {"login": "a"}}"#,
        r#"{"number": 3, "title": "PR", "state": "open", "draft": true, "merged": false, "html_url": "u", "node_id": "PR_1", "head": {"ref": "whilly/p/T-1", "sha": "abc"}, "base": {"ref": "main"}, "mergeable": null}"#,
        r#"{"id": 9, "body": "<!-- whilly:status -->\nstatus", "user": {"login": "whilly"}}"#,
        "<https://api.github.com/repositories/1/issues?page=2>; rel=\"next\", <https://api.github.com/repositories/1/issues?page=5>; rel=\"last\"",
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head></html>",
    ];
    let t = Target::new(
        "github_payloads",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        &[
            "## Acceptance",
            "## Test",
            "## Key files",
            "- [ ] ",
            "- ",
            "```",
            "<!--",
            "-->",
            "rel=\"next\"",
            "<",
            ">;",
            "\"labels\"",
            "\"number\"",
            "\"head\"",
            "<title>",
        ],
    );
    let repo: whilly::forge::refs::RepoRef = "octo/api".parse().unwrap();
    t.run(move |bytes| {
        let s = text(bytes);
        if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
            let _ = serde_json::from_value::<Issue>(v.clone());
            let _ = serde_json::from_value::<PullRequest>(v.clone());
            let _ = serde_json::from_value::<Comment>(v);
        }
        let _ = whilly::forge::answer::json(bytes);
        let _ = whilly::forge::github::next_link(Some(&s));
        let _ = whilly::forge::intake::parse_body(&s);
        let issue = whilly::forge::intake::UpstreamIssue {
            number: 7,
            title: s.lines().next().unwrap_or_default().to_string(),
            body: s.clone(),
            labels: vec!["whilly:ready".into()],
            url: "https://github.com/octo/api/issues/7".into(),
            state: "open".into(),
            comments: vec![s.clone()],
        };
        for with_comments in [false, true] {
            let _ = whilly::forge::intake::to_task(&repo, &issue, with_comments);
        }
    });
}

#[test]
fn jira_payloads() {
    use whilly::forge::jira::{JiraIssue, adf, intake};
    let seeds = [
        serde_json::json!({"key": "ABC-1", "fields": {
            "summary": "Export week 1",
            "description": adf::from_markdown("The export.\n\n## Acceptance\n- the file exists\n\n## Test\n- test -f x\n"),
            "status": {"name": "To Do", "statusCategory": {"key": "new"}},
            "priority": {"name": "Highest"}, "labels": ["a"],
            "customfield_10042": "- first\n- second"}})
        .to_string(),
        serde_json::json!({"key": "ABC-2", "fields": {"summary": "", "description": null,
            "customfield_10042": {"type": "doc", "content": []}}})
        .to_string(),
    ];
    let t = Target::new(
        "jira_payloads",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        &[
            "\"key\"",
            "\"fields\"",
            "\"summary\"",
            "\"description\"",
            "ABC-",
            "\"customfield_10042\"",
        ],
    );
    t.run(|bytes| {
        let s = text(bytes);
        let _ = intake::is_key(&s);
        let Ok(v) = serde_json::from_slice::<Value>(bytes) else {
            return;
        };
        let f = &v["fields"];
        let issue = JiraIssue {
            key: v["key"].as_str().unwrap_or("ABC-1").to_string(),
            summary: f["summary"].as_str().unwrap_or_default().to_string(),
            description: f["description"].clone(),
            status: "To Do".into(),
            status_category: "new".into(),
            priority: f["priority"]["name"].as_str().map(str::to_string),
            labels: Vec::new(),
            fields: f.clone(),
            url: "https://x.invalid/browse/ABC-1".into(),
        };
        let _ = intake::to_task(&issue, None);
        let _ = intake::to_task(&issue, Some("customfield_10042"));
    });
}

#[test]
fn the_log_redactor_in_any_pieces() {
    let seeds = [
        "key sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKL end\n",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----\nafter\n",
        "password = hunter2hunter2\nGITHUB_TOKEN=ghp_0123456789abcdefghijklmnopqrstuvwxyzAB\n",
    ];
    let t = Target::new(
        "log_redactor",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        &[
            "-----END",
            "-----BEGIN RSA PRIVATE KEY-----",
            "token=",
            "AKIA",
        ],
    );
    t.run(|bytes| {
        use whilly::domain::secrets::LogRedactor;
        let mut r = LogRedactor::default();
        // Pieces as the attempt log's reader cuts them, the cut points taken from the input.
        let mut pending: Vec<u8> = Vec::new();
        for chunk in bytes.chunks(1 + bytes.first().copied().unwrap_or(7) as usize % 37) {
            pending.extend_from_slice(chunk);
            let n = LogRedactor::line_cut(&pending, 512);
            let _ = r.redact(&pending[..n]);
            pending.drain(..n);
            let q = LogRedactor::quiet_cut(&pending);
            let _ = r.redact(&pending[..q]);
            pending.drain(..q);
        }
        let _ = r.redact(&pending);
    });
}

/// The SSE `Last-Event-ID` header and the query strings of the HTTP surface, sent raw to the
/// real `whilly serve`: every answer is a 2xx or a 4xx, never a 5xx or a dropped connection,
/// and the server still answers afterwards.
#[test]
fn sse_resume_points_and_query_strings_over_http() {
    let repo = Repo::new(&engine::plan("fuzz", vec![engine::task("T-1")]), "true");
    let served = http_serve::serve(&repo, &[]);
    let addr = served.url.trim_start_matches("http://").to_string();
    let seeds = [
        "1",
        "0",
        "-1",
        "9223372036854775807",
        "after=3&plan=fuzz",
        "plan=fuzz",
        "after=-5",
        "plan=%2e%2e%2f",
        "after=1e3",
    ];
    let t = Target::new(
        "http_query",
        seeds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        &[
            "&", "=", "%", "%00", "%ff", "+", "after=", "plan=", "#", "?", " ", "\r\n",
        ],
    );
    let request = |path: &str, header: &str| -> String {
        let mut s = std::net::TcpStream::connect(&addr).expect("the server answers");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nLast-Event-ID: {header}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).unwrap_or(0);
        String::from_utf8_lossy(&head[..n]).into_owned()
    };
    t.run(|bytes| {
        // Header values and request targets cannot hold CR, LF or NUL: those are a different
        // request, not this one's parsing.
        let clean: String = text(bytes)
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n' | '\0'))
            .collect();
        let query: String = clean
            .bytes()
            .map(|b| {
                if b.is_ascii_graphic() && b != b'#' {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        for path in [
            format!("/events/stream?{query}"),
            format!("/status.json?{query}"),
            format!("/?{query}"),
        ] {
            let head = request(&path, &clean);
            let status = head.split_whitespace().nth(1).unwrap_or_default();
            assert!(
                status.starts_with('2') || status.starts_with('4'),
                "GET {path} with Last-Event-ID {clean:?}: {head:?}"
            );
        }
    });
    let head = request("/health/live", "");
    assert!(head.starts_with("HTTP/1.1 200"), "still answering: {head}");
}
