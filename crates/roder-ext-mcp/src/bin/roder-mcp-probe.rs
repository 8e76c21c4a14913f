//! A small real MCP server (rmcp's server side, on stdio) for the tests of
//! `placement = "runner"`: it is copied into a sandbox and started there
//! over the runner's process stream. Its tools act on the filesystem it runs
//! in, so a test can tell a sandbox from the host: `write_file` writes a
//! file, `whereami` names the host and process, `exit` ends the process
//! (a test of the restart). It writes a line to stderr at start, which must
//! reach Roder's log and never the model.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt as _};

struct Probe;

fn schema(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(object) => object,
        _ => JsonObject::new(),
    }
}

fn text(result: String) -> CallToolResponse {
    CallToolResult::success(vec![ContentBlock::text(result)]).into()
}

fn argument(arguments: &Option<JsonObject>, key: &str) -> Result<String, ErrorData> {
    arguments
        .as_ref()
        .and_then(|arguments| arguments.get(key))
        .and_then(|value| value.as_str())
        .map(String::from)
        .ok_or_else(|| ErrorData::invalid_params(format!("missing string argument {key}"), None))
}

impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("roder-mcp-probe", "0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let path_and_text = schema(serde_json::json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
            "required": ["path", "text"],
        }));
        let nothing = schema(serde_json::json!({"type": "object", "properties": {}}));
        Ok(ListToolsResult {
            tools: vec![
                Tool::new(
                    "write_file",
                    "Writes text to a file where the server runs.",
                    path_and_text,
                ),
                Tool::new(
                    "whereami",
                    "The server's host name, process id and directory.",
                    nothing.clone(),
                ),
                Tool::new("exit", "Ends the server's process.", nothing),
            ],
            ..ListToolsResult::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match request.name.as_ref() {
            "write_file" => {
                let path = argument(&request.arguments, "path")?;
                let contents = argument(&request.arguments, "text")?;
                match tokio::fs::write(&path, contents.as_bytes()).await {
                    Ok(()) => Ok(text(format!("wrote {} bytes to {path}", contents.len()))),
                    Err(error) => Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                        "cannot write {path}: {error}"
                    ))])
                    .into()),
                }
            }
            "whereami" => {
                let host = tokio::fs::read_to_string("/etc/hostname")
                    .await
                    .unwrap_or_default();
                let cwd = std::env::current_dir().unwrap_or_default();
                Ok(text(format!(
                    "host={} pid={} cwd={}",
                    host.trim(),
                    std::process::id(),
                    cwd.display()
                )))
            }
            "exit" => std::process::exit(3),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    eprintln!("PROBE-STDERR-LINE: started");
    let service = Probe.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
