//! `initialize`.

use crate::connection::Context;
use crate::error::RpcError;
use crate::methods::METHODS;
use crate::protocol::{ConnectionLimitsInfo, InitializeParams, InitializeResult, ServerInfo};

/// Bumped on incompatible changes to the protocol.
pub const PROTOCOL_VERSION: u32 = 1;

pub(crate) async fn initialize(
    context: &Context,
    params: InitializeParams,
) -> Result<InitializeResult, RpcError> {
    if !context.mark_initialized() {
        return Err(RpcError::invalid_request(
            "already initialized: send initialize once per connection",
        ));
    }
    context.approver.identify(
        params
            .client_info
            .as_ref()
            .map(|client| client.name.as_str()),
        params.capabilities.approvals,
    );
    if let Some(client) = &params.client_info {
        tracing::info!(client = %client.name, version = ?client.version, approvals = params.capabilities.approvals, "client initialized");
    }
    Ok(InitializeResult {
        server_info: ServerInfo {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        },
        protocol_version: PROTOCOL_VERSION,
        methods: METHODS.iter().map(|method| method.to_string()).collect(),
        limits: ConnectionLimitsInfo {
            max_message_bytes: context.limits.max_message_bytes as u64,
            client_queue: context.limits.client_queue as u64,
        },
        client_id: context.approver.client_id(),
    })
}
