//! `thread/rewindTargets`, `thread/rollback`, `thread/fork` over the
//! runtime's `rewind_targets`, `rollback_thread` and `fork_thread`.

use roder_api::checkpoint::WorkspaceCheckpoint;

use crate::connection::Context;
use crate::error::RpcError;
use crate::protocol::{
    CheckpointInfo, RewindTargetInfo, ThreadForkParams, ThreadIdParams, ThreadResult,
    ThreadRewindTargetsResult, ThreadRollbackParams, ThreadRollbackResult,
};

fn checkpoint_info(checkpoint: WorkspaceCheckpoint) -> CheckpointInfo {
    CheckpointInfo {
        checkpointer: checkpoint.checkpointer,
        id: checkpoint.id,
        reference: checkpoint.reference,
    }
}

pub(crate) async fn targets(
    context: &Context,
    params: ThreadIdParams,
) -> Result<ThreadRewindTargetsResult, RpcError> {
    let targets = context
        .runtime
        .rewind_targets(&params.thread_id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadRewindTargetsResult {
        targets: targets
            .into_iter()
            .map(|target| RewindTargetInfo {
                turn: target.turn,
                turn_id: target.turn_id,
                message: target.message,
                checkpoint: checkpoint_info(target.checkpoint),
            })
            .collect(),
    })
}

/// Refused as busy (-32002) while a turn runs; nothing is written when it
/// fails.
pub(crate) async fn rollback(
    context: &Context,
    params: ThreadRollbackParams,
) -> Result<ThreadRollbackResult, RpcError> {
    let rolled_back = context
        .runtime
        .rollback_thread(&params.thread_id, params.to_turn)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadRollbackResult {
        to_turn: rolled_back.to_turn,
        rolled_back_turns: rolled_back.rolled_back_turns,
        checkpoint: checkpoint_info(rolled_back.checkpoint),
    })
}

/// The new thread, with this connection subscribed to it (as for
/// `thread/start`).
pub(crate) async fn fork(
    context: &Context,
    params: ThreadForkParams,
) -> Result<ThreadResult, RpcError> {
    let metadata = context
        .runtime
        .fork_thread(&params.thread_id, params.at_turn)
        .await
        .map_err(RpcError::from_runtime)?;
    context
        .subscriptions
        .subscribe(&metadata.thread_id, 0)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(ThreadResult {
        thread: context.thread_info(metadata),
        tool_sources: Vec::new(),
    })
}
