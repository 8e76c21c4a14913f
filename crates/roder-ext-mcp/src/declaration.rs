//! What declares an MCP server: a `[mcp_servers.NAME]` table of the `roder`
//! binary's `config.toml` (snake_case keys), or an entry of an app server's
//! `thread/start {mcpServers}` (the same keys, also in camelCase), checked
//! into a [`McpServerConfig`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, HttpServer, McpServerConfig, McpTransport,
    Placement, StdioServer, ToolFilter,
};

/// One declared server, as written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty", alias = "envVars")]
    pub env_vars: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "bearerTokenEnvVar"
    )]
    pub bearer_token_env_var: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "startupTimeoutSec"
    )]
    pub startup_timeout_sec: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "toolTimeoutSec"
    )]
    pub tool_timeout_sec: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        alias = "enabledTools"
    )]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        alias = "disabledTools"
    )]
    pub disabled_tools: Vec<String>,
    /// `false` keeps the table but starts nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementName>,
    /// `true`: the tools' `readOnlyHint` annotations are believed (they
    /// then run without asking where reads do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlacementName {
    Host,
    Runner,
}

impl McpServerEntry {
    /// The server this table describes, or why it describes none. `None`
    /// for a table with `enabled = false`.
    pub fn to_config(&self, name: &str) -> anyhow::Result<Option<McpServerConfig>> {
        self.to_config_in(name, &format!("[mcp_servers.{name}]"))
    }

    /// [`to_config`](Self::to_config), naming the entry `what` in errors.
    pub fn to_config_in(&self, name: &str, what: &str) -> anyhow::Result<Option<McpServerConfig>> {
        if self.enabled == Some(false) {
            return Ok(None);
        }
        if !crate::names::valid_server_name(name) {
            anyhow::bail!(
                "{what}: a server name may hold only letters, digits, '_' and '-' (it is part of its tools' names)"
            );
        }
        let placement = match self.placement {
            Some(PlacementName::Runner) => {
                if self.url.is_some() {
                    anyhow::bail!(
                        "{what}: placement = \"runner\" is for command servers (started in the thread's sandbox), not url ones"
                    );
                }
                if !self.env_vars.is_empty() {
                    anyhow::bail!(
                        "{what}: env_vars passes Roder's variables to a host server; a server in the runner gets only its env"
                    );
                }
                Placement::Runner
            }
            Some(PlacementName::Host) | None => Placement::Host,
        };
        let transport = match (&self.command, &self.url) {
            (Some(command), None) => {
                if self.bearer_token_env_var.is_some() {
                    anyhow::bail!(
                        "{what}: bearer_token_env_var is for url servers, not command ones"
                    );
                }
                McpTransport::Stdio(StdioServer {
                    command: command.clone(),
                    args: self.args.clone(),
                    env: self.env.clone(),
                    env_vars: self.env_vars.clone(),
                    cwd: self.cwd.clone(),
                })
            }
            (None, Some(url)) => {
                if !self.args.is_empty()
                    || !self.env.is_empty()
                    || !self.env_vars.is_empty()
                    || self.cwd.is_some()
                {
                    anyhow::bail!(
                        "{what}: args, env, env_vars and cwd are for command servers, not url ones"
                    );
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    anyhow::bail!("{what}: url \"{url}\" is not an http:// or https:// URL");
                }
                McpTransport::Http(HttpServer {
                    url: url.clone(),
                    bearer_token_env: self.bearer_token_env_var.clone(),
                })
            }
            (Some(_), Some(_)) => anyhow::bail!("{what}: give command or url, not both"),
            (None, None) => anyhow::bail!(
                "{what}: give command (a stdio server) or url (a streamable-HTTP server)"
            ),
        };
        Ok(Some(McpServerConfig {
            name: name.to_string(),
            transport,
            startup_timeout: seconds(what, "startup_timeout_sec", self.startup_timeout_sec)?
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: seconds(what, "tool_timeout_sec", self.tool_timeout_sec)?
                .unwrap_or(DEFAULT_CALL_TIMEOUT),
            tools: ToolFilter {
                enabled: self.enabled_tools.clone(),
                disabled: self.disabled_tools.clone(),
            },
            placement,
            trusted: self.trusted.unwrap_or(false),
        }))
    }
}

fn seconds(what: &str, key: &str, value: Option<f64>) -> anyhow::Result<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(value) if value.is_finite() && value > 0.0 && value <= 86_400.0 => {
            Ok(Some(Duration::from_secs_f64(value)))
        }
        Some(value) => {
            anyhow::bail!("{what}: {key} = {value} is not a number of seconds in (0, 86400]")
        }
    }
}

/// Every enabled server of `tables`, checked.
pub fn servers(tables: &BTreeMap<String, McpServerEntry>) -> anyhow::Result<Vec<McpServerConfig>> {
    let mut servers = Vec::new();
    for (name, entry) in tables {
        if let Some(server) = entry.to_config(name)? {
            servers.push(server);
        }
    }
    Ok(servers)
}
