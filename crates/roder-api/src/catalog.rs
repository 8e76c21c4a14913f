//! Well-known identifiers shared by the runtime, its configuration and tests.

/// Inference engine id of the scripted/mock engine used in tests and benchmarks.
pub const PROVIDER_MOCK: &str = "mock";

/// Default model name paired with [`PROVIDER_MOCK`].
pub const MODEL_MOCK: &str = "mock";
