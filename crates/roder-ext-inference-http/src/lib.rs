//! The HTTP plumbing Roder's inference engines share, so that each engine
//! crate holds only its wire format (request mapping and event decoding).
//!
//! * [`Connection`]: an engine's config ([`ProviderConfig`]) with the HTTP
//!   client, headers and API key ([`ApiKeySource`], sent as [`KeyHeader`])
//!   made from it; each request is made from it as an [`Exchange`].
//! * [`Exchange`]: one logical request, sent again after connection
//!   failures and transient answers as `ReliabilityConfig` allows,
//!   honouring `Retry-After` (seconds or HTTP-date); [`classify`] decides
//!   what is transient from the status, the error body and
//!   `x-should-retry`.
//! * [`Driver`]: reads the SSE response through an engine's [`Decoder`],
//!   with an idle timeout and cancellation, and requests it again when a
//!   stream breaks before anything was delivered, never after.
//! * [`ProviderError`]: errors that name the provider and the fix.
//! * [`overflow`]: a request longer than the model's context window is
//!   returned as `roder_api::inference::ContextOverflow`, never retried, so
//!   the runtime can compact the thread and try once more.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use reqwest::header::HeaderMap;
//! use roder_ext_inference_http::{
//!     ApiKeySource, Connection, ConnectionSettings, KeyHeader, ProviderConfig,
//! };
//!
//! struct LocalConfig;
//!
//! impl ProviderConfig for LocalConfig {
//!     fn connection_settings(&self) -> anyhow::Result<ConnectionSettings> {
//!         Ok(ConnectionSettings {
//!             provider: "local".into(),
//!             api_key: ApiKeySource::None,
//!             key_header: KeyHeader::Bearer,
//!             headers: HeaderMap::new(),
//!             extra_headers: Vec::new(),
//!             connect_timeout: Duration::from_secs(10),
//!             idle_timeout: Duration::from_secs(300),
//!         })
//!     }
//!
//!     fn url(&self, path: &str) -> String {
//!         format!("http://localhost:8080/v1/{path}")
//!     }
//! }
//!
//! # fn main() -> anyhow::Result<()> {
//! let connection = Connection::new(LocalConfig)?;
//! # let _ = connection;
//! # Ok(()) }
//! ```

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod api_key;
pub mod classify;
mod connection;
mod decoder;
mod driver;
mod error;
mod error_body;
mod exchange;
mod http_date;
mod line_frames;
pub mod overflow;
mod retry;
pub mod tls_roots;

pub use api_key::ApiKeySource;
pub use classify::{FailureReport, RetryClass, classify, is_retryable_status};
pub use connection::{Connection, ConnectionSettings, KeyHeader, ProviderConfig};
pub use decoder::{DecodeError, Decoder, Event, Progress, decode_chunks, snippet};
pub use driver::Driver;
pub use error::ProviderError;
pub use exchange::Exchange;
pub use overflow::{is_context_overflow, reported};
