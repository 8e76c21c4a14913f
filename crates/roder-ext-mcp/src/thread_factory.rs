//! MCP servers a client declares for one thread (an app server's
//! `thread/start {mcpServers}`): the [`ThreadToolFactory`] of id
//! [`MCP_SERVERS`].
//!
//! The declaration is an object of servers by name, each entry with the keys
//! of a `[mcp_servers.NAME]` table in camelCase or snake_case:
//!
//! ```json
//! { "time":  { "command": "mcp-server-time" },
//!   "probe": { "command": "/opt/tools/probe", "placement": "runner", "enabledTools": ["whereami"] },
//!   "docs":  { "url": "http://127.0.0.1:8000/mcp" } }
//! ```
//!
//! A client is not the operator, so what it declares gets less than a
//! `config.toml` table: `envVars` and `bearerTokenEnvVar` are refused (they
//! read Roder's own environment, where its API keys are), and a server on
//! Roder's host (a command without `placement = "runner"`, or a url) starts
//! only when the runtime says the thread's own commands run unconfined on
//! this host ([`HostAccess`]); otherwise its entry is `failed` with why.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use roder_api::thread_tools::{
    MCP_SERVERS, StartedThreadTools, ThreadToolFactory, ThreadToolRequest, ToolSourceState,
    ToolSourceStatus,
};
use roder_api::tools::ToolExecutor;

use crate::config::{McpServerConfig, Placement};
use crate::declaration::McpServerEntry;
use crate::source::{McpToolSource, ServerStatus};

/// Starts the MCP servers of one thread's declaration.
///
/// ```no_run
/// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
/// use roder_api::thread_tools::MCP_SERVERS;
/// // installed with `ExtensionRegistryBuilder::thread_tool_factory(Arc::new(McpThreadTools::new(None)))`
/// let servers = serde_json::json!({ "time": { "command": "mcp-server-time" } });
/// let started = runtime.start_thread_tools("thread-1", MCP_SERVERS, servers).await?;
/// # Ok(()) }
/// ```
pub struct McpThreadTools {
    cache_dir: Option<PathBuf>,
}

impl McpThreadTools {
    /// `cache_dir` keeps each server's tool list (see [`crate::tool_cache`]),
    /// which is what a runner-placed server offers before its first start.
    pub fn new(cache_dir: Option<PathBuf>) -> Self {
        Self { cache_dir }
    }
}

#[async_trait::async_trait]
impl ThreadToolFactory for McpThreadTools {
    fn id(&self) -> String {
        MCP_SERVERS.to_string()
    }

    fn check(&self, declaration: &serde_json::Value) -> anyhow::Result<()> {
        parse(declaration).map(|_| ())
    }

    async fn start(&self, request: ThreadToolRequest) -> anyhow::Result<StartedThreadTools> {
        let servers = parse(&request.declaration)?;
        let mut refused = Vec::new();
        let mut allowed = Vec::new();
        for server in servers {
            match (server.placement, request.host.refusal()) {
                (Placement::Host, Some(why)) => refused.push(ToolSourceStatus {
                    name: server.name,
                    state: ToolSourceState::Failed,
                    tools: Vec::new(),
                    error: Some(format!("not started on Roder's host: {why}")),
                }),
                _ => allowed.push(server),
            }
        }
        let source =
            McpToolSource::start_with_cache(allowed, &request.workspace, self.cache_dir.as_deref())
                .await?;
        let mut sources = Vec::new();
        for (name, status) in source.statuses() {
            let (state, count, error) = match status {
                ServerStatus::Ready { tools } => (ToolSourceState::Ready, *tools, None),
                ServerStatus::InRunner { tools } => (ToolSourceState::InRunner, *tools, None),
                ServerStatus::Failed { error, tools } => {
                    (ToolSourceState::Failed, *tools, Some(error.clone()))
                }
            };
            let names: Vec<String> = source
                .tools()
                .iter()
                .filter(|tool| tool.connection().config().name == *name)
                .map(|tool| tool.spec().name)
                .collect();
            debug_assert_eq!(names.len(), count);
            sources.push(ToolSourceStatus {
                name: name.clone(),
                state,
                tools: names,
                error,
            });
        }
        sources.extend(refused);
        Ok(StartedThreadTools {
            tools: source
                .tools()
                .iter()
                .map(|tool| tool.clone() as Arc<dyn ToolExecutor>)
                .collect(),
            sources,
        })
    }
}

