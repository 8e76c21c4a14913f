//! `[mcp_servers.NAME]` tables: MCP servers whose tools the model gets.
//!
//! ```toml
//! [mcp_servers.git]                  # stdio: a child process
//! command = "mcp-server-git"
//! args = ["--repository", "."]
//! env = { GIT_PAGER = "cat" }        # set for the server
//! env_vars = ["GITHUB_TOKEN"]        # Roder's variables passed through (nothing else is)
//! disabled_tools = ["git_reset"]     # or enabled_tools = [...]
//! startup_timeout_sec = 30
//! tool_timeout_sec = 120
//!
//! [mcp_servers.docs]                 # streamable HTTP
//! url = "http://127.0.0.1:8000/mcp"
//! bearer_token_env_var = "DOCS_MCP_TOKEN"
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use roder_ext_mcp::{
    DEFAULT_CALL_TIMEOUT, DEFAULT_STARTUP_TIMEOUT, HttpServer, McpServerConfig, McpTransport,
    Placement, StdioServer, ToolFilter,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_vars: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_sec: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// `false` keeps the table but starts nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<PlacementName>,
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
        if self.enabled == Some(false) {
            return Ok(None);
        }
        let what = format!("[mcp_servers.{name}]");
        if !roder_ext_mcp::names::valid_server_name(name) {
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
            startup_timeout: seconds(&what, "startup_timeout_sec", self.startup_timeout_sec)?
                .unwrap_or(DEFAULT_STARTUP_TIMEOUT),
            call_timeout: seconds(&what, "tool_timeout_sec", self.tool_timeout_sec)?
                .unwrap_or(DEFAULT_CALL_TIMEOUT),
            tools: ToolFilter {
                enabled: self.enabled_tools.clone(),
                disabled: self.disabled_tools.clone(),
            },
            placement,
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

/// The `[mcp_servers.*]` part of `config show`: token variables shown as
/// set or missing, never their values; `env` values are not shown either.
pub fn show(servers: &[McpServerConfig]) -> String {
    let mut out = String::new();
    for server in servers {
        out.push_str(&format!("\n[mcp_servers.{}]\n", server.name));
        match &server.transport {
            McpTransport::Stdio(stdio) => {
                out.push_str(&format!("command = {:?}\n", stdio.command));
                if !stdio.args.is_empty() {
                    out.push_str(&format!("args = {:?}\n", stdio.args));
                }
                if !stdio.env.is_empty() {
                    let keys: Vec<&String> = stdio.env.keys().collect();
                    out.push_str(&format!("# env sets {keys:?}\n"));
                }
                if !stdio.env_vars.is_empty() {
                    out.push_str(&format!("env_vars = {:?}\n", stdio.env_vars));
                }
            }
            McpTransport::Http(http) => {
                out.push_str(&format!("url = {:?}\n", http.url));
                if let Some(variable) = &http.bearer_token_env {
                    let state = match std::env::var(variable) {
                        Ok(value) if !value.is_empty() => "set",
                        _ => "missing",
                    };
                    out.push_str(&format!(
                        "bearer_token_env_var = \"{variable}\"  # {state}\n"
                    ));
                }
            }
        }
        out.push_str(&format!(
            "startup_timeout_sec = {}\ntool_timeout_sec = {}\n",
            server.startup_timeout.as_secs_f64(),
            server.call_timeout.as_secs_f64()
        ));
        if let Some(enabled) = &server.tools.enabled {
            out.push_str(&format!("enabled_tools = {enabled:?}\n"));
        }
        if !server.tools.disabled.is_empty() {
            out.push_str(&format!("disabled_tools = {:?}\n", server.tools.disabled));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<McpServerConfig>> {
        let tables: BTreeMap<String, McpServerEntry> =
            toml::from_str(text).map_err(|error| anyhow::anyhow!("{}", error.message()))?;
        servers(&tables)
    }

    #[test]
    fn stdio_and_http_servers_parse() {
        let servers = parse(
            r#"
[git]
command = "mcp-server-git"
args = ["--repository", "."]
env = { A = "b" }
env_vars = ["GITHUB_TOKEN"]
disabled_tools = ["git_reset"]
startup_timeout_sec = 5
tool_timeout_sec = 0.5

[docs]
url = "http://127.0.0.1:8000/mcp"
bearer_token_env_var = "DOCS_TOKEN"
enabled_tools = ["search"]

[off]
command = "nothing"
enabled = false
"#,
        )
        .unwrap();
        assert_eq!(servers.len(), 2);
        let docs = &servers[0];
        assert_eq!(docs.name, "docs");
        assert_eq!(docs.credential_var(), Some("DOCS_TOKEN"));
        assert!(docs.tools.allows("search") && !docs.tools.allows("other"));
        let git = &servers[1];
        assert_eq!(git.startup_timeout, Duration::from_secs(5));
        assert_eq!(git.call_timeout, Duration::from_millis(500));
        assert!(!git.tools.allows("git_reset"));
        let McpTransport::Stdio(stdio) = &git.transport else {
            panic!("{git:?}")
        };
        assert_eq!(stdio.args, vec!["--repository", "."]);
        assert_eq!(stdio.env["A"], "b");
        let shown = show(&servers);
        assert!(shown.contains("[mcp_servers.git]"), "{shown}");
        assert!(
            shown.contains("bearer_token_env_var = \"DOCS_TOKEN\""),
            "{shown}"
        );
        assert!(!shown.contains("\"b\""), "env values stay hidden: {shown}");
    }

    #[test]
    fn mistakes_are_named() {
        let error = |text: &str| parse(text).unwrap_err().to_string();
        assert!(error("[x]\ncomand = \"a\"").contains("comand"));
        assert!(error("[x]\nargs = []").contains("give command"));
        assert!(error("[x]\ncommand = \"a\"\nurl = \"http://h\"").contains("not both"));
        assert!(error("[x]\nurl = \"http://h\"\nargs = [\"a\"]").contains("for command servers"));
        assert!(error("[x]\nurl = \"ftp://h\"").contains("not an http"));
        assert!(
            error("[x]\ncommand = \"a\"\nbearer_token_env_var = \"T\"").contains("for url servers")
        );
        assert!(error("[x]\ncommand = \"a\"\ntool_timeout_sec = 0").contains("tool_timeout_sec"));
        assert!(error("[\"a b\"]\ncommand = \"a\"").contains("only letters"));
        let runner = error("[x]\nurl = \"http://h\"\nplacement = \"runner\"");
        assert!(
            runner.contains("placement = \"runner\" is for command servers"),
            "{runner}"
        );
        assert!(
            error("[x]\ncommand = \"a\"\nenv_vars = [\"A\"]\nplacement = \"runner\"")
                .contains("gets only its env")
        );
        let boxed = parse("[x]\ncommand = \"a\"\nplacement = \"runner\"").unwrap();
        assert_eq!(boxed[0].placement, Placement::Runner);
        assert!(error("[x]\ncommand = \"a\"\nplacement = \"moon\"").contains("moon"));
        assert!(
            parse("[x]\ncommand = \"a\"\nplacement = \"host\"")
                .unwrap()
                .len()
                == 1
        );
    }
}
