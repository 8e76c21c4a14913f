//! Engine configuration: which server, which key, which extra headers.
//!
//! The key ([`ApiKeySource`]) is looked up when a request is made, not when
//! the engine is built, so a key exported after start-up works and no key
//! ends up in a persisted config or a log line.

use std::time::Duration;

use reqwest::header::HeaderMap;
use roder_ext_inference_http::{ApiKeySource, ConnectionSettings, KeyHeader, ProviderConfig};
use serde_json::{Map, Value};

/// Configuration shared by [`crate::OpenAiChatEngine`] and
/// [`crate::OpenAiResponsesEngine`].
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// The engine id threads select (`"openai"`, `"openrouter"`, `"ollama"`).
    pub id: String,
    /// Everything before `/chat/completions`, `/responses` or `/models`,
    /// e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    pub api_key: ApiKeySource,
    /// Sent with every request (OpenRouter's `HTTP-Referer`/`X-Title`,
    /// `OpenAI-Organization`, ...).
    pub extra_headers: Vec<(String, String)>,
    /// Merged into every request body last, so it can set fields this crate
    /// does not know (Ollama's `options`, OpenRouter's `provider`) or
    /// override ones it does.
    pub extra_body: Map<String, Value>,
    /// Time allowed to open a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// A stream that sends nothing for this long counts as dropped.
    pub idle_timeout: Duration,
    /// The context window (in tokens) of this provider's models, reported
    /// by `list_models` as `ModelDescriptor::context_window` for every model
    /// (the runtime derives its compaction threshold from it). Set it for
    /// servers whose model list says nothing (OpenAI's does not; vLLM and
    /// OpenRouter report `context_length`, which this overrides). `None`:
    /// only what the server reports. The `context_window` key of a
    /// provider's section in `config.toml` is meant to land here.
    pub context_window: Option<u64>,
}

impl OpenAiConfig {
    /// api.openai.com with the key from `OPENAI_API_KEY`, engine id `openai`.
    pub fn openai() -> Self {
        Self {
            id: "openai".to_string(),
            base_url: "https://api.openai.com/v1".to_string(),
            api_key: ApiKeySource::env("OPENAI_API_KEY"),
            extra_headers: Vec::new(),
            extra_body: Map::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            context_window: None,
        }
    }

    /// An OpenAI-compatible server with no key (a local server).
    pub fn compatible(id: impl Into<String>, base_url: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            base_url: base_url.into(),
            api_key: ApiKeySource::None,
            ..Self::openai()
        }
    }

    pub fn with_api_key(mut self, api_key: ApiKeySource) -> Self {
        self.api_key = api_key;
        self
    }

    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }
}

impl ProviderConfig for OpenAiConfig {
    fn connection_settings(&self) -> anyhow::Result<ConnectionSettings> {
        Ok(ConnectionSettings {
            provider: self.id.clone(),
            api_key: self.api_key.clone(),
            key_header: KeyHeader::Bearer,
            headers: HeaderMap::new(),
            extra_headers: self.extra_headers.clone(),
            connect_timeout: self.connect_timeout,
            idle_timeout: self.idle_timeout,
        })
    }

    /// `base_url` + `path`, with exactly one slash between them.
    fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self::openai()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_keys_are_redacted_in_debug_output() {
        let config = OpenAiConfig::openai().with_api_key(ApiKeySource::Static("sk-secret".into()));
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn urls_join_with_one_slash() {
        let config = OpenAiConfig::compatible("local", "http://localhost:8080/v1/");
        assert_eq!(
            config.url("/chat/completions"),
            "http://localhost:8080/v1/chat/completions"
        );
        assert_eq!(
            OpenAiConfig::openai().url("models"),
            "https://api.openai.com/v1/models"
        );
    }
}
