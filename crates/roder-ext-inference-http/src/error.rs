//! Errors a user can act on. Each names the provider and, where there is
//! one, the fix (the variable to set, the URL to check). Callers that need
//! to branch (retry or not) use [`ProviderError::retry_class`].
//!
//! One type serves every engine: the provider (the engine id a thread
//! selected) is a field, so messages name it without a type per engine.

use crate::classify::RetryClass;

/// Why a request to a model provider failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("no API key for provider \"{provider}\": set the environment variable {variable}")]
    MissingApiKey { provider: String, variable: String },

    #[error(
        "the API key for provider \"{provider}\"{origin} contains characters that cannot be sent in an HTTP header"
    )]
    InvalidApiKey {
        provider: String,
        /// " (from OPENAI_API_KEY)" when it came from a variable, else empty.
        origin: String,
    },

    #[error("authentication failed for provider \"{provider}\" (HTTP {status}): {message}{hint}")]
    Authentication {
        provider: String,
        status: u16,
        message: String,
        /// "; check the API key in OPENAI_API_KEY" when the key came from a
        /// variable, else a pointer to the provider's configured key.
        hint: String,
    },

    #[error(
        "could not reach provider \"{provider}\" at {url}: {detail}; check that the server is running and that base_url is right"
    )]
    Unreachable {
        provider: String,
        url: String,
        detail: String,
    },

    #[error("the request to provider \"{provider}\" at {url} failed: {detail}")]
    Transport {
        provider: String,
        url: String,
        detail: String,
    },

    #[error("provider \"{provider}\" answered HTTP {status}: {message}")]
    Http {
        provider: String,
        status: u16,
        message: String,
        /// Decided from the status, the body and `x-should-retry`.
        retry: RetryClass,
    },

    /// The request is longer than the model's context window. Leaves the
    /// engine as [`roder_api::inference::ContextOverflow`] (see
    /// [`ProviderError::into_anyhow`]) so the runtime can compact and retry.
    #[error(
        "provider \"{provider}\" refused the request as longer than the model's context window: {message}"
    )]
    ContextOverflow { provider: String, message: String },

    #[error("the response stream from provider \"{provider}\" broke before it completed: {detail}")]
    StreamDropped { provider: String, detail: String },

    #[error("provider \"{provider}\" reported an error: {message}")]
    Reported {
        provider: String,
        message: String,
        retry: RetryClass,
    },

    #[error("provider \"{provider}\" sent a stream event this engine cannot read: {detail}")]
    Protocol { provider: String, detail: String },

    #[error("the request to provider \"{provider}\" was cancelled")]
    Cancelled { provider: String },

    #[error("{last} (gave up after {attempts} attempts)")]
    Exhausted {
        attempts: u32,
        last: Box<ProviderError>,
    },

    #[error("{source}; not retried because part of the response had already been delivered")]
    AfterOutput { source: Box<ProviderError> },
}

impl ProviderError {
    /// Whether another attempt of the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retry_class().is_retryable()
    }

    /// How this failure may be retried (see [`crate::classify`]).
    pub fn retry_class(&self) -> RetryClass {
        match self {
            ProviderError::Unreachable { .. }
            | ProviderError::Transport { .. }
            | ProviderError::StreamDropped { .. } => RetryClass::Transient,
            ProviderError::Http { retry, .. } | ProviderError::Reported { retry, .. } => *retry,
            _ => RetryClass::Permanent,
        }
    }
}

impl ProviderError {
    /// This error as the engine returns it: a context overflow becomes
    /// [`roder_api::inference::ContextOverflow`] (with the provider's own
    /// words), which the runtime finds with `downcast_ref`; every other
    /// error stays a `ProviderError`.
    pub fn into_anyhow(self) -> anyhow::Error {
        match self {
            ProviderError::ContextOverflow { message, .. } => {
                crate::overflow::overflow_error(message)
            }
            other => anyhow::Error::from(other),
        }
    }
}

/// `error` and its sources joined, for transport errors whose top-level
/// message ("error sending request") hides the cause ("Connection refused").
pub(crate) fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if parts.last().is_none_or(|last| !last.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// At most `max_chars` characters of `text`, with `…` when it was cut: a
/// server's body or event quoted in an error must not flood the message.
pub(crate) fn shorten(text: &str, max_chars: usize) -> String {
    let mut short: String = text.chars().take(max_chars).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhausted_errors_keep_the_cause() {
        for provider in ["openai", "anthropic"] {
            let error = ProviderError::Exhausted {
                attempts: 3,
                last: Box::new(ProviderError::Http {
                    provider: provider.into(),
                    status: 503,
                    message: "overloaded".into(),
                    retry: RetryClass::Transient,
                }),
            };
            assert_eq!(
                error.to_string(),
                format!(
                    "provider \"{provider}\" answered HTTP 503: overloaded (gave up after 3 attempts)"
                )
            );
        }
    }
}
