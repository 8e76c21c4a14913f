//! When and how long to wait before repeating a request.
//!
//! Only requests that are safe to repeat are retried: `GET`s and `DELETE`s.
//! Exec, file writes, sprite creation and checkpoints are sent once, because
//! a repeat could run a command twice or create a second sprite.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, RETRY_AFTER};

/// Bounds for retrying idempotent requests on 5xx, 429 and refused connections.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
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
