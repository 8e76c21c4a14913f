//! The tools of a set of MCP servers, as one [`ToolContributor`].

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ToolProviderId;
use roder_api::tools::{ToolContributor, ToolRegistry, ToolSpec};

use crate::config::{McpServerConfig, Placement};
use crate::connection::McpConnection;
use crate::names::{NameAllocator, valid_server_name};
use crate::tool::McpTool;
use crate::tool_cache::{self, CachedTool};

/// The contributor's id.
pub const CONTRIBUTOR_ID: &str = "mcp";

/// How one server's start went, for the caller to report.
#[derive(Debug, Clone, PartialEq)]
pub enum ServerStatus {
    /// Started; this many of its tools are offered.
    Ready { tools: usize },
    /// Did not start. Its last listed tools (from the cache) or else its
    /// `enabled_tools` are still offered, and a call to one starts the
    /// server again or answers this error.
    Failed { error: String, tools: usize },
}

/// Every configured server's tools. Build it with [`McpToolSource::start`]
/// before the runtime (the registry is fixed when the runtime is built), then
/// install it with `ExtensionRegistryBuilder::tool_contributor`.
pub struct McpToolSource {
    tools: Vec<Arc<McpTool>>,
    statuses: Vec<(String, ServerStatus)>,
}

impl McpToolSource {
    /// Starts every server at once, each within its start-up timeout, and
    /// lists its tools. A server that fails to start fails nothing else: its
    /// status says why. `Err` only for a configuration no start can fix (a
    /// bad or repeated name, `placement = "runner"`). Stdio servers start in
    /// `cwd` unless they name a directory.
    pub async fn start(servers: Vec<McpServerConfig>, cwd: &Path) -> anyhow::Result<Self> {
        Self::start_with_cache(servers, cwd, None).await
    }

    /// [`McpToolSource::start`], keeping each server's tool list in
    /// `cache_dir` (see [`crate::tool_cache`]): a server that fails to
    /// start offers its last listed tools, whose calls try to start it again.
    pub async fn start_with_cache(
        servers: Vec<McpServerConfig>,
        cwd: &Path,
        cache_dir: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let mut seen = std::collections::BTreeSet::new();
        for server in &servers {
            check(server)?;
            if !seen.insert(server.name.clone()) {
                anyhow::bail!("MCP server \"{}\" is configured twice", server.name);
            }
        }
        let connections: Vec<Arc<McpConnection>> = servers
            .into_iter()
            .map(|server| Arc::new(McpConnection::new(server, cwd.to_path_buf())))
            .collect();
        let listings = futures::future::join_all(
            connections
                .iter()
                .map(|connection| async move { connection.list_tools().await }),
        )
        .await;

        let mut names = NameAllocator::default();
        for builtin in roder_api::tools::WORKSPACE_TOOL_NAMES {
            names.reserve(builtin);
        }
        let mut tools = Vec::new();
        let mut statuses = Vec::new();
        for (connection, listing) in connections.into_iter().zip(listings) {
            let config = connection.config().clone();
            let before = tools.len();
            let status = match listing {
                Ok(listed) => {
                    if let Some(dir) = cache_dir {
                        let cached = listed
                            .iter()
                            .map(|tool| CachedTool {
                                name: tool.name.to_string(),
                                description: tool.description.as_deref().map(String::from),
                                input_schema: serde_json::Value::Object(
                                    (*tool.input_schema).clone(),
                                ),
                            })
                            .collect();
                        tool_cache::save(dir, &config, cached).await;
                    }
                    for tool in listed {
                        if !config.tools.allows(&tool.name) {
                            continue;
                        }
                        let spec = ToolSpec {
                            name: names.allocate(&config.name, &tool.name),
                            description: describe(&config.name, tool.description.as_deref()),
                            parameters: serde_json::Value::Object((*tool.input_schema).clone()),
                        };
                        tools.push(Arc::new(McpTool::new(
                            connection.clone(),
                            tool.name.to_string(),
                            spec,
                        )));
                    }
                    ServerStatus::Ready {
                        tools: tools.len() - before,
                    }
                }
                Err(error) => {
                    let error = format!("{error:#}");
                    tracing::warn!(server = %config.name, "MCP server failed to start: {error}");
                    // Its last listed tools (or those named in the config)
                    // are still offered: calling one retries the start, or
                    // tells the model why not.
                    let cached = match cache_dir {
                        Some(dir) => tool_cache::load(dir, &config).await,
                        None => None,
                    };
                    for tool in cached.iter().flatten() {
                        if !config.tools.allows(&tool.name) {
                            continue;
                        }
                        let spec = ToolSpec {
                            name: names.allocate(&config.name, &tool.name),
                            description: format!(
                                "{}\n(MCP server \"{}\", which failed to start; a call tries to start it again)",
                                tool.description.as_deref().unwrap_or("An MCP tool."),
                                config.name
                            ),
                            parameters: tool.input_schema.clone(),
                        };
                        tools.push(Arc::new(McpTool::new(
                            connection.clone(),
                            tool.name.clone(),
                            spec,
                        )));
                    }
                    let listed_from_cache = cached.is_some();
                    for tool in config
                        .tools
                        .enabled
                        .iter()
                        .flatten()
                        .filter(|_| !listed_from_cache)
                    {
                        if !config.tools.allows(tool) {
                            continue;
                        }
                        let spec = ToolSpec {
                            name: names.allocate(&config.name, tool),
                            description: format!(
                                "Tool \"{tool}\" of MCP server \"{}\", which failed to start; a call tries to start it again.",
                                config.name
                            ),
                            parameters: serde_json::json!({"type": "object"}),
                        };
                        tools.push(Arc::new(McpTool::new(
                            connection.clone(),
                            tool.clone(),
                            spec,
                        )));
                    }
                    ServerStatus::Failed {
                        error,
                        tools: tools.len() - before,
                    }
                }
            };
            statuses.push((config.name.clone(), status));
        }
        Ok(Self { tools, statuses })
    }

    /// Each server's name and how its start went, in configuration order.
    pub fn statuses(&self) -> &[(String, ServerStatus)] {
        &self.statuses
    }

    /// The tools, as the model will see them.
    pub fn tools(&self) -> &[Arc<McpTool>] {
        &self.tools
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools
            .iter()
            .map(|tool| roder_api::tools::ToolExecutor::spec(tool.as_ref()))
            .collect()
    }
}

impl ToolContributor for McpToolSource {
    fn id(&self) -> ToolProviderId {
        CONTRIBUTOR_ID.to_string()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        for tool in &self.tools {
            registry.register(tool.clone())?;
        }
        Ok(())
    }
}

/// A server configuration that no start could make work.
pub fn check(server: &McpServerConfig) -> anyhow::Result<()> {
    if !valid_server_name(&server.name) {
        anyhow::bail!(
            "MCP server name \"{}\" may hold only letters, digits, '_' and '-' (it is part of its tools' names)",
            server.name
        );
    }
    if server.placement == Placement::Runner {
        anyhow::bail!(
            "MCP server \"{}\": placement = \"runner\" is not supported yet (use placement = \"host\")",
            server.name
        );
    }
    Ok(())
}

fn describe(server: &str, description: Option<&str>) -> String {
    match description {
        Some(description) if !description.trim().is_empty() => {
            format!("{description}\n(MCP server \"{server}\")")
        }
        _ => format!("A tool of MCP server \"{server}\"."),
    }
}
