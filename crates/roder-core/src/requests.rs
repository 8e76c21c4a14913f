//! Inputs and outputs of the runtime's public methods.

use roder_api::events::EventEnvelope;
use roder_api::inference::ReasoningEffort;
use roder_api::tools::ToolSpec;

/// A new thread. Fields the runtime does not support (`workspace_id`,
/// `root_id`, `selection_mode`) are rejected when set.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateThreadRequest {
    pub title: Option<String>,
    /// Local workspace directory (for unbound threads).
    pub workspace: String,
    pub workspace_id: Option<String>,
    pub root_id: Option<String>,
    /// Inference engine id; defaults to the runtime's.
    pub provider: Option<String>,
    pub model: Option<String>,
    pub selection_mode: Option<String>,
    /// When non-empty, the only tools this thread may use.
    pub tool_allowlist: Vec<String>,
    pub developer_instructions: Option<String>,
    /// Tools the client declares and resolves itself
    /// (`Runtime::resolve_external_tool_call`).
    pub external_tools: Vec<ToolSpec>,
    /// Runs the thread's workspace tools in a runner.
    pub runner: Option<ThreadRunnerSelection>,
}

impl CreateThreadRequest {
    /// A plain thread in `workspace` with every other field at its default.
    pub fn in_workspace(workspace: impl Into<String>) -> Self {
        Self {
            title: None,
            workspace: workspace.into(),
            workspace_id: None,
            root_id: None,
            provider: None,
            model: None,
            selection_mode: None,
            tool_allowlist: Vec::new(),
            developer_instructions: None,
            external_tools: Vec::new(),
            runner: None,
        }
    }
}

/// The runner a thread is bound to. Persisted with the thread: `config` must
/// not hold secrets (providers read credentials from their environment).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadRunnerSelection {
    pub provider_id: String,
    pub config: serde_json::Value,
    /// Absolute runner path that is the thread's workspace root.
    pub workspace: String,
    /// Extra absolute runner paths reads may resolve under.
    pub read_roots: Vec<String>,
}

/// One user message to run as a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct StartTurnRequest {
    pub thread_id: String,
    pub message: String,
    /// Image URLs or data URLs attached to the message.
    pub images: Vec<String>,
    pub provider_override: Option<String>,
    pub model_override: Option<String>,
    pub reasoning_override: Option<ReasoningEffort>,
    /// The client's working directory. For a thread without a runner, a
    /// non-empty value is the local workspace root of this turn.
    pub workspace: String,
    /// System instructions (see `default_instructions`).
    pub instructions: String,
    pub developer_context: Option<String>,
    /// Not supported; must be false.
    pub task_ledger_required: bool,
}

impl StartTurnRequest {
    /// A turn with default instructions and nothing overridden.
    pub fn new(thread_id: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            thread_id: thread_id.into(),
            message: message.into(),
            images: Vec::new(),
            provider_override: None,
            model_override: None,
            reasoning_override: None,
            workspace: String::new(),
            instructions: crate::default_instructions(),
            developer_context: None,
            task_ledger_required: false,
        }
    }
}

/// What a turn sets beyond its [`StartTurnRequest`] (whose fields are
/// fixed): `Runtime::start_turn_with`.
///
/// ```
/// use roder_api::policy_mode::PolicyMode;
/// use roder_core::TurnOptions;
///
/// let options = TurnOptions { policy_mode: Some(PolicyMode::Plan), traceparent: None };
/// assert_ne!(options, TurnOptions::default());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnOptions {
    /// This turn's approval mode, over the thread's and the runtime's.
    pub policy_mode: Option<roder_api::policy_mode::PolicyMode>,
    /// A client's W3C `traceparent`: the turn's trace continues it.
    pub traceparent: Option<String>,
}

/// The client's answer to an `ExternalToolCallRequested` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalToolResolution {
    pub output: String,
    pub is_error: bool,
}

/// Events of one thread after a cursor.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadEventsPage {
    pub events: Vec<EventEnvelope>,
    /// Pass this back to read what comes next (the last `seq` returned, or the
    /// cursor given when nothing was new).
    pub next_cursor: u64,
}
