//! Which failures the Anthropic engine retries: `x-should-retry` is the
//! server's own answer and is obeyed either way, a request too large fails
//! at once, overloads and rate limits are retried, and `Retry-After` is
//! read as an HTTP-date too.

mod common;

use common::{ask, engine, reliability, request, user};
use roder_api::inference::ReliabilityConfig;
use roder_testkit::fake_models::{FakeError, FakeModelServer, MessagesStream, RecordedReply};

const RATE_LIMIT: &str = r#"{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your organization's rate limit. Please reduce the prompt length or the maximum tokens requested, or try again later."}}"#;

#[tokio::test]
async fn rate_limits_marked_should_retry_are_retried_until_the_stream_comes() {
    let server = FakeModelServer::start().await.unwrap();
    for _ in 0..2 {
        server.push(RecordedReply::json(429, RATE_LIMIT).header("x-should-retry", "true"));
    }
    server.push(MessagesStream::text_reply("msg_1", "ok"));
    let response = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.model_requests().len(), 3);
}

#[tokio::test]
async fn should_retry_false_stops_even_an_overload() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        RecordedReply::json(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
        .header("x-should-retry", "false"),
    );
    server.push(MessagesStream::text_reply("msg_1", "never reached"));
    let error = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider \"anthropic-test\" answered HTTP 529: Overloaded"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn a_request_too_large_fails_at_once() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::new(
        413,
        "Request exceeds the maximum allowed number of bytes.",
    ));
    server.push(MessagesStream::text_reply("msg_1", "never reached"));
    let error = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("HTTP 413: Request exceeds the maximum allowed number of bytes."),
        "{error}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn an_overload_event_before_any_output_is_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(MessagesStream::new("m").error("overloaded_error", "Overloaded"));
    server.push(MessagesStream::text_reply("msg_1", "ok"));
    let response = ask(
        &engine(&server),
        &reliability(4),
        request(vec![user("hi")], None),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn retry_after_as_an_http_date_replaces_the_computed_backoff() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(FakeError::new(529, "Overloaded").retry_after("Sun, 06 Nov 1994 08:49:37 GMT"));
    server.push(MessagesStream::text_reply("msg_1", "ok"));
    // An hour of computed backoff: only the (past) date lets the request
    // finish in time.
    let reliability = ReliabilityConfig {
        max_attempts: 2,
        initial_backoff_ms: 3_600_000,
        max_backoff_ms: 3_600_000,
    };
    let response = ask(
        &engine(&server),
        &reliability,
        request(vec![user("hi")], None),
    )
    .await
    .unwrap();
    assert_eq!(response.text, "ok");
}
