//! One logical request to a provider, sent as many times as the retry
//! policy allows: connection failures, transient answers (408/409/429/5xx
//! unless the body or `x-should-retry` says otherwise, see
//! [`crate::classify`]) and (via [`Exchange::before_retry`]) broken streams
//! and transient in-stream errors are retried; a doubtful failure gets one
//! more attempt; everything else fails at once with the provider's message.
//! A request longer than the context window is never retried: it fails as
//! [`ProviderError::ContextOverflow`].

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderMap;
use reqwest::{Method, Response};
use roder_api::inference::ReliabilityConfig;
use tokio_util::sync::CancellationToken;

use crate::classify::{FailureReport, RetryClass, classify, should_retry_header};
use crate::error::{ProviderError, chain};
use crate::error_body::{error_fields, error_message, is_json, read_error_body};
use crate::overflow::is_context_overflow;
use crate::retry::{delay_before, retry_after};

/// A request that is ready to send, with everything needed to send it
/// again. Made by [`crate::Connection::exchange`]; read as a stream by
/// [`crate::Driver`].
pub struct Exchange {
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
    /// Doubtful failures already given their one more attempt.
    doubtful_retries: u32,
}

/// What an [`Exchange`] is made of.
pub(crate) struct ExchangeParts {
    pub(crate) provider: String,
    pub(crate) client: reqwest::Client,
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Option<Bytes>,
    pub(crate) key_variable: Option<String>,
    pub(crate) reliability: ReliabilityConfig,
    pub(crate) cancel: CancellationToken,
    pub(crate) idle_timeout: Duration,
}

impl Exchange {
    pub(crate) fn new(parts: ExchangeParts) -> Self {
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
            doubtful_retries: 0,
        }
    }

    /// Sends the turn's W3C trace context as a `traceparent` header, so a
    /// traced provider (or proxy) joins the turn's trace. A malformed one is
    /// left out.
    pub fn with_traceparent(mut self, traceparent: Option<&str>) -> Self {
        if let Some(value) = traceparent
            .filter(|value| roder_api::telemetry::valid_traceparent(value))
            .and_then(|value| reqwest::header::HeaderValue::from_str(value).ok())
        {
            self.headers.insert("traceparent", value);
        }
        self
    }

    pub(crate) fn provider(&self) -> &str {
        &self.provider
    }

    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    pub(crate) fn idle_timeout(&self) -> Duration {
        self.idle_timeout
    }

    pub(crate) fn cancelled(&self) -> ProviderError {
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
    /// returns the error to report: permanent, a doubtful one seen twice,
    /// attempts used up, or cancelled while waiting.
    pub(crate) async fn before_retry(
        &mut self,
        error: ProviderError,
        retry_after: Option<Duration>,
    ) -> Result<(), ProviderError> {
        let class = error.retry_class();
        if class == RetryClass::Permanent {
            return Err(error);
        }
        let max_attempts = self.reliability.max_attempts.max(1);
        let doubt_settled = class == RetryClass::Doubtful && self.doubtful_retries >= 1;
        if self.attempts >= max_attempts || doubt_settled {
            return Err(if self.attempts > 1 {
                ProviderError::Exhausted {
                    attempts: self.attempts,
                    last: Box::new(error),
                }
            } else {
                error
            });
        }
        let retry_after = if class == RetryClass::Doubtful {
            // Waiting does not make a used-up quota or a request too large
            // for the limit succeed: the one confirming attempt waits only
            // the computed backoff, so the error comes back quickly.
            self.doubtful_retries += 1;
            None
        } else {
            retry_after
        };
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
        let should_retry = should_retry_header(response.headers());
        let body = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => return Err((self.cancelled(), None)),
            body = tokio::time::timeout(self.idle_timeout, read_error_body(response)) => {
                body.unwrap_or_default()
            }
        };
        let message = error_message(&body, status.canonical_reason());
        let (kind, code) = error_fields(&body);
        let report = FailureReport {
            status: Some(status.as_u16()),
            kind: kind.as_deref(),
            code: code.as_deref(),
            message: &message,
            should_retry,
        };
        let retry = classify(report);
        let error = if is_context_overflow(&report) {
            // No retry can make it fit; the runtime compacts instead.
            ProviderError::ContextOverflow {
                provider: self.provider.clone(),
                message,
            }
        } else if status.as_u16() == 401 {
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
                retry,
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
