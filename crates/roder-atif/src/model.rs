//! The ATIF documents this crate writes: the subset of Harbor's pydantic
//! models (`harbor.models.trajectories`, ATIF-v1.7) that a Roder thread
//! fills. Every model there forbids unknown fields, so these structs have
//! no others, and leave out what is `None` as Harbor's own writer does.

use serde::Serialize;
use serde_json::{Map, Value};

/// The version this crate writes: the first with `llm_call_count` and
/// `extra` on tool calls and observation results.
pub const SCHEMA_VERSION: &str = "ATIF-v1.7";

/// A whole trajectory: one Roder thread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trajectory {
    pub schema_version: &'static str,
    /// The thread id.
    pub session_id: String,
    pub agent: Agent,
    /// Numbered 1, 2, 3, ... without gaps.
    pub steps: Vec<Step>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
    pub final_metrics: FinalMetrics,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agent {
    pub name: String,
    pub version: String,
    /// `provider/model` of the thread's first turn.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
}

/// Who a step comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    System,
    User,
    Agent,
}

/// One step. `model_name`, `reasoning_content`, `tool_calls` and `metrics`
/// are for agent steps only (Harbor rejects them elsewhere).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub step_id: usize,
    /// RFC 3339, which Python's `datetime.fromisoformat` reads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    pub source: Source,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub observation: Option<Observation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<Metrics>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_copied_context: Option<bool>,
    /// 1 for a step that is one model request; absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub llm_call_count: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub tool_call_id: String,
    pub function_name: String,
    /// ATIF wants an object: arguments that are not a JSON object (cut
    /// off, or a bare value) are kept as `{"raw": TEXT}`.
    pub arguments: Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    pub results: Vec<ObservationResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObservationResult {
    /// A `tool_call_id` of the same step; `None` for a result whose call
    /// is not in the log (kept in a system step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_call_id: Option<String>,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

/// One model request's tokens.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metrics {
    /// Input tokens, cached ones included (as Roder counts them).
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FinalMetrics {
    pub total_prompt_tokens: u64,
    pub total_completion_tokens: u64,
    pub total_cached_tokens: u64,
    pub total_steps: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub extra: Option<Map<String, Value>>,
}
