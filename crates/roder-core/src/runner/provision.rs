//! Getting a live session for a bound thread: resume the persisted one when it
//! belongs to the same provider and destination (and wake it when the
//! runtime paused it for idleness, `idle.rs`), otherwise (or when resuming
//! fails because the state is stale) create a fresh one. The new state is
//! persisted before the session is handed out, so a crash right after never
//! loses track of a sandbox.

use std::sync::Arc;

use roder_api::events::{RoderEvent, RunnerLifecycle, RunnerLifecycleAction};
use roder_api::remote_runner::{RemoteRunnerProvider, RemoteRunnerSession, RunnerDestination};
use roder_api::thread::ThreadStore;

use crate::bus::EventBus;
use crate::error::RuntimeError;
use crate::runner::state::persist_runner_state;
use crate::threads::ThreadState;

/// What an initialization needs; owned so it can run on its own task.
pub(crate) struct Provisioner {
    pub store: Arc<dyn ThreadStore>,
    pub bus: Arc<EventBus>,
    pub thread: Arc<ThreadState>,
    pub provider: Arc<dyn RemoteRunnerProvider>,
    pub destination: RunnerDestination,
}

impl Provisioner {
    pub async fn run(self) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let provider_id = self.provider.id();
        let span = tracing::Span::current();
        match self.acquire().await {
            Ok((session, action)) => {
                let state = session.state();
                span.record(
                    "roder.detail",
                    format!(
                        "{action:?} {} session {}",
                        state.provider_id, state.session_id
                    ),
                );
                self.lifecycle(action, Some(&session), None).await;
                Ok(session)
            }
            Err(error) => {
                let message = format!(
                    "runner \"{provider_id}\" could not be provisioned for thread \"{}\": {error:#}",
                    self.thread.thread_id
                );
                crate::trace::failed(&span, &message);
                self.lifecycle(
                    RunnerLifecycleAction::ProvisioningFailed,
                    None,
                    Some(message.clone()),
                )
                .await;
                Err(anyhow::Error::msg(message))
            }
        }
    }

    async fn acquire(
        &self,
    ) -> anyhow::Result<(Arc<dyn RemoteRunnerSession>, RunnerLifecycleAction)> {
        let metadata = self
            .store
            .load_metadata(&self.thread.thread_id)
            .await?
            .ok_or_else(|| RuntimeError::ThreadNotFound(self.thread.thread_id.clone()))?;
        let provider_id = self.provider.id();
        let idle_paused = metadata.runner_idle_paused;
        let resumable = metadata.runner_state.filter(|state| {
            state.provider_id == provider_id && state.destination_id == self.destination.id
        });
        let mut resumed = None;
        if let Some(state) = resumable {
            match self.provider.resume_session(state).await {
                Ok(session) => resumed = Some(session),
                Err(error) => tracing::info!(
                    thread_id = %self.thread.thread_id,
                    provider_id,
                    "persisted runner state is stale, creating a fresh session: {error:#}"
                ),
            }
        }
        let (session, action) = match resumed {
            // Paused by the runtime when it was idle: this use wakes it.
            Some(session) if idle_paused => {
                session.resume().await.map_err(|error| {
                    error.context("could not wake the sandbox paused while idle")
                })?;
                (session, RunnerLifecycleAction::Resumed)
            }
            Some(session) => (session, RunnerLifecycleAction::Resumed),
            None => (
                self.provider
                    .create_session(self.destination.clone())
                    .await?,
                RunnerLifecycleAction::Created,
            ),
        };
        if let Err(error) =
            persist_runner_state(self.store.as_ref(), &self.thread, session.state()).await
        {
            // A session nobody can find again must not outlive this call.
            if action == RunnerLifecycleAction::Created {
                let _ = session.close().await;
            }
            return Err(error.context("could not persist the runner session state"));
        }
        Ok((session, action))
    }

    async fn lifecycle(
        &self,
        action: RunnerLifecycleAction,
        session: Option<&Arc<dyn RemoteRunnerSession>>,
        error: Option<String>,
    ) {
        let event = RoderEvent::RunnerLifecycle(RunnerLifecycle {
            thread_id: self.thread.thread_id.clone(),
            provider_id: self.provider.id(),
            action,
            state: session.map(|session| session.state()),
            error,
        });
        if let Err(error) = self.bus.emit(&self.thread, None, event).await {
            tracing::warn!("could not record runner lifecycle event: {error:#}");
        }
    }
}
