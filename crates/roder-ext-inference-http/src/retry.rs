//! When to try a model request again and how long to wait first.
//!
//! The policy is the runtime's [`ReliabilityConfig`]: a bounded number of
//! attempts with doubling backoff. A server's `Retry-After` replaces the
//! computed backoff (it knows its own load better than we do) but is still
//! capped by `max_backoff_ms`, so a server cannot park a turn for an hour.

use std::time::Duration;

use reqwest::header::HeaderMap;
use roder_api::inference::ReliabilityConfig;

/// The wait before attempt `next_attempt` (1-based).
pub(crate) fn delay_before(
    reliability: &ReliabilityConfig,
    next_attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    let cap = Duration::from_millis(reliability.max_backoff_ms);
    retry_after
        .unwrap_or_else(|| reliability.backoff(next_attempt))
        .min(cap)
}

/// The server's requested wait: OpenAI's `retry-after-ms`, else
/// `Retry-After` in (possibly fractional) seconds. The HTTP-date form is
/// not read; the computed backoff applies then.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1_000.0);
    }
    header("retry-after")
        .and_then(|value| value.parse::<f64>().ok())
        .and_then(duration_from_secs)
}

fn duration_from_secs(secs: f64) -> Option<Duration> {
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

    use super::*;

    fn reliability() -> ReliabilityConfig {
        ReliabilityConfig {
            max_attempts: 5,
            initial_backoff_ms: 100,
            max_backoff_ms: 1_000,
        }
    }

    #[test]
    fn backoff_applies_without_retry_after() {
        assert_eq!(
            delay_before(&reliability(), 2, None),
            Duration::from_millis(100)
        );
        assert_eq!(
            delay_before(&reliability(), 3, None),
            Duration::from_millis(200)
        );
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let short = Some(Duration::from_millis(10));
        assert_eq!(
            delay_before(&reliability(), 3, short),
            Duration::from_millis(10)
        );
        let long = Some(Duration::from_secs(3_600));
        assert_eq!(
            delay_before(&reliability(), 2, long),
            Duration::from_millis(1_000)
        );
    }

    #[test]
    fn retry_after_headers_are_read() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(500)));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        headers.insert("retry-after-ms", HeaderValue::from_static("-5"));
        assert_eq!(retry_after(&headers), None);
    }
}
