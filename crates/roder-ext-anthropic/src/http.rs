//! One logical request to a provider, sent as many times as the retry
//! policy allows: connection failures, 408/429/5xx and (via
//! [`Exchange::before_retry`]) broken streams are retried; everything else
//! fails at once with an error that says what to fix.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, Response};
use roder_api::inference::ReliabilityConfig;
use tokio_util::sync::CancellationToken;

use crate::error::{ProviderError, chain};
use crate::retry::{delay_before, retry_after};

/// The most of an error body that is read; error bodies are small, and a
/// misbehaving server must not make us buffer megabytes.
const MAX_ERROR_BODY: usize = 16 * 1024;

pub(crate) struct Exchange {
    provider: String,
    client: reqwest::Client,
    method: Method,
    url: String,
    headers: HeaderMap,
    body: Option<Bytes>,
    /// The environment variable the key came from, for 401 hints.
    key_variable: Option<String>,
    reliability: ReliabilityConfig,
    cancel: CancellationToken,
    idle_timeout: Duration,
    attempts: u32,
}

/// What an [`Exchange`] is made of.
pub(crate) struct ExchangeParts {
    pub provider: String,
    pub client: reqwest::Client,
    pub method: Method,
    pub url: String,
    pub headers: HeaderMap,
    pub body: Option<Bytes>,
    pub key_variable: Option<String>,
    pub reliability: ReliabilityConfig,
    pub cancel: CancellationToken,
    pub idle_timeout: Duration,
}

impl Exchange {
    pub fn new(parts: ExchangeParts) -> Self {
        Self {
            provider: parts.provider,
            client: parts.client,
            method: parts.method,
            url: parts.url,
            headers: parts.headers,
            body: parts.body,
            key_variable: parts.key_variable,
            reliability: parts.reliability,
            cancel: parts.cancel,
            idle_timeout: parts.idle_timeout,
            attempts: 0,
        }
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    pub fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    pub fn cancelled(&self) -> ProviderError {
        ProviderError::Cancelled {
            provider: self.provider.clone(),
        }
    }

    /// Sends until a 2xx answer arrives, retrying as the policy allows.
    pub async fn send(&mut self) -> Result<Response, ProviderError> {
        loop {
            match self.attempt().await {
                Ok(response) => return Ok(response),
                Err((error, retry_after)) => self.before_retry(error, retry_after).await?,
            }
        }
    }

    /// After `error`, either waits out the backoff (`Ok`: try again) or
    /// returns the error to report: not retryable, attempts used up, or
    /// cancelled while waiting.
    pub async fn before_retry(
        &mut self,
        error: ProviderError,
        retry_after: Option<Duration>,
    ) -> Result<(), ProviderError> {
        if !error.is_retryable() {
            return Err(error);
        }
        let max_attempts = self.reliability.max_attempts.max(1);
        if self.attempts >= max_attempts {
            return Err(if self.attempts > 1 {
                ProviderError::Exhausted {
                    attempts: self.attempts,
                    last: Box::new(error),
                }
            } else {
                error
            });
        }
        let delay = delay_before(&self.reliability, self.attempts + 1, retry_after);
        tracing::warn!(
            provider = %self.provider,
            attempt = self.attempts,
            max_attempts,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error = %error,
            "model request failed; retrying"
        );
        tokio::select! {
            biased;
            _ = self.cancel.cancelled() => Err(self.cancelled()),
            _ = tokio::time::sleep(delay) => Ok(()),
        }
    }

    /// One try. The error comes with the server's `Retry-After`, if any.
    async fn attempt(&mut self) -> Result<Response, (ProviderError, Option<Duration>)> {
        self.attempts += 1;
        let mut request = self
            .client
            .request(self.method.clone(), &self.url)
            .headers(self.headers.clone());
        if let Some(body) = &self.body {
            request = request.body(body.clone());
        }
        let sent = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err((self.cancelled(), None)),
            sent = request.send() => sent,
        };
        let response = sent.map_err(|error| (self.transport_error(&error), None))?;
        let status = response.status();
        if status.is_success() {
            if self.body.is_some() && is_json(&response) {
                // A server that ignored `stream: true`, or put an error in
                // a 200: say so instead of reporting an empty stream.
                let body = tokio::time::timeout(self.idle_timeout, read_error_body(response))
                    .await
                    .unwrap_or_default();
                let error = ProviderError::Protocol {
                    provider: self.provider.clone(),
                    detail: format!(
                        "expected an event stream but got JSON ({}); check that the server supports streaming",
                        error_message(&body, None)
                    ),
                };
                return Err((error, None));
            }
            return Ok(response);
        }
        let retry_after = retry_after(response.headers());
        let body = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err((self.cancelled(), None)),
            body = tokio::time::timeout(self.idle_timeout, read_error_body(response)) => {
                body.unwrap_or_default()
            }
        };
        let message = error_message(&body, status.canonical_reason());
        let error = if status.as_u16() == 401 {
            ProviderError::Authentication {
                provider: self.provider.clone(),
                status: status.as_u16(),
                message,
                hint: match &self.key_variable {
                    Some(variable) => format!("; check the API key in {variable}"),
                    None => "; check the API key configured for this provider".to_string(),
                },
            }
        } else {
            ProviderError::Http {
                provider: self.provider.clone(),
                status: status.as_u16(),
                message,
            }
        };
        Err((error, retry_after))
    }

    fn transport_error(&self, error: &reqwest::Error) -> ProviderError {
        // The top-level message repeats the URL and hyper's "client error
        // (Connect)" says nothing; the causes below say what broke.
        let detail = match std::error::Error::source(error) {
            Some(source) => chain(source)
                .trim_start_matches("client error (Connect): ")
                .to_string(),
            None => error.to_string(),
        };
        if error.is_connect() {
            ProviderError::Unreachable {
                provider: self.provider.clone(),
                url: self.url.clone(),
                detail,
            }
        } else {
            ProviderError::Transport {
                provider: self.provider.clone(),
                url: self.url.clone(),
                detail,
            }
        }
    }
}

/// A header value that carries a secret (`x-api-key`), marked sensitive
/// so that reqwest never prints it.
pub(crate) fn sensitive(
    value: &str,
    provider: &str,
    variable: Option<&str>,
) -> Result<HeaderValue, ProviderError> {
    let mut value = HeaderValue::from_str(value).map_err(|_| ProviderError::InvalidApiKey {
        provider: provider.to_string(),
        origin: variable
            .map(|variable| format!(" (from {variable})"))
            .unwrap_or_default(),
    })?;
    value.set_sensitive(true);
    Ok(value)
}
fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

async fn read_error_body(mut response: Response) -> String {
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
    let mut short: String = body.chars().take(500).collect();
    if short.len() < body.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

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
