//! What a running turn needs, resolved once when it starts.

use std::path::PathBuf;
use std::sync::Arc;

use crate::runner::deadline::TurnDeadline;
use crate::threads::{ActiveTurn, ThreadState};
use crate::writer::WriterGuard;
use roder_api::inference::{InferenceEngine, ReasoningEffort};
use roder_api::remote_runner::ThreadRunnerBinding;
use roder_api::tools::ToolSpec;

/// Where the turn's workspace tools run.
#[derive(Debug, Clone)]
pub(crate) enum TurnWorkspace {
    /// A directory on this host.
    Local(PathBuf),
    /// The thread's runner.
    Runner(ThreadRunnerBinding),
    /// Nowhere: the thread has no runner and local execution is disabled.
    Disabled,
}

pub(crate) struct TurnPlan {
    pub thread: Arc<ThreadState>,
    pub turn_id: String,
    pub active: ActiveTurn,
    pub engine: Arc<dyn InferenceEngine>,
    pub model: String,
    pub instructions: String,
    pub developer_context: Option<String>,
    pub reasoning: Option<ReasoningEffort>,
    pub workspace: TurnWorkspace,
    pub external_tools: Vec<ToolSpec>,
    /// Tools the client declared for this thread, as they were when the
    /// turn started.
    pub thread_tools: Arc<crate::thread_tools::ThreadTools>,
    pub thread_allowlist: Vec<String>,
    /// The turn's own approval mode (`TurnOptions`), over the thread's.
    pub mode_override: Option<roder_api::policy_mode::PolicyMode>,
    pub deadline: TurnDeadline,
    pub deadline_seconds: Option<u64>,
    /// The thread's profile `limits.max_tool_calls`: calls past it this turn
    /// get an error result.
    pub max_tool_calls: Option<u32>,
    /// Tool calls this turn has routed so far.
    pub tool_calls: std::sync::atomic::AtomicU32,
    pub parallel_tool_calls: bool,
    /// How the turn's local commands are confined (a runner session has its
    /// thread's policy from its destination config).
    pub sandbox: roder_api::sandbox_policy::SandboxPolicy,
    /// Tokens this turn's model requests used, whatever way it ends.
    pub usage: std::sync::Mutex<roder_api::inference::TokenUsage>,
    /// The thread's writer lease, held until the terminal event is written.
    pub writer: std::sync::Mutex<Option<WriterGuard>>,
    /// Events waiting to go out with the next one (`TurnContext::defer`).
    pub deferred: std::sync::Mutex<Vec<roder_api::events::RoderEvent>>,
}

impl TurnPlan {
    pub fn thread_id(&self) -> &str {
        &self.thread.thread_id
    }

    pub fn add_usage(&self, usage: &roder_api::inference::TokenUsage) {
        self.usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(usage);
    }

    pub fn usage(&self) -> roder_api::inference::TokenUsage {
        self.usage
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn take_writer(&self) -> Option<WriterGuard> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    pub fn defer(&self, event: roder_api::events::RoderEvent) {
        self.deferred
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(event);
    }

    pub fn take_deferred(&self) -> Vec<roder_api::events::RoderEvent> {
        std::mem::take(
            &mut *self
                .deferred
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The mode a call made now runs under: the turn's, else the thread's
    /// (read now, so a change applies to the next call), else `runtime`'s.
    pub fn mode_over(
        &self,
        runtime: roder_api::policy_mode::PolicyMode,
    ) -> roder_api::policy_mode::PolicyMode {
        self.mode_override
            .or(self.thread.approvals().mode)
            .unwrap_or(runtime)
    }

    /// The thread's rules, as they are now.
    pub fn thread_rules(&self) -> Arc<roder_api::approval::ThreadApprovals> {
        self.thread.approvals()
    }

    pub fn is_external_tool(&self, name: &str) -> bool {
        self.external_tools.iter().any(|tool| tool.name == name)
    }
}
