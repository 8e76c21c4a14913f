//! Long sessions, against the fake server on 127.0.0.1: signed thinking
//! carried into the tool-use continuation from the persisted transcript
//! (also by a fresh engine reading it from JSON, as a resumed thread does),
//! "prompt is too long" returned as `ContextOverflow` after exactly one
//! request, context windows in `list_models`.

mod common;

use common::{Turn, ask, config, engine, reasoning_transcript, reliability, request, user};
use roder_api::inference::{
    ContextOverflow, InferenceProviderContext, ReasoningEffort, TokenUsage,
};
use roder_api::transcript::TranscriptItem;
use roder_ext_anthropic::AnthropicEngine;
use roder_testkit::fake_models::{FakeError, FakeModelServer, MessagesStream};
use serde_json::{Value, json};

const SIGNATURE: &str = "EqQBCkYIBxgCKkB+/sig==\u{7f}ü";

/// The assistant messages of a recorded request body.
fn assistant_messages(body: &Value) -> Vec<Vec<Value>> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "assistant")
        .map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn thinking_round() -> MessagesStream {
    MessagesStream::new("msg_1")
        .thinking(&["I should ", "list files."], SIGNATURE)
        .redacted_thinking("opaque-bytes")
        .text(&["Listing."])
        .tool_use("toolu_1", "shell", &["{\"cmd\":\"ls\"}"])
        .usage(100, 30)
}

#[tokio::test]
async fn a_tool_round_sends_its_signed_thinking_back_first() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(thinking_round().stop("tool_use"));
    server.push(
        MessagesStream::new("msg_2")
            .text(&["done"])
            .usage(150, 4)
            .cache_usage(100, 0)
            .stop("end_turn"),
    );
    let mut turn = Turn::new("list files");
    turn.reasoning = Some(ReasoningEffort::Low);
    turn.run(&engine(&server), &reliability(1)).await.unwrap();
    assert_eq!(turn.final_text.as_deref(), Some("done"));

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let second = &requests[1].body;
    let assistant = assistant_messages(second);
    assert_eq!(assistant.len(), 1, "{second}");
    let content = &assistant[0];
    assert_eq!(
        content[0],
        json!({"type": "thinking", "thinking": "I should list files.", "signature": SIGNATURE})
    );
    assert_eq!(content[0]["signature"].as_str(), Some(SIGNATURE));
    assert_eq!(
        content[1],
        json!({"type": "redacted_thinking", "data": "opaque-bytes"})
    );
    assert_eq!(content[2]["type"], json!("text"));
    assert_eq!(content[3]["type"], json!("tool_use"));
    assert_eq!(second["thinking"]["type"], json!("enabled"));
    // Usage of both rounds adds up (input counts cache reads).
    assert_eq!(
        turn.usage,
        TokenUsage {
            input_tokens: 350,
            output_tokens: 34,
            cached_input_tokens: 100,
            reasoning_tokens: 0,
        }
    );
}

#[tokio::test]
async fn a_thread_resumed_in_a_new_process_sends_its_persisted_signed_thinking() {
    // First "process": the round with thinking and a tool use.
    let transcript_json = {
        let server = FakeModelServer::start().await.unwrap();
        server.push(thinking_round().stop("tool_use"));
        let response = ask(
            &engine(&server),
            &reliability(1),
            request(vec![user("go")], Some(ReasoningEffort::Medium)),
        )
        .await
        .unwrap();
        let mut transcript = vec![user("go")];
        transcript.extend(reasoning_transcript(&response));
        transcript.push(TranscriptItem::AssistantMessage {
            text: response.text.clone(),
        });
        for call in &response.tool_calls {
            transcript.push(TranscriptItem::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            });
            transcript.push(TranscriptItem::ToolResult {
                id: call.id.clone(),
                name: call.name.clone(),
                output: "a.txt".into(),
                is_error: false,
            });
        }
        serde_json::to_string(&transcript).unwrap()
    };
    assert!(transcript_json.contains(SIGNATURE.split('\u{7f}').next().unwrap()));

    // Second "process": a fresh server and engine, the transcript from JSON.
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::text_reply("msg_2", "a.txt is there"));
    let transcript: Vec<TranscriptItem> = serde_json::from_str(&transcript_json).unwrap();
    let engine = AnthropicEngine::new(config(&server)).unwrap();
    let response = ask(
        &engine,
        &reliability(1),
        request(transcript, Some(ReasoningEffort::Medium)),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "a.txt is there");
    let body = &server.model_requests()[0].body;
    let assistant = assistant_messages(body);
    assert_eq!(assistant[0][0]["type"], json!("thinking"), "{body}");
    assert_eq!(assistant[0][0]["signature"].as_str(), Some(SIGNATURE));
    assert_eq!(assistant[0][1]["type"], json!("redacted_thinking"));
    // The continuation keeps thinking on: its signed blocks are there.
    assert_eq!(body["thinking"]["type"], json!("enabled"));
}

