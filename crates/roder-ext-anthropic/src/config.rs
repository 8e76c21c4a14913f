//! Engine configuration: which server, which key, which API version, how
//! many tokens an answer may take.
//!
//! The key ([`ApiKeySource`]) is looked up when a request is made, not when
//! the engine is built, so a key exported after start-up works and no key
//! ends up in a persisted config or a log line.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use roder_api::inference::ReasoningEffort;
use roder_ext_inference_http::{ApiKeySource, ConnectionSettings, KeyHeader, ProviderConfig};
use serde_json::{Map, Value};

/// Configuration of an [`crate::AnthropicEngine`].
#[derive(Debug, Clone, PartialEq)]
pub struct AnthropicConfig {
    /// The engine id threads select (`"anthropic"`).
    pub id: String,
    /// The server, without `/v1` (`https://api.anthropic.com`); a trailing
    /// `/v1` is accepted too.
    pub base_url: String,
    pub api_key: ApiKeySource,
    /// The `anthropic-version` header.
    pub version: String,
    /// `max_tokens` of every request: the most an answer (thinking
    /// included) may take. The API requires it; 16384 fits every current
    /// model except the 3.5 generation (8192).
    pub max_tokens: u32,
    /// Marks the system prompt and the latest message as cache breakpoints
    /// (`cache_control: ephemeral`), so each round of an agent loop reads
    /// the conversation so far from the prompt cache.
    pub prompt_caching: bool,
    /// Sent with every request (`anthropic-beta`, ...).
    pub extra_headers: Vec<(String, String)>,
    /// Merged into every request body last (`temperature`, `metadata`, ...).
    pub extra_body: Map<String, Value>,
    /// Time allowed to open a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// A stream that sends nothing for this long counts as dropped. The API
    /// sends `ping` events while a long answer is produced.
    pub idle_timeout: Duration,
    /// The context window (in tokens) `list_models` reports for every model
    /// (the runtime derives its compaction threshold from it). `None`: the
    /// 200,000 tokens of every current Claude model (`claude-` ids other
    /// than the 100k `claude-2` and `claude-instant`), unknown for other
    /// ids. Set it when a beta header (1M context) or a proxy changes the
    /// window. The `context_window` key of a provider's section in
    /// `config.toml` is meant to land here.
    pub context_window: Option<u64>,
}

impl AnthropicConfig {
    /// api.anthropic.com with the key from `ANTHROPIC_API_KEY`, engine id
    /// `anthropic`, API version 2023-06-01.
    pub fn anthropic() -> Self {
        Self {
            id: "anthropic".to_string(),
            base_url: "https://api.anthropic.com".to_string(),
            api_key: ApiKeySource::env("ANTHROPIC_API_KEY"),
            version: "2023-06-01".to_string(),
            max_tokens: 16_384,
            prompt_caching: true,
            extra_headers: Vec::new(),
            extra_body: Map::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(300),
            context_window: None,
        }
    }

    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    pub fn with_api_key(mut self, api_key: ApiKeySource) -> Self {
        self.api_key = api_key;
        self
    }

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.extra_headers.push((name.into(), value.into()));
        self
    }

    pub fn with_context_window(mut self, tokens: u64) -> Self {
        self.context_window = Some(tokens);
        self
    }

    /// The context window of `model`: [`AnthropicConfig::context_window`]
    /// when set, else 200,000 for current Claude models, else unknown.
    pub fn context_window_of(&self, model: &str) -> Option<u64> {
        if self.context_window.is_some() {
            return self.context_window;
        }
        let current_claude = model.starts_with("claude-")
            && !model.starts_with("claude-2")
            && !model.starts_with("claude-instant");
        current_claude.then_some(200_000)
    }

    /// The thinking budget for `effort`, or `None` when `max_tokens` leaves
    /// no room for the 1024-token minimum plus an answer.
    ///
    /// Budgets (the API documents no mapping from effort): minimal 1024,
    /// low 4096, medium 8192, high 12288; each capped at `max_tokens - 1024`
    /// so the answer keeps room, since the budget counts against
    /// `max_tokens`.
    pub fn thinking_budget(&self, effort: ReasoningEffort) -> Option<u32> {
        let wanted: u32 = match effort {
            ReasoningEffort::Minimal => 1_024,
            ReasoningEffort::Low => 4_096,
            ReasoningEffort::Medium => 8_192,
            ReasoningEffort::High => 12_288,
        };
        let budget = wanted.min(self.max_tokens.saturating_sub(1_024));
        (budget >= 1_024).then_some(budget)
    }
}

impl ProviderConfig for AnthropicConfig {
    /// The key goes in `x-api-key`; the version is checked here so that a
    /// typo is an error at start-up rather than at the first turn.
    fn connection_settings(&self) -> anyhow::Result<ConnectionSettings> {
        let version = HeaderValue::from_str(&self.version).map_err(|_| {
            anyhow::anyhow!(
                "provider \"{}\": invalid anthropic-version {:?}",
                self.id,
                self.version
            )
        })?;
        let mut headers = HeaderMap::new();
        headers.insert("anthropic-version", version);
        Ok(ConnectionSettings {
            provider: self.id.clone(),
            api_key: self.api_key.clone(),
            key_header: KeyHeader::Named(HeaderName::from_static("x-api-key")),
            headers,
            extra_headers: self.extra_headers.clone(),
            connect_timeout: self.connect_timeout,
            idle_timeout: self.idle_timeout,
        })
    }

    /// `{base_url}/v1/{path}`, whether or not `base_url` ends in `/v1`.
    fn url(&self, path: &str) -> String {
        let base = self.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        format!("{base}/v1/{}", path.trim_start_matches('/'))
    }
}

impl Default for AnthropicConfig {
    fn default() -> Self {
        Self::anthropic()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_keys_are_redacted_in_debug_output() {
        let config =
            AnthropicConfig::anthropic().with_api_key(ApiKeySource::Static("sk-ant-secret".into()));
        assert!(!format!("{config:?}").contains("sk-ant-secret"));
    }

    #[test]
    fn urls_get_exactly_one_v1() {
        let config = AnthropicConfig::anthropic();
        assert_eq!(
            config.url("messages"),
            "https://api.anthropic.com/v1/messages"
        );
        let config = config.with_base_url("http://127.0.0.1:9/v1/");
        assert_eq!(config.url("/models"), "http://127.0.0.1:9/v1/models");
    }

    #[test]
    fn context_windows_come_from_the_config_or_the_model_family() {
        let config = AnthropicConfig::anthropic();
        assert_eq!(config.context_window_of("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(
            config.context_window_of("claude-3-5-haiku-latest"),
            Some(200_000)
        );
        assert_eq!(config.context_window_of("claude-2.1"), None);
        assert_eq!(config.context_window_of("my-proxy-model"), None);
        let config = config.with_context_window(1_000_000);
        assert_eq!(
            config.context_window_of("claude-sonnet-4-5"),
            Some(1_000_000)
        );
        assert_eq!(config.context_window_of("my-proxy-model"), Some(1_000_000));
    }

    #[test]
    fn thinking_budgets_leave_room_for_the_answer() {
        let mut config = AnthropicConfig::anthropic();
        assert_eq!(config.thinking_budget(ReasoningEffort::High), Some(12_288));
        assert_eq!(
            config.thinking_budget(ReasoningEffort::Minimal),
            Some(1_024)
        );
        config.max_tokens = 4_096;
        assert_eq!(config.thinking_budget(ReasoningEffort::High), Some(3_072));
        config.max_tokens = 2_000;
        assert_eq!(config.thinking_budget(ReasoningEffort::Low), None);
    }
}
