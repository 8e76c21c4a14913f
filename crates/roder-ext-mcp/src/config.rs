//! What a configured MCP server is: how to reach it, how long to wait for
//! it, and which of its tools the model may see.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Start-up (spawn or connect, `initialize`, `tools/list`) gets this long by
/// default: Python servers take a second or two on a loaded machine.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// One tool call gets this long by default (the turn's deadline still caps it).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);

/// One MCP server as Roder uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// The server's name in Roder: part of every tool name it offers
    /// (`mcp__NAME__TOOL`) and of every log line about it.
    pub name: String,
    pub transport: McpTransport,
    pub startup_timeout: Duration,
    pub call_timeout: Duration,
    pub tools: ToolFilter,
    pub placement: Placement,
    /// The operator vouches for the server: its tools' `readOnlyHint`
    /// annotations are believed, so they run without asking where reads
    /// do. Untrusted (the default), every tool of it counts as writing and
    /// running commands.
    pub trusted: bool,
}

impl McpServerConfig {
    /// A stdio server with the default timeouts, all tools, on the host.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: &[&str]) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Stdio(StdioServer {
                command: command.into(),
                args: args.iter().map(|arg| arg.to_string()).collect(),
                env: BTreeMap::new(),
                env_vars: Vec::new(),
                cwd: None,
            }),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tools: ToolFilter::default(),
            placement: Placement::Host,
            trusted: false,
        }
    }

    /// A streamable-HTTP server with the default timeouts, all tools.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            transport: McpTransport::Http(HttpServer {
                url: url.into(),
                bearer_token_env: None,
            }),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            tools: ToolFilter::default(),
            placement: Placement::Host,
            trusted: false,
        }
    }

    /// The variable holding this server's bearer token, if any: like a
    /// model provider's key, it must never reach a command's environment.
    pub fn credential_var(&self) -> Option<&str> {
        match &self.transport {
            McpTransport::Http(http) => http.bearer_token_env.as_deref(),
            McpTransport::Stdio(_) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum McpTransport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio(StdioServer),
    /// The streamable HTTP transport at a URL.
    Http(HttpServer),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StdioServer {
    pub command: String,
    pub args: Vec<String>,
    /// Variables set for the server, on top of the small base environment.
    pub env: BTreeMap<String, String>,
    /// Names of Roder's own variables passed through to the server. Nothing
    /// else of Roder's environment is (API keys stay with Roder).
    pub env_vars: Vec<String>,
    /// Where the server starts; default: the workspace Roder was started in.
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HttpServer {
    pub url: String,
    /// The variable holding the bearer token sent as `Authorization`; the
    /// token itself is never in a config file.
    pub bearer_token_env: Option<String>,
}

/// Which of a server's tools the model is offered.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolFilter {
    /// Only these (by the server's own tool names), when set.
    pub enabled: Option<Vec<String>>,
    /// Never these.
    pub disabled: Vec<String>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        let enabled = match &self.enabled {
            Some(enabled) => enabled.iter().any(|name| name == tool),
            None => true,
        };
        enabled && !self.disabled.iter().any(|name| name == tool)
    }
}

/// Where the server's process runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Placement {
    /// A child process of Roder on this host (or a remote URL).
    #[default]
    Host,
    /// Inside each runner-bound thread's sandbox, started through its runner
    /// session on the thread's first call and spoken to over the runner's
    /// process stream (stdio servers only).
    Runner,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_applies_enabled_then_disabled() {
        let all = ToolFilter::default();
        assert!(all.allows("anything"));
        let some = ToolFilter {
            enabled: Some(vec!["a".into(), "b".into()]),
            disabled: vec!["b".into()],
        };
        assert!(some.allows("a"));
        assert!(!some.allows("b"));
        assert!(!some.allows("c"));
        let none = ToolFilter {
            enabled: Some(vec![]),
            disabled: vec![],
        };
        assert!(!none.allows("a"));
    }

    #[test]
    fn only_an_http_server_has_a_credential_variable() {
        let mut http = McpServerConfig::http("h", "http://127.0.0.1:1/mcp");
        assert_eq!(http.credential_var(), None);
        if let McpTransport::Http(server) = &mut http.transport {
            server.bearer_token_env = Some("H_TOKEN".into());
        }
        assert_eq!(http.credential_var(), Some("H_TOKEN"));
        assert_eq!(McpServerConfig::stdio("s", "x", &[]).credential_var(), None);
    }
}
