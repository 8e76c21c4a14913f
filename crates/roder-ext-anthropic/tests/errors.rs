//! Failures against the fake Messages server: each error a user can act
//! on, retries that succeed, retries that give up, and the rule that
//! nothing is retried once part of a response was delivered.

mod common;

use common::{KEY, Turn, WAIT, ask, config, dead_base_url, engine, reliability, request, user};
use futures::StreamExt;
use roder_api::inference::{
    InferenceEngine, InferenceEvent, InferenceTurnContext, ReliabilityConfig,
};
use roder_ext_anthropic::{AnthropicEngine, ApiKeySource, ProviderError};
use roder_testkit::fake_models::{FakeError, FakeModelServer, FakeReply, MessagesStream};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn a_missing_key_names_the_variable_and_sends_nothing() {
    let server = FakeModelServer::start().await.unwrap();
    let engine = AnthropicEngine::new(config(&server).with_api_key(ApiKeySource::env(
        "RODER_TEST_ANTHROPIC_KEY_THAT_IS_NOT_SET",
    )))
    .unwrap();
    let error = ask(&engine, &reliability(3), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "no API key for provider \"anthropic-test\": set the environment variable RODER_TEST_ANTHROPIC_KEY_THAT_IS_NOT_SET"
    );
    assert!(matches!(
        error.downcast_ref::<ProviderError>(),
        Some(ProviderError::MissingApiKey { .. })
    ));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn a_rejected_key_says_authentication_failed_and_is_not_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("sk-ant-the-right-one");
    let engine = engine(&server);
    let error = ask(&engine, &reliability(4), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "authentication failed for provider \"anthropic-test\" (HTTP 401): invalid x-api-key; check the API key configured for this provider"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_rejected_key_from_a_variable_names_the_variable() {
    // PATH is always set, so the key resolves without touching the env.
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key(KEY);
    let engine =
        AnthropicEngine::new(config(&server).with_api_key(ApiKeySource::env("PATH"))).unwrap();
    let error = ask(&engine, &reliability(1), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert!(
        error.to_string().ends_with("; check the API key in PATH"),
        "{error}"
    );
}

#[tokio::test]
async fn an_unreachable_base_url_says_so_after_the_allowed_attempts() {
    let url = dead_base_url().await;
    let engine = AnthropicEngine::new(config_for(&url)).unwrap();
    let error = ask(&engine, &reliability(2), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    let message = error.to_string();
    assert!(
        message.starts_with(&format!(
            "could not reach provider \"anthropic-test\" at {url}/v1/messages: tcp connect error: "
        )),
        "{message}"
    );
    assert!(message.contains("check that the server is running and that base_url is right"));
    assert!(message.ends_with("(gave up after 2 attempts)"), "{message}");
}

fn config_for(url: &str) -> roder_ext_anthropic::AnthropicConfig {
    roder_ext_anthropic::AnthropicConfig {
        id: "anthropic-test".into(),
        ..roder_ext_anthropic::AnthropicConfig::anthropic()
    }
    .with_base_url(url)
    .with_api_key(ApiKeySource::Static(KEY.into()))
}

#[tokio::test]
async fn rate_limits_overloads_and_server_errors_are_retried_then_succeed() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::rate_limited("0"));
    server.push(FakeError::new(529, "Overloaded"));
    server.push(FakeError::server_error());
    server.push(MessagesStream::new("m").error("overloaded_error", "Overloaded"));
    server.push(MessagesStream::text_reply("msg", "finally"));
    let engine = engine(&server);
    let response = ask(&engine, &reliability(5), request(vec![user("hi")], None))
        .await
        .unwrap();
    assert_eq!(response.text, "finally");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 5);
    assert!(requests.iter().all(|r| r.body == requests[0].body));
}

#[tokio::test]
async fn retry_after_replaces_the_computed_backoff_and_is_capped() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::rate_limited("0"));
    server.push(MessagesStream::text_reply("msg", "ok"));
    // An hour of computed backoff: only the server's zero wait lets the
    // request finish in time.
    let slow = ReliabilityConfig {
        max_attempts: 2,
        initial_backoff_ms: 3_600_000,
        max_backoff_ms: 3_600_000,
    };
    let engine = engine(&server);
    assert_eq!(
        ask(&engine, &slow, request(vec![user("hi")], None))
            .await
            .unwrap()
            .text,
        "ok"
    );

    // An hour of Retry-After: only the cap lets it finish in time.
    server.push(FakeError::rate_limited("3600"));
    server.push(MessagesStream::text_reply("msg", "ok again"));
    let capped = ReliabilityConfig {
        max_attempts: 2,
        initial_backoff_ms: 1,
        max_backoff_ms: 20,
    };
    assert_eq!(
        ask(&engine, &capped, request(vec![user("hi")], None))
            .await
            .unwrap()
            .text,
        "ok again"
    );
}

