//! Whole turns against the fake Messages server: several rounds of tool
//! use with thinking, input JSON split mid-string and mid-escape, parallel
//! tool uses, usage, and what each request carried.

mod common;

use common::{KEY, Turn, ask, engine, reliability, request, user};
use roder_api::inference::{InferenceEngine, InferenceEvent, ReasoningEffort, TokenUsage};
use roder_testkit::fake_models::{FakeModelServer, MessagesStream};
use serde_json::json;

/// `{"cmd":"echo \"a\\b\" ü"}` cut inside the string, between `\` and the
/// character it escapes, and inside a `\\` pair.
const SPLIT_INPUT: [&str; 5] = ["{\"cmd\":\"ec", "ho \\", "\"a\\", "\\b\\\" ü", "\"}"];

#[tokio::test]
async fn a_tool_use_turn_over_several_rounds_with_thinking() {
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key(KEY);
    server.push(
        MessagesStream::new("msg_1")
            .thinking(&["I will ", "look around."], "sig-round-1")
            .text(&["Looking."])
            .tool_use("toolu_1", "shell", &SPLIT_INPUT)
            .tool_use("toolu_2", "shell", &["{\"cmd\":", "\"pwd\"}"])
            .usage(100, 40)
            .stop("tool_use")
            .split_every(5),
    );
    server.push(
        MessagesStream::new("msg_2")
            .thinking(&["Now list."], "sig-round-2")
            .tool_use("toolu_3", "shell", &["{\"cmd\":\"ls\"}"])
            .usage(150, 20)
            .stop("tool_use")
            .split_every(1),
    );
    server.push(
        MessagesStream::new("msg_3")
            .text(&["All ", "done."])
            .usage(200, 10)
            .stop("end_turn"),
    );

    let engine = engine(&server);
    let mut turn = Turn::new("inspect the repo");
    turn.reasoning = Some(ReasoningEffort::Medium);
    turn.run(&engine, &reliability(1)).await.unwrap();

    assert_eq!(turn.rounds, 3);
    assert_eq!(turn.final_text.as_deref(), Some("All done."));
    let executed: Vec<(&str, &str)> = turn
        .executions
        .iter()
        .map(|(id, _, arguments)| (id.as_str(), arguments.as_str()))
        .collect();
    assert_eq!(
        executed,
        vec![
            ("toolu_1", SPLIT_INPUT.concat().as_str()),
            ("toolu_2", "{\"cmd\":\"pwd\"}"),
            ("toolu_3", "{\"cmd\":\"ls\"}"),
        ]
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&turn.executions[0].2).unwrap()["cmd"],
        "echo \"a\\b\" ü"
    );
    assert_eq!(turn.usage.input_tokens, 450);
    assert_eq!(turn.usage.output_tokens, 70);

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3);
    for recorded in &requests {
        assert_eq!(recorded.path, "/v1/messages");
        assert_eq!(recorded.header("x-api-key"), Some(KEY));
        assert_eq!(recorded.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(recorded.header("authorization"), None);
        assert!(recorded.authorized);
        assert_eq!(recorded.body["stream"], json!(true));
        assert_eq!(recorded.body["model"], json!("claude-fake"));
        // Every round may think: the signed blocks of each tool turn are
        // sent back.
        assert_eq!(
            recorded.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
    }
    let messages = requests[2].body["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
    let first_assistant = messages[1]["content"].as_array().unwrap();
    assert_eq!(
        first_assistant[0],
        json!({"type": "thinking", "thinking": "I will look around.", "signature": "sig-round-1"})
    );
    assert_eq!(
        first_assistant[1],
        json!({"type": "text", "text": "Looking."})
    );
    assert_eq!(
        first_assistant[2],
        json!({"type": "tool_use", "id": "toolu_1", "name": "shell",
               "input": {"cmd": "echo \"a\\b\" ü"}})
    );
    assert_eq!(first_assistant[3]["id"], json!("toolu_2"));
    let results = messages[2]["content"].as_array().unwrap();
    assert_eq!(
        results[0],
        json!({"type": "tool_result", "tool_use_id": "toolu_1", "content": "ran echo \"a\\b\" ü"})
    );
    assert_eq!(results[1]["tool_use_id"], json!("toolu_2"));
    assert_eq!(
        messages[3]["content"][0],
        json!({"type": "thinking", "thinking": "Now list.", "signature": "sig-round-2"})
    );
    // The latest message is the prompt-cache breakpoint.
    assert_eq!(
        messages[4]["content"][0]["cache_control"],
        json!({"type": "ephemeral"})
    );
    assert_eq!(
        requests[2].body["system"][0]["text"],
        json!("You are a coding agent.")
    );
}

#[tokio::test]
async fn reasoning_without_signed_data_turns_thinking_off_for_the_tool_round() {
    // As in a log written before reasoning kept its provider data.
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::text_reply("msg", "ok"));
    let engine = engine(&server);
    let transcript = vec![
        user("go"),
        roder_api::transcript::TranscriptItem::Reasoning {
            text: "thought in another process".into(),
            provider_data: None,
        },
        roder_api::transcript::TranscriptItem::ToolCall {
            id: "toolu_9".into(),
            name: "shell".into(),
            arguments: "{\"cmd\":\"ls\"}".into(),
        },
        roder_api::transcript::TranscriptItem::ToolResult {
            id: "toolu_9".into(),
            name: "shell".into(),
            output: "a".into(),
            is_error: false,
        },
    ];
    let response = ask(
        &engine,
        &reliability(1),
        request(transcript, Some(ReasoningEffort::High)),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "ok");
    let body = &server.model_requests()[0].body;
    assert!(body.get("thinking").is_none());
    assert!(!body.to_string().contains("thought in another process"));
}

#[tokio::test]
async fn parallel_tool_uses_complete_separately_and_the_flag_is_sent() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::tool_uses_reply(
        "msg_p",
        &[
            ("toolu_a", "shell", "{\"cmd\":\"ls\"}"),
            ("toolu_b", "shell", "{\"cmd\":\"pwd\"}"),
            ("toolu_c", "shell", "{\"cmd\":\"id\"}"),
        ],
    ));
    server.push(MessagesStream::tool_uses_reply(
        "msg_q",
        &[("toolu_d", "shell", "{\"cmd\":\"x\"}")],
    ));
    let engine = engine(&server);
    let response = ask(&engine, &reliability(1), request(vec![user("go")], None))
        .await
        .unwrap();
    let ids: Vec<&str> = response
        .tool_calls
        .iter()
        .map(|call| call.id.as_str())
        .collect();
    assert_eq!(ids, ["toolu_a", "toolu_b", "toolu_c"]);
    assert_eq!(
        response.completion.unwrap().stop_reason.as_deref(),
        Some("tool_use")
    );
    assert_eq!(
        server.model_requests()[0].body["tool_choice"],
        json!({"type": "auto", "disable_parallel_tool_use": false})
    );

    let mut sequential = request(vec![user("go")], None);
    sequential.parallel_tool_calls = false;
    ask(&engine, &reliability(1), sequential).await.unwrap();
    assert_eq!(
        server.model_requests()[1].body["tool_choice"]["disable_parallel_tool_use"],
        json!(true)
    );
}

