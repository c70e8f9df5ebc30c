//! Spend while Claude works: the usage its stream-json assistant messages carry, priced as it
//! arrives, so budgets can stop an agent mid-run. The exact cost still comes from the final
//! `result` line (`total_cost_usd`); this is the running estimate until then.
//!
//! Claude Code prints one `assistant` line per content block, each repeating its API message's
//! `id` and its usage so far, so usage is kept per message id (the latest wins) and summed over
//! messages; a line without an id counts on its own.

use super::result::{PriceTable, Usage, u64_at};
use crate::domain::Usd;
use serde_json::Value;
use std::collections::HashMap;

/// The running usage and cost of one agent run, fed line by line.
#[derive(Debug, Clone)]
pub struct UsageMeter {
    prices: PriceTable,
    /// `agents.<name>.model`, the fallback when neither the message nor `init` names a model.
    configured_model: Option<String>,
    /// The model `system`/`init` announced.
    init_model: Option<String>,
    /// Message id → (model, usage so far).
    messages: HashMap<String, (Option<String>, Usage)>,
    /// Usage of messages without an id, per model.
    anonymous: Vec<(Option<String>, Usage)>,
    cost: Usd,
}

impl UsageMeter {
    pub fn new(prices: PriceTable, configured_model: Option<String>) -> UsageMeter {
        UsageMeter {
            prices,
            configured_model,
            init_model: None,
            messages: HashMap::new(),
            anonymous: Vec::new(),
            cost: Usd::ZERO,
        }
    }

    /// Feeds one output line (non-JSON and other events are ignored). Returns the new running
    /// cost when this line changed it.
    pub fn feed_line(&mut self, line: &str) -> Option<Usd> {
        let line = line.trim();
        // Only assistant and init lines matter; tool results can be megabytes, so skip parsing
        // anything that cannot be one of them.
        if !line.starts_with('{') || !(line.contains("\"assistant\"") || line.contains("\"init\""))
        {
            return None;
        }
        let v: Value = serde_json::from_str(line).ok()?;
        match v["type"].as_str()? {
            "system" if v["subtype"] == "init" => {
                self.init_model = v["model"].as_str().map(str::to_string);
                None
            }
            "assistant" => {
                let msg = &v["message"];
                let usage = usage_of(msg.get("usage")?)?;
                let model = msg["model"].as_str().map(str::to_string);
                match msg["id"].as_str() {
                    Some(id) => {
                        self.messages.insert(id.to_string(), (model, usage));
                    }
                    None => self.anonymous.push((model, usage)),
                }
                let before = self.cost;
                self.cost = self.price_all();
                (self.cost != before).then_some(self.cost)
            }
            _ => None,
        }
    }

    /// The running cost: every message's usage priced by its model (unpriced models count 0).
    pub fn cost(&self) -> Usd {
        self.cost
    }

    /// Tokens so far over all messages.
    pub fn usage(&self) -> Usage {
        let mut total = Usage::default();
        for (_, u) in self.messages.values().chain(self.anonymous.iter()) {
            total.add(u);
        }
        total
    }

    fn price_all(&self) -> Usd {
        let fallback = self
            .init_model
            .as_deref()
            .or(self.configured_model.as_deref());
        self.messages
            .values()
            .chain(self.anonymous.iter())
            .filter_map(|(model, usage)| {
                let model = model.as_deref().filter(|m| !m.is_empty()).or(fallback)?;
                self.prices.price(model, usage)
            })
            .fold(Usd::ZERO, |a, b| a + b)
    }
}

fn usage_of(u: &Value) -> Option<Usage> {
    u.is_object().then(|| Usage {
        input_tokens: u64_at(u, "input_tokens"),
        output_tokens: u64_at(u, "output_tokens"),
        cache_read_input_tokens: u64_at(u, "cache_read_input_tokens"),
        cache_creation_input_tokens: u64_at(u, "cache_creation_input_tokens"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::agent::result::ModelPrice;

    fn prices() -> PriceTable {
        let mut t = PriceTable::new();
        t.insert("claude-sonnet-4-5", ModelPrice::new(3.0, 15.0));
        t.insert("claude-haiku-4-5", ModelPrice::new(1.0, 5.0));
        t
    }

    fn assistant(id: Option<&str>, model: Option<&str>, input: u64, output: u64) -> String {
        let mut msg = serde_json::json!({
            "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}],
            "usage": {"input_tokens": input, "output_tokens": output,
                      "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}
        });
        if let Some(id) = id {
            msg["id"] = id.into();
        }
        if let Some(m) = model {
            msg["model"] = m.into();
        }
        serde_json::json!({"type": "assistant", "message": msg, "session_id": "s"}).to_string()
    }

    #[test]
    fn repeated_blocks_of_one_message_count_once() {
        let mut m = UsageMeter::new(prices(), None);
        let a = assistant(
            Some("msg_1"),
            Some("claude-sonnet-4-5-20250929"),
            1_000_000,
            0,
        );
        assert_eq!(m.feed_line(&a), Some(Usd::from_f64(3.0)));
        // The same message's next content block: same id, same usage: no change.
        assert_eq!(m.feed_line(&a), None);
        // Its usage grows (a later block reports more output): replaced, not added.
        let a2 = assistant(
            Some("msg_1"),
            Some("claude-sonnet-4-5-20250929"),
            1_000_000,
            100_000,
        );
        assert_eq!(m.feed_line(&a2), Some(Usd::from_f64(4.5)));
        // A second message adds up.
        let b = assistant(Some("msg_2"), Some("claude-haiku-4-5"), 0, 200_000);
        assert_eq!(m.feed_line(&b), Some(Usd::from_f64(5.5)));
        assert_eq!(m.usage().input_tokens, 1_000_000);
        assert_eq!(m.usage().output_tokens, 300_000);
    }

    #[test]
    fn model_falls_back_to_init_then_config_and_noise_is_ignored() {
        let mut m = UsageMeter::new(prices(), Some("claude-haiku-4-5".into()));
        // No model anywhere but the configuration.
        assert_eq!(
            m.feed_line(&assistant(None, None, 1_000_000, 0)),
            Some(Usd::from_f64(1.0))
        );
        // init names the model: it now prices messages without one (sonnet: 3 $/Mtok).
        m.feed_line(r#"{"type":"system","subtype":"init","model":"claude-sonnet-4-5","cwd":"/w"}"#);
        assert_eq!(
            m.feed_line(&assistant(None, None, 1_000_000, 0)),
            Some(Usd::from_f64(6.0))
        );
        for noise in [
            "",
            "warning: not json",
            "{broken",
            r#"{"type":"user","message":{"content":[]}}"#,
            r#"{"type":"assistant","message":{"content":[]}}"#,
            r#"{"type":"result","total_cost_usd":99}"#,
        ] {
            assert_eq!(m.feed_line(noise), None, "{noise}");
        }
        assert_eq!(m.cost(), Usd::from_f64(6.0));
        // An unpriced model costs nothing rather than failing.
        assert_eq!(
            m.feed_line(&assistant(Some("x"), Some("mystery-model"), 5_000_000, 0)),
            None
        );
    }

    #[test]
    fn cache_tokens_are_priced() {
        let mut m = UsageMeter::new(prices(), None);
        let line = r#"{"type":"assistant","message":{"id":"m","model":"claude-sonnet-4-5","usage":{"input_tokens":0,"output_tokens":0,"cache_read_input_tokens":1000000,"cache_creation_input_tokens":1000000}}}"#;
        assert_eq!(m.feed_line(line), Some(Usd::from_f64(0.3 + 3.75)));
    }
}
