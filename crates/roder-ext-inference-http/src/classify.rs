//! Which failures are worth another attempt, decided from everything the
//! provider said: the HTTP status, the error's type and code, its message
//! and Anthropic's `x-should-retry` header.
//!
//! The status alone is not enough: OpenAI answers both "slow down" and
//! "your quota is used up" with 429, and reports a request that exceeds a
//! per-minute token limit outright under the code `rate_limit_exceeded`.
//! Retrying those four times only delays the error the user has to act on.
//! Where the status (or code) says "retry" but the body says the request
//! cannot succeed, the failure is [`RetryClass::Doubtful`]: one more attempt
//! settles it, then the provider's message is reported.

/// How a failed attempt may be retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryClass {
    /// The request or the account is the problem (bad request, bad key,
    /// quota used up, request too large): fail at once.
    Permanent,
    /// A retryable status or code with a body that says the request cannot
    /// succeed: at most one more attempt, then fail.
    Doubtful,
    /// Load, rate limits, server faults, broken connections: retry with
    /// backoff as `ReliabilityConfig` allows.
    Transient,
}

impl RetryClass {
    pub fn is_retryable(self) -> bool {
        self != RetryClass::Permanent
    }
}

/// What a provider said about one failure.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailureReport<'a> {
    /// The HTTP status; `None` for an error reported inside a stream that
    /// was answered with 200. OpenRouter's in-stream numeric `code` is an
    /// upstream status and goes here too.
    pub status: Option<u16>,
    /// The error's `type` (`insufficient_quota`, `overloaded_error`, ...).
    pub kind: Option<&'a str>,
    /// The error's `code` when it is a string (`rate_limit_exceeded`, ...).
    pub code: Option<&'a str>,
    pub message: &'a str,
    /// Anthropic's (and OpenAI's) `x-should-retry` header, when sent.
    pub should_retry: Option<bool>,
}

/// Error types and codes that no retry can fix.
const PERMANENT: &[&str] = &[
    "insufficient_quota",
    "billing_hard_limit_reached",
    "billing_not_active",
    "access_terminated",
    "invalid_request_error",
    "invalid_api_key",
    "authentication_error",
    "permission_error",
    "not_found_error",
    "model_not_found",
    "request_too_large",
    "context_length_exceeded",
    "string_above_max_length",
    "unsupported_parameter",
    "unsupported_value",
    "invalid_prompt",
];

/// Error types and codes that mean "try again later".
const TRANSIENT: &[&str] = &[
    "rate_limit_exceeded",
    "rate_limit_error",
    "overloaded_error",
    "overloaded",
    "server_is_overloaded",
    "api_error",
    "server_error",
    "slow_down",
    "timeout_error",
];

/// 408, 409 (OpenAI's lock conflicts), 429 and every 5xx (Anthropic's 529
/// "overloaded" included) are worth another try; other statuses mean the
/// request itself is wrong.
pub fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 409 | 429) || (500..=599).contains(&status)
}

/// The retry class of one failure. The rules, in order:
///
/// 1. `x-should-retry: false` is the server's own answer: permanent.
/// 2. Worth retrying at all are: `x-should-retry: true`, a retryable
///    status (408, 409, 429, 5xx), and, inside a stream, a transient type
///    or code (`rate_limit_exceeded`, `overloaded_error`, ...). Anything
///    else is permanent: a status such as 400, 401, 403, 404, 413 or 422,
///    and an in-stream error of a permanent or unknown kind, because a
///    server that accepted the request and then gave up on it rarely
///    changes its mind.
/// 3. What is worth retrying but whose body says the request cannot
///    succeed (a permanent type or code such as `insufficient_quota`, or a
///    message saying the request is too large) is doubtful: one more
///    attempt, then the provider's message.
/// 4. The rest is transient.
pub fn classify(report: FailureReport<'_>) -> RetryClass {
    if report.should_retry == Some(false) {
        return RetryClass::Permanent;
    }
    let listed = |list: &[&str]| {
        [report.kind, report.code]
            .into_iter()
            .flatten()
            .any(|word| list.contains(&word))
    };
    let cannot_succeed = listed(PERMANENT) || says_too_large(report.message);
    let retryable = report.should_retry == Some(true)
        || match report.status {
            Some(status) => is_retryable_status(status),
            None => listed(TRANSIENT),
        };
    match (retryable, cannot_succeed) {
        (true, true) => RetryClass::Doubtful,
        (true, false) => RetryClass::Transient,
        (false, _) => RetryClass::Permanent,
    }
}

