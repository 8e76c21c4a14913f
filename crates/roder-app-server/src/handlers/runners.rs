//! `runners/*`.

use crate::connection::Context;
use crate::convert;
use crate::error::RpcError;
use crate::protocol::{
    RunnerInfo, RunnerStateResult, RunnersListParams, RunnersListResult, RunnersRejoinParams,
    SandboxBackendStatus, SandboxProtection, ThreadIdParams,
};

pub(crate) async fn list(
    context: &Context,
    _params: RunnersListParams,
) -> Result<RunnersListResult, RpcError> {
    let runners = context
        .runtime
        .runner_providers()
        .map(|provider| RunnerInfo {
            provider_id: provider.id(),
            capabilities: convert::capabilities(provider.capabilities()),
            setup_hint: provider.setup_hint(),
            default_workspace: provider.default_workspace(),
        })
        .collect();
    let sandbox = context
        .runtime
        .sandbox_status()
        .into_iter()
        .map(|(backend, protections)| SandboxBackendStatus {
            backend,
            protections: protections
                .into_iter()
                .map(|protection| SandboxProtection {
                    name: protection.name,
                    active: protection.active,
                    detail: protection.detail,
                })
                .collect(),
        })
        .collect();
    Ok(RunnersListResult { runners, sandbox })
}

pub(crate) async fn pause(
    context: &Context,
    params: ThreadIdParams,
) -> Result<RunnerStateResult, RpcError> {
    state(context.runtime.pause_thread_runner(&params.thread_id).await)
}

pub(crate) async fn resume(
    context: &Context,
    params: ThreadIdParams,
) -> Result<RunnerStateResult, RpcError> {
    state(
        context
            .runtime
            .resume_thread_runner(&params.thread_id)
            .await,
    )
}

pub(crate) async fn detach(
    context: &Context,
    params: ThreadIdParams,
) -> Result<RunnerStateResult, RpcError> {
    state(
        context
            .runtime
            .detach_thread_runner(&params.thread_id)
            .await,
    )
}

pub(crate) async fn rejoin(
    context: &Context,
    params: RunnersRejoinParams,
) -> Result<RunnerStateResult, RpcError> {
    state(
        context
            .runtime
            .rejoin_thread_runner(&params.thread_id, params.sandbox_id)
            .await,
    )
}

fn state(
    result: anyhow::Result<roder_api::remote_runner::RunnerSessionState>,
) -> Result<RunnerStateResult, RpcError> {
    let state = result.map_err(RpcError::from_runtime)?;
    Ok(RunnerStateResult {
        state: convert::runner_state(state),
    })
}
