//! Live test against api.anthropic.com. It runs only when
//! `ANTHROPIC_API_KEY` is set (and passes trivially otherwise);
//! `RODER_LIVE_ANTHROPIC_MODEL` picks the model (default
//! `claude-haiku-4-5`).

mod common;

use common::{ask, reliability, request, user};
use roder_api::inference::ReasoningEffort;
use roder_ext_anthropic::{AnthropicConfig, AnthropicEngine};

#[tokio::test]
async fn live_text_tool_use_and_thinking() {
    if std::env::var("ANTHROPIC_API_KEY").map_or(true, |key| key.trim().is_empty()) {
        eprintln!("skipped: ANTHROPIC_API_KEY is not set");
        return;
    }
    let model = std::env::var("RODER_LIVE_ANTHROPIC_MODEL")
        .unwrap_or_else(|_| "claude-haiku-4-5".to_string());
    let engine = AnthropicEngine::new(AnthropicConfig::anthropic()).unwrap();

    let mut text = request(vec![user("Reply with exactly the word: pong")], None);
    text.model = model.clone();
    text.tools.clear();
    let response = ask(&engine, &reliability(3), text).await.unwrap();
    assert!(
        response.text.to_lowercase().contains("pong"),
        "{}",
        response.text
    );
    assert!(response.usage.input_tokens > 0);

    let mut tool = request(
        vec![user("Use the shell tool to run the command `echo \"hi\"`.")],
        Some(ReasoningEffort::Minimal),
    );
    tool.model = model;
    let response = ask(&engine, &reliability(3), tool).await.unwrap();
    let call = response.tool_calls.first().expect("a tool call");
    let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    assert!(
        arguments["cmd"].as_str().unwrap().contains("echo"),
        "{arguments}"
    );
}
