//! Recognising "the request does not fit the model's context window".
//!
//! That failure is not like the others: no retry of the same request can
//! succeed, but the runtime can compact the thread and send a shorter one.
//! So it leaves the engine as [`roder_api::inference::ContextOverflow`]
//! (which the runtime downcasts to), never retried here.
//!
//! How providers say it:
//! * OpenAI (Chat Completions and Responses, HTTP 400 or a
//!   `response.failed` / `error` event): code `context_length_exceeded`,
//!   message "Your input exceeds the context window of this model" or
//!   "This model's maximum context length is N tokens" (the latter also
//!   from vLLM and other compatible servers).
//! * Anthropic (HTTP 400 `invalid_request_error`): "prompt is too long:
//!   N tokens > M maximum".

use roder_api::inference::ContextOverflow;

use crate::classify::{FailureReport, classify, is_retryable_status};
use crate::decoder::DecodeError;

/// Codes and types that name the overflow outright.
const CODES: &[&str] = &["context_length_exceeded"];

/// Message phrases (lower case) that say the prompt is over the window.
const PHRASES: &[&str] = &[
    "prompt is too long",
    "exceeds the context window",
    "maximum context length",
    "context length exceeded",
];

/// Whether `report` says the request is longer than the context window.
/// A retryable status (429 "Request too large ... tokens per min" is a
/// rate limit, not the window) never is.
pub fn is_context_overflow(report: &FailureReport<'_>) -> bool {
    if report.status.is_some_and(is_retryable_status) {
        return false;
    }
    let named = [report.kind, report.code]
        .into_iter()
        .flatten()
        .any(|word| CODES.contains(&word));
    let message = report.message.to_ascii_lowercase();
    named || PHRASES.iter().any(|phrase| message.contains(phrase))
}

/// What a decoder returns for an error the provider reported inside a
/// stream: [`DecodeError::ContextOverflow`] when the request was over the
/// window, else [`DecodeError::Reported`] with the class [`classify`]
/// gives. `message` is the text to show (the engine may add the code).
pub fn reported(report: FailureReport<'_>, message: String) -> DecodeError {
    if is_context_overflow(&report) {
        return DecodeError::ContextOverflow {
            message: report.message.to_string(),
        };
    }
    DecodeError::Reported {
        message,
        retry: classify(report),
    }
}

/// The error the runtime downcasts to, with the provider's own words.
pub(crate) fn overflow_error(message: String) -> anyhow::Error {
    anyhow::Error::from(ContextOverflow { message })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::RetryClass;

    fn report<'a>(
        status: Option<u16>,
        kind: Option<&'a str>,
        message: &'a str,
    ) -> FailureReport<'a> {
        FailureReport {
            status,
            kind,
            code: kind,
            message,
            should_retry: None,
        }
    }

    #[test]
    fn each_provider_s_wording_is_an_overflow() {
        let openai = report(
            Some(400),
            Some("context_length_exceeded"),
            "Your input exceeds the context window of this model.",
        );
        assert!(is_context_overflow(&openai));
        let anthropic = report(
            Some(400),
            Some("invalid_request_error"),
            "prompt is too long: 208310 tokens > 200000 maximum",
        );
        assert!(is_context_overflow(&anthropic));
        let vllm = report(
            Some(400),
            None,
            "This model's maximum context length is 8192 tokens. However, you requested 9000",
        );
        assert!(is_context_overflow(&vllm));
        let in_stream = report(None, Some("context_length_exceeded"), "too long");
        assert!(is_context_overflow(&in_stream));
    }

    #[test]
    fn other_failures_are_not() {
        let tpm = report(
            Some(429),
            Some("rate_limit_exceeded"),
            "Request too large for gpt-4o-mini on tokens per min (TPM)",
        );
        assert!(!is_context_overflow(&tpm));
        let invalid = report(Some(400), Some("invalid_request_error"), "bad tool schema");
        assert!(!is_context_overflow(&invalid));
        assert_eq!(
            reported(invalid, "bad tool schema".into()),
            DecodeError::Reported {
                message: "bad tool schema".into(),
                retry: RetryClass::Permanent,
            }
        );
        assert_eq!(
            reported(
                report(None, Some("context_length_exceeded"), "too long"),
                "too long (context_length_exceeded)".into()
            ),
            DecodeError::ContextOverflow {
                message: "too long".into()
            }
        );
    }

    #[test]
    fn the_error_downcasts_to_the_api_type() {
        let error = overflow_error("prompt is too long".into());
        assert_eq!(
            error.downcast_ref::<ContextOverflow>(),
            Some(&ContextOverflow {
                message: "prompt is too long".into()
            })
        );
    }
}
