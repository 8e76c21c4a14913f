//! Runtime configuration and its validation.
//!
//! Every field exists because clients set it. A field the runtime does not act
//! on is rejected by [`RuntimeConfig::validate`] when it differs from its
//! default, with an error naming it: a setting is never silently ignored.

use std::collections::HashMap;
use std::path::PathBuf;

use roder_api::catalog::{MODEL_MOCK, PROVIDER_MOCK};
use roder_api::command_shell::CommandShell;
use roder_api::inference::{
    HostedWebSearchConfig, ReasoningEffort, ReliabilityConfig, RuntimeProfile,
};
use roder_api::policy_mode::PolicyMode;
use roder_api::remote_runner::RunnerDestination;
use serde::{Deserialize, Serialize};

/// Latency/quality trade-off for model selection. Only `Standard` exists today.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeedPolicy {
    #[default]
    Standard,
    Fast,
}

/// Multi-agent workflows planned by the model. Not supported yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DynamicWorkflowsConfig {
    pub enabled: bool,
}

/// Smallest `auto_compact_token_limit`: below it the instructions and tool
/// specs alone leave no room for a conversation.
pub const MIN_COMPACT_TOKEN_LIMIT: u64 = 2_000;

#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeConfig {
    /// Inference engine id used when a thread or turn names none.
    pub default_provider: String,
    pub default_model: String,
    pub reasoning: Option<ReasoningEffort>,
    /// Estimated tokens (request bytes / 4) past which the next request of a
    /// turn compacts the thread first. Unset: 80% of the model's context
    /// window when its engine's `list_models` reports one, else never.
    pub auto_compact_token_limit: Option<u64>,
    /// Largest tool output sent to the model, in bytes: a longer one keeps
    /// its head and tail and states the cut. The log keeps outputs whole.
    pub tool_output_cap_bytes: usize,
    /// Read `AGENTS.md` from a local workspace root into the developer context
    /// of every model request.
    pub file_backed_dynamic_context: bool,
    pub hosted_web_search: HostedWebSearchConfig,
    /// Not supported: per-model edit tool variants.
    pub model_edit_tools: HashMap<String, String>,
    /// Per model: whether the model may call tools in parallel (unset: yes).
    pub model_parallel_tool_calls: HashMap<String, bool>,
    /// Not supported: per-model request profiles.
    pub model_profiles: HashMap<String, serde_json::Value>,
    /// When non-empty, the only tools any thread may use.
    pub tool_allowlist: Vec<String>,
    pub command_shell: CommandShell,
    /// Local workspace of threads created without one.
    pub workspace: Option<String>,
    pub policy_mode: PolicyMode,
    pub runtime_profile: RuntimeProfile,
    /// Only `SpeedPolicy::Standard` is supported.
    pub speed_policy: SpeedPolicy,
    /// Not supported.
    pub dynamic_workflows: DynamicWorkflowsConfig,
    /// Retry policy handed to inference engines.
    pub reliability: ReliabilityConfig,
    /// Wall-clock bound of one turn.
    pub turn_deadline_seconds: Option<u64>,
    /// Runner that new threads bind to when a workspace is known for it.
    pub remote_runner_destination: Option<RunnerDestination>,
    /// Not supported.
    pub team_data_dir: Option<PathBuf>,
    /// Not supported.
    pub roadmap_data_dir: Option<PathBuf>,
    /// Whether threads without a runner may run workspace tools on this host
    /// (the initial value of `Runtime::set_allow_local_workspaces`). Hosted
    /// deployments set it to false so nothing ever touches the host.
    pub allow_local_workspaces: bool,
    /// Events the broadcast bus buffers per subscriber. Memory is allocated
    /// up front (a few hundred bytes a slot); a subscriber that falls further
    /// behind gets `RecvError::Lagged` and catches up from the persisted log
    /// (`Runtime::read_thread_events`).
    pub event_buffer_capacity: usize,
    /// How long a thread's writer lease lasts without renewal, for stores
    /// whose leases expire (a shared database). The runtime renews it every
    /// third of this while it writes; a file-lock store ignores it.
    pub writer_lease_ttl: std::time::Duration,
    /// How commands are confined unless a thread or its runner destination
    /// says otherwise (default: enforced, network off).
    pub sandbox: roder_api::sandbox_policy::SandboxPolicy,
    /// Environment variables that hold a configured provider's credential
    /// (an engine's `api_key_env`). Never passed to a command, in addition
    /// to [`KNOWN_CREDENTIAL_VARS`](roder_api::sandbox_policy::KNOWN_CREDENTIAL_VARS).
    pub credential_vars: Vec<String>,
    /// Rules, the ask timeout and what happens with nobody to ask.
    pub approvals: ApprovalsConfig,
    /// Whether traces carry prompts, model outputs, tool arguments and
    /// outputs (`[telemetry] capture_content`). Off: spans carry names,
    /// ids, counts and timings only.
    pub telemetry_capture_content: bool,
    /// Runners by name (`config.toml`'s `[runners.NAME]`), for a profile
    /// whose `runner` names one: a thread created with that profile and no
    /// runner of its own binds to it.
    pub named_runners: std::collections::BTreeMap<String, crate::requests::ThreadRunnerSelection>,
    /// Checkpoints kept per thread (`[checkpoints] keep_turns`): every that
    /// many new checkpoints of a thread, the older ones are collected in
    /// the background. `None`: only [`Runtime::collect_checkpoints`]
    /// (`roder gc`) and deleting the thread remove them.
    pub checkpoint_keep_turns: Option<usize>,
}

