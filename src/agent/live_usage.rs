//! Spend while an agent works: the usage its output lines carry, priced as they arrive, so
//! budgets can stop an agent mid-run. The exact cost still comes from the final result parse;
//! this is the running estimate until then.
//!
//! One meter for every CLI: what differs is a [`LineReader`] (each backend's own, next to its
//! result parser) turning one JSON event into [`Reading`]s. The meter keeps the readings, prices
//! the tokens with the [`PriceTable`] and sums, the same way for all of them.

use super::result::{PriceTable, Usage};
use crate::domain::Usd;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// What one output line says about spend.
#[derive(Debug, Clone, PartialEq)]
pub enum Reading {
    /// The model the session runs (Claude's `init`): it prices usage that names no model, ahead
    /// of the configured one.
    SessionModel(String),
    /// The line is the run's own final account: the usage readings that come with it are the
    /// whole run's, what was read before is dropped, and nothing read later counts (a session
    /// file followed a moment behind the output must not add to it).
    Settled,
    /// The usage of one piece of work (a message, a turn, a step).
    Usage {
        /// A later reading with the same key replaces this one (Claude repeats a message's usage
        /// on each of its content blocks; cumulative totals), unless it has fewer tokens: two
        /// sources of one running total (Codex's output and its session file) may be read out of
        /// order, and a total never falls. `None` always adds.
        key: Option<String>,
        /// The model that did the work, when the line names it.
        model: Option<String>,
        usage: Usage,
        /// A cost the CLI reported for this piece (OpenCode's `cost`); it wins over pricing
        /// the tokens.
        cost: Option<f64>,
    },
}

/// How one CLI's output lines move the meter.
#[derive(Debug, Clone, Copy)]
pub struct LineReader {
    /// A line is parsed only when it contains one of these: tool output can be megabytes, and
    /// every line passes through the meter on the PTY reader thread.
    pub needles: &'static [&'static str],
    /// The readings of one JSON event; the second argument is `agents.<name>.model`.
    pub read: fn(&Value, Option<&str>) -> Vec<Reading>,
}

#[derive(Debug, Clone)]
struct Entry {
    model: Option<String>,
    usage: Usage,
    cost: Option<f64>,
}

/// A file where a CLI writes its usage while it works when its output gives it only at the end
/// (Codex: `CODEX_HOME/sessions/YYYY/MM/DD/rollout-…-<thread id>.jsonl`; Gemini CLI:
/// `~/.gemini/tmp/<project>/chats/session-…-<id8>.jsonl`). Its lines go through the same
/// [`LineReader`] as the output's; the engine finds and follows the file.
#[derive(Debug, Clone)]
pub struct SessionLog {
    /// The directory the session files are under (in folders of their own below it: by date
    /// for Codex, by project for Gemini), searched by `locate`.
    pub dir: PathBuf,
    /// Only an output line containing this is offered to `id_of`.
    pub needle: &'static str,
    /// The session's id, from the output event that names it; `None` for any other event.
    pub id_of: fn(&Value) -> Option<String>,
    /// Session `id`'s file under `dir`, once it exists (the id is a plain one, see
    /// [`SessionLog::id_in`]).
    pub locate: fn(&Path, &str) -> Option<PathBuf>,
}

/// The subfolders of `dir`, greatest name first (dated names: newest first); none when it
/// cannot be read.
pub(crate) fn subdirs_newest_first(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort_unstable_by(|a, b| b.cmp(a));
    dirs
}

/// The first file in `dir` whose name `matches`.
pub(crate) fn file_in(dir: &Path, matches: impl Fn(&str) -> bool) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        let name = e.file_name();
        matches(name.to_str()?).then(|| e.path())
    })
}

