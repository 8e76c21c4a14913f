//! Tools from Model Context Protocol servers, through `rmcp`.
//!
//! A server is a child process speaking MCP on its stdin/stdout (started
//! supervised, in its own process group, with a small environment and its
//! stderr logged) or a streamable-HTTP endpoint (with a bearer token read
//! from a named variable). [`McpToolSource::start`] starts them all at once
//! and lists their tools; the source is a [`roder_api::tools::ToolContributor`]
//! that registers each tool as `mcp__SERVER__TOOL` with the server's input
//! schema. A call maps the server's answer to a tool result; a server that is
//! down is started again on the next call, and any failure is an error
//! result the model reads, never a failed turn. A server with
//! `placement = Placement::Runner` runs inside each runner-bound thread's
//! sandbox instead, started through the thread's runner session on its first
//! call ([`RunnerServer`]).
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use roder_ext_mcp::{McpServerConfig, McpToolSource};
//! let time = McpServerConfig::stdio("time", "mcp-server-time", &[]);
//! let source = McpToolSource::start(vec![time], std::path::Path::new(".")).await?;
//! let mut builder = roder_api::extension::ExtensionRegistryBuilder::new();
//! builder.tool_contributor(std::sync::Arc::new(source));
//! # Ok(()) }
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod config;
pub mod connection;
pub mod declaration;
pub mod names;
pub mod result;
mod runner_process;
pub mod runner_server;
pub mod source;
mod stdio;
pub mod thread_factory;
pub mod tool;
pub mod tool_cache;
mod trace;

pub use config::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, HttpServer, McpServerConfig, McpTransport,
    Placement, StdioServer, ToolFilter,
};
pub use connection::McpConnection;
pub use runner_server::RunnerServer;
pub use source::{McpToolSource, ServerStatus};
pub use stdio::BASE_ENV;
pub use thread_factory::McpThreadTools;
pub use tool::McpTool;
