//! One MCP tool as a Roder tool: its spec is the server's, under its
//! `mcp__SERVER__TOOL` name; a call goes to the server's shared connection.

use std::sync::Arc;

use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor, ToolResult, ToolSpec};

use crate::connection::McpConnection;
use crate::result::tool_result;

pub struct McpTool {
    connection: Arc<McpConnection>,
    /// The server's own name for the tool.
    tool: String,
    spec: ToolSpec,
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
            tool,
            spec,
        }
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
        tokio::select! {
            outcome = self.connection.call(&self.tool, arguments, timeout) => Ok(match outcome {
                Ok(result) => tool_result(&call, &server, &self.tool, result),
                Err(failure) => self.error(&call, failure),
            }),
            // Dropping the call future tells the server to cancel it.
            () = ctx.cancellation.cancelled() => Ok(self.error(&call, "cancelled: the turn was interrupted")),
        }
    }
}
