//! `initialize`: the first request of every connection.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InitializeParams {
    /// Who is connecting; only logged.
    #[serde(default)]
    pub client_info: Option<ClientInfo>,
    /// What this client does besides requests (answering approvals).
    #[serde(default)]
    pub capabilities: super::ClientCapabilities,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    pub server_info: ServerInfo,
    /// Bumped on incompatible changes to this protocol.
    pub protocol_version: u32,
    /// Every method this server answers.
    pub methods: Vec<String>,
    pub limits: ConnectionLimitsInfo,
    /// This connection's id: how answers it gives are recorded
    /// (`approval_resolved.by.clientId`).
    pub client_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

/// The bounds this connection runs under, so a client can stay inside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionLimitsInfo {
    /// Largest message (in bytes) the server reads; larger ones get -32007.
    pub max_message_bytes: u64,
    /// Notifications buffered for this client before it is told it lagged
    /// (-32008) and must resume from its last seq.
    pub client_queue: u64,
}

/// The empty result of methods that only succeed or fail.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}
