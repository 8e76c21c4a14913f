//! Failures against the fake server, for both OpenAI engines: each error a
//! user can act on, retries that succeed, retries that give up, and the
//! rule that nothing is retried once part of a response was delivered.

mod common;

use std::time::Duration;

use common::{APIS, Api, KEY, Turn, WAIT, ask, config, dead_base_url, reliability, request, user};
use futures::StreamExt;
use roder_api::inference::{InferenceEvent, InferenceTurnContext, ReliabilityConfig};
use roder_ext_openai::{ApiKeySource, OpenAiConfig, ProviderError};
use roder_testkit::fake_models::{
    ChatStream, FakeError, FakeModelServer, FakeReply, ResponsesStream,
};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_missing_key_names_the_variable_and_sends_nothing() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        let config = config(&server)
            .with_api_key(ApiKeySource::env("RODER_TEST_OPENAI_KEY_THAT_IS_NOT_SET"));
        let engine = api.engine(config);
        let error = ask(engine.as_ref(), &reliability(3), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "no API key for provider \"openai-test\": set the environment variable RODER_TEST_OPENAI_KEY_THAT_IS_NOT_SET"
        );
        assert!(matches!(
            error.downcast_ref::<ProviderError>(),
            Some(ProviderError::MissingApiKey { .. })
        ));
        assert!(server.requests().is_empty());
    }
}

#[tokio::test]
async fn a_rejected_key_says_authentication_failed_and_is_not_retried() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.require_api_key("sk-the-right-one");
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "authentication failed for provider \"openai-test\" (HTTP 401): Incorrect API key provided; check the API key configured for this provider"
        );
        assert_eq!(server.requests().len(), 1, "{api:?}");
        assert!(!server.requests()[0].authorized);
    }
}

#[tokio::test]
async fn a_rejected_key_from_a_variable_names_the_variable() {
    // PATH is always set, so the key resolves without touching the env.
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key(KEY);
    let engine = Api::Chat.engine(config(&server).with_api_key(ApiKeySource::env("PATH")));
    let error = ask(engine.as_ref(), &reliability(1), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with("; check the API key in PATH"),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_base_url_says_so_after_the_allowed_attempts() {
    for api in APIS {
        let url = dead_base_url().await;
        let config = OpenAiConfig::compatible("local", url.clone());
        let engine = api.engine(config);
        let error = ask(engine.as_ref(), &reliability(2), request(vec![user("hi")]))
            .await
            .unwrap_err();
        let message = error.to_string();
        let path = match api {
            Api::Chat => "chat/completions",
            Api::Responses => "responses",
        };
        assert!(
            message.starts_with(&format!(
                "could not reach provider \"local\" at {url}/{path}: tcp connect error: "
            )),
            "{message}"
        );
        assert!(message.contains("check that the server is running and that base_url is right"));
        assert!(message.ends_with("(gave up after 2 attempts)"), "{message}");
    }
}

#[tokio::test]
async fn rate_limits_and_server_errors_are_retried_then_succeed() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(FakeError::rate_limited("0"));
        server.push(FakeError::server_error());
        server.push(FakeError::new(503, "busy").retry_after_ms(1));
        server.push(api.text_reply("third time lucky"));
        let engine = api.engine(config(&server));
        let response = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
            .await
            .unwrap();
        assert_eq!(response.text, "third time lucky", "{api:?}");
        let requests = server.model_requests();
        assert_eq!(requests.len(), 4);
        // Every attempt sends the same request.
        assert!(requests.iter().all(|r| r.body == requests[0].body));
    }
}

#[tokio::test]
async fn retry_after_replaces_the_computed_backoff() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(FakeError::rate_limited("0"));
        server.push(FakeError::new(429, "slow down").retry_after_ms(0));
        server.push(api.text_reply("ok"));
        let engine = api.engine(config(&server));
        // An hour of computed backoff: only the server's zero wait lets the
        // request finish in time.
        let reliability = ReliabilityConfig {
            max_attempts: 3,
            initial_backoff_ms: 3_600_000,
            max_backoff_ms: 3_600_000,
        };
        let response = ask(engine.as_ref(), &reliability, request(vec![user("hi")]))
            .await
            .unwrap();
        assert_eq!(response.text, "ok", "{api:?}");
    }
}

#[tokio::test]
async fn retry_after_is_honoured_but_capped_by_max_backoff() {
    let server = FakeModelServer::start().await.unwrap();
    // An hour: the test can only finish in time because of the cap.
    server.push(FakeError::rate_limited("3600"));
    server.push(Api::Chat.text_reply("ok"));
    let engine = Api::Chat.engine(config(&server));
    let reliability = ReliabilityConfig {
        max_attempts: 2,
        initial_backoff_ms: 1,
        max_backoff_ms: 20,
    };
    let response = ask(engine.as_ref(), &reliability, request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "ok");
}

