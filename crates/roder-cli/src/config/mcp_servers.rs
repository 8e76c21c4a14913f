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

pub use roder_ext_mcp::declaration::{McpServerEntry, servers};
use roder_ext_mcp::{McpServerConfig, McpTransport};

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
    use std::collections::BTreeMap;
    use std::time::Duration;

    use roder_ext_mcp::Placement;

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
