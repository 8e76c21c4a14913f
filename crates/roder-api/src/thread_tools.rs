//! Tools a client declares for one thread, such as the MCP servers of an app
//! server's `thread/start {mcpServers}`.
//!
//! The runtime's [`ToolRegistry`](crate::tools::ToolRegistry) is fixed when
//! the runtime is built; a client that brings its own tool sources for one
//! thread hands a declaration to a [`ThreadToolFactory`] instead. The factory
//! starts them and gives back their executors; the runtime offers those to
//! that thread only, for as long as this process holds them (they are live
//! state: never persisted, since a declaration can hold secrets).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::tools::ToolExecutor;

/// The id of the factory that starts MCP servers (`roder-ext-mcp`).
pub const MCP_SERVERS: &str = "mcp_servers";

/// What a client's declaration may run on Roder's own host. The runtime
/// decides it from the thread and its policy; the factory refuses what it
/// does not allow, so a thread that must not touch the host never does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HostAccess {
    /// The thread's own commands run unconfined on this host (sandbox mode
    /// `none`): a host process the client declares is no wider than them.
    Unconfined,
    /// The thread's commands are confined on this host; a client-declared
    /// host process would not be, so it is refused.
    Confined,
    /// The thread never touches this host (it is bound to a runner, or
    /// local execution is disabled).
    Forbidden,
}

impl HostAccess {
    /// Why a client-declared host process may not start, `None` if it may.
    ///
    /// ```
    /// use roder_api::thread_tools::HostAccess;
    ///
    /// assert!(HostAccess::Unconfined.refusal().is_none());
    /// assert!(HostAccess::Forbidden.refusal().unwrap().contains("never touches this host"));
    /// ```
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            HostAccess::Unconfined => None,
            HostAccess::Confined => Some(
                "this thread's host commands are confined by the sandbox policy and a \
                 client-declared host server would not be; declare it with placement \
                 \"runner\", or in the operator's config",
            ),
            HostAccess::Forbidden => Some(
                "this thread never touches this host (it runs in a runner, or local \
                 execution is disabled); declare it with placement \"runner\"",
            ),
        }
    }
}

/// One declaration, for one thread.
#[derive(Debug, Clone)]
pub struct ThreadToolRequest {
    pub thread_id: String,
    /// The thread's local workspace: where a host process starts by default.
    pub workspace: PathBuf,
    pub host: HostAccess,
    /// The client's declaration, as the factory documents it.
    pub declaration: serde_json::Value,
}

/// What a factory started: the executors to offer the thread and the state
/// of each source (a source that failed to start is a state, not an error).
#[derive(Clone, Default)]
pub struct StartedThreadTools {
    pub tools: Vec<Arc<dyn ToolExecutor>>,
    pub sources: Vec<ToolSourceStatus>,
}

/// How one declared source came up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolSourceStatus {
    pub name: String,
    pub state: ToolSourceState,
    /// The names of the tools offered for it (prefixed, as the model sees them).
    pub tools: Vec<String>,
    /// Why it is not ready (never a secret: no environment values, no stderr).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolSourceState {
    /// Started and listed its tools.
    Ready,
    /// Did not start; its tools (if any are known) answer error results or
    /// try again.
    Failed,
    /// Starts in the thread's runner on the first call of one of its tools.
    InRunner,
}

/// Starts the tool sources a client declares for one thread.
///
/// ```
/// use roder_api::thread_tools::{StartedThreadTools, ThreadToolFactory, ThreadToolRequest};
///
/// struct Nothing;
///
/// #[async_trait::async_trait]
/// impl ThreadToolFactory for Nothing {
///     fn id(&self) -> String {
///         "nothing".into()
///     }
///     fn check(&self, declaration: &serde_json::Value) -> anyhow::Result<()> {
///         anyhow::ensure!(declaration.is_null(), "nothing takes no declaration");
///         Ok(())
///     }
///     async fn start(&self, _request: ThreadToolRequest) -> anyhow::Result<StartedThreadTools> {
///         Ok(StartedThreadTools::default())
///     }
/// }
/// ```
#[async_trait::async_trait]
pub trait ThreadToolFactory: Send + Sync {
    /// Which declarations it reads ([`MCP_SERVERS`], ...).
    fn id(&self) -> String;

    /// Whether `declaration` is well formed, without starting anything, so
    /// a client's mistake is refused before its thread exists.
    fn check(&self, declaration: &serde_json::Value) -> anyhow::Result<()>;

    /// Starts what `request` declares. An error is a declaration that cannot
    /// be honoured at all; a source that fails to start is a
    /// [`ToolSourceState::Failed`] entry instead.
    async fn start(&self, request: ThreadToolRequest) -> anyhow::Result<StartedThreadTools>;
}