#[tokio::test]
async fn retries_give_up_after_max_attempts_with_the_last_error() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        for _ in 0..3 {
            server.push(FakeError::new(503, "The engine is currently overloaded"));
        }
        server.push(api.text_reply("never reached"));
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(3), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "provider \"openai-test\" answered HTTP 503: The engine is currently overloaded (gave up after 3 attempts)"
        );
        assert_eq!(server.remaining_replies(), 1);
    }
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(FakeError::new(400, "The model `nope` does not exist"));
        server.push(api.text_reply("never reached"));
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(3), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "provider \"openai-test\" answered HTTP 400: The model `nope` does not exist"
        );
        assert_eq!(server.model_requests().len(), 1);
    }
}

#[tokio::test]
async fn a_stream_dropped_before_any_output_is_retried() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        let reply = api.tool_reply(&[("call_1", "shell", &["{\"cmd\":\"ls\"}"])]);
        // Chat: the role chunk only; Responses: created + in_progress.
        let frames = match api {
            Api::Chat => 1,
            Api::Responses => 2,
        };
        server.push(reply.clone().drop_after_frames(frames));
        // A clean end of the body before completion counts as a drop too.
        server.push(reply.clone().end_after_frames(frames));
        server.push(reply);
        server.push(api.text_reply("done"));
        let engine = api.engine(config(&server));
        let mut turn = Turn::new("go");
        turn.run(engine.as_ref(), &reliability(3)).await.unwrap();
        assert_eq!(turn.executions.len(), 1, "{api:?}");
        assert_eq!(server.model_requests().len(), 4);
    }
}

#[tokio::test]
async fn no_retry_once_a_tool_call_was_delivered() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        let reply = match api {
            // The finish chunk completes the calls; the body breaks before
            // the usage chunk and [DONE].
            Api::Chat => ChatStream::new()
                .tool_call(0, "call_1", "shell", &["{\"cmd\":\"rm -rf build\"}"])
                .finish("tool_calls")
                .usage(1, 1)
                .done()
                .drop_after_frames(4),
            // The call's output_item.done is delivered; no response.completed.
            Api::Responses => ResponsesStream::new("resp_d")
                .function_call("call_1", "shell", &["{\"cmd\":\"rm -rf build\"}"])
                .message(&["more"])
                .completed()
                .drop_after_frames(6),
        };
        server.push(reply);
        server.push(api.tool_reply(&[("call_1", "shell", &["{\"cmd\":\"rm -rf build\"}"])]));
        let engine = api.engine(config(&server));
        let mut turn = Turn::new("clean");
        let error = turn
            .run(engine.as_ref(), &reliability(5))
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("broke before it completed"),
            "{api:?}: {message}"
        );
        assert!(
            message
                .ends_with("not retried because part of the response had already been delivered"),
            "{message}"
        );
        assert!(turn.executions.is_empty(), "{api:?}");
        assert_eq!(server.model_requests().len(), 1, "{api:?}");
    }
}

#[tokio::test]
async fn no_retry_once_text_was_delivered() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        let reply = match api {
            Api::Chat => ChatStream::new()
                .text("Half an ans")
                .text("wer")
                .finish("stop")
                .done(),
            Api::Responses => ResponsesStream::new("r")
                .message(&["Half an ans", "wer"])
                .completed(),
        };
        let body = reply.body();
        let text_at = body.windows(4).position(|w| w == b"Half").unwrap();
        // Cut a few bytes after the first delta's frame ends.
        let cut = text_at
            + body[text_at..]
                .windows(2)
                .position(|w| w == b"\n\n")
                .unwrap()
            + 5;
        server.push(reply.drop_after_bytes(cut));
        server.push(api.text_reply("Half an answer"));
        let engine = api.engine(config(&server));
        let cancel = CancellationToken::new();
        let reliability = reliability(3);
        let ctx = InferenceTurnContext {
            thread_id: "t",
            turn_id: "u",
            reliability: &reliability,
            cancellation: &cancel,
            traceparent: None,
        };
        let mut stream = engine
            .stream_turn(ctx, request(vec![user("hi")]))
            .await
            .unwrap();
        let mut text = String::new();
        let mut error = None;
        while let Some(item) = tokio::time::timeout(WAIT, stream.next()).await.unwrap() {
            match item {
                Ok(InferenceEvent::MessageDelta(delta)) => text.push_str(&delta.text),
                Ok(_) => {}
                Err(e) => error = Some(e),
            }
        }
        assert_eq!(text, "Half an ans", "{api:?}");
        assert!(error.unwrap().to_string().contains("not retried"));
        assert_eq!(server.model_requests().len(), 1);
    }
}