/// `[approvals]`: the runtime's rules and how asks behave.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalsConfig {
    /// Allow and deny rules for every thread (deny beats allow and every
    /// mode).
    pub rules: roder_api::approval::ApprovalRules,
    /// How long an ask waits for an answer before the call is rejected.
    pub timeout: std::time::Duration,
    /// What a call that would ask does when no approver is attached.
    pub no_approver: roder_api::approval::NoApprover,
}

impl Default for ApprovalsConfig {
    fn default() -> Self {
        Self {
            rules: Default::default(),
            timeout: std::time::Duration::from_secs(600),
            no_approver: Default::default(),
        }
    }
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            default_provider: PROVIDER_MOCK.to_string(),
            default_model: MODEL_MOCK.to_string(),
            reasoning: None,
            auto_compact_token_limit: None,
            tool_output_cap_bytes: 32 * 1024,
            file_backed_dynamic_context: true,
            hosted_web_search: HostedWebSearchConfig::disabled(),
            model_edit_tools: HashMap::new(),
            model_parallel_tool_calls: HashMap::new(),
            model_profiles: HashMap::new(),
            tool_allowlist: Vec::new(),
            command_shell: CommandShell::default(),
            workspace: None,
            policy_mode: PolicyMode::Default,
            runtime_profile: RuntimeProfile::Interactive,
            speed_policy: SpeedPolicy::Standard,
            dynamic_workflows: DynamicWorkflowsConfig::default(),
            reliability: ReliabilityConfig::default(),
            turn_deadline_seconds: None,
            remote_runner_destination: None,
            team_data_dir: None,
            roadmap_data_dir: None,
            allow_local_workspaces: true,
            event_buffer_capacity: 4_096,
            writer_lease_ttl: std::time::Duration::from_secs(30),
            sandbox: Default::default(),
            credential_vars: Vec::new(),
            approvals: ApprovalsConfig::default(),
            telemetry_capture_content: false,
            named_runners: Default::default(),
            checkpoint_keep_turns: None,
        }
    }
}

impl RuntimeConfig {
    /// Every variable a command must never see: the known credential
    /// variables and the configured ones.
    pub fn all_credential_vars(&self) -> Vec<String> {
        let mut vars: Vec<String> = roder_api::sandbox_policy::KNOWN_CREDENTIAL_VARS
            .iter()
            .map(|name| name.to_string())
            .chain(self.credential_vars.iter().cloned())
            .collect();
        vars.sort();
        vars.dedup();
        vars
    }

