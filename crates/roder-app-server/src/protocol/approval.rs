//! Approvals on the wire: the mode and rules of a thread, the
//! server-to-client `approval/request`, its answer, and the
//! `approval/resolved` notification.
//!
//! A connection that says `capabilities: {approvals: true}` in `initialize`
//! answers the asks of every thread it follows (`thread/start`,
//! `thread/resume`, `thread/fork`): each ask reaches it as an
//! `approval/request` request (after the `approval_requested` event), also
//! when it subscribes while the ask is pending. Its result is an
//! [`ApprovalResult`]. With several approvers the first answer wins; every
//! approver gets `approval/resolved` once it is settled, however it was.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Server to client: decide one call.
pub const APPROVAL_REQUEST: &str = "approval/request";
/// Server to client: an ask was settled (by anyone, or by a timeout, an
/// interrupt, a rule).
pub const APPROVAL_RESOLVED: &str = "approval/resolved";

/// Which calls run without asking (see the README's approvals section).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PolicyModeName {
    /// Only reading tools are offered.
    Plan,
    /// Reads run; every edit and command asks.
    Default,
    /// Reads and edits inside the workspace run; commands ask.
    AcceptEdits,
    /// Nothing asks (the sandbox and deny rules still hold).
    Bypass,
}

/// A person's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionName {
    AllowOnce,
    /// Run it, and keep `rules` as allow rules of the thread.
    AllowThread,
    /// Run it, and keep `rules` as allow rules in the server's config.toml.
    AllowAlways,
    Reject,
    /// Do not run it, and keep `rules` as deny rules in the server's config.
    RejectAlways,
    /// Do not run it, and end the turn as interrupted.
    RejectAndStop,
}

/// Whether a thread's asks wait for an approver to attach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalRequirementName {
    /// With no approver following the thread, the server's
    /// `[approvals] no_approver` decides at once.
    #[default]
    Optional,
    /// Asks wait (up to the timeout) for an approver to follow the thread.
    Required,
}

/// Allow and deny rules: `exec:git status`, `write:docs/**`, `tool:NAME`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalRulesInfo {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
}

/// A thread's approval settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadApprovalsInfo {
    /// The thread's own mode (`null`: the server's).
    pub mode: Option<PolicyModeName>,
    /// The mode its next turn runs under unless the turn names one.
    pub effective_mode: PolicyModeName,
    pub requirement: ApprovalRequirementName,
    /// The thread's own rules (the server's apply too).
    pub rules: ApprovalRulesInfo,
}

/// `thread/setMode`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadSetModeParams {
    pub thread_id: String,
    /// `null` clears the thread's own mode (the server's then applies).
    pub mode: Option<PolicyModeName>,
}

/// The params of `approval/request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalRequestParams {
    pub thread_id: String,
    pub turn_id: String,
    pub approval_id: String,
    /// The model's id of the call (as in `tool_call_requested`).
    pub call_id: String,
    pub tool_name: String,
    /// What the tool declares it does: `read`, `search`, `write`,
    /// `delete`, `move`, `execute`, `network`.
    pub effects: Vec<String>,
    /// One word for the call (`read`, `edit`, `execute`, ... as in ACP).
    pub kind: String,
    pub preview: ApprovalPreview,
    /// What `allow_thread`, `allow_always` and `reject_always` keep; empty
    /// when no rule can describe the call (they then act once).
    pub rules: Vec<String>,
    /// RFC 3339: when the call is rejected if nobody answers.
    pub expires_at: String,
}

/// The call as it would happen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalPreview {
    pub summary: String,
    pub command: Option<CommandPreviewInfo>,
    pub files: Vec<FilePreviewInfo>,
    pub arguments: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandPreviewInfo {
    pub command: String,
    pub cwd: String,
    /// `host`, or `runner` with `providerId` and `sessionId` (a container).
    pub runs_on: RunsOnInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunsOnInfo {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FilePreviewInfo {
    /// Absolute, where the file will be written.
    pub path: String,
    /// Unified diff.
    pub diff: String,
    /// Whole texts when small (`null`: absent, or too large to carry).
    pub old_text: Option<String>,
    pub new_text: Option<String>,
}

/// The result of `approval/request`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalResult {
    pub decision: DecisionName,
    /// Passed to the model with a rejection.
    #[serde(default)]
    pub message: Option<String>,
}

/// The params of `approval/resolved`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResolvedParams {
    pub thread_id: String,
    pub approval_id: String,
    pub call_id: String,
    pub decision: DecisionName,
    /// Who settled it: `{kind: "client", clientId}`, `{kind: "rule",
    /// rule}`, `{kind: "timeout"}`, `{kind: "interrupt"}`, ...
    pub by: Value,
}

/// What a client can do, said in `initialize`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientCapabilities {
    /// This client answers `approval/request` for the threads it follows.
    #[serde(default)]
    pub approvals: bool,
}
