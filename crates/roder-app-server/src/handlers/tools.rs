//! `tools/resolve`.

use roder_core::ExternalToolResolution;

use crate::connection::Context;
use crate::error::RpcError;
use crate::protocol::{Empty, ToolsResolveParams};

pub(crate) async fn resolve(
    context: &Context,
    params: ToolsResolveParams,
) -> Result<Empty, RpcError> {
    context
        .runtime
        .resolve_external_tool_call(
            &params.request_id,
            ExternalToolResolution {
                output: params.output,
                is_error: params.is_error,
            },
        )
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(Empty {})
}
