//! What an attempt produced: the final text, cost, usage, and whether the agent claimed success.

use crate::domain::Usd;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Printed by the agent as the last line of its final answer when, and only when, every
/// acceptance criterion is met. A task without it is never DONE.
pub const COMPLETION_MARKER: &str = "<promise>COMPLETE</promise>";

/// Token counts of one attempt (all turns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cache_read_input_tokens)
            .saturating_add(self.cache_creation_input_tokens)
    }

    pub(crate) fn add(&mut self, other: &Usage) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
    }
}

/// Where [`AgentResult::cost`] came from, so the engine can warn about unpriced runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The agent reported an exact cost (Claude's `total_cost_usd`, OpenCode's `cost`).
    Reported,
    /// Computed from token counts with the [`PriceTable`].
    Priced,
    /// No cost and no price for the model: the cost is zero and should be flagged.
    #[default]
    Unknown,
}

/// The outcome of one attempt as read from the agent's output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentResult {
    /// The agent's final answer (not the transcript).
    pub text: String,
    pub cost: Usd,
    pub cost_source: CostSource,
    pub usage: Usage,
    pub num_turns: u32,
    pub duration_ms: Option<u64>,
    /// The agent itself reported failure (an API error, max turns, a crash).
    pub is_error: bool,
    /// Claude's `subtype` (`success`, `error_max_turns`, …); `no_result` when no final result
    /// could be found in the output at all.
    pub subtype: String,
    /// [`COMPLETION_MARKER`] appears in the final answer.
    pub marker_found: bool,
    /// The JSON the result was read from, when there was one.
    pub raw_json: Option<Value>,
}

impl AgentResult {
    /// A result for output with no recognisable final answer: an error, the tail as text.
    pub fn no_result(clean_output: &str) -> AgentResult {
        AgentResult {
            text: tail_lines(clean_output, 40),
            is_error: true,
            subtype: "no_result".to_string(),
            ..AgentResult::default()
        }
    }

    /// How a JSON agent's run ended, from what its events said: the reported `error` if any,
    /// else its `final_text`, else (it never gave a final answer, an error too) `partial`, what
    /// it said last. The marker counts only without an error. Usage, turns and the raw event are
    /// the caller's to add.
    pub fn answered(
        error: Option<String>,
        final_text: Option<String>,
        partial: String,
    ) -> AgentResult {
        let is_error = error.is_some() || final_text.is_none();
        let subtype = if error.is_some() {
            "error"
        } else if is_error {
            "no_result"
        } else {
            "success"
        };
        let marker_allowed = error.is_none();
        let text = error.or(final_text).unwrap_or(partial);
        AgentResult {
            marker_found: marker_allowed && has_marker(&text),
            text,
            is_error,
            subtype: subtype.to_string(),
            ..AgentResult::default()
        }
    }
}

/// Prices per million tokens of one model.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// Cache reads; 10 % of the input price when absent (Anthropic's published ratio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_per_mtok: Option<f64>,
    /// Cache writes; 125 % of the input price when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_per_mtok: Option<f64>,
}

impl ModelPrice {
    pub fn new(input_per_mtok: f64, output_per_mtok: f64) -> ModelPrice {
        ModelPrice {
            input_per_mtok,
            output_per_mtok,
            cache_read_per_mtok: None,
            cache_write_per_mtok: None,
        }
    }

    pub fn cost(&self, usage: &Usage) -> Usd {
        let read = self
            .cache_read_per_mtok
            .unwrap_or(self.input_per_mtok * 0.1);
        let write = self
            .cache_write_per_mtok
            .unwrap_or(self.input_per_mtok * 1.25);
        let dollars = (usage.input_tokens as f64 * self.input_per_mtok
            + usage.output_tokens as f64 * self.output_per_mtok
            + usage.cache_read_input_tokens as f64 * read
            + usage.cache_creation_input_tokens as f64 * write)
            / 1_000_000.0;
        Usd::from_f64(dollars)
    }
}

/// Model name → price, for agents that report tokens but no cost. Empty by default: prices
/// change, so they come from configuration rather than from this source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    prices: BTreeMap<String, ModelPrice>,
}

impl PriceTable {
    pub fn new() -> PriceTable {
        PriceTable::default()
    }

