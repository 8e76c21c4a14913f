//! Long sessions, against the fake server on 127.0.0.1: encrypted
//! reasoning carried from round to round and across processes (Responses),
//! context-overflow errors returned as `ContextOverflow` after exactly one
//! request (both APIs), the configured context window in `list_models`.

mod common;

use common::{APIS, Api, KEY, Turn, ask, config, reasoning_transcript, reliability, request, user};
use roder_api::inference::{ContextOverflow, InferenceProviderContext, TokenUsage};
use roder_api::transcript::TranscriptItem;
use roder_ext_openai::OpenAiResponsesEngine;
use roder_testkit::fake_models::{FakeError, FakeModelServer, ResponsesStream};
use serde_json::{Value, json};

const ENCRYPTED: &str = "gAAAAABo-3xY_zQ+/encrypted==\u{1}ü";

/// The reasoning items of a recorded Responses request body.
fn sent_reasoning(body: &Value) -> Vec<Value> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "reasoning")
        .cloned()
        .collect()
}

fn include(body: &Value) -> Value {
    body["include"].clone()
}

#[tokio::test]
async fn a_tool_round_sends_its_encrypted_reasoning_back() {
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key(KEY);
    server.push(
        ResponsesStream::new("resp_1")
            .reasoning_item(&[&["Look ", "first"]], Some(ENCRYPTED))
            .function_call("call_1", "shell", &["{\"cmd\":\"ls\"}"])
            .usage_details(100, 20, 0, 12)
            .completed(),
    );
    server.push(
        ResponsesStream::new("resp_2")
            .message(&["done"])
            .usage_details(140, 5, 100, 0)
            .completed(),
    );
    let engine = OpenAiResponsesEngine::new(config(&server)).unwrap();
    let mut turn = Turn::new("list files");
    // A reasoning model: `include` is asked for without an effort.
    turn.model = Some("gpt-5".into());
    turn.run(&engine, &reliability(1)).await.unwrap();
    assert_eq!(turn.final_text.as_deref(), Some("done"));

    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    for recorded in &requests {
        assert_eq!(
            include(&recorded.body),
            json!(["reasoning.encrypted_content"])
        );
        assert_eq!(recorded.body["store"], json!(false));
    }
    let sent = sent_reasoning(&requests[1].body);
    assert_eq!(sent.len(), 1, "{}", requests[1].body);
    assert_eq!(sent[0]["encrypted_content"].as_str(), Some(ENCRYPTED));
    assert_eq!(
        sent[0]["summary"],
        json!([{"type": "summary_text", "text": "Look first"}])
    );
    assert!(sent[0].get("id").is_none(), "store is false: no item ids");
    // In its place: right before the call it preceded.
    let input = requests[1].body["input"].as_array().unwrap();
    let at = input
        .iter()
        .position(|item| item["type"] == "reasoning")
        .unwrap();
    assert_eq!(input[at + 1]["type"], json!("function_call"));
    // Usage of both rounds adds up.
    assert_eq!(
        turn.usage,
        TokenUsage {
            input_tokens: 240,
            output_tokens: 25,
            cached_input_tokens: 100,
            reasoning_tokens: 12,
        }
    );
}

