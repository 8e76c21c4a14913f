//! The tools of a set of MCP servers, as one [`ToolContributor`].

use std::path::Path;
use std::sync::Arc;

use roder_api::extension::ToolProviderId;
use roder_api::tools::{ToolContributor, ToolRegistry, ToolSpec};

use crate::config::{McpServerConfig, Placement};
use crate::connection::McpConnection;
use crate::names::{NameAllocator, valid_server_name};
use crate::runner_server::RunnerServer;
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
    /// `placement = "runner"`: not started now; each thread's first call
    /// starts it in that thread's runner session. This many tools are
    /// offered (its cached list, else its `enabled_tools`).
    InRunner { tools: usize },
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
    /// bad or repeated name, `placement = "runner"` of a url server). A
    /// runner-placed server is not started here (see [`RunnerServer`]). Stdio servers start in
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
        // A runner-placed server is not started here: it runs per thread,
        // in the thread's runner session, from the first call of its tools.
        let listings = futures::future::join_all(connections.iter().map(|connection| async move {
            if connection.config().placement == Placement::Runner {
                None
            } else {
                Some(connection.list_tools().await)
            }
        }))
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
                None => {
                    let cached = match cache_dir {
                        Some(dir) => tool_cache::load(dir, &config).await,
                        None => None,
                    };
                    let server = Arc::new(RunnerServer::new(
                        config.clone(),
                        cache_dir.map(Path::to_path_buf),
                    ));
                    runner_tools(&server, cached, &mut names, &mut tools);
                    let offered = tools.len() - before;
                    if offered == 0 {
                        tracing::warn!(
                            server = %config.name,
                            "MCP server placed in the runner offers no tools: name them in its enabled_tools (its tool list can only be read inside a sandbox)"
                        );
                    }
                    ServerStatus::InRunner { tools: offered }
                }
                Some(Ok(listed)) => {
                    if let Some(dir) = cache_dir {
                        let cached = listed.iter().map(CachedTool::listed).collect();
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
                        tools.push(Arc::new(
                            McpTool::new(connection.clone(), tool.name.to_string(), spec)
                                .read_only(tool_cache::read_only_hint(&tool)),
                        ));
                    }
                    ServerStatus::Ready {
                        tools: tools.len() - before,
                    }
                }
                Some(Err(error)) => {
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
                        tools.push(Arc::new(
                            McpTool::new(connection.clone(), tool.name.clone(), spec)
                                .read_only(tool.read_only),
                        ));
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
    if server.placement == Placement::Runner
        && !matches!(server.transport, crate::config::McpTransport::Stdio(_))
    {
        anyhow::bail!(
            "MCP server \"{}\": placement = \"runner\" needs a command (a url is reached from the host, not started in a sandbox)",
            server.name
        );
    }
    Ok(())
}

/// The tools of a runner-placed server: its cached list (names,
/// descriptions and schemas of its last start), else its `enabled_tools`
/// with an open object schema.
fn runner_tools(
    server: &Arc<RunnerServer>,
    cached: Option<Vec<CachedTool>>,
    names: &mut NameAllocator,
    tools: &mut Vec<Arc<McpTool>>,
) {
    let config = server.config();
    let listed: Vec<CachedTool> = match cached {
        Some(cached) => cached,
        None => config
            .tools
            .enabled
            .iter()
            .flatten()
            .map(|name| CachedTool {
                name: name.clone(),
                description: None,
                input_schema: serde_json::json!({"type": "object"}),
                read_only: false,
            })
            .collect(),
    };
    for tool in listed {
        if !config.tools.allows(&tool.name) {
            continue;
        }
        let spec = ToolSpec {
            name: names.allocate(&config.name, &tool.name),
            description: format!(
                "{}\n(MCP server \"{}\", running in this thread's sandbox)",
                tool.description
                    .as_deref()
                    .filter(|text| !text.trim().is_empty())
                    .unwrap_or("An MCP tool."),
                config.name
            ),
            parameters: tool.input_schema,
        };
        let read_only = tool.read_only;
        tools.push(Arc::new(
            McpTool::in_runner(server.clone(), tool.name, spec).read_only(read_only),
        ));
    }
}

fn describe(server: &str, description: Option<&str>) -> String {
    match description {
        Some(description) if !description.trim().is_empty() => {
            format!("{description}\n(MCP server \"{server}\")")
        }
        _ => format!("A tool of MCP server \"{server}\"."),
    }
}