#[tokio::test]
async fn retries_give_up_after_max_attempts_with_the_last_error() {
    let server = FakeModelServer::start().await.unwrap();
    for _ in 0..3 {
        server.push(FakeError::new(529, "Overloaded"));
    }
    server.push(MessagesStream::text_reply("msg", "never reached"));
    let engine = engine(&server);
    let error = ask(&engine, &reliability(3), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider \"anthropic-test\" answered HTTP 529: Overloaded (gave up after 3 attempts)"
    );
    assert_eq!(server.remaining_replies(), 1);
}

#[tokio::test]
async fn invalid_requests_are_not_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::new(
        400,
        "max_tokens: 99999 > 64000, which is the maximum allowed",
    ));
    server.push(MessagesStream::text_reply("msg", "never reached"));
    let engine = engine(&server);
    let error = ask(&engine, &reliability(3), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider \"anthropic-test\" answered HTTP 400: max_tokens: 99999 > 64000, which is the maximum allowed"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_stream_dropped_before_any_output_is_retried() {
    let server = FakeModelServer::start().await.unwrap();
    let reply = MessagesStream::tool_uses_reply("msg", &[("toolu_1", "shell", "{\"cmd\":\"ls\"}")]);
    // message_start, then the tool_use block starts: nothing delivered yet.
    server.push(reply.clone().drop_after_frames(2));
    server.push(reply.clone().end_after_frames(2));
    server.push(reply);
    server.push(MessagesStream::text_reply("msg", "done"));
    let engine = engine(&server);
    let mut turn = Turn::new("go");
    turn.run(&engine, &reliability(3)).await.unwrap();
    assert_eq!(turn.executions.len(), 1);
    assert_eq!(server.model_requests().len(), 4);
}

#[tokio::test]
async fn no_retry_once_a_tool_use_was_delivered() {
    let server = FakeModelServer::start().await.unwrap();
    let reply = MessagesStream::new("msg")
        .tool_use("toolu_1", "shell", &["{\"cmd\":\"rm -rf build\"}"])
        .text(&["more"])
        .stop("tool_use");
    // message_start, the tool_use block (start, delta, stop), then the break.
    server.push(reply.clone().drop_after_frames(4));
    server.push(reply);
    let engine = engine(&server);
    let mut turn = Turn::new("clean");
    let error = turn.run(&engine, &reliability(5)).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("broke before it completed"), "{message}");
    assert!(
        message.ends_with("not retried because part of the response had already been delivered"),
        "{message}"
    );
    assert!(turn.executions.is_empty());
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn no_retry_once_text_was_delivered_even_for_an_overload() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        MessagesStream::new("m")
            .text(&["Half an ans"])
            .error("overloaded_error", "Overloaded"),
    );
    server.push(MessagesStream::text_reply("msg", "Half an answer"));
    let engine = engine(&server);
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
        .stream_turn(ctx, request(vec![user("hi")], None))
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
    assert_eq!(text, "Half an ans");
    let message = error.unwrap().to_string();
    assert_eq!(
        message,
        "provider \"anthropic-test\" reported an error: Overloaded (overloaded_error); not retried because part of the response had already been delivered"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_retry_after_a_completed_round_does_not_run_tools_twice() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::tool_uses_reply(
        "m1",
        &[("toolu_1", "shell", "{\"cmd\":\"make\"}")],
    ));
    server.push(FakeError::new(529, "Overloaded"));
    let done = MessagesStream::text_reply("m2", "built");
    server.push(done.clone().drop_after_frames(1));
    server.push(done);
    let engine = engine(&server);
    let mut turn = Turn::new("build");
    turn.run(&engine, &reliability(3)).await.unwrap();
    assert_eq!(turn.final_text.as_deref(), Some("built"));
    assert_eq!(turn.executions.len(), 1);
    assert_eq!(server.model_requests().len(), 4);
}

#[tokio::test]
async fn a_non_retryable_error_event_fails_the_request() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::new("m").error(
        "invalid_request_error",
        "messages.1: tool_use ids must be unique",
    ));
    let engine = engine(&server);
    let error = ask(&engine, &reliability(3), request(vec![user("hi")], None))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "the model request failed: provider \"anthropic-test\" reported an error: messages.1: tool_use ids must be unique (invalid_request_error)"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn cancelling_stops_a_waiting_stream_and_drops_the_connection() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeReply::Hang);
    let engine = engine(&server);
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
        .stream_turn(ctx, request(vec![user("hi")], None))
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
    assert_eq!(
        first.unwrap().unwrap_err().to_string(),
        "the request to provider \"anthropic-test\" was cancelled"
    );
    assert!(after.is_none());
    server.wait_for_disconnects(1, WAIT).await.unwrap();
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_cancelled_turn_makes_no_request() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::text_reply("m", "never"));
    let engine = engine(&server);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let reliability = reliability(3);
    let ctx = InferenceTurnContext {
        thread_id: "t",
        turn_id: "u",
        reliability: &reliability,
        cancellation: &cancel,
        traceparent: None,
    };
    let error = match engine
        .stream_turn(ctx, request(vec![user("hi")], None))
        .await
    {
        Ok(_) => panic!("a cancelled turn must not stream"),
        Err(error) => error,
    };
    assert!(error.to_string().contains("was cancelled"));
    assert!(server.model_requests().is_empty());
}