#[tokio::test]
async fn a_retry_after_a_completed_round_does_not_run_tools_twice() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(api.tool_reply(&[("call_1", "shell", &["{\"cmd\":\"make\"}"])]));
        // The second round fails twice before it answers.
        server.push(FakeError::server_error());
        let done = api.text_reply("built");
        let frames = match api {
            Api::Chat => 1,
            Api::Responses => 2,
        };
        server.push(done.clone().drop_after_frames(frames));
        server.push(done);
        let engine = api.engine(config(&server));
        let mut turn = Turn::new("build");
        turn.run(engine.as_ref(), &reliability(3)).await.unwrap();
        assert_eq!(turn.final_text.as_deref(), Some("built"));
        assert_eq!(turn.executions.len(), 1, "{api:?}");
        assert_eq!(server.model_requests().len(), 4);
    }
}

#[tokio::test]
async fn provider_errors_inside_the_stream_fail_the_request() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::new()
                    .error(
                        "This request violates the content policy",
                        serde_json::json!(400),
                    )
                    .done(),
            ),
            Api::Responses => server.push(
                ResponsesStream::new("r")
                    .failed("invalid_prompt", "This request violates the content policy"),
            ),
        }
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(3), request(vec![user("hi")]))
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(
                "the model request failed: provider \"openai-test\" reported an error: This request violates the content policy"
            ),
            "{message}"
        );
        assert_eq!(server.model_requests().len(), 1);
    }
}

#[tokio::test]
async fn retryable_errors_inside_the_stream_are_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(ResponsesStream::new("r").failed("server_error", "try again"));
    server.push(Api::Responses.text_reply("ok"));
    let engine = Api::Responses.engine(config(&server));
    let response = ask(engine.as_ref(), &reliability(2), request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn cancelling_stops_a_waiting_stream_and_drops_the_connection() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        server.push(FakeReply::Hang);
        let engine = api.engine(config(&server));
        let cancel = CancellationToken::new();
        let reliability = reliability(5);
        let ctx = InferenceTurnContext {
            thread_id: "t",
            turn_id: "u",
            reliability: &reliability,
            cancellation: &cancel,
            traceparent: None,
        };
        let mut stream = engine
            .stream_turn(ctx, request(vec![user("hi")]))
            .await
            .unwrap();
        let reader = tokio::spawn(async move {
            let first = stream.next().await;
            let after = stream.next().await;
            (first, after)
        });
        server.wait_for_requests(1, WAIT).await.unwrap();
        cancel.cancel();
        let (first, after) = tokio::time::timeout(WAIT, reader).await.unwrap().unwrap();
        let error = first.unwrap().unwrap_err();
        assert_eq!(
            error.to_string(),
            "the request to provider \"openai-test\" was cancelled"
        );
        assert!(after.is_none(), "nothing follows a cancellation");
        server.wait_for_disconnects(1, WAIT).await.unwrap();
        assert_eq!(
            server.model_requests().len(),
            1,
            "no retry after a cancellation"
        );
    }
}

#[tokio::test]
async fn cancelling_during_a_backoff_stops_retrying() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::rate_limited("3600"));
    server.push(Api::Chat.text_reply("never"));
    let engine = Api::Chat.engine(config(&server));
    let cancel = CancellationToken::new();
    let reliability = ReliabilityConfig {
        max_attempts: 3,
        initial_backoff_ms: 1,
        max_backoff_ms: 3_600_000,
    };
    let canceller = {
        let cancel = cancel.clone();
        async move {
            server.wait_for_requests(1, WAIT).await.unwrap();
            cancel.cancel();
            server
        }
    };
    let ctx = InferenceTurnContext {
        thread_id: "t",
        turn_id: "u",
        reliability: &reliability,
        cancellation: &cancel,
        traceparent: None,
    };
    let (result, server) = tokio::time::timeout(
        WAIT,
        futures::future::join(
            engine.stream_turn(ctx, request(vec![user("hi")])),
            canceller,
        ),
    )
    .await
    .unwrap();
    let error = match result {
        Ok(_) => panic!("a cancelled request must fail"),
        Err(error) => error,
    };
    assert!(error.to_string().contains("was cancelled"), "{error}");
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_silent_stream_times_out_and_is_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeReply::Hang);
    server.push(Api::Chat.text_reply("awake"));
    let mut config = config(&server);
    config.idle_timeout = Duration::from_millis(200);
    let engine = Api::Chat.engine(config);
    let response = ask(engine.as_ref(), &reliability(2), request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "awake");
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn a_server_that_answers_json_instead_of_a_stream_says_so() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        let body = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
        server.push(FakeError::new(200, "").raw_body(body));
        server.push(api.text_reply("never reached"));
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(3), request(vec![user("hi")]))
            .await
            .unwrap_err();
        let message = error.to_string();
        assert!(
            message.starts_with(
                "provider \"openai-test\" sent a stream event this engine cannot read: expected an event stream but got JSON"
            ),
            "{message}"
        );
        assert!(message.contains("chat.completion"), "{message}");
        assert_eq!(server.model_requests().len(), 1);
    }
}