impl SessionLog {
    /// The session id an output line names, if it names one. Ids that could be anything but a
    /// plain id are refused: they are matched against file names.
    pub fn id_in(&self, line: &str) -> Option<String> {
        let line = line.trim();
        if !line.starts_with('{') || !line.contains(self.needle) {
            return None;
        }
        let v: Value = serde_json::from_str(line).ok()?;
        (self.id_of)(&v).filter(|id| {
            !id.is_empty()
                && id.len() <= 128
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
    }
}

/// The running usage and cost of one agent run, fed line by line.
#[derive(Debug, Clone)]
pub struct UsageMeter {
    reader: LineReader,
    prices: PriceTable,
    /// `agents.<name>.model`, the fallback when neither the reading nor the session names a model.
    configured_model: Option<String>,
    session_model: Option<String>,
    /// Every usage reading, in arrival order (keyed ones replaced in place).
    entries: Vec<Entry>,
    /// Key → index in `entries`.
    keys: HashMap<String, usize>,
    cost: Usd,
    /// The run's final account has been read ([`Reading::Settled`]).
    settled: bool,
}

impl UsageMeter {
    pub fn new(
        reader: LineReader,
        prices: PriceTable,
        configured_model: Option<String>,
    ) -> UsageMeter {
        UsageMeter {
            reader,
            prices,
            configured_model: configured_model.filter(|m| !m.is_empty()),
            session_model: None,
            entries: Vec::new(),
            keys: HashMap::new(),
            cost: Usd::ZERO,
            settled: false,
        }
    }

    /// Feeds one output line (non-JSON and events the reader ignores change nothing). Returns
    /// the new running cost when this line changed it.
    pub fn feed_line(&mut self, line: &str) -> Option<Usd> {
        let line = line.trim();
        if !line.starts_with('{') || !self.reader.needles.iter().any(|n| line.contains(n)) {
            return None;
        }
        let v: Value = serde_json::from_str(line).ok()?;
        let readings = (self.reader.read)(&v, self.configured_model.as_deref());
        if readings.is_empty() {
            return None;
        }
        let settles = readings.iter().any(|r| matches!(r, Reading::Settled));
        if settles {
            self.entries.clear();
            self.keys.clear();
            self.settled = false;
        }
        for r in readings {
            self.apply(r);
        }
        self.settled |= settles;
        let before = self.cost;
        self.cost = self.price_all();
        (self.cost != before).then_some(self.cost)
    }

    fn apply(&mut self, reading: Reading) {
        match reading {
            Reading::SessionModel(m) => self.session_model = Some(m).filter(|m| !m.is_empty()),
            Reading::Settled => {}
            Reading::Usage { .. } if self.settled => {}
            Reading::Usage {
                key,
                model,
                usage,
                cost,
            } => {
                let entry = Entry { model, usage, cost };
                match key {
                    Some(k) => match self.keys.get(&k) {
                        Some(&i) if entry.usage.total() < self.entries[i].usage.total() => {}
                        Some(&i) => self.entries[i] = entry,
                        None => {
                            self.keys.insert(k, self.entries.len());
                            self.entries.push(entry);
                        }
                    },
                    None => self.entries.push(entry),
                }
            }
        }
    }

    /// The running cost: reported costs as reported, the other usage summed per model and
    /// priced once per model, as the result parsers price a whole run (unpriced models count 0).
    pub fn cost(&self) -> Usd {
        self.cost
    }

    /// Tokens so far over all readings.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for e in &self.entries {
            total.add(&e.usage);
        }
        total
    }

    fn price_all(&self) -> Usd {
        let fallback = self
            .session_model
            .as_deref()
            .or(self.configured_model.as_deref());
        let mut reported = 0.0_f64;
        let mut per_model: BTreeMap<&str, Usage> = BTreeMap::new();
        for e in &self.entries {
            match e.cost {
                Some(c) => reported += c,
                None => {
                    let model = e.model.as_deref().filter(|m| !m.is_empty()).or(fallback);
                    if let Some(m) = model {
                        per_model.entry(m).or_default().add(&e.usage);
                    }
                }
            }
        }
        per_model
            .iter()
            .filter_map(|(m, u)| self.prices.price(m, u))
            .fold(Usd::from_f64(reported), |a, b| a + b)
    }
}