/// Whether a message says the request exceeds a limit outright (OpenAI's
/// "Request too large for gpt-4o-mini ... on tokens per min").
fn says_too_large(message: &str) -> bool {
    message.to_ascii_lowercase().contains("request too large")
}

/// `x-should-retry` read as a boolean; anything but `true`/`false` is
/// ignored.
pub(crate) fn should_retry_header(headers: &reqwest::header::HeaderMap) -> Option<bool> {
    let value = headers.get("x-should-retry")?.to_str().ok()?.trim();
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, kind: &str, message: &str) -> RetryClass {
        classify(FailureReport {
            status: Some(status),
            kind: Some(kind),
            code: Some(kind),
            message,
            should_retry: None,
        })
    }

    fn in_stream(code: &str, message: &str) -> RetryClass {
        classify(FailureReport {
            code: Some(code),
            message,
            ..FailureReport::default()
        })
    }

    #[test]
    fn statuses_that_are_retried() {
        for status in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(status), "{status}");
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!is_retryable_status(status), "{status}");
        }
    }

    #[test]
    fn permanent_statuses_fail_at_once_whatever_the_body() {
        assert_eq!(
            http(400, "invalid_request_error", "Unsupported parameter"),
            RetryClass::Permanent
        );
        assert_eq!(
            http(413, "request_too_large", "too big"),
            RetryClass::Permanent
        );
        assert_eq!(http(404, "server_error", "x"), RetryClass::Permanent);
    }

    #[test]
    fn a_quota_429_gets_one_more_attempt_a_rate_limit_429_the_budget() {
        assert_eq!(
            http(429, "insufficient_quota", "You exceeded your current quota"),
            RetryClass::Doubtful
        );
        assert_eq!(
            http(429, "rate_limit_error", "would exceed your rate limit"),
            RetryClass::Transient
        );
        assert_eq!(
            http(529, "overloaded_error", "later"),
            RetryClass::Transient
        );
        assert_eq!(http(503, "", ""), RetryClass::Transient);
    }

    #[test]
    fn the_should_retry_header_decides_whether_but_not_how_often() {
        let report = FailureReport {
            status: Some(503),
            should_retry: Some(false),
            ..FailureReport::default()
        };
        assert_eq!(classify(report), RetryClass::Permanent);
        let report = FailureReport {
            status: Some(400),
            should_retry: Some(true),
            ..FailureReport::default()
        };
        assert_eq!(classify(report), RetryClass::Transient);
        // A quota answer stays doubtful: the header cannot buy it more
        // than one more attempt.
        let report = FailureReport {
            status: Some(429),
            kind: Some("insufficient_quota"),
            message: "quota",
            should_retry: Some(true),
            ..FailureReport::default()
        };
        assert_eq!(classify(report), RetryClass::Doubtful);
        let report = FailureReport {
            status: Some(429),
            kind: Some("rate_limit_error"),
            message: "would exceed your rate limit, try again later",
            should_retry: Some(true),
            ..FailureReport::default()
        };
        assert_eq!(classify(report), RetryClass::Transient);
    }

    #[test]
    fn in_stream_errors_retry_only_transient_codes() {
        assert_eq!(
            in_stream("insufficient_quota", "You exceeded your current quota"),
            RetryClass::Permanent
        );
        assert_eq!(
            in_stream(
                "rate_limit_exceeded",
                "Request too large for gpt-4o-mini on tokens per min (TPM)"
            ),
            RetryClass::Doubtful
        );
        assert_eq!(
            in_stream("rate_limit_exceeded", "Rate limit reached"),
            RetryClass::Transient
        );
        assert_eq!(
            in_stream("overloaded_error", "Overloaded"),
            RetryClass::Transient
        );
        assert_eq!(in_stream("made_up", "?"), RetryClass::Permanent);
        assert_eq!(
            in_stream("context_length_exceeded", "too long"),
            RetryClass::Permanent
        );
    }

    #[test]
    fn the_header_is_read_loosely() {
        let mut headers = reqwest::header::HeaderMap::new();
        assert_eq!(should_retry_header(&headers), None);
        headers.insert("x-should-retry", "True".parse().unwrap());
        assert_eq!(should_retry_header(&headers), Some(true));
        headers.insert("x-should-retry", "false".parse().unwrap());
        assert_eq!(should_retry_header(&headers), Some(false));
        headers.insert("x-should-retry", "maybe".parse().unwrap());
        assert_eq!(should_retry_header(&headers), None);
    }
}
