//! Live tests against api.openai.com. Each runs only when `OPENAI_API_KEY`
//! is set (and passes trivially otherwise); `RODER_LIVE_OPENAI_MODEL`
//! picks the model (default `gpt-4.1-mini`).

mod common;

use common::{APIS, ask, reliability, request, user};
use roder_ext_openai::OpenAiConfig;

fn live_model() -> Option<String> {
    if std::env::var("OPENAI_API_KEY").map_or(true, |key| key.trim().is_empty()) {
        eprintln!("skipped: OPENAI_API_KEY is not set");
        return None;
    }
    Some(std::env::var("RODER_LIVE_OPENAI_MODEL").unwrap_or_else(|_| "gpt-4.1-mini".to_string()))
}

#[tokio::test]
async fn live_text_and_tool_call() {
    let Some(model) = live_model() else {
        return;
    };
    for api in APIS {
        let engine = api.engine(OpenAiConfig::openai());
        let mut text = request(vec![user("Reply with exactly the word: pong")]);
        text.model = model.clone();
        text.tools.clear();
        let response = ask(engine.as_ref(), &reliability(3), text).await.unwrap();
        assert!(
            response.text.to_lowercase().contains("pong"),
            "{api:?}: {}",
            response.text
        );
        assert!(response.usage.input_tokens > 0);

        let mut tool = request(vec![user(
            "Use the shell tool to run the command `echo \"hi\"`. Do not answer in text.",
        )]);
        tool.model = model.clone();
        let response = ask(engine.as_ref(), &reliability(3), tool).await.unwrap();
        let call = response.tool_calls.first().expect("a tool call");
        let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
        assert!(
            arguments["cmd"].as_str().unwrap().contains("echo"),
            "{api:?}: {arguments}"
        );
    }
}
