//! Which failures are retried, for both OpenAI engines: quota exhaustion
//! and requests too large for a limit get one more attempt at most,
//! permanent errors inside a stream none, `x-should-retry` is obeyed, and
//! `Retry-After` is read in both of its forms.

mod common;

use common::{APIS, Api, ask, config, reliability, request, user};
use roder_api::inference::ReliabilityConfig;
use roder_testkit::fake_models::{
    ChatStream, FakeError, FakeModelServer, RecordedReply, ResponsesStream,
};

const QUOTA: &str = "You exceeded your current quota, please check your plan and billing details.";

#[tokio::test]
async fn a_quota_429_is_tried_once_more_then_fails_with_the_providers_message() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        for _ in 0..3 {
            // An hour's Retry-After: the confirming attempt must not wait
            // it (`ask` gives up after 10 s).
            server.push(
                FakeError::new(429, QUOTA)
                    .kind("insufficient_quota")
                    .retry_after("3600"),
            );
        }
        server.push(api.text_reply("never reached"));
        let engine = api.engine(config(&server));
        let reliability = ReliabilityConfig {
            max_attempts: 4,
            initial_backoff_ms: 1,
            max_backoff_ms: 3_600_000,
        };
        let error = ask(engine.as_ref(), &reliability, request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!(
                "provider \"openai-test\" answered HTTP 429: {QUOTA} (gave up after 2 attempts)"
            ),
            "{api:?}"
        );
        assert_eq!(server.model_requests().len(), 2, "{api:?}");
    }
}

#[tokio::test]
async fn a_rate_limit_429_is_retried_as_the_budget_allows() {
    let server = FakeModelServer::start().await.unwrap();
    for _ in 0..3 {
        server.push(FakeError::new(429, "Rate limit reached").kind("rate_limit_exceeded"));
    }
    server.push(Api::Chat.text_reply("ok"));
    let engine = Api::Chat.engine(config(&server));
    let response = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.model_requests().len(), 4);
}

#[tokio::test]
async fn quota_exhaustion_inside_the_stream_fails_after_one_request() {
    for api in APIS {
        let server = FakeModelServer::start().await.unwrap();
        match api {
            Api::Chat => server.push(
                ChatStream::new()
                    .error(QUOTA, serde_json::json!("insufficient_quota"))
                    .done(),
            ),
            Api::Responses => {
                server.push(ResponsesStream::new("r").error("insufficient_quota", QUOTA))
            }
        }
        server.push(api.text_reply("never reached"));
        let engine = api.engine(config(&server));
        let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
            .await
            .unwrap_err();
        assert!(error.to_string().contains(QUOTA), "{api:?}: {error}");
        assert_eq!(server.model_requests().len(), 1, "{api:?}");
    }
}

#[tokio::test]
async fn a_request_too_large_for_the_rate_limit_is_tried_once_more() {
    let message = "Request too large for gpt-4o-mini in organization on tokens per min (TPM): Limit 30000, Requested 35364.";
    let server = FakeModelServer::start().await.unwrap();
    for _ in 0..3 {
        server.push(ResponsesStream::new("r").failed("rate_limit_exceeded", message));
    }
    let engine = Api::Responses.engine(config(&server));
    let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(error.to_string().contains(message), "{error}");
    assert!(
        error.to_string().ends_with("(gave up after 2 attempts)"),
        "{error}"
    );
    assert_eq!(server.model_requests().len(), 2);
}

#[tokio::test]
async fn a_context_length_error_is_not_retried() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        FakeError::new(400, "This model's maximum context length is 128000 tokens.")
            .kind("context_length_exceeded"),
    );
    let engine = Api::Responses.engine(config(&server));
    let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("maximum context length"),
        "{error}"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn x_should_retry_false_stops_retries_of_a_server_error() {
    let server = FakeModelServer::start().await.unwrap();
    server.push(
        RecordedReply::json(
            503,
            r#"{"error":{"message":"do not retry","type":"server_error"}}"#,
        )
        .header("x-should-retry", "false"),
    );
    server.push(Api::Chat.text_reply("never reached"));
    let engine = Api::Chat.engine(config(&server));
    let error = ask(engine.as_ref(), &reliability(4), request(vec![user("hi")]))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "provider \"openai-test\" answered HTTP 503: do not retry"
    );
    assert_eq!(server.model_requests().len(), 1);
}

#[tokio::test]
async fn retry_after_as_an_http_date_replaces_the_computed_backoff() {
    let server = FakeModelServer::start().await.unwrap();
    // A date already past means "retry now".
    server.push(FakeError::rate_limited("Wed, 21 Oct 2015 07:28:00 GMT"));
    server.push(Api::Chat.text_reply("ok"));
    let engine = Api::Chat.engine(config(&server));
    // An hour of computed backoff: only the date lets the request finish
    // in time.
    let reliability = ReliabilityConfig {
        max_attempts: 2,
        initial_backoff_ms: 3_600_000,
        max_backoff_ms: 3_600_000,
    };
    let response = ask(engine.as_ref(), &reliability, request(vec![user("hi")]))
        .await
        .unwrap();
    assert_eq!(response.text, "ok");
    assert_eq!(server.model_requests().len(), 2);
}