    /// Rejects settings the runtime would otherwise ignore, naming each one.
    pub fn validate(&self) -> anyhow::Result<()> {
        let mut unsupported = Vec::new();
        if !self.model_edit_tools.is_empty() {
            unsupported.push("model_edit_tools");
        }
        if !self.model_profiles.is_empty() {
            unsupported.push("model_profiles");
        }
        if self.speed_policy != SpeedPolicy::Standard {
            unsupported.push("speed_policy");
        }
        if self.dynamic_workflows != DynamicWorkflowsConfig::default() {
            unsupported.push("dynamic_workflows");
        }
        if self.team_data_dir.is_some() {
            unsupported.push("team_data_dir");
        }
        if self.roadmap_data_dir.is_some() {
            unsupported.push("roadmap_data_dir");
        }
        if !unsupported.is_empty() {
            anyhow::bail!(
                "{} {} not supported; leave {} at the default",
                unsupported.join(", "),
                if unsupported.len() == 1 { "is" } else { "are" },
                if unsupported.len() == 1 { "it" } else { "them" },
            );
        }
        if self.command_shell.program.trim().is_empty() {
            anyhow::bail!("command_shell.program is empty; set a shell such as \"sh\"");
        }
        if self.writer_lease_ttl < std::time::Duration::from_secs(1) {
            anyhow::bail!("writer_lease_ttl must be at least 1 second");
        }
        if self
            .auto_compact_token_limit
            .is_some_and(|limit| limit < MIN_COMPACT_TOKEN_LIMIT)
        {
            anyhow::bail!(
                "auto_compact_token_limit must be at least {MIN_COMPACT_TOKEN_LIMIT} tokens (or unset for 80% of the model's context window)"
            );
        }
        if self.tool_output_cap_bytes < 1_024 {
            anyhow::bail!("tool_output_cap_bytes must be at least 1024");
        }
        if self.event_buffer_capacity == 0 {
            anyhow::bail!("event_buffer_capacity must be at least 1");
        }
        if self.reliability.max_attempts == 0 {
            anyhow::bail!("reliability.max_attempts must be at least 1");
        }
        if self.approvals.timeout.is_zero() {
            anyhow::bail!("approvals.timeout must be at least 1 second");
        }
        if self.turn_deadline_seconds == Some(0) {
            anyhow::bail!("turn_deadline_seconds must be at least 1 (or unset for no deadline)");
        }
        Ok(())
    }

    /// Whether `model` may call several tools in one response.
    pub fn parallel_tool_calls_allowed(&self, model: &str) -> bool {
        self.model_parallel_tool_calls
            .get(model)
            .copied()
            .unwrap_or(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        RuntimeConfig::default().validate().unwrap();
    }

    #[test]
    fn unsupported_fields_are_named() {
        let config = RuntimeConfig {
            team_data_dir: Some(PathBuf::from("/tmp/team")),
            ..RuntimeConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("team_data_dir is not supported"), "{error}");

        let config = RuntimeConfig {
            model_profiles: HashMap::from([("m".to_string(), serde_json::json!({}))]),
            speed_policy: SpeedPolicy::Fast,
            dynamic_workflows: DynamicWorkflowsConfig { enabled: true },
            model_edit_tools: HashMap::from([("m".to_string(), "patch".to_string())]),
            roadmap_data_dir: Some(PathBuf::from("/r")),
            ..RuntimeConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        for field in [
            "model_edit_tools",
            "model_profiles",
            "speed_policy",
            "dynamic_workflows",
            "roadmap_data_dir",
        ] {
            assert!(error.contains(field), "{field} missing from: {error}");
        }
        assert!(error.contains("are not supported"));
    }

    #[test]
    fn parallel_tool_calls_default_to_allowed() {
        let mut config = RuntimeConfig::default();
        assert!(config.parallel_tool_calls_allowed("any"));
        config
            .model_parallel_tool_calls
            .insert("serial".to_string(), false);
        assert!(!config.parallel_tool_calls_allowed("serial"));
    }

    #[test]
    fn a_compaction_limit_is_supported_above_its_minimum() {
        let config = RuntimeConfig {
            auto_compact_token_limit: Some(100_000),
            ..RuntimeConfig::default()
        };
        config.validate().unwrap();
        let config = RuntimeConfig {
            auto_compact_token_limit: Some(10),
            ..RuntimeConfig::default()
        };
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("auto_compact_token_limit must be at least"),
            "{error}"
        );
    }

    #[test]
    fn zero_deadline_is_rejected() {
        let config = RuntimeConfig {
            turn_deadline_seconds: Some(0),
            ..RuntimeConfig::default()
        };
        assert!(
            config
                .validate()
                .unwrap_err()
                .to_string()
                .contains("turn_deadline_seconds")
        );
    }
}
