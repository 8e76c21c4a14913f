//! Reading what a server said when it refused a request: its error body,
//! bounded in size, boiled down to the one message a user needs.

use reqwest::Response;

use crate::error::shorten;

/// The most of an error body that is read; error bodies are small, and a
/// misbehaving server must not make us buffer megabytes.
const MAX_ERROR_BODY: usize = 16 * 1024;

/// Whether a response says it is JSON (an error, or a server that ignored
/// `stream: true`), rather than an event stream.
pub(crate) fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

/// Up to [`MAX_ERROR_BODY`] bytes of the body, lossily decoded.
pub(crate) async fn read_error_body(mut response: Response) -> String {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= MAX_ERROR_BODY {
            body.truncate(MAX_ERROR_BODY);
            break;
        }
    }
    String::from_utf8_lossy(&body).into_owned()
}

/// The message of an error body: `error.message` (OpenAI and Anthropic),
/// `error` as a string (Ollama), `message` or `detail` (other servers),
/// else the body itself, shortened.
pub(crate) fn error_message(body: &str, reason: Option<&str>) -> String {
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(body) {
        let candidates = [
            value.pointer("/error/message"),
            value.get("error"),
            value.get("message"),
            value.get("detail"),
        ];
        for candidate in candidates.into_iter().flatten() {
            if let Some(text) = candidate.as_str().filter(|text| !text.trim().is_empty()) {
                return text.to_string();
            }
        }
    }
    let body = body.trim();
    if body.is_empty() {
        return reason.unwrap_or("no error message").to_string();
    }
    shorten(body, 500)
}

/// The error's `type` and string `code`, where OpenAI
/// (`{"error": {"type", "code"}}`) and Anthropic
/// (`{"type": "error", "error": {"type"}}`) put them.
pub(crate) fn error_fields(body: &str) -> (Option<String>, Option<String>) {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        return (None, None);
    };
    let text = |pointer: &str| {
        value
            .pointer(pointer)
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
    };
    (text("/error/type"), text("/error/code"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_types_and_codes_are_read() {
        let openai = r#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert_eq!(
            error_fields(openai),
            (
                Some("insufficient_quota".into()),
                Some("insufficient_quota".into())
            )
        );
        let anthropic = r#"{"type":"error","error":{"type":"overloaded_error","message":"later"}}"#;
        assert_eq!(
            error_fields(anthropic),
            (Some("overloaded_error".into()), None)
        );
        assert_eq!(error_fields(r#"{"error":{"code":429}}"#), (None, None));
        assert_eq!(error_fields("not json"), (None, None));
    }

    #[test]
    fn error_messages_are_found_in_every_known_shape() {
        let openai =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        assert_eq!(error_message(openai, None), "Incorrect API key provided");
        let anthropic = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
        assert_eq!(error_message(anthropic, None), "invalid x-api-key");
        assert_eq!(
            error_message(r#"{"error":"model 'x' not found"}"#, None),
            "model 'x' not found"
        );
        assert_eq!(
            error_message(r#"{"detail":"Not Found"}"#, None),
            "Not Found"
        );
        assert_eq!(
            error_message("upstream timed out", None),
            "upstream timed out"
        );
        assert_eq!(error_message("", Some("Bad Gateway")), "Bad Gateway");
        assert!(error_message(&"x".repeat(2_000), None).chars().count() <= 501);
    }
}