fn overflow_of(error: &anyhow::Error) -> &ContextOverflow {
    error
        .downcast_ref::<ContextOverflow>()
        .unwrap_or_else(|| panic!("not a ContextOverflow: {error:#}"))
}

#[tokio::test]
async fn a_prompt_too_long_is_a_context_overflow_after_one_request() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::prompt_too_long(208_310, 200_000));
    server.push(MessagesStream::text_reply("m", "must not be requested"));
    let error = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap_err();
    assert_eq!(
        overflow_of(&error).message,
        "prompt is too long: 208310 tokens > 200000 maximum"
    );
    assert_eq!(server.model_requests().len(), 1, "never retried");
}

#[tokio::test]
async fn an_in_stream_prompt_too_long_is_a_context_overflow_after_one_request() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::new("m").error(
        "invalid_request_error",
        "prompt is too long: 210000 tokens > 200000 maximum",
    ));
    server.push(MessagesStream::text_reply("m", "must not be requested"));
    let error = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap_err();
    overflow_of(&error);
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_request_over_the_fake_window_overflows_and_a_short_one_does_not() {
    let server = FakeModelServer::start().await.unwrap();
    server.set_context_window(1_000);
    server.push(MessagesStream::text_reply("m", "short is fine"));
    let engine = engine(&server);
    let long = "x".repeat(8_000);
    let error = ask(&engine, &reliability(4), request(vec![user(&long)], None))
        .await
        .unwrap_err();
    assert!(overflow_of(&error).message.contains("prompt is too long"));
    let response = ask(&engine, &reliability(4), request(vec![user("hi")], None))
        .await
        .unwrap();
    assert_eq!(response.text, "short is fine");
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn other_invalid_requests_are_not_overflows() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::new(400, "tools.0.input_schema: invalid"));
    let error = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap_err();
    assert!(
        error.downcast_ref::<ContextOverflow>().is_none(),
        "{error:#}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn models_are_listed_with_their_context_windows() {
    let server = FakeModelServer::start().await.unwrap();
    server.set_models(&["claude-sonnet-4-5", "proxy-model"]);
    let reliability = reliability(1);
    let windows = |engine: AnthropicEngine| {
        let reliability = reliability.clone();
        async move {
            let ctx = InferenceProviderContext {
                reliability: &reliability,
            };
            let models = roder_api::inference::InferenceEngine::list_models(&engine, ctx)
                .await
                .unwrap();
            models
                .into_iter()
                .map(|model| (model.id, model.context_window))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        windows(engine(&server)).await,
        vec![
            ("claude-sonnet-4-5".to_string(), Some(200_000)),
            ("proxy-model".to_string(), None),
        ]
    );
    let configured = AnthropicEngine::new(config(&server).with_context_window(1_000_000)).unwrap();
    assert_eq!(
        windows(configured).await,
        vec![
            ("claude-sonnet-4-5".to_string(), Some(1_000_000)),
            ("proxy-model".to_string(), Some(1_000_000)),
        ]
    );
}
