//! The effective settings: the file, then the environment, then flags.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::file::{ConfigFile, ProviderEntry, ProviderKind, RunnerEntry};
use crate::cli::GlobalArgs;

/// Used when neither a flag, `RODER_MODEL` nor the file names a model.
const DEFAULT_MODEL: &str = "openai/gpt-5";

/// `provider/model`; the model part may itself contain slashes
/// (`openrouter/anthropic/claude-sonnet-4`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLabel {
    pub provider: String,
    pub model: String,
}

impl ModelLabel {
    pub fn parse(label: &str) -> anyhow::Result<Self> {
        match label.split_once('/') {
            Some((provider, model)) if !provider.is_empty() && !model.is_empty() => Ok(Self {
                provider: provider.to_string(),
                model: model.to_string(),
            }),
            _ => anyhow::bail!(
                "model \"{label}\" is not of the form provider/model (for example openai/gpt-5)"
            ),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Settings {
    pub home: PathBuf,
    /// This home's id (`$RODER_HOME/home-id`, created on first use), the
    /// label of its docker containers; see `crate::home_id`.
    pub home_id: String,
    pub model: ModelLabel,
    /// Where the model label came from, for `config show`.
    pub model_source: &'static str,
    pub providers: BTreeMap<String, ProviderEntry>,
    pub runners: BTreeMap<String, RunnerEntry>,
    pub sandbox: roder_api::sandbox_policy::SandboxPolicy,
    pub auto_compact_token_limit: Option<u64>,
    pub reasoning_effort: Option<roder_api::inference::ReasoningEffort>,
    /// The enabled `[mcp_servers.*]`, checked.
    pub mcp_servers: Vec<roder_ext_mcp::McpServerConfig>,
    pub store: super::store::StoreChoice,
    pub writer_lease_ttl_secs: Option<u64>,
    /// `policy_mode` (unset: the runtime's default).
    pub policy_mode: Option<roder_api::policy_mode::PolicyMode>,
    /// `[approvals]`, checked.
    pub approvals: roder_core::ApprovalsConfig,
}

/// Providers that need no table.
fn builtin_providers() -> BTreeMap<String, ProviderEntry> {
    BTreeMap::from([
        (
            "openai".to_string(),
            ProviderEntry {
                kind: ProviderKind::OpenaiResponses,
                base_url: None,
                api_key_env: Some("OPENAI_API_KEY".to_string()),
                context_window: None,
            },
        ),
        (
            "anthropic".to_string(),
            ProviderEntry {
                kind: ProviderKind::Anthropic,
                base_url: None,
                api_key_env: Some("ANTHROPIC_API_KEY".to_string()),
                context_window: None,
            },
        ),
    ])
}

impl Settings {
    pub fn load(args: &GlobalArgs) -> anyhow::Result<Self> {
        let home = match &args.home {
            Some(home) => home.clone(),
            None => dirs::home_dir()
                .ok_or_else(|| anyhow::anyhow!("cannot find the home directory; set RODER_HOME"))?
                .join(".roder"),
        };
        let path = home.join("config.toml");
        let file = match std::fs::read_to_string(&path) {
            Ok(text) => ConfigFile::parse(&text)
                .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => ConfigFile::default(),
            Err(error) => anyhow::bail!("cannot read {}: {error}", path.display()),
        };
        let env_model = std::env::var("RODER_MODEL")
            .ok()
            .filter(|model| !model.is_empty());
        let (label, model_source) = match (&args.model, env_model, &file.model) {
            (Some(flag), _, _) => (flag.clone(), "--model"),
            (None, Some(env), _) => (env, "RODER_MODEL"),
            (None, None, Some(file)) => (file.clone(), "config.toml"),
            (None, None, None) => (DEFAULT_MODEL.to_string(), "default"),
        };
        let mut providers = builtin_providers();
        providers.extend(file.providers);
        let model = ModelLabel::parse(&label)?;
        if !providers.contains_key(&model.provider) {
            anyhow::bail!(
                "model provider \"{}\" is not configured (configured: {}); add a [providers.{}] table with kind, base_url and api_key_env",
                model.provider,
                providers.keys().cloned().collect::<Vec<_>>().join(", "),
                model.provider
            );
        }
        let mcp_servers = super::mcp_servers::servers(&file.mcp_servers)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        let home_id = crate::home_id::load_or_create(&home)?;
        let approvals = approvals(file.approvals.unwrap_or_default())
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        Ok(Self {
            home,
            home_id,
            model,
            model_source,
            providers,
            runners: file.runners,
            sandbox: file.sandbox.unwrap_or_default(),
            auto_compact_token_limit: file.auto_compact_token_limit,
            reasoning_effort: file.reasoning_effort,
            mcp_servers,
            store: match &file.store {
                Some(store) => super::store::StoreChoice::parse(store)
                    .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
                None => Default::default(),
            },
            writer_lease_ttl_secs: file.writer_lease_ttl_secs,
            policy_mode: file.policy_mode,
            approvals,
        })
    }

    pub fn config_path(&self) -> PathBuf {
        self.home.join("config.toml")
    }

    /// The variables that hold a configured provider's key: commands never
    /// see them.
    pub fn credential_vars(&self) -> Vec<String> {
        self.providers
            .values()
            .filter_map(|provider| provider.api_key_env.clone())
            .chain(
                self.mcp_servers
                    .iter()
                    .filter_map(|server| server.credential_var().map(String::from)),
            )
            .collect()
    }

    pub fn threads_dir(&self) -> PathBuf {
        self.home.join("threads")
    }

    pub fn worktrees_dir(&self) -> PathBuf {
        self.home.join("worktrees")
    }

    /// The effective configuration as TOML, with each key variable's state
    /// (set or missing) but never its value.
    pub fn show(&self) -> String {
        let mut out = String::new();
        out.push_str(&format!("# home: {}\n", self.home.display()));
        out.push_str(&format!("# home id: {}\n", self.home_id));
        out.push_str(&format!(
            "model = \"{}/{}\"  # from {}\n",
            self.model.provider, self.model.model, self.model_source
        ));
        out.push_str(&format!("store = \"{}\"\n", self.store.describe()));
        if let Some(ttl) = self.writer_lease_ttl_secs {
            out.push_str(&format!("writer_lease_ttl_secs = {ttl}\n"));
        }
        if let Some(limit) = self.auto_compact_token_limit {
            out.push_str(&format!("auto_compact_token_limit = {limit}\n"));
        }
        if let Some(effort) = self.reasoning_effort {
            out.push_str(&format!("reasoning_effort = \"{}\"\n", effort.as_str()));
        }
        if let Some(mode) = self.policy_mode {
            out.push_str(&format!("policy_mode = \"{mode}\"\n"));
        }
        for (name, provider) in &self.providers {
            out.push_str(&format!("\n[providers.{name}]\n"));
            let kind = match provider.kind {
                ProviderKind::OpenaiChat => "openai-chat",
                ProviderKind::OpenaiResponses => "openai-responses",
                ProviderKind::Anthropic => "anthropic",
            };
            out.push_str(&format!("kind = \"{kind}\"\n"));
            if let Some(base_url) = &provider.base_url {
                out.push_str(&format!("base_url = \"{base_url}\"\n"));
            }
            if let Some(variable) = &provider.api_key_env {
                let state = match std::env::var(variable) {
                    Ok(value) if !value.is_empty() => "set",
                    _ => "missing",
                };
                out.push_str(&format!("api_key_env = \"{variable}\"  # {state}\n"));
            }
            if let Some(window) = provider.context_window {
                out.push_str(&format!("context_window = {window}\n"));
            }
        }
        for (name, runner) in &self.runners {
            out.push_str(&format!("\n[runners.{name}]\n"));
            out.push_str(&format!("provider = \"{}\"\n", runner.provider));
            out.push_str(&format!(
                "config = {}\n",
                toml::Value::Table(runner.config.clone())
            ));
        }
        out.push_str(&super::mcp_servers::show(&self.mcp_servers));
        out.push_str("\n[approvals]\n");
        let quoted = |rules: &[roder_api::approval::ApprovalRule]| {
            rules
                .iter()
                .map(|rule| toml::Value::String(rule.to_string()).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        out.push_str(&format!(
            "allow = [{}]\n",
            quoted(&self.approvals.rules.allow)
        ));
        out.push_str(&format!(
            "deny = [{}]\n",
            quoted(&self.approvals.rules.deny)
        ));
        out.push_str(&format!(
            "timeout_s = {}\n",
            self.approvals.timeout.as_secs()
        ));
        let no_approver = match self.approvals.no_approver {
            roder_api::approval::NoApprover::Allow => "allow",
            roder_api::approval::NoApprover::Reject => "reject",
        };
        out.push_str(&format!("no_approver = \"{no_approver}\"\n"));
        out.push_str("\n[sandbox]\n");
        match toml::to_string(&self.sandbox) {
            Ok(table) => out.push_str(&table),
            Err(error) => out.push_str(&format!("# cannot show the sandbox policy: {error}\n")),
        }
        out
    }
}

/// `[approvals]` as the runtime takes it.
fn approvals(entry: super::file::ApprovalsEntry) -> anyhow::Result<roder_core::ApprovalsConfig> {
    let defaults = roder_core::ApprovalsConfig::default();
    let timeout = match entry.timeout_s {
        Some(0) => anyhow::bail!("[approvals] timeout_s must be at least 1"),
        Some(seconds) => std::time::Duration::from_secs(seconds),
        None => defaults.timeout,
    };
    Ok(roder_core::ApprovalsConfig {
        rules: roder_api::approval::ApprovalRules {
            allow: entry.allow,
            deny: entry.deny,
        },
        timeout,
        no_approver: entry.no_approver.unwrap_or(defaults.no_approver),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_labels_split_at_the_first_slash() {
        let label = ModelLabel::parse("openrouter/anthropic/claude").unwrap();
        assert_eq!(label.provider, "openrouter");
        assert_eq!(label.model, "anthropic/claude");
        assert!(ModelLabel::parse("gpt-5").is_err());
        assert!(ModelLabel::parse("/gpt-5").is_err());
    }
}
