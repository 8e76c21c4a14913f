//! The config file's format. Unknown keys and kinds are errors that name
//! them: a typo must never be silently ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Default model as `provider/model`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub providers: BTreeMap<String, ProviderEntry>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub runners: BTreeMap<String, RunnerEntry>,
    /// Compact a thread's context when a request would pass this many
    /// tokens (default: 80% of the model's context window, when known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_compact_token_limit: Option<u64>,
    /// How hard reasoning models think: "minimal", "low", "medium" or
    /// "high". Unset: no reasoning is asked for (the provider's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<roder_api::inference::ReasoningEffort>,
    /// How commands are confined (default: enforced, network off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<roder_api::sandbox_policy::SandboxPolicy>,
    /// MCP servers whose tools the model gets (see `mcp_servers.rs`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mcp_servers: BTreeMap<String, super::mcp_servers::McpServerEntry>,
    /// The thread store: "jsonl" (default) or a postgres:// URL (see
    /// `store.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<String>,
    /// How long a thread's writer lease lasts unrenewed (default 30): with
    /// a shared store, how soon another replica takes a dead one's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_lease_ttl_secs: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    OpenaiChat,
    OpenaiResponses,
    Anthropic,
}

/// A model provider. `api_key_env` names the variable holding the key; the
/// key itself never appears in a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    pub kind: ProviderKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model's context window in tokens, when the API does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
}

/// A runner destination: which provider, with what config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerEntry {
    pub provider: String,
    #[serde(default)]
    pub config: toml::Table,
}

impl ConfigFile {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        toml::from_str(text).map_err(|error| anyhow::anyhow!("{}", error.message().trim()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sandbox_table_parses_and_its_typos_are_named() {
        let file = ConfigFile::parse(
            r#"
[sandbox]
network = "on"
writable_roots = ["/opt/cache"]
env = { pass = ["CARGO_HOME"] }
limits = { max_processes = 256 }
"#,
        )
        .unwrap();
        let sandbox = file.sandbox.unwrap();
        assert!(sandbox.network.allows());
        assert_eq!(sandbox.env.pass, vec!["CARGO_HOME".to_string()]);
        assert_eq!(sandbox.limits.max_processes, Some(256));
        let error = ConfigFile::parse(
            "[sandbox]
netwrok = \"on\"\n",
        )
        .err()
        .map(|error| error.to_string())
        .unwrap_or_default();
        assert!(error.contains("netwrok"), "{error}");
    }

    #[test]
    fn a_full_file_parses() {
        let file = ConfigFile::parse(
            r#"
model = "local/qwen3"
[providers.local]
kind = "openai-chat"
base_url = "http://127.0.0.1:8080/v1"
[runners.box]
provider = "docker"
config = { image = "roder-sandbox:latest" }
"#,
        )
        .unwrap();
        assert_eq!(file.model.as_deref(), Some("local/qwen3"));
        assert_eq!(file.providers["local"].kind, ProviderKind::OpenaiChat);
        assert_eq!(
            file.runners["box"].config["image"].as_str(),
            Some("roder-sandbox:latest")
        );
    }

    #[test]
    fn unknown_keys_and_kinds_are_named() {
        let error = ConfigFile::parse("modle = \"x/y\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("modle"), "{error}");
        let error = ConfigFile::parse("[providers.x]\nkind = \"openai-chatt\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("openai-chatt"), "{error}");
        let error = ConfigFile::parse("[providers.x]\nkind = \"anthropic\"\napi_key = \"sk\"")
            .unwrap_err()
            .to_string();
        assert!(error.contains("api_key"), "{error}");
    }
}
