//! OpenAI inference engines for Roder: the Responses API
//! ([`OpenAiResponsesEngine`]) and Chat Completions
//! ([`OpenAiChatEngine`]), both streaming over SSE.
//!
//! Chat Completions is also the dialect of OpenAI-compatible servers, so
//! with a different `base_url` the chat engine drives OpenRouter, vLLM,
//! Ollama or llama.cpp's server:
//!
//! ```no_run
//! use roder_ext_openai::{ApiKeySource, OpenAiChatEngine, OpenAiConfig, OpenAiResponsesEngine};
//!
//! # fn main() -> anyhow::Result<()> {
//! let openai = OpenAiResponsesEngine::new(OpenAiConfig::openai())?;
//! let ollama = OpenAiChatEngine::new(OpenAiConfig::compatible("ollama", "http://localhost:11434/v1"))?;
//! let openrouter = OpenAiChatEngine::new(
//!     OpenAiConfig::compatible("openrouter", "https://openrouter.ai/api/v1")
//!         .with_api_key(ApiKeySource::env("OPENROUTER_API_KEY")),
//! )?;
//! # Ok(()) }
//! ```
//!
//! Both engines retry transient failures (rate limits, overloads, 5xx,
//! unreachable servers, streams that break before delivering anything) as
//! `ctx.reliability` allows, honouring `Retry-After` in both its forms;
//! quota exhaustion and requests too large get one more attempt at most,
//! other permanent errors none ([`RetryClass`]). They never retry once part
//! of a response was delivered, stop at once when `ctx.cancellation` fires,
//! and report errors a user can act on ([`ProviderError`]). Refusals stream
//! as text with the stop reason `refusal`; a tool call cut off by the
//! output limit is never completed.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod chat;
mod config;
mod ids;
mod models;
mod responses;

pub use chat::OpenAiChatEngine;
pub use config::OpenAiConfig;
pub use responses::OpenAiResponsesEngine;
// The HTTP plumbing is shared with the other engine crates; its public
// names are re-exported so callers need not depend on it directly.
pub use roder_ext_inference_http::{ApiKeySource, ProviderError, RetryClass, is_retryable_status};