    pub fn insert(&mut self, model: impl Into<String>, price: ModelPrice) {
        self.prices.insert(model.into(), price);
    }

    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The price of `model`: an exact match, else the longest configured name `model` starts
    /// with (so `claude-sonnet-4` prices `claude-sonnet-4-5-20250929`); a `provider/` prefix
    /// (OpenCode's `anthropic/claude-…`) is tried without the provider too.
    pub fn lookup(&self, model: &str) -> Option<&ModelPrice> {
        let bare = model.rsplit_once('/').map_or(model, |(_, m)| m);
        for candidate in [model, bare] {
            if let Some(p) = self.prices.get(candidate) {
                return Some(p);
            }
        }
        [model, bare]
            .iter()
            .flat_map(|m| {
                self.prices
                    .iter()
                    .filter(move |(k, _)| m.starts_with(k.as_str()))
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| p)
    }

    /// The cost of `usage` on `model`, when the model has a price.
    pub fn price(&self, model: &str, usage: &Usage) -> Option<Usd> {
        self.lookup(model).map(|p| p.cost(usage))
    }
}

/// Fills `cost`/`cost_source` from the price table when the agent reported no cost.
pub(crate) fn apply_prices(result: &mut AgentResult, model: Option<&str>, prices: &PriceTable) {
    if result.cost_source == CostSource::Reported {
        return;
    }
    match model.and_then(|m| prices.price(m, &result.usage)) {
        Some(cost) => {
            result.cost = cost;
            result.cost_source = CostSource::Priced;
        }
        None => {
            result.cost = Usd::ZERO;
            result.cost_source = CostSource::Unknown;
        }
    }
}

/// Whether the completion marker is in an agent's final answer.
pub fn has_marker(final_text: &str) -> bool {
    final_text.contains(COMPLETION_MARKER)
}

/// PTY bytes as plain text: lossy UTF-8, ANSI escape sequences (CSI, OSC, two-byte ESC) removed,
/// `\r\n` → `\n` and other carriage returns dropped. Terminal wrapping never inserts bytes, so a
/// JSON line stays one line here however wide it is.
pub fn clean_output(raw: &[u8]) -> String {
    let text = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, then one final byte in @..~.
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                }
                // OSC / DCS / APC / PM / SOS: up to BEL or ST (ESC \).
                Some(']' | 'P' | '_' | '^' | 'X') => {
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' && chars.peek() == Some(&'\\') {
                            chars.next();
                            break;
                        }
                    }
                }
                // Charset selection and similar take one more byte.
                Some('(' | ')' | '*' | '+' | '#' | '%') => {
                    chars.next();
                }
                _ => {}
            },
            '\r' => {}
            // C1 CSI, rarely used but possible.
            '\u{9b}' => {
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            c if c.is_control() && c != '\n' && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// The last `n` non-empty lines of `text`.
pub fn tail_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

pub(crate) fn u64_at(v: &Value, key: &str) -> u64 {
    match v.get(key) {
        Some(Value::Number(n)) => n
            .as_u64()
            .or_else(|| n.as_f64().map(|f| f.max(0.0) as u64))
            .unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn strips_ansi_and_carriage_returns() {
        let raw = b"\x1b[1;32mgreen\x1b[0m\r\n\x1b]0;title\x07{\"a\":1}\r\nspin\rner\x1b(B\n";
        assert_eq!(clean_output(raw), "green\n{\"a\":1}\nspinner\n");
        assert_eq!(
            clean_output(b"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
            "link"
        );
        assert_eq!(clean_output(&[0xff, b'o', b'k']), "\u{fffd}ok");
    }

    #[test]
    fn price_lookup_and_cost() {
        let mut t = PriceTable::new();
        t.insert("claude-sonnet-4", ModelPrice::new(3.0, 15.0));
        t.insert("claude-sonnet-4-5", ModelPrice::new(4.0, 20.0));
        t.insert("gpt-5", ModelPrice::new(1.25, 10.0));
        assert_eq!(
            t.lookup("claude-sonnet-4-5-20250929")
                .map(|p| p.input_per_mtok),
            Some(4.0)
        );
        assert_eq!(
            t.lookup("anthropic/claude-sonnet-4-20250514")
                .map(|p| p.input_per_mtok),
            Some(3.0)
        );
        assert!(t.lookup("gemini-2.5-pro").is_none());
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            ..Usage::default()
        };
        assert_eq!(t.price("gpt-5", &usage), Some(Usd::from_f64(2.25)));
        let cached = Usage {
            cache_read_input_tokens: 1_000_000,
            cache_creation_input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(
            t.price("claude-sonnet-4", &cached),
            Some(Usd::from_f64(0.3 + 3.75))
        );
    }

    #[test]
    fn apply_prices_keeps_reported_cost() {
        let mut t = PriceTable::new();
        t.insert("m", ModelPrice::new(1.0, 1.0));
        let mut r = AgentResult {
            cost: Usd(7),
            cost_source: CostSource::Reported,
            ..Default::default()
        };
        apply_prices(&mut r, Some("m"), &t);
        assert_eq!(r.cost, Usd(7));
        let mut r = AgentResult {
            usage: Usage {
                input_tokens: 1_000_000,
                ..Usage::default()
            },
            ..Default::default()
        };
        apply_prices(&mut r, Some("m"), &t);
        assert_eq!(
            (r.cost, r.cost_source),
            (Usd::from_f64(1.0), CostSource::Priced)
        );
        apply_prices(&mut r, Some("other"), &t);
        assert_eq!((r.cost, r.cost_source), (Usd::ZERO, CostSource::Unknown));
    }

    #[test]
    fn tail_and_marker() {
        assert_eq!(tail_lines("a\n\nb\nc\n", 2), "b\nc");
        assert!(has_marker("done\n<promise>COMPLETE</promise>"));
        assert!(!has_marker("<promise>COMPLETE</promise"));
    }

    #[test]
    fn answered_prefers_the_error_and_counts_the_marker_only_without_one() {
        let done = format!("ok\n{COMPLETION_MARKER}");
        let r = AgentResult::answered(None, Some(done.clone()), String::new());
        assert_eq!(
            (r.subtype.as_str(), r.is_error, r.marker_found),
            ("success", false, true)
        );
        let r = AgentResult::answered(Some("429".into()), Some(done.clone()), String::new());
        assert_eq!(
            (
                r.subtype.as_str(),
                r.text.as_str(),
                r.is_error,
                r.marker_found
            ),
            ("error", "429", true, false)
        );
        // No final answer: an error, with what the agent said last as the text.
        let r = AgentResult::answered(None, None, done.clone());
        assert_eq!(
            (
                r.subtype.as_str(),
                r.text.as_str(),
                r.is_error,
                r.marker_found
            ),
            ("no_result", done.as_str(), true, true)
        );
    }
}
