//! What the MCP tests share: finding the PyPI servers (missing ones fail
//! the test under CI, where `.ci/run` installs them) and calling a tool.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use roder_api::tools::{ToolCall, ToolExecutionContext, ToolResult, ToolWorkspace};
use roder_ext_mcp::McpToolSource;

/// Whether `program` runs here (`python3 -c 'import mcp'` for the SDK). Under
/// `CI=true` a missing one panics: `.ci/run` installs them, so a skip there
/// would hide a broken install step.
pub fn available(program: &str, args: &[&str]) -> bool {
    let found = std::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !found {
        if std::env::var("CI").is_ok_and(|value| value == "true") {
            panic!("`{program}` is not installed; .ci/run installs it with pip");
        }
        eprintln!(
            "skipping: `{program}` is not installed (pip install mcp-server-time mcp-server-git mcp)"
        );
    }
    found
}

pub fn have_time_server() -> bool {
    available("python3", &["-c", "import mcp_server_time"])
        && available("mcp-server-time", &["--help"])
}

pub fn have_git_server() -> bool {
    available("python3", &["-c", "import mcp_server_git"])
        && available("mcp-server-git", &["--help"])
}

pub fn have_sdk() -> bool {
    available("python3", &["-c", "import mcp.server.mcpserver, uvicorn"])
}

/// The SDK-written test server beside these tests.
pub fn toy_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/servers/toy_server.py")
}

/// Calls the tool named `name` of `source` as the runtime would.
pub async fn call(source: &McpToolSource, name: &str, arguments: serde_json::Value) -> ToolResult {
    use roder_api::tools::ToolExecutor as _;
    let tool = source
        .tools()
        .iter()
        .find(|tool| tool.spec().name == name)
        .unwrap_or_else(|| {
            panic!(
                "no tool {name}; tools: {:?}",
                source
                    .specs()
                    .iter()
                    .map(|spec| spec.name.clone())
                    .collect::<Vec<_>>()
            )
        });
    let call = ToolCall {
        id: "call-1".into(),
        name: name.into(),
        arguments,
    };
    tool.execute(
        ToolExecutionContext::for_workspace(ToolWorkspace::None),
        call,
    )
    .await
    .unwrap()
}
