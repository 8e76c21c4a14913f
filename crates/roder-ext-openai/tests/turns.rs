//! Whole turns against the fake server, for both OpenAI engines: several
//! rounds of tool calls, arguments split mid-string and mid-escape, parallel
//! calls, usage, and what each request carried.

mod common;

use common::{APIS, Api, KEY, Turn, ask, config, reliability, request, user};
use roder_api::inference::{InferenceEvent, TokenUsage};
use roder_api::transcript::TranscriptItem;
use roder_testkit::fake_models::{ChatStream, FakeModelServer, ResponsesStream};
use serde_json::json;

/// `{"cmd":"echo \"a\\b\" ü"}` cut inside the string, between `\` and the
/// character it escapes, and inside a `\\` pair.
const SPLIT_ARGUMENTS: [&str; 5] = ["{\"cmd\":\"ec", "ho \\", "\"a\\", "\\b\\\" ü", "\"}"];

#[tokio::test]
async fn a_tool_calling_turn_over_several_rounds() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.require_api_key(KEY);
        // Round 1: two calls at once, the first one's arguments in pieces,
        // and the whole body cut every 7 bytes.
        server.push(
            api.tool_reply(&[
                ("call_1", "shell", &SPLIT_ARGUMENTS),
                ("call_2", "shell", &["{\"cmd\":", "\"pwd\"}"]),
            ])
            .split_every(7),
        );
        // Round 2: one more call, byte by byte.
        server.push(
            api.tool_reply(&[("call_3", "shell", &["{\"cmd\":\"ls\"}"])])
                .split_every(1),
        );
        // Round 3: the answer.
        server.push(api.text_reply("All done."));

        let engine = api.engine(config(&server));
        let mut turn = Turn::new("inspect the repo");
        turn.run(engine.as_ref(), &reliability(1)).await.unwrap();

        assert_eq!(turn.rounds, 3, "{api:?}");
        assert_eq!(turn.final_text.as_deref(), Some("All done."));
        let executed: Vec<(&str, &str)> = turn
            .executions
            .iter()
            .map(|(id, _, arguments)| (id.as_str(), arguments.as_str()))
            .collect();
        assert_eq!(
            executed,
            vec![
                ("call_1", SPLIT_ARGUMENTS.concat().as_str()),
                ("call_2", "{\"cmd\":\"pwd\"}"),
                ("call_3", "{\"cmd\":\"ls\"}"),
            ],
            "{api:?}"
        );
        let first: serde_json::Value = serde_json::from_str(&turn.executions[0].2).unwrap();
        assert_eq!(first["cmd"], "echo \"a\\b\" ü");
        assert_eq!(turn.usage.input_tokens, 30, "{api:?}");
        assert_eq!(turn.usage.output_tokens, 15, "{api:?}");

        let requests = server.model_requests();
        assert_eq!(requests.len(), 3);
        for recorded in &requests {
            assert_eq!(recorded.path, api.path());
            assert_eq!(recorded.header("authorization"), Some("Bearer sk-test-key"));
            assert!(recorded.authorized);
            assert_eq!(recorded.body["stream"], json!(true));
            assert_eq!(recorded.body["model"], json!("fake-model"));
        }
        // The third request carries every call and result of the turn, with
        // the arguments exactly as the model produced them.
        let last = &requests[2].body;
        match api {
            Api::Chat => {
                let messages = last["messages"].as_array().unwrap();
                let roles: Vec<&str> = messages
                    .iter()
                    .map(|m| m["role"].as_str().unwrap())
                    .collect();
                assert_eq!(
                    roles,
                    [
                        "system",
                        "user",
                        "assistant",
                        "tool",
                        "tool",
                        "assistant",
                        "tool"
                    ]
                );
                assert_eq!(messages[2]["tool_calls"].as_array().unwrap().len(), 2);
                assert_eq!(
                    messages[2]["tool_calls"][0]["function"]["arguments"],
                    json!(SPLIT_ARGUMENTS.concat())
                );
                assert_eq!(
                    messages[3],
                    json!({"role": "tool", "tool_call_id": "call_1",
                                                "content": "ran echo \"a\\b\" ü"})
                );
            }
            Api::Responses => {
                let input = last["input"].as_array().unwrap();
                let kinds: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
                assert_eq!(
                    kinds,
                    [
                        "message",
                        "function_call",
                        "function_call",
                        "function_call_output",
                        "function_call_output",
                        "function_call",
                        "function_call_output"
                    ]
                );
                assert_eq!(input[1]["arguments"], json!(SPLIT_ARGUMENTS.concat()));
                assert_eq!(input[3]["call_id"], json!("call_1"));
                assert_eq!(last["instructions"], json!("You are a coding agent."));
            }
        }
    }
}

#[tokio::test]
async fn text_streams_as_separate_deltas() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::new()
                    .text("Hel")
                    .text("lo, ")
                    .text("wörld")
                    .finish("stop")
                    .done(),
            ),
            Api::Responses => server.push(
                ResponsesStream::new("resp_1")
                    .message(&["Hel", "lo, ", "wörld"])
                    .completed(),
            ),
        }
        let engine = api.engine(config(&server));
        let response = ask(engine.as_ref(), &reliability(1), request(vec![user("hi")]))
            .await
            .unwrap();
        assert_eq!(
            response.text_deltas,
            vec!["Hel", "lo, ", "wörld"],
            "{api:?}"
        );
        assert_eq!(
            response.completion.unwrap().stop_reason.as_deref(),
            Some("stop")
        );
    }
}

