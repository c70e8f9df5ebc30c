//! Properties of the agent layer's pure functions over arbitrary input: nothing panics, secrets
//! never survive redaction, and the command template never re-splits a prompt.

use proptest::prelude::*;
use whilly::agent::backend::{AgentSettings, BackendKind, Invocation};
use whilly::agent::guards::{check_command, check_secrets};
use whilly::agent::handoff::parse_result_json;
use whilly::agent::result::clean_output;
use whilly::agent::{PriceTable, build_backend, redact_secrets, render_stream_line};

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
        let text = clean_output(&bytes);
        {
            let mut s = AgentSettings::new(BackendKind::Command);
            s.command = Some("sh -c true".into());
            let b = build_backend(&s).expect("backend");
            let _ = b.parse_result(&bytes, &PriceTable::new());
        }
        let prices = PriceTable::new();
        let _ = whilly::agent::claude::parse_claude_output(&text, Some("m"), &prices);
        let _ = whilly::agent::opencode::parse_opencode_output(&text, Some("m"), &prices);
        let _ = whilly::agent::codex::parse_codex_output(&text, Some("m"), &prices);
        let _ = whilly::agent::gemini::parse_gemini_output(&text, Some("m"), &prices);
        for line in text.lines() {
            let _ = render_stream_line(line);
        }
        let _ = render_stream_line(&text);
        let _ = check_command(&text);
        let _ = check_secrets(&text);
        let _ = parse_result_json(&text);
        let _ = redact_secrets(&text);
    }

    #[test]
    fn redaction_removes_generated_secrets(
        prefix in "[ a-z.,:\n]{0,40}",
        body in "[A-Za-z0-9]{36}",
        suffix in "[ a-z.,\n]{0,40}",
    ) {
        for secret in [format!("ghp_{body}"), format!("sk-ant-api03-{body}"), format!("AKIA{}", body[..16].to_ascii_uppercase())] {
            // Secrets are recognised as tokens: separated from surrounding words.
            let text = format!("{prefix} {secret} {suffix}");
            let redacted = redact_secrets(&text);
            prop_assert!(!redacted.contains(&secret), "{redacted}");
            prop_assert!(check_secrets(&text).is_err());
            // Redacting twice changes nothing more.
            prop_assert_eq!(redact_secrets(&redacted), redacted.clone());
        }
    }

    #[test]
    fn prompt_is_always_exactly_one_argument(prompt in "\\PC{0,200}") {
        let mut s = AgentSettings::new(BackendKind::Command);
        s.command = Some("sh -c 'exit 0' x {prompt}".into());
        let b = build_backend(&s).expect("backend");
        let dir = std::path::Path::new("/tmp");
        let inv = Invocation { prompt: &prompt, prompt_file: dir, workdir: dir, task_id: "T" };
        let cmd = b.command(&inv).expect("command");
        prop_assert_eq!(cmd.args.len(), 4);
        prop_assert_eq!(&cmd.args[3], &prompt);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// JSON-ish noise around real events: the structured parsers still never panic.
    #[test]
    fn json_shaped_noise_never_panics(
        lines in proptest::collection::vec(
            prop_oneof![
                Just(r#"{"type":"result","subtype":"success","is_error":false,"result":"x","usage":{"input_tokens":-5,"output_tokens":1e300}}"#.to_string()),
                Just(r#"{"type":"step_finish","part":{"tokens":{"input":"a","cache":7},"cost":"NaN"}}"#.to_string()),
                Just(r#"{"type":"turn.completed","usage":null}"#.to_string()),
                Just(r#"{"type":"message","role":"assistant","content":5,"delta":true}"#.to_string()),
                Just(r#"{"response":null,"stats":{"models":{"m":{"tokens":[]}}}}"#.to_string()),
                Just(r#"{"msg":{"type":"token_count","info":{"total_token_usage":"x"}}}"#.to_string()),
                "\\PC{0,60}",
            ],
            0..12,
        )
    ) {
        let text = lines.join("\n");
        let prices = PriceTable::new();
        let _ = whilly::agent::claude::parse_claude_output(&text, None, &prices);
        let _ = whilly::agent::opencode::parse_opencode_output(&text, None, &prices);
        let _ = whilly::agent::codex::parse_codex_output(&text, None, &prices);
        let _ = whilly::agent::gemini::parse_gemini_output(&text, None, &prices);
        for line in &lines {
            let _ = render_stream_line(line);
        }
    }
}