/// Feeds every line of `output` to `meter`, asserting the running cost never falls; the cost
/// after the last line.
#[cfg(test)]
pub(crate) fn run_meter(meter: &mut UsageMeter, output: &str) -> Usd {
    let mut last = Usd::ZERO;
    for line in output.lines() {
        if let Some(cost) = meter.feed_line(line) {
            assert!(
                cost >= last,
                "the running cost fell from {last} to {cost} at {line}"
            );
            last = cost;
        }
        assert_eq!(meter.cost(), last);
    }
    last
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::result::ModelPrice;

    /// A reader of test lines: `{"k": key?, "m": model?, "in": n, "out": n, "cost": c?}`, and
    /// `{"session": model}`.
    fn read(v: &Value, _configured: Option<&str>) -> Vec<Reading> {
        if let Some(m) = v["session"].as_str() {
            return vec![Reading::SessionModel(m.to_string())];
        }
        vec![Reading::Usage {
            key: v["k"].as_str().map(str::to_string),
            model: v["m"].as_str().map(str::to_string),
            usage: Usage {
                input_tokens: v["in"].as_u64().unwrap_or(0),
                output_tokens: v["out"].as_u64().unwrap_or(0),
                ..Usage::default()
            },
            cost: v["cost"].as_f64(),
        }]
    }

    const READER: LineReader = LineReader {
        needles: &["\"in\"", "\"session\"", "\"cost\""],
        read,
    };

    fn prices() -> PriceTable {
        let mut t = PriceTable::new();
        t.insert("sonnet", ModelPrice::new(3.0, 15.0));
        t.insert("haiku", ModelPrice::new(1.0, 5.0));
        t
    }

    #[test]
    fn keyed_readings_replace_the_others_add() {
        let mut m = UsageMeter::new(READER, prices(), None);
        let a = r#"{"k":"m1","m":"sonnet","in":1000000,"out":0}"#;
        assert_eq!(m.feed_line(a), Some(Usd::from_f64(3.0)));
        // The same key again, unchanged: no change.
        assert_eq!(m.feed_line(a), None);
        // Its usage grew: replaced, not added.
        let a2 = r#"{"k":"m1","m":"sonnet","in":1000000,"out":100000}"#;
        assert_eq!(m.feed_line(a2), Some(Usd::from_f64(4.5)));
        // Unkeyed readings add up, each time.
        let b = r#"{"m":"haiku","in":0,"out":200000}"#;
        assert_eq!(m.feed_line(b), Some(Usd::from_f64(5.5)));
        assert_eq!(m.feed_line(b), Some(Usd::from_f64(6.5)));
        assert_eq!(m.usage().input_tokens, 1_000_000);
        assert_eq!(m.usage().output_tokens, 500_000);
    }

    #[test]
    fn model_falls_back_to_the_session_then_config_and_noise_is_ignored() {
        let mut m = UsageMeter::new(READER, prices(), Some("haiku".into()));
        assert_eq!(m.feed_line(r#"{"in":1000000}"#), Some(Usd::from_f64(1.0)));
        // The session names its model: it now prices readings without one (3 $/Mtok).
        assert_eq!(
            m.feed_line(r#"{"session":"sonnet"}"#),
            Some(Usd::from_f64(3.0))
        );
        assert_eq!(m.feed_line(r#"{"in":1000000}"#), Some(Usd::from_f64(6.0)));
        for noise in ["", "warning: not json", "{broken", r#"{"other":1}"#] {
            assert_eq!(m.feed_line(noise), None, "{noise}");
        }
        // An unpriced model costs nothing rather than failing.
        assert_eq!(m.feed_line(r#"{"m":"mystery","in":5000000}"#), None);
        assert_eq!(m.cost(), Usd::from_f64(6.0));
    }

    #[test]
    fn a_keyed_total_never_falls_when_read_late() {
        let mut m = UsageMeter::new(READER, prices(), Some("sonnet".into()));
        let full = r#"{"k":"total","in":2000000}"#;
        let partial = r#"{"k":"total","in":1000000}"#;
        assert_eq!(m.feed_line(full), Some(Usd::from_f64(6.0)));
        // The same total from a slower source, an earlier value of it: ignored.
        assert_eq!(m.feed_line(partial), None);
        assert_eq!(m.cost(), Usd::from_f64(6.0));
        assert_eq!(m.usage().input_tokens, 2_000_000);
    }

    #[test]
    fn a_settled_account_replaces_what_came_before_and_closes_the_meter() {
        fn read_settled(v: &Value, c: Option<&str>) -> Vec<Reading> {
            let mut r = read(v, c);
            if v["final"].as_bool() == Some(true) {
                r.insert(0, Reading::Settled);
            }
            r
        }
        let reader = LineReader {
            needles: &["\"in\""],
            read: read_settled,
        };
        let mut m = UsageMeter::new(reader, prices(), Some("sonnet".into()));
        m.feed_line(r#"{"k":"a","in":1000000}"#);
        m.feed_line(r#"{"k":"b","in":1000000}"#);
        assert_eq!(m.cost(), Usd::from_f64(6.0));
        // The run's own total: the same two million tokens, not four.
        let fin = r#"{"final":true,"k":"total","in":2000000}"#;
        assert_eq!(m.feed_line(fin), None);
        assert_eq!(m.cost(), Usd::from_f64(6.0));
        // A followed file's late line does not add to the settled account.
        assert_eq!(m.feed_line(r#"{"k":"c","in":1000000}"#), None);
        assert_eq!(m.cost(), Usd::from_f64(6.0));
    }

    #[test]
    fn a_session_log_takes_only_plain_ids() {
        fn id_of(v: &Value) -> Option<String> {
            v["id"].as_str().map(str::to_string)
        }
        let log = SessionLog {
            dir: PathBuf::from("/nowhere"),
            needle: "started",
            id_of,
            locate: |_, _| None,
        };
        assert_eq!(
            log.id_in(r#"{"type":"started","id":"01a2-beef"}"#)
                .as_deref(),
            Some("01a2-beef")
        );
        for refused in [
            r#"{"type":"started","id":"../../etc"}"#,
            r#"{"type":"started","id":""}"#,
            r#"{"type":"started","id":"a/b"}"#,
            r#"{"type":"other","id":"abc"}"#,
            "not json started",
        ] {
            assert_eq!(log.id_in(refused), None, "{refused}");
        }
    }

    #[test]
    fn a_reported_cost_wins_over_the_tokens() {
        let mut m = UsageMeter::new(READER, prices(), Some("sonnet".into()));
        assert_eq!(
            m.feed_line(r#"{"in":1000000,"cost":0.5}"#),
            Some(Usd::from_f64(0.5))
        );
        assert_eq!(m.feed_line(r#"{"in":1000000}"#), Some(Usd::from_f64(3.5)));
        assert_eq!(m.usage().input_tokens, 2_000_000);
    }

    #[test]
    fn usage_is_priced_per_model_once_like_the_final_parse() {
        // Two readings of 1 token each at $0.4/Mtok: priced one by one each rounds to 0 µ$,
        // summed first they are 0.8 µ$ → 1 µ$, which is what a parser pricing the run gets.
        let mut t = PriceTable::new();
        t.insert("tiny", ModelPrice::new(0.4, 0.4));
        let mut m = UsageMeter::new(READER, t, Some("tiny".into()));
        m.feed_line(r#"{"in":1}"#);
        m.feed_line(r#"{"in":1}"#);
        assert_eq!(m.cost(), Usd(1));
    }
}