#[tokio::test]
async fn text_streams_as_separate_deltas_and_usage_comes_last() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        MessagesStream::new("msg_u")
            .text(&["Hel", "lo, ", "wörld"])
            .usage(20, 7)
            .cache_usage(1000, 30)
            .stop("end_turn"),
    );
    let engine = engine(&server);
    let response = ask(&engine, &reliability(1), request(vec![user("hi")], None))
        .await
        .unwrap();
    assert_eq!(response.text_deltas, ["Hel", "lo, ", "wörld"]);
    let expected = TokenUsage {
        input_tokens: 1050,
        output_tokens: 7,
        cached_input_tokens: 1000,
        reasoning_tokens: 0,
    };
    assert_eq!(response.usage, expected);
    let n = response.events.len();
    assert_eq!(response.events[n - 2], InferenceEvent::Usage(expected));
    let completion = response.completion.unwrap();
    assert_eq!(completion.stop_reason.as_deref(), Some("end_turn"));
    assert_eq!(completion.provider_response_id.as_deref(), Some("msg_u"));
}

#[tokio::test]
async fn models_are_listed() {
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key(KEY);
    server.set_models(&["claude-a", "claude-b"]);
    let engine = engine(&server);
    let reliability = reliability(1);
    let models = engine
        .list_models(roder_api::inference::InferenceProviderContext {
            reliability: &reliability,
        })
        .await
        .unwrap();
    let ids: Vec<&str> = models.iter().map(|model| model.id.as_str()).collect();
    assert_eq!(ids, ["claude-a", "claude-b"]);
    assert_eq!(models[0].display_name.as_deref(), Some("Fake claude-a"));
    assert_eq!(engine.id(), "anthropic-test");
}