/// The servers of a declaration, checked; `null` declares none.
fn parse(declaration: &serde_json::Value) -> anyhow::Result<Vec<McpServerConfig>> {
    if declaration.is_null() {
        return Ok(Vec::new());
    }
    use serde::Deserialize as _;
    let entries = BTreeMap::<String, McpServerEntry>::deserialize(declaration)
        .map_err(|error| anyhow::anyhow!("mcpServers: {error} (an object of servers by name)"))?;
    let mut servers = Vec::new();
    for (name, entry) in entries {
        let what = format!("mcpServers.{name}");
        if !entry.env_vars.is_empty() {
            anyhow::bail!(
                "{what}: envVars passes Roder's own environment variables, which a server a client declares never gets; give values in env"
            );
        }
        if entry.bearer_token_env_var.is_some() {
            anyhow::bail!(
                "{what}: bearerTokenEnvVar reads Roder's own environment, which a server a client declares never gets; declare the server in the operator's config"
            );
        }
        if let Some(server) = entry.to_config_in(&name, &what)? {
            servers.push(server);
        }
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use roder_api::thread_tools::HostAccess;
    use serde_json::json;

    use super::*;

    #[test]
    fn camel_and_snake_case_keys_both_parse() {
        let servers = parse(&json!({
            "time": { "command": "mcp-server-time", "toolTimeoutSec": 2, "disabledTools": ["x"] },
            "probe": { "command": "/p", "placement": "runner", "enabled_tools": ["a"] },
            "off": { "command": "nothing", "enabled": false }
        }))
        .unwrap();
        assert_eq!(servers.len(), 2);
        assert_eq!(servers[0].name, "probe");
        assert_eq!(servers[0].placement, Placement::Runner);
        assert!(servers[0].tools.allows("a") && !servers[0].tools.allows("b"));
        assert_eq!(servers[1].call_timeout, std::time::Duration::from_secs(2));
        assert!(!servers[1].tools.allows("x"));
        assert!(parse(&serde_json::Value::Null).unwrap().is_empty());
    }

    #[test]
    fn what_reads_roders_environment_is_refused() {
        let error = |value: serde_json::Value| parse(&value).unwrap_err().to_string();
        assert!(
            error(json!({"a": {"command": "x", "envVars": ["OPENAI_API_KEY"]}}))
                .contains("mcpServers.a: envVars")
        );
        assert!(
            error(json!({"a": {"url": "http://h/mcp", "bearerTokenEnvVar": "T"}}))
                .contains("bearerTokenEnvVar")
        );
        assert!(error(json!(["a"])).contains("an object of servers by name"));
        assert!(error(json!({"a": {"comand": "x"}})).contains("comand"));
        assert!(error(json!({"a b": {"command": "x"}})).contains("only letters"));
    }

    #[tokio::test]
    async fn host_servers_are_refused_where_the_thread_may_not_run_them() {
        let factory = McpThreadTools::new(None);
        for host in [HostAccess::Confined, HostAccess::Forbidden] {
            let started = factory
                .start(ThreadToolRequest {
                    thread_id: "t".into(),
                    workspace: std::env::temp_dir(),
                    host,
                    declaration: json!({
                        "here": { "command": "/definitely/not/started" },
                        "there": { "command": "/p", "placement": "runner", "enabledTools": ["a"] },
                        "web": { "url": "http://127.0.0.1:9/mcp" }
                    }),
                })
                .await
                .unwrap();
            let by_name: BTreeMap<&str, &ToolSourceStatus> = started
                .sources
                .iter()
                .map(|source| (source.name.as_str(), source))
                .collect();
            for refused in ["here", "web"] {
                let source = by_name[refused];
                assert_eq!(source.state, ToolSourceState::Failed, "{host:?} {source:?}");
                assert!(
                    source
                        .error
                        .as_deref()
                        .unwrap()
                        .contains("not started on Roder's host"),
                    "{source:?}"
                );
            }
            let there = by_name["there"];
            assert_eq!(there.state, ToolSourceState::InRunner);
            assert_eq!(there.tools, vec!["mcp__there__a".to_string()]);
            let offered: Vec<String> = started.tools.iter().map(|tool| tool.spec().name).collect();
            assert_eq!(offered, vec!["mcp__there__a".to_string()]);
        }
    }
}
