//! Where an engine's API key comes from.
//!
//! The key is looked up when a request is made, not when the engine is
//! built, so a key exported after start-up works and no key ends up in a
//! persisted config or a log line.

use std::fmt;

use crate::error::ProviderError;

/// Where an engine's API key comes from.
#[derive(Clone, PartialEq, Eq)]
pub enum ApiKeySource {
    /// No key and no key header (`Authorization`, `x-api-key`): local
    /// servers (Ollama, llama.cpp, vLLM without `--api-key`) or a gateway
    /// that adds its own.
    None,
    /// Read this environment variable at each request.
    Env(String),
    /// This key. For tests (which must not touch the process environment)
    /// and for callers that fetch keys from elsewhere. Never printed.
    Static(String),
}

impl ApiKeySource {
    pub fn env(name: impl Into<String>) -> Self {
        ApiKeySource::Env(name.into())
    }

    /// The environment variable a user should set, for error messages.
    pub fn variable(&self) -> Option<&str> {
        match self {
            ApiKeySource::Env(name) => Some(name),
            _ => None,
        }
    }

    /// The key to send now; a missing or empty variable names itself.
    pub(crate) fn resolve(&self, provider: &str) -> Result<Option<String>, ProviderError> {
        match self {
            ApiKeySource::None => Ok(None),
            ApiKeySource::Static(key) => Ok(Some(key.clone())),
            ApiKeySource::Env(name) => match std::env::var(name) {
                Ok(key) if !key.trim().is_empty() => Ok(Some(key.trim().to_string())),
                _ => Err(ProviderError::MissingApiKey {
                    provider: provider.to_string(),
                    variable: name.clone(),
                }),
            },
        }
    }
}

/// Hand-written so that a `Static` key never reaches a log line through a
/// config's derived `Debug`.
impl fmt::Debug for ApiKeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApiKeySource::None => f.write_str("None"),
            ApiKeySource::Env(name) => f.debug_tuple("Env").field(name).finish(),
            ApiKeySource::Static(_) => f.write_str("Static(<redacted>)"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_keys_are_redacted_in_debug_output() {
        let source = ApiKeySource::Static("sk-secret".into());
        assert_eq!(format!("{source:?}"), "Static(<redacted>)");
    }

    #[test]
    fn a_missing_variable_names_itself() {
        let source = ApiKeySource::env("RODER_TEST_SURELY_UNSET_KEY_VARIABLE");
        let error = source.resolve("openai").unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("RODER_TEST_SURELY_UNSET_KEY_VARIABLE"),
            "{message}"
        );
        assert!(message.contains("\"openai\""), "{message}");

        let error = ApiKeySource::env("RODER_TEST_SURELY_UNSET_ANTHROPIC_KEY")
            .resolve("anthropic")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "no API key for provider \"anthropic\": set the environment variable RODER_TEST_SURELY_UNSET_ANTHROPIC_KEY"
        );
    }

    #[test]
    fn static_keys_are_trimmed_only_from_variables() {
        let source = ApiKeySource::Static(" sk-as-given ".into());
        assert_eq!(
            source.resolve("openai").unwrap().as_deref(),
            Some(" sk-as-given ")
        );
        assert_eq!(ApiKeySource::None.resolve("local").unwrap(), None);
    }
}
