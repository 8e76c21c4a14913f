//! The provider-owned fence around one workspace tool execution.
//!
//! Acquired after the in-process session lock, with the bounds the deadline
//! allows; the execution races `wait_lost()` and is dropped (before it can
//! write) when the provider says the fence ended. `release()` is always
//! called, from a task when the execution itself was dropped.

use std::future::Future;

use roder_api::remote_runner::{
    RemoteRunnerSession, RemoteWorkspaceExecutionLease, RunnerWorkspaceExecutionLeaseRequest,
};

use crate::runner::deadline::TurnDeadline;

/// A held lease that is released when dropped.
pub(crate) struct LeaseGuard {
    lease: Option<Box<dyn RemoteWorkspaceExecutionLease>>,
}

impl LeaseGuard {
    pub async fn acquire(
        session: &dyn RemoteRunnerSession,
        deadline: &TurnDeadline,
    ) -> anyhow::Result<Self> {
        let acquire_timeout = deadline.lease_acquire_timeout();
        let request = RunnerWorkspaceExecutionLeaseRequest {
            execution_id: uuid::Uuid::new_v4().to_string(),
            acquire_timeout_ms: u64::try_from(acquire_timeout.as_millis()).unwrap_or(u64::MAX),
            lease_timeout_ms: deadline
                .lease_timeout()
                .map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
        };
        let span = crate::trace::step("runner.lease_wait");
        let lease = tracing::Instrument::instrument(
            tokio::time::timeout(
                acquire_timeout,
                session.acquire_workspace_execution_lease(request),
            ),
            span,
        )
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "timed out after {} ms waiting for the runner's workspace execution lease",
                acquire_timeout.as_millis()
            )
        })?
        .map_err(|error| {
            anyhow::anyhow!("could not acquire the runner's workspace execution lease: {error:#}")
        })?;
        Ok(Self { lease })
    }

    /// Runs `execution`, or fails with "lease was lost" as soon as the
    /// provider reports the fence gone.
    pub async fn run<T>(
        &self,
        execution: impl Future<Output = anyhow::Result<T>>,
    ) -> anyhow::Result<T> {
        let Some(lease) = &self.lease else {
            return execution.await;
        };
        tokio::select! {
            result = execution => result,
            lost = lease.wait_lost() => {
                let reason = match lost {
                    Ok(()) => "the provider ended it".to_string(),
                    Err(error) => format!("{error:#}"),
                };
                Err(anyhow::anyhow!(
                    "the runner's workspace execution lease was lost ({reason}); the tool was stopped before finishing, retry it"
                ))
            }
        }
    }

    pub async fn release(mut self) {
        if let Some(lease) = self.lease.take()
            && let Err(error) = lease.release().await
        {
            tracing::warn!("could not release the workspace execution lease: {error:#}");
        }
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Some(lease) = self.lease.take()
            && let Ok(handle) = tokio::runtime::Handle::try_current()
        {
            handle.spawn(async move {
                if let Err(error) = lease.release().await {
                    tracing::warn!("could not release the workspace execution lease: {error:#}");
                }
            });
        }
    }
}
