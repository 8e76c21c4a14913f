//! `turn/*`.

use roder_api::inference;
use roder_core::{StartTurnRequest, TurnOptions};

use crate::connection::Context;
use crate::error::RpcError;
use crate::protocol::{
    Empty, ReasoningEffort, TurnInterruptParams, TurnStartParams, TurnStartResult,
};

pub(crate) async fn start(
    context: &Context,
    params: TurnStartParams,
) -> Result<TurnStartResult, RpcError> {
    let mut request = StartTurnRequest::new(params.thread_id, params.message);
    request.images = params.images;
    request.provider_override = params.provider;
    request.model_override = params.model;
    request.reasoning_override = params.reasoning.map(|effort| match effort {
        ReasoningEffort::Minimal => inference::ReasoningEffort::Minimal,
        ReasoningEffort::Low => inference::ReasoningEffort::Low,
        ReasoningEffort::Medium => inference::ReasoningEffort::Medium,
        ReasoningEffort::High => inference::ReasoningEffort::High,
    });
    request.workspace = params.workspace.unwrap_or_default();
    if let Some(instructions) = params.instructions {
        request.instructions = instructions;
    }
    request.developer_context = params.developer_context;
    if let Some(traceparent) = &params.traceparent
        && !roder_api::telemetry::valid_traceparent(traceparent)
    {
        return Err(RpcError::invalid_params(
            "turn/start",
            "traceparent",
            format!("{traceparent:?} is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)"),
        ));
    }
    let options = TurnOptions {
        policy_mode: params.policy_mode.map(crate::convert::mode),
        traceparent: params.traceparent,
    };
    let turn_id = context
        .runtime
        .start_turn_with(request, options)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(TurnStartResult { turn_id })
}

pub(crate) async fn interrupt(
    context: &Context,
    params: TurnInterruptParams,
) -> Result<Empty, RpcError> {
    context
        .runtime
        .interrupt_turn(&params.thread_id, &params.turn_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(Empty {})
}
