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
    /// The thread store: "jsonl" (default) or a postgres:// URL, or a
    /// `[store]` table with `url` and `sync` (see `store.rs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreEntry>,
    /// Checkpoint retention (`[checkpoints] keep_turns`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoints: Option<CheckpointsEntry>,
    /// How long a thread's writer lease lasts unrenewed (default 30): with
    /// a shared store, how soon another replica takes a dead one's thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_lease_ttl_secs: Option<u64>,
    /// Which calls run without asking, for the app server and ACP
    /// sessions: "plan", "default" (the default), "accept_edits" or
    /// "bypass". `roder exec` takes `--mode` instead (default "bypass").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_mode: Option<roder_api::policy_mode::PolicyMode>,
    /// Allow and deny rules, the ask timeout, and what happens with nobody
    /// to ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approvals: Option<ApprovalsEntry>,
    /// Trace and metric export over OTLP (off unless an endpoint is set
    /// here or in `OTEL_EXPORTER_OTLP_ENDPOINT`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<roder_ext_telemetry::TelemetryFile>,
    /// The agent profile new threads run as when none is asked for
    /// (`builtin:NAME`, a name, a path). Unset: no profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_profile: Option<String>,
}

/// `[checkpoints]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointsEntry {
    /// How many of a thread's latest turns keep their checkpoint
    /// (default 10); `roder gc` removes the older ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_turns: Option<usize>,
}

/// `store`: a bare string (the store), or a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StoreEntry {
    Url(String),
    Table(StoreTable),
}

/// `[store]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreTable {
    /// "jsonl" (default) or a postgres:// URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// JSONL only: "none", "turn" (default) or "always" (see
    /// `roder_ext_jsonl_thread_store::sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync: Option<String>,
}

/// `[approvals]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsEntry {
    /// Rules that let calls run without asking: "exec:cargo test",
    /// "write:docs/**", "tool:mcp__time__*". `allow_always` adds here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<roder_api::approval::ApprovalRule>,
    /// Rules that refuse calls under every mode. `reject_always` adds here.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<roder_api::approval::ApprovalRule>,
    /// Seconds an ask waits for an answer (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_s: Option<u64>,
    /// "allow" (default) or "reject": what a call that would ask does when
    /// no approver is attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_approver: Option<roder_api::approval::NoApprover>,
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
    fn approvals_parse_and_bad_rules_are_named() {
        let file = ConfigFile::parse(
            r#"
policy_mode = "accept_edits"
[approvals]
allow = ["exec:cargo test", "write:docs/**"]
deny = ["exec:rm"]
timeout_s = 30
no_approver = "reject"
"#,
        )
        .unwrap();
        assert_eq!(
            file.policy_mode,
            Some(roder_api::policy_mode::PolicyMode::AcceptEdits)
        );
        let approvals = file.approvals.unwrap();
        assert_eq!(approvals.allow.len(), 2);
        assert_eq!(approvals.deny[0].to_string(), "exec:rm");
        assert_eq!(approvals.timeout_s, Some(30));
        let error = ConfigFile::parse("[approvals]\nallow = [\"exec:a && b\"]\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("exec:a && b"), "{error}");
        let error = ConfigFile::parse("policy_mode = \"yolo\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("yolo"), "{error}");
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
