//! `workdirs/*`: straight to the runtime's working-directory materializer.

use crate::connection::Context;
use crate::convert;
use crate::error::RpcError;
use crate::protocol::{
    WorkdirIdParams, WorkdirResult, WorkdirsCreateParams, WorkdirsListParams, WorkdirsListResult,
};

pub(crate) async fn create(
    context: &Context,
    params: WorkdirsCreateParams,
) -> Result<WorkdirResult, RpcError> {
    let materializer = context.runtime.workdirs().map_err(RpcError::from_runtime)?;
    let materialized = materializer
        .materialize(convert::workdir_request(params))
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(WorkdirResult {
        workdir: convert::workdir_info(materialized.info),
    })
}

pub(crate) async fn list(
    context: &Context,
    _params: WorkdirsListParams,
) -> Result<WorkdirsListResult, RpcError> {
    let materializer = context.runtime.workdirs().map_err(RpcError::from_runtime)?;
    let workdirs = materializer.list().await.map_err(RpcError::from_runtime)?;
    Ok(WorkdirsListResult {
        workdirs: workdirs.into_iter().map(convert::workdir_info).collect(),
    })
}

pub(crate) async fn get(
    context: &Context,
    params: WorkdirIdParams,
) -> Result<WorkdirResult, RpcError> {
    let materializer = context.runtime.workdirs().map_err(RpcError::from_runtime)?;
    let info = materializer
        .get(&params.id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(WorkdirResult {
        workdir: convert::workdir_info(info),
    })
}

pub(crate) async fn cleanup(
    context: &Context,
    params: WorkdirIdParams,
) -> Result<WorkdirResult, RpcError> {
    let materializer = context.runtime.workdirs().map_err(RpcError::from_runtime)?;
    let info = materializer
        .cleanup(&params.id)
        .await
        .map_err(RpcError::from_runtime)?;
    Ok(WorkdirResult {
        workdir: convert::workdir_info(info),
    })
}
