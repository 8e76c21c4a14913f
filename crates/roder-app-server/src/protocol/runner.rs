//! `runners/*`: installed providers and the lifecycle of a thread's runner.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnersListParams {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnersListResult {
    pub runners: Vec<RunnerInfo>,
    /// Per backend, which protections of the server's sandbox policy are
    /// active on this machine, which are not, and why.
    pub sandbox: Vec<SandboxBackendStatus>,
}

/// One backend's protections (`roder sandbox status` shows the same).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxBackendStatus {
    pub backend: String,
    pub protections: Vec<SandboxProtection>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxProtection {
    /// What it protects: `filesystem writes`, `network`, `.git/hooks`, ...
    pub name: String,
    pub active: bool,
    /// By what it is enforced, or why it is not.
    pub detail: String,
}

/// An installed runner provider.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerInfo {
    pub provider_id: String,
    pub capabilities: RunnerCapabilities,
    /// What to set up before the provider is usable (never a secret).
    pub setup_hint: Option<String>,
    /// Workspace used when the provider is the server's default destination.
    pub default_workspace: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerCapabilities {
    pub command_exec: bool,
    pub file_read: bool,
    pub file_write: bool,
    pub port_preview: bool,
    pub snapshots: bool,
    pub cancellation: bool,
    pub artifact_export: bool,
    /// `runners/pause` works.
    pub pausable: bool,
    /// `runners/detach` and `runners/rejoin` work.
    pub detachable: bool,
    pub mounts: RunnerMountCapabilities,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerMountCapabilities {
    pub s3: bool,
    pub gcs: bool,
    pub r2: bool,
    pub azure_blob: bool,
    pub box_storage: bool,
    pub provider_native: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunnersRejoinParams {
    pub thread_id: String,
    /// Rejoin this sandbox instead of the one persisted with the thread.
    #[serde(default)]
    pub sandbox_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerStateResult {
    pub state: RunnerState,
}

/// A runner session as persisted with its thread.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerState {
    pub provider_id: String,
    pub session_id: String,
    pub destination_id: String,
    pub snapshot: Option<RunnerSnapshot>,
    pub metadata: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunnerSnapshot {
    pub provider_id: String,
    pub snapshot_id: String,
    pub metadata: Value,
}
