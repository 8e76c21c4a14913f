//! When and how long to wait before repeating a request.
//!
//! Requests that are safe to repeat (`GET`s, `DELETE`, `fs/write`, which
//! replaces the whole file, and the `mkdir -p` that is the first exec after
//! a create) are retried on 5xx, 429 and refused connections. Any request is
//! repeated when the sprite's process supervisor refused it with 503
//! "Process not ready": the live server answers that from a middleware in
//! front of `/exec` while the supervisor starts (right after a create, and
//! presumably on a cold wake), before anything ran. Other execs, sprite creation and
//! checkpoints are otherwise sent once, because a repeat could run a
//! command twice or create a second sprite.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// Bounds for retrying requests: idempotent ones on 5xx, 429 and refused
/// connections, any one on 503 "Process not ready".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries of an idempotent request after the first attempt on 5xx, 429
    /// or a refused connection (0 disables them).
    pub max_retries: u32,
    /// Retries of any request the sprite refused with 503 "Process not
    /// ready" because its process supervisor is still starting. Counted
    /// apart from `max_retries`; the default (8, with the default backoff
    /// about 21 s in all) covers a new sprite's start-up.
    pub not_ready_retries: u32,
    /// Wait before the first retry when the server gives no `Retry-After`;
    /// doubled on each further retry.
    pub initial_backoff: Duration,
    /// Cap on the doubled backoff.
    pub max_backoff: Duration,
    /// A `Retry-After` longer than this is not waited out: the error is
    /// returned at once, with the server's wait in its message.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            not_ready_retries: 8,
            initial_backoff: Duration::from_millis(200),
            max_backoff: Duration::from_secs(5),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

/// What to do after a response to an idempotent request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryDecision {
    /// Hand the response to the caller (success, or an error not worth repeating).
    Stop,
    /// Wait this long, then send the request again.
    RetryAfter(Duration),
}

impl RetryPolicy {
    /// Backoff before retry number `attempt` (0-based) when the server is silent.
    pub(crate) fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.min(16));
        self.initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff)
    }

    /// Whether a response with `status` to attempt `attempt` is retried.
    pub(crate) fn decide(
        &self,
        attempt: u32,
        status: StatusCode,
        headers: &HeaderMap,
    ) -> RetryDecision {
        let retryable = status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS;
        if !retryable || attempt >= self.max_retries {
            return RetryDecision::Stop;
        }
        match retry_after(headers) {
            Some(wait) if wait > self.max_retry_after => RetryDecision::Stop,
            Some(wait) => RetryDecision::RetryAfter(wait),
            None => RetryDecision::RetryAfter(self.backoff(attempt)),
        }
    }
}

/// Whether an error body says the sprite's process supervisor is still
/// starting. The live middleware writes "Process not ready" (as plain text;
/// a JSON `{"error": …}` holding it counts too).
pub(crate) fn says_not_ready(body: &str) -> bool {
    body.to_ascii_lowercase().contains("not ready")
}

/// `Retry-After` in seconds. The HTTP-date form is not understood and yields
/// `None`, which falls back to the backoff.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    /// Total wait of `retries` backoffs.
    fn total_backoff(policy: &RetryPolicy, retries: u32) -> Duration {
        (0..retries).fold(Duration::ZERO, |sum, attempt| {
            sum.saturating_add(policy.backoff(attempt))
        })
    }

    fn headers(retry_after: Option<&str>) -> HeaderMap {
        let mut map = HeaderMap::new();
        if let Some(value) = retry_after {
            map.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.backoff(0), Duration::from_millis(200));
        assert_eq!(policy.backoff(1), Duration::from_millis(400));
        assert_eq!(policy.backoff(10), Duration::from_secs(5));
        assert_eq!(policy.backoff(u32::MAX), Duration::from_secs(5));
    }

    #[test]
    fn retries_server_errors_and_rate_limits_a_bounded_number_of_times() {
        let policy = RetryPolicy::default();
        let none = headers(None);
        assert_eq!(
            policy.decide(0, StatusCode::INTERNAL_SERVER_ERROR, &none),
            RetryDecision::RetryAfter(Duration::from_millis(200))
        );
        assert_eq!(
            policy.decide(3, StatusCode::BAD_GATEWAY, &none),
            RetryDecision::Stop
        );
        for status in [
            StatusCode::OK,
            StatusCode::NOT_FOUND,
            StatusCode::UNAUTHORIZED,
        ] {
            assert_eq!(policy.decide(0, status, &none), RetryDecision::Stop);
        }
    }

    #[test]
    fn recognises_the_not_ready_answer() {
        assert!(says_not_ready("Process not ready\n"));
        assert!(says_not_ready(r#"{"error":"process NOT READY"}"#));
        assert!(!says_not_ready("upstream connect error"));
        let policy = RetryPolicy::default();
        assert_eq!(total_backoff(&policy, 0), Duration::ZERO);
        assert_eq!(
            total_backoff(&policy, policy.not_ready_retries),
            Duration::from_millis(21_200)
        );
    }

    #[test]
    fn honours_retry_after_within_bounds() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.decide(0, StatusCode::TOO_MANY_REQUESTS, &headers(Some("2"))),
            RetryDecision::RetryAfter(Duration::from_secs(2))
        );
        assert_eq!(
            policy.decide(0, StatusCode::TOO_MANY_REQUESTS, &headers(Some("3600"))),
            RetryDecision::Stop
        );
        assert_eq!(
            policy.decide(
                0,
                StatusCode::SERVICE_UNAVAILABLE,
                &headers(Some("Wed, 21 Oct 2015 07:28:00 GMT"))
            ),
            RetryDecision::RetryAfter(Duration::from_millis(200))
        );
    }
}
