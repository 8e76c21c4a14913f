//! Installs the configured MCP servers' tools into a runtime being built.
//!
//! The runtime's tool registry is fixed when it is built, and a server's
//! tools are known only once it has started and listed them, so the servers
//! start here, before the runtime, within their start-up timeouts (all at
//! once). `wiring::runtime` is synchronous, so this waits with
//! `block_in_place`: the worker thread hands its other tasks to the rest of
//! the pool while it waits, so nothing else stalls. A server that does not
//! start is a warning on stderr and error results for its tools (those it
//! listed last time, kept in `$RODER_HOME/mcp-tools/`, or its
//! `enabled_tools`), never a failed command.

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ExtensionRegistryBuilder;
use roder_ext_mcp::{McpThreadTools, McpToolSource, ServerStatus};

use crate::config::Settings;

/// Starts `settings`' MCP servers and adds their tools to `builder`. Stdio
/// servers start in `workspace` unless they name a `cwd`. Also installs the
/// factory of servers a client declares per thread (`thread/start
/// {mcpServers}` of the app server), sharing the tool-list cache.
pub fn install(
    builder: &mut ExtensionRegistryBuilder,
    settings: &Settings,
    workspace: &Path,
) -> anyhow::Result<()> {
    let cache = settings.home.join("mcp-tools");
    builder.thread_tool_factory(Arc::new(McpThreadTools::new(Some(cache.clone()))));
    if settings.mcp_servers.is_empty() {
        return Ok(());
    }
    let handle = tokio::runtime::Handle::try_current().map_err(|_| {
        anyhow::anyhow!("MCP servers are started from the async runtime; none is running")
    })?;
    if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
        anyhow::bail!("MCP servers need the multi-threaded async runtime to start");
    }
    let servers = settings.mcp_servers.clone();
    let source = tokio::task::block_in_place(|| {
        handle.block_on(McpToolSource::start_with_cache(
            servers,
            workspace,
            Some(&cache),
        ))
    })?;
    report(&source);
    builder.tool_contributor(Arc::new(source));
    Ok(())
}

/// One stderr line per server that did not start (the log has its stderr).
fn report(source: &McpToolSource) {
    for (name, status) in source.statuses() {
        match status {
            ServerStatus::Ready { tools } => {
                tracing::info!(server = %name, "MCP server started: {tools} tools");
            }
            ServerStatus::InRunner { tools } => {
                tracing::info!(server = %name, "MCP server in the runner: {tools} tools, started in each thread's sandbox on its first call");
            }
            ServerStatus::Failed { error, .. } => {
                eprintln!("roder: {error}; a call of one of its tools tries to start it again");
            }
        }
    }
}
