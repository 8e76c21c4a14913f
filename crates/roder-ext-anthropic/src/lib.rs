//! The Anthropic Messages API as a Roder inference engine
//! ([`AnthropicEngine`]), streaming over SSE, with tool use and extended
//! thinking.
//!
//! ```no_run
//! use roder_ext_anthropic::{AnthropicConfig, AnthropicEngine};
//!
//! # fn main() -> anyhow::Result<()> {
//! // api.anthropic.com, key from ANTHROPIC_API_KEY, engine id "anthropic".
//! let engine = AnthropicEngine::new(AnthropicConfig::anthropic())?;
//! # Ok(()) }
//! ```
//!
//! The engine retries transient failures (429 rate limits, 5xx and 529
//! "overloaded", unreachable servers, `overloaded_error` events and streams
//! that break before delivering anything) as `ctx.reliability` allows,
//! obeying `x-should-retry` and honouring `Retry-After` in both its forms;
//! permanent errors (400, 401, 403, 404, 413, `invalid_request_error`) fail
//! at once ([`RetryClass`]). It never retries once part of a response was
//! delivered, stops at once when `ctx.cancellation` fires, and reports
//! errors a user can act on ([`ProviderError`]). A tool use cut off by
//! `max_tokens` is never completed. A prompt longer than the context window
//! fails after one request as `roder_api::inference::ContextOverflow`, so
//! the runtime can compact and retry.
//!
//! Signed thinking blocks are emitted as `InferenceEvent::ReasoningItem`s;
//! the runtime persists them with the transcript
//! (`TranscriptItem::Reasoning::provider_data`) and the engine sends them
//! back from there, so a thread resumed by another process keeps its
//! thinking across a tool-use continuation.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod config;
mod decode;
mod engine;
mod request;

pub use config::AnthropicConfig;
pub use engine::AnthropicEngine;
// The HTTP plumbing is shared with the other engine crates; its public
// names are re-exported so callers need not depend on it directly.
pub use roder_ext_inference_http::{ApiKeySource, ProviderError, RetryClass, is_retryable_status};
