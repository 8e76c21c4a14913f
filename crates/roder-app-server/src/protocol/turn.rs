//! `turn/*` and `tools/resolve`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnStartParams {
    pub thread_id: String,
    /// The user message.
    pub message: String,
    /// Image URLs or data URLs attached to the message.
    #[serde(default)]
    pub images: Vec<String>,
    /// Inference engine for this turn (default: the thread's).
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub reasoning: Option<ReasoningEffort>,
    /// For a thread without a runner: the local workspace root of this turn.
    #[serde(default)]
    pub workspace: Option<String>,
    /// System instructions (default: Roder's).
    #[serde(default)]
    pub instructions: Option<String>,
    #[serde(default)]
    pub developer_context: Option<String>,
    /// This turn's approval mode, over the thread's.
    #[serde(default)]
    pub policy_mode: Option<super::PolicyModeName>,
    /// W3C trace context: the turn's trace continues this one.
    #[serde(default)]
    pub traceparent: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Minimal,
    Low,
    Medium,
    High,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResult {
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

/// The client's answer to an `external_tool_call_requested` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsResolveParams {
    /// `request_id` of the `external_tool_call_requested` event.
    pub request_id: String,
    /// What the model reads as the tool's result.
    pub output: String,
    #[serde(default)]
    pub is_error: bool,
}