#[tokio::test]
async fn a_thread_resumed_in_a_new_process_sends_its_persisted_reasoning() {
    // First "process": one round with reasoning and a call.
    let transcript_json = {
        let server = FakeModelServer::start().await.unwrap();
        server.push(
            ResponsesStream::new("resp_1")
                .reasoning_item(&[&["plan"]], Some(ENCRYPTED))
                .function_call("call_1", "shell", &["{\"cmd\":\"ls\"}"])
                .completed(),
        );
        let engine = OpenAiResponsesEngine::new(config(&server)).unwrap();
        let mut req = request(vec![user("go")]);
        req.model = "o4-mini".into();
        let response = ask(&engine, &reliability(1), req).await.unwrap();
        let mut transcript = vec![user("go")];
        transcript.extend(reasoning_transcript(&response));
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
    assert!(
        transcript_json.contains("provider_data"),
        "{transcript_json}"
    );

    // Second "process": a fresh server and engine, the transcript from JSON.
    let server = FakeModelServer::start().await.unwrap();
    server.push(ResponsesStream::text_reply("resp_2", "a.txt is there"));
    let engine = OpenAiResponsesEngine::new(config(&server)).unwrap();
    let transcript: Vec<TranscriptItem> = serde_json::from_str(&transcript_json).unwrap();
    let mut req = request(transcript);
    req.model = "o4-mini".into();
    let response = ask(&engine, &reliability(1), req).await.unwrap();
    assert_eq!(response.text, "a.txt is there");
    let body = &server.model_requests()[0].body;
    let sent = sent_reasoning(body);
    assert_eq!(sent.len(), 1, "{body}");
    assert_eq!(sent[0]["encrypted_content"].as_str(), Some(ENCRYPTED));
    assert_eq!(include(body), json!(["reasoning.encrypted_content"]));
}

#[tokio::test]
async fn chat_completions_leave_reasoning_items_out() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(Api::Chat.text_reply("ok"));
    let engine = Api::Chat.engine(config(&server));
    let transcript = vec![
        user("go"),
        TranscriptItem::Reasoning {
            text: "plan".into(),
            provider_data: Some(json!({"type": "reasoning", "id": "rs_1",
                "encrypted_content": ENCRYPTED, "summary": []})),
        },
        TranscriptItem::AssistantMessage {
            text: "answer".into(),
        },
        user("again"),
    ];
    ask(engine.as_ref(), &reliability(1), request(transcript))
        .await
        .unwrap();
    let body = server.model_requests()[0].body.to_string();
    assert!(!body.contains("gAAAA"), "{body}");
    assert!(!body.contains("reasoning.encrypted_content"), "{body}");
    assert!(body.contains("answer"));
}

fn overflow_of(error: &anyhow::Error) -> &ContextOverflow {
    error
        .downcast_ref::<ContextOverflow>()
        .unwrap_or_else(|| panic!("not a ContextOverflow: {error:#}"))
}

#[tokio::test]
async fn an_http_context_length_exceeded_is_a_context_overflow_after_one_request() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(FakeError::context_length_exceeded());
        server.push(api.text_reply("must not be requested"));
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert!(
            overflow_of(&error)
                .message
                .contains("exceeds the context window"),
            "{api:?}: {error:#}"
        );
        assert_eq!(server.model_requests().len(), 1, "{api:?}: never retried");
    }
}

#[tokio::test]
async fn an_in_stream_context_length_exceeded_is_a_context_overflow_after_one_request() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        ResponsesStream::new("r").failed("context_length_exceeded", "Your input is too long."),
    );
    server.push(Api::Responses.text_reply("must not be requested"));
    let engine = OpenAiResponsesEngine::new(config(&server)).unwrap();
    let error = ask(&engine, &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(overflow_of(&error).message, "Your input is too long.");
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_request_over_the_fake_window_overflows_and_a_short_one_does_not() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.set_context_window(1_000);
        server.push(api.text_reply("short is fine"));
        let engine = api.engine(config(&server));
        let long = "x".repeat(8_000);
        let error = ask(engine.as_ref(), &reliability(4), request(vec![user(&long)]))
            .await
            .unwrap_err();
        overflow_of(&error);
        let response = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
            .await
            .unwrap();
        assert_eq!(response.text, "short is fine", "{api:?}");
        assert_eq!(server.model_requests().len(), 2, "{api:?}");
    }
}

#[tokio::test]
async fn other_invalid_requests_are_not_overflows() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::new(400, "Invalid schema for function 'shell'"));
    let engine = OpenAiResponsesEngine::new(config(&server)).unwrap();
    let error = ask(&engine, &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(
        error.downcast_ref::<ContextOverflow>().is_none(),
        "{error:#}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn the_configured_context_window_is_listed_for_every_model() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.set_models(&["gpt-a", "gpt-b"]);
        let reliability = reliability(1);
        let ctx = InferenceProviderContext {
            reliability: &reliability,
        };
        let unknown = api.engine(config(&server)).list_models(ctx).await.unwrap();
        assert!(unknown.iter().all(|model| model.context_window.is_none()));
        let engine = api.engine(config(&server).with_context_window(272_000));
        let ctx = InferenceProviderContext {
            reliability: &reliability,
        };
        let models = engine.list_models(ctx).await.unwrap();
        assert_eq!(models.len(), 2);
        assert!(
            models
                .iter()
                .all(|model| model.context_window == Some(272_000)),
            "{api:?}: {models:?}"
        );
    }
}
