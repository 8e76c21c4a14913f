//! The last tool list each server gave, kept on disk, so that a server that
//! fails to start still offers the tools it had (each call then tries to
//! start it again, or answers why not) instead of vanishing from the model's
//! view. Only what the server itself said is kept: names, descriptions,
//! schemas; keyed by the server's name and a hash of its command and
//! arguments (or URL), so a changed server never gets another's list.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::config::{McpServerConfig, McpTransport};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CachedTool {
    pub name: String,
    pub description: Option<String>,
    pub input_schema: serde_json::Value,
    /// The server's `readOnlyHint` annotation (read-only only counts for a
    /// server marked trusted).
    #[serde(default)]
    pub read_only: bool,
}

impl CachedTool {
    /// What is kept of a tool the server listed.
    pub fn listed(tool: &rmcp::model::Tool) -> Self {
        Self {
            name: tool.name.to_string(),
            description: tool.description.as_deref().map(String::from),
            input_schema: serde_json::Value::Object((*tool.input_schema).clone()),
            read_only: read_only_hint(tool),
        }
    }
}

/// Whether the server says the tool only reads.
pub fn read_only_hint(tool: &rmcp::model::Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|annotations| annotations.read_only_hint)
        .unwrap_or(false)
}

#[derive(Debug, Serialize, Deserialize)]
struct CacheFile {
    fingerprint: String,
    tools: Vec<CachedTool>,
}

fn path(dir: &Path, server: &McpServerConfig) -> PathBuf {
    dir.join(format!("{}.json", server.name))
}

/// What identifies the server's program: not its environment (which may
/// hold secrets) nor its directory.
fn fingerprint(server: &McpServerConfig) -> String {
    let identity = match &server.transport {
        McpTransport::Stdio(stdio) => {
            let mut parts = vec![stdio.command.clone()];
            parts.extend(stdio.args.iter().cloned());
            parts.join("\0")
        }
        McpTransport::Http(http) => http.url.clone(),
    };
    let mut state: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in identity.bytes() {
        state ^= u64::from(byte);
        state = state.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{state:016x}")
}

/// Saves `tools` as `server`'s last list. Failing to save is only logged:
/// the cache is a convenience.
pub async fn save(dir: &Path, server: &McpServerConfig, tools: Vec<CachedTool>) {
    let file = CacheFile {
        fingerprint: fingerprint(server),
        tools,
    };
    let result = async {
        tokio::fs::create_dir_all(dir).await?;
        let text = serde_json::to_vec_pretty(&file)?;
        let target = path(dir, server);
        let temporary = target.with_extension("json.tmp");
        tokio::fs::write(&temporary, text).await?;
        tokio::fs::rename(&temporary, &target).await?;
        anyhow::Ok(())
    }
    .await;
    if let Err(error) = result {
        tracing::warn!(server = %server.name, "cannot save the MCP tool list cache: {error:#}");
    }
}

/// `server`'s last saved list, if there is one for this same program.
pub async fn load(dir: &Path, server: &McpServerConfig) -> Option<Vec<CachedTool>> {
    let text = tokio::fs::read(path(dir, server)).await.ok()?;
    let file: CacheFile = serde_json::from_slice(&text).ok()?;
    (file.fingerprint == fingerprint(server)).then_some(file.tools)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_list_comes_back_only_for_the_same_program() {
        let dir = tempfile::tempdir().unwrap();
        let server = McpServerConfig::stdio("s", "prog", &["--a"]);
        assert_eq!(load(dir.path(), &server).await, None);
        let tools = vec![CachedTool {
            name: "t".into(),
            description: Some("d".into()),
            input_schema: serde_json::json!({"type": "object"}),
            read_only: true,
        }];
        save(dir.path(), &server, tools.clone()).await;
        assert_eq!(load(dir.path(), &server).await, Some(tools));
        let changed = McpServerConfig::stdio("s", "prog", &["--b"]);
        assert_eq!(load(dir.path(), &changed).await, None);
    }
}
