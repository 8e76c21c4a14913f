//! One MCP tool as a Roder tool: its spec is the server's, under its
//! `mcp__SERVER__TOOL` name; a call goes to the server's shared connection.

use std::sync::Arc;

use roder_api::approval::ToolEffects;
use roder_api::tools::{
    ToolCall, ToolExecutionContext, ToolExecutor, ToolResult, ToolSpec, ToolWorkspace,
};

use crate::connection::{CallFailure, McpConnection};
use crate::result::tool_result;
use crate::runner_server::RunnerServer;

pub struct McpTool {
    /// The server's connection (for a runner-placed server: one that is
    /// never started, only its configuration is read).
    connection: Arc<McpConnection>,
    /// `placement = "runner"`: the per-session connections a call picks from.
    runner: Option<Arc<RunnerServer>>,
    /// The server's own name for the tool.
    tool: String,
    spec: ToolSpec,
    /// The server's `readOnlyHint` for it.
    read_only_hint: bool,
}

impl McpTool {
    /// A tool of the server behind `connection` that the model calls as
    /// `spec.name`. `parameters` without `"type": "object"` gets it: every
    /// model API wants an object schema for a function's arguments.
    pub fn new(connection: Arc<McpConnection>, tool: String, mut spec: ToolSpec) -> Self {
        if let Some(schema) = spec.parameters.as_object_mut() {
            schema
                .entry("type")
                .or_insert_with(|| serde_json::Value::String("object".into()));
        } else {
            spec.parameters = serde_json::json!({"type": "object"});
        }
        Self {
            connection,
            runner: None,
            tool,
            spec,
            read_only_hint: false,
        }
    }

    /// Records the server's `readOnlyHint` for this tool. It only counts
    /// when the server is marked trusted ([`McpTool::effects`]).
    pub fn read_only(mut self, hint: bool) -> Self {
        self.read_only_hint = hint;
        self
    }

    /// A tool of a `placement = "runner"` server: each call goes to the
    /// server running in the calling thread's runner session.
    pub fn in_runner(server: Arc<RunnerServer>, tool: String, spec: ToolSpec) -> Self {
        let template = Arc::new(McpConnection::new(
            server.config().clone(),
            std::path::PathBuf::new(),
        ));
        let mut this = Self::new(template, tool, spec);
        this.runner = Some(server);
        this
    }

    pub fn server_tool_name(&self) -> &str {
        &self.tool
    }

    pub fn connection(&self) -> &Arc<McpConnection> {
        &self.connection
    }

    fn error(&self, call: &ToolCall, message: impl std::fmt::Display) -> ToolResult {
        let server = &self.connection.config().name;
        let mut result = ToolResult::error(
            call,
            format!("MCP server \"{server}\", tool \"{}\": {message}", self.tool),
        );
        result.data = serde_json::json!({"mcp_server": server, "mcp_tool": self.tool});
        result
    }
}

#[async_trait::async_trait]
impl ToolExecutor for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    /// A runner-placed server's tools get the thread's runner session.
    fn runs_in_workspace(&self) -> bool {
        self.runner.is_some()
    }

    /// Only reads when its server is marked trusted and says so with
    /// `readOnlyHint`: a server's hints are its own claims, so an untrusted
    /// server's tools count as writing and running commands, and ask.
    fn effects(&self) -> ToolEffects {
        if self.connection.config().trusted && self.read_only_hint {
            ToolEffects::READ
        } else {
            ToolEffects::UNDECLARED
        }
    }

    async fn execute(
        &self,
        ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        let arguments = match &call.arguments {
            serde_json::Value::Object(arguments) => Some(arguments.clone()),
            serde_json::Value::Null => None,
            other => {
                return Ok(self.error(
                    &call,
                    format!("the arguments must be a JSON object, not {other}"),
                ));
            }
        };
        let mut timeout = self.connection.config().call_timeout;
        if let Some(remaining) = ctx.remaining_deadline() {
            timeout = timeout.min(remaining);
        }
        let server = self.connection.config().name.clone();
        let connection = match (&self.runner, &ctx.workspace) {
            (None, _) => self.connection.clone(),
            (Some(runner), ToolWorkspace::Remote(remote)) => runner.connection_for(&remote.session),
            (Some(_), _) => {
                return Ok(self.error(
                    &call,
                    "the server runs in the thread's runner (placement = \"runner\"), and this thread has no runner",
                ));
            }
        };
        tokio::select! {
            outcome = connection.call(&self.tool, arguments, timeout) => Ok(match outcome {
                Ok(result) => tool_result(&call, &server, &self.tool, result),
                Err(failure) => {
                    let start_failed = matches!(failure, CallFailure::Start(_));
                    let mut result = self.error(&call, failure);
                    // The result is published as the call's completion
                    // event: a client tells a server that did not start
                    // from a tool that failed.
                    if start_failed {
                        result.data["mcp_start_failed"] = serde_json::Value::Bool(true);
                    }
                    result
                }
            }),
            // Dropping the call future tells the server to cancel it.
            () = ctx.cancellation.cancelled() => Ok(self.error(&call, "cancelled: the turn was interrupted")),
        }
    }
}
