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

/// A model label that is malformed or names no configured provider. It is
/// refused before anything is created, with exit code 1 (`roder exec`'s
/// failure), not 2 (a config file that does not parse).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ModelError(String);

impl ModelLabel {
    pub fn parse(label: &str) -> Result<Self, ModelError> {
        let well_formed = |part: &str| {
            !part.is_empty() && !part.chars().any(|c| c.is_whitespace() || c.is_control())
        };
        match label.split_once('/') {
            Some((provider, model)) if well_formed(provider) && well_formed(model) => Ok(Self {
                provider: provider.to_string(),
                model: model.to_string(),
            }),
            _ => Err(ModelError(format!(
                "model {label:?} is not of the form provider/model without spaces (for example openai/gpt-5); fix --model, RODER_MODEL or `model` in config.toml"
            ))),
        }
    }
}

/// Turns whose checkpoints are kept when `[checkpoints] keep_turns` is
/// unset: enough to undo an afternoon's mistakes, not a month of copies.
pub const DEFAULT_KEEP_TURNS: usize = 10;

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
    /// `[store] sync` (JSONL only; the default `turn`).
    pub store_sync: roder_ext_jsonl_thread_store::SyncMode,
    /// `[checkpoints] keep_turns`: a thread's latest turns whose
    /// checkpoints `roder gc` keeps.
    pub checkpoint_keep_turns: usize,
    pub writer_lease_ttl_secs: Option<u64>,
    /// `policy_mode` (unset: the runtime's default).
    pub policy_mode: Option<roder_api::policy_mode::PolicyMode>,
    /// `[approvals]`, checked.
    pub approvals: roder_core::ApprovalsConfig,
    /// `[telemetry]` and the `OTEL_*` variables: `None` when export is off.
    pub telemetry: Option<roder_ext_telemetry::TelemetryConfig>,
    /// `default_profile`: what new threads run as when no profile is asked
    /// for (unset: no profile).
    pub default_profile: Option<String>,
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
    /// Roder's home: `--home`, `RODER_HOME`, else `~/.roder`.
    pub fn home(args: &GlobalArgs) -> anyhow::Result<PathBuf> {
        match &args.home {
            Some(home) => Ok(home.clone()),
            None => Ok(dirs::home_dir()
                .ok_or_else(|| anyhow::anyhow!("cannot find the home directory; set RODER_HOME"))?
                .join(".roder")),
        }
    }

    pub fn load(args: &GlobalArgs) -> anyhow::Result<Self> {
        let home = Self::home(args)?;
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
            return Err(ModelError(format!(
                "model provider \"{}\" is not configured (configured: {}); add a [providers.{}] table with kind, base_url and api_key_env",
                model.provider,
                providers.keys().cloned().collect::<Vec<_>>().join(", "),
                model.provider
            ))
            .into());
        }
        let mcp_servers = super::mcp_servers::servers(&file.mcp_servers)
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        let home_id = crate::home_id::load_or_create(&home)?;
        let approvals = approvals(file.approvals.unwrap_or_default())
            .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?;
        let environment: std::collections::HashMap<String, String> = std::env::vars().collect();
        let telemetry =
            roder_ext_telemetry::TelemetryConfig::resolve(file.telemetry.as_ref(), &environment)
                .map_err(|error| anyhow::anyhow!("{}: [telemetry]: {error}", path.display()))?;
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
            store: super::store::StoreChoice::from_entry(file.store.as_ref())
                .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
            store_sync: super::store::sync_from_entry(file.store.as_ref())
                .map_err(|error| anyhow::anyhow!("{}: {error}", path.display()))?,
            checkpoint_keep_turns: file
                .checkpoints
                .as_ref()
                .and_then(|checkpoints| checkpoints.keep_turns)
                .unwrap_or(DEFAULT_KEEP_TURNS),
            writer_lease_ttl_secs: file.writer_lease_ttl_secs,
            policy_mode: file.policy_mode,
            approvals,
            telemetry,
            default_profile: file.default_profile.filter(|text| !text.trim().is_empty()),
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
        out.push_str(&super::store::show(&self.store, self.store_sync));
        out.push_str(&format!(
            "checkpoints = {{ keep_turns = {} }}\n",
            self.checkpoint_keep_turns
        ));
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
        if let Some(profile) = &self.default_profile {
            out.push_str(&format!("default_profile = {profile:?}\n"));
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
        // Under its key, so nested tables print as [sandbox.env], not [env].
        let sandbox = toml::Value::try_from(&self.sandbox)
            .map(|policy| toml::Table::from_iter([("sandbox".to_string(), policy)]));
        match sandbox.and_then(|table| toml::to_string(&table)) {
            Ok(table) => out.push_str(&format!("\n{table}")),
            Err(error) => out.push_str(&format!("\n# cannot show the sandbox policy: {error}\n")),
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
        assert!(ModelLabel::parse("openai/").is_err());
        assert!(ModelLabel::parse("openai/gpt 5").is_err());
        assert!(ModelLabel::parse("open ai/gpt-5").is_err());
        assert!(ModelLabel::parse("openai/gpt-5\n").is_err());
    }

    fn shown(home: &std::path::Path) -> String {
        let args = GlobalArgs {
            home: Some(home.to_path_buf()),
            model: None,
        };
        let shown = Settings::load(&args).unwrap().show();
        shown
            .lines()
            .filter(|line| !line.starts_with("# home"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn config_show_prints_a_config_that_loads_to_the_same_settings() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            r#"
model = "local/qwen"
reasoning_effort = "low"
[providers.local]
kind = "openai-chat"
base_url = "http://127.0.0.1:1/v1"
context_window = 1000
[runners.box]
provider = "docker"
config = { image = "roder-sandbox:latest", sandbox = { network = "on" } }
[mcp_servers.docs]
url = "http://127.0.0.1:8000/mcp"
bearer_token_env_var = "DOCS_TOKEN"
tool_timeout_sec = 0.5
[sandbox]
mechanism = "bubblewrap"
env = { pass = ["CARGO_HOME"], set = { A = "1" } }
limits = { cpus = 1.5, max_processes = 10 }
"#,
        )
        .unwrap();
        let first = shown(home.path());
        assert!(first.contains("[sandbox.env.set]"), "{first}");
        let again = tempfile::tempdir().unwrap();
        std::fs::write(again.path().join("config.toml"), &first).unwrap();
        assert_eq!(shown(again.path()), first);
    }

    proptest::proptest! {
        #[test]
        fn labels_parse_or_are_refused_and_accepted_ones_rejoin(label in "\\PC{0,30}") {
            if let Ok(parsed) = ModelLabel::parse(&label) {
                proptest::prop_assert_eq!(format!("{}/{}", parsed.provider, parsed.model), label);
                proptest::prop_assert!(!parsed.provider.contains('/'));
            }
        }
    }
}