#[tokio::test]
async fn parallel_calls_interleaved_on_the_wire_complete_separately() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::with_id("chatcmpl-par")
                    .tool_call_start(0, "call_a", "shell")
                    .tool_call_start(1, "call_b", "shell")
                    .tool_call_arguments(1, "{\"cmd\":\"e")
                    .tool_call_arguments(0, "{\"cmd\":\"l")
                    .tool_call_arguments(0, "s\"}")
                    .tool_call_arguments(1, "cho\"}")
                    .finish("tool_calls")
                    .done(),
            ),
            Api::Responses => server.push(
                ResponsesStream::new("resp_par")
                    .function_call_added("call_a", "shell")
                    .function_call_added("call_b", "shell")
                    .function_call_delta("call_b", "{\"cmd\":\"e")
                    .function_call_delta("call_a", "{\"cmd\":\"l")
                    .function_call_delta("call_a", "s\"}")
                    .function_call_delta("call_b", "cho\"}")
                    .function_call_done("call_a")
                    .function_call_done("call_b")
                    .completed(),
            ),
        }
        let engine = api.engine(config(&server));
        let response = ask(engine.as_ref(), &reliability(1), request(vec![user("go")]))
            .await
            .unwrap();
        let calls: Vec<(&str, &str)> = response
            .tool_calls
            .iter()
            .map(|call| (call.id.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            vec![
                ("call_a", "{\"cmd\":\"ls\"}"),
                ("call_b", "{\"cmd\":\"echo\"}")
            ],
            "{api:?}"
        );
        assert_eq!(response.argument_deltas.len(), 4, "{api:?}");
        assert_eq!(
            response.completion.unwrap().stop_reason.as_deref(),
            Some("tool_calls")
        );
        let body = &server.model_requests()[0].body;
        assert_eq!(body["parallel_tool_calls"], json!(true));
    }
}

#[tokio::test]
async fn usage_is_reported_once_before_completed() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::with_id("chatcmpl-u")
                    .text("ok")
                    .finish("stop")
                    .usage_details(1200, 80, 1000, 30)
                    .done(),
            ),
            Api::Responses => server.push(
                ResponsesStream::new("resp_u")
                    .message(&["ok"])
                    .usage_details(1200, 80, 1000, 30)
                    .completed(),
            ),
        }
        let engine = api.engine(config(&server));
        let response = ask(engine.as_ref(), &reliability(1), request(vec![user("hi")]))
            .await
            .unwrap();
        let expected = TokenUsage {
            input_tokens: 1200,
            output_tokens: 80,
            cached_input_tokens: 1000,
            reasoning_tokens: 30,
        };
        assert_eq!(response.usage, expected, "{api:?}");
        let n = response.events.len();
        assert_eq!(response.events[n - 2], InferenceEvent::Usage(expected));
        let completion = response.completion.unwrap();
        let id = match api {
            Api::Chat => "chatcmpl-u",
            Api::Responses => "resp_u",
        };
        assert_eq!(completion.provider_response_id.as_deref(), Some(id));
    }
}

#[tokio::test]
async fn reasoning_streams_and_effort_is_sent() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::new()
                    .reasoning("Think")
                    .reasoning("ing.")
                    .text("Answer")
                    .finish("stop")
                    .done(),
            ),
            Api::Responses => server.push(
                ResponsesStream::new("resp_r")
                    .reasoning_summary(&[&["Think", "ing."]])
                    .message(&["Answer"])
                    .completed(),
            ),
        }
        let engine = api.engine(config(&server));
        let mut req = request(vec![
            user("hi"),
            TranscriptItem::Reasoning {
                text: "earlier thoughts".into(),
                provider_data: None,
            },
            TranscriptItem::AssistantMessage {
                text: "earlier answer".into(),
            },
            user("again"),
        ]);
        req.reasoning = Some(roder_api::inference::ReasoningEffort::Medium);
        let response = ask(engine.as_ref(), &reliability(1), req).await.unwrap();
        assert_eq!(response.reasoning, "Thinking.", "{api:?}");
        assert_eq!(response.text, "Answer");
        let body = &server.model_requests()[0].body;
        match api {
            Api::Chat => assert_eq!(body["reasoning_effort"], json!("medium")),
            Api::Responses => assert_eq!(body["reasoning"]["effort"], json!("medium")),
        }
        // Reasoning without provider data is not replayed (see the README).
        assert!(!body.to_string().contains("earlier thoughts"), "{api:?}");
        assert!(body.to_string().contains("earlier answer"), "{api:?}");
    }
}

#[tokio::test]
async fn local_servers_get_no_authorization_and_extra_headers_are_sent() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(ChatStream::text_reply("hi"));
    let config = roder_ext_openai::OpenAiConfig::compatible("ollama", server.openai_base_url())
        .with_header("X-Title", "roder");
    let engine = Api::Chat.engine(config);
    let response = ask(engine.as_ref(), &reliability(1), request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "hi");
    let recorded = &server.model_requests()[0];
    assert_eq!(recorded.header("authorization"), None);
    assert_eq!(recorded.header("x-title"), Some("roder"));
}

#[tokio::test]
async fn a_compatible_server_that_omits_done_still_completes() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(ChatStream::new().text("fine").finish("stop").without_done());
    let engine = Api::Chat.engine(config(&server));
    let response = ask(engine.as_ref(), &reliability(1), request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "fine");
}

#[tokio::test]
async fn models_are_listed() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.require_api_key(KEY);
        server.set_models(&["gpt-a", "gpt-b"]);
        let engine = api.engine(config(&server));
        let reliability = reliability(1);
        let models = engine
            .list_models(roder_api::inference::InferenceProviderContext {
                reliability: &reliability,
            })
            .await
            .unwrap();
        let ids: Vec<&str> = models.iter().map(|model| model.id.as_str()).collect();
        assert_eq!(ids, ["gpt-a", "gpt-b"]);
        assert_eq!(engine.id(), "openai-test");
    }
}
