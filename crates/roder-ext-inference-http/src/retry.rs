//! When to try a model request again and how long to wait first.
//!
//! The policy is the runtime's [`ReliabilityConfig`]: a bounded number of
//! attempts with doubling backoff. A server's `Retry-After` replaces the
//! computed backoff (it knows its own load better than we do) but is still
//! capped by `max_backoff_ms`, so a server cannot park a turn for an hour.
//! Whether to retry at all is [`crate::classify`]'s.

use std::time::Duration;

use reqwest::header::HeaderMap;
use roder_api::inference::ReliabilityConfig;
use time::OffsetDateTime;

use crate::http_date::parse_http_date;

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
/// `Retry-After` in either of its forms: delta-seconds (fractions
/// accepted, as some servers send them) or an HTTP-date, counted from now
/// (a date already past means "now").
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    retry_after_at(headers, OffsetDateTime::now_utc())
}

/// [`retry_after`] with the clock given, so tests need no sleeping.
fn retry_after_at(headers: &HeaderMap, now: OffsetDateTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok()) {
        return duration_from_secs(ms / 1_000.0);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return duration_from_secs(secs);
    }
    let when = parse_http_date(value)?;
    let wait = (when - now).as_seconds_f64().max(0.0);
    duration_from_secs(wait)
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
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        headers.insert("retry-after-ms", HeaderValue::from_static("-5"));
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn retry_after_as_an_http_date_counts_from_now() {
        let now = parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT").unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:03 GMT"),
        );
        assert_eq!(retry_after_at(&headers, now), Some(Duration::from_secs(3)));
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:27:00 GMT"),
        );
        assert_eq!(retry_after_at(&headers, now), Some(Duration::ZERO));
        // A date far ahead is still capped by `max_backoff_ms`.
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Thu, 22 Oct 2015 07:28:00 GMT"),
        );
        let wait = retry_after_at(&headers, now);
        assert_eq!(wait, Some(Duration::from_secs(86_400)));
        assert_eq!(
            delay_before(&reliability(), 2, wait),
            Duration::from_millis(1_000)
        );
    }
}
