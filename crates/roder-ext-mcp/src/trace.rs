//! An MCP tool call's own span, under the tool span the runtime opened
//! (`execute_tool mcp__NAME__TOOL`): what the call to the server cost,
//! server start included, apart from the runtime's share. Named and
//! attributed after OpenTelemetry's MCP conventions (`tools/call TOOL`,
//! `mcp.method.name`, `network.transport`); exported with the runtime's
//! spans (target `roder::trace`). No arguments or results are recorded.

use rmcp::model::CallToolResult;
use tracing::Span;
use tracing::field::Empty;

use crate::config::{McpServerConfig, McpTransport};
use crate::connection::CallFailure;

/// The span of one `tools/call` of `tool` (the server's own name for it).
pub(crate) fn call_span(config: &McpServerConfig, tool: &str) -> Span {
    let transport = match &config.transport {
        McpTransport::Stdio(_) => "pipe",
        McpTransport::Http(_) => "tcp",
    };
    tracing::info_span!(
        target: "roder::trace",
        "mcp_call",
        otel.name = format!("tools/call {tool}"),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = "tools/call",
        gen_ai.tool.name = tool,
        roder.mcp.server = config.name.as_str(),
        network.transport = transport,
    )
}

/// Marks the span failed when the call did not get an answer, or the
/// server answered with an error result.
pub(crate) fn answered(span: &Span, outcome: &Result<CallToolResult, CallFailure>) {
    let failure = match outcome {
        Ok(result) if result.is_error == Some(true) => {
            Some("the tool answered with an error".to_string())
        }
        Ok(_) => None,
        Err(failure) => Some(failure.to_string()),
    };
    if let Some(description) = failure {
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", description.as_str());
    }
}
