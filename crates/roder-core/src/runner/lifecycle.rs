//! Runner lifecycle operations of a thread: pause, resume, detach, rejoin.
//!
//! Each returns the provider's state after the operation and persists it into
//! the thread's metadata, so a later process can pick the sandbox up again.

use std::sync::Arc;

use futures::FutureExt;
use roder_api::events::{RoderEvent, RunnerLifecycle, RunnerLifecycleAction};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerDestination, RunnerSessionState,
};

use crate::runner::binding;
use crate::runner::provision::Provisioner;
use crate::runner::state::persist_runner_state;
use crate::runtime::Runtime;
use crate::threads::ThreadState;

impl Runtime {
    /// The thread's live runner session: cached, or provisioned once however
    /// many callers ask at the same time.
    pub(crate) async fn runner_session(
        &self,
        thread: &Arc<ThreadState>,
        destination: &RunnerDestination,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>> {
        let provider = binding::provider(&self.providers, &destination.provider_id)?.clone();
        let provisioner = Provisioner {
            store: self.store.clone(),
            bus: self.bus.clone(),
            thread: thread.clone(),
            provider,
            destination: destination.clone(),
        };
        self.sessions
            .get_or_init(&thread.thread_id, move || {
                // Made when an initialization starts, in the caller's span
                // (the call that provisions); it runs on its own task.
                let span = crate::trace::step("runner.provision");
                tracing::Instrument::instrument(provisioner.run(), span).boxed()
            })
            .await
    }

    /// The thread's runner destination: its binding's, else the runtime-level
    /// destination recorded when it was created (lifecycle operations work on
    /// a sandbox even when no workspace was known to bind tools to).
    pub(crate) async fn thread_destination(
        &self,
        thread_id: &str,
    ) -> anyhow::Result<(
        Arc<ThreadState>,
        RunnerDestination,
        Arc<dyn RemoteRunnerProvider>,
    )> {
        let thread = self.thread_state(thread_id).await?;
        let metadata = self.thread_metadata(thread_id).await?;
        let destination = metadata
            .runner_binding
            .map(|binding| binding.destination)
            .or(metadata.runner_destination)
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "thread \"{thread_id}\" has no runner; create it with a runner selection or configure a runner destination"
                )
            })?;
        let provider = binding::provider(&self.providers, &destination.provider_id)?.clone();
        Ok((thread, destination, provider))
    }

    /// Provisions (or reuses) the thread's session, then pauses it.
    pub async fn pause_thread_runner(&self, thread_id: &str) -> anyhow::Result<RunnerSessionState> {
        let (thread, destination, provider) = self.thread_destination(thread_id).await?;
        let _writer = self.open_writer(&thread).await?;
        let session = self.runner_session(&thread, &destination).await?;
        if !provider.capabilities().pausable {
            anyhow::bail!(
                "runner provider \"{}\" does not support pausing",
                provider.id()
            );
        }
        let state = session.pause().await?;
        self.record_lifecycle(&thread, &provider, RunnerLifecycleAction::Paused, &state)
            .await?;
        Ok(state)
    }

    /// Wakes the thread's session (provisioning or resuming it if needed).
    pub async fn resume_thread_runner(
        &self,
        thread_id: &str,
    ) -> anyhow::Result<RunnerSessionState> {
        let (thread, destination, provider) = self.thread_destination(thread_id).await?;
        let _writer = self.open_writer(&thread).await?;
        let session = self.runner_session(&thread, &destination).await?;
        let state = session.resume().await?;
        self.record_lifecycle(&thread, &provider, RunnerLifecycleAction::Woken, &state)
            .await?;
        Ok(state)
    }

    /// Releases the local handle and keeps the sandbox for a later rejoin.
    pub async fn detach_thread_runner(
        &self,
        thread_id: &str,
    ) -> anyhow::Result<RunnerSessionState> {
        let (thread, destination, provider) = self.thread_destination(thread_id).await?;
        let _writer = self.open_writer(&thread).await?;
        if !provider.capabilities().detachable {
            anyhow::bail!(
                "runner provider \"{}\" does not support detaching",
                provider.id()
            );
        }
        let session = self.runner_session(&thread, &destination).await?;
        let state = session.detach().await?;
        self.record_lifecycle(&thread, &provider, RunnerLifecycleAction::Detached, &state)
            .await?;
        // Detached: the sandbox lives on for a later rejoin.
        let _ = self.sessions.evict(thread_id);
        Ok(state)
    }

    /// Reattaches to the persisted sandbox (or `sandbox_id`, when given)
    /// without creating one, and caches the session for later calls.
    pub async fn rejoin_thread_runner(
        &self,
        thread_id: &str,
        sandbox_id: Option<String>,
    ) -> anyhow::Result<RunnerSessionState> {
        let (thread, destination, provider) = self.thread_destination(thread_id).await?;
        let _writer = self.open_writer(&thread).await?;
        let metadata = self.thread_metadata(thread_id).await?;
        let mut state = match metadata.runner_state {
            Some(state) => state,
            None => match &sandbox_id {
                Some(id) => RunnerSessionState {
                    provider_id: provider.id(),
                    session_id: id.clone(),
                    destination_id: destination.id.clone(),
                    snapshot: None,
                    metadata: serde_json::Value::Null,
                },
                None => anyhow::bail!(
                    "thread \"{thread_id}\" has no persisted runner state to rejoin; give a sandbox id"
                ),
            },
        };
        if state.provider_id != provider.id() {
            anyhow::bail!(
                "thread \"{thread_id}\" persisted a \"{}\" runner state but is bound to \"{}\"",
                state.provider_id,
                provider.id()
            );
        }
        if let Some(id) = sandbox_id {
            state.session_id = id;
        }
        let session = provider.rejoin_session(state).await?;
        let state = session.state();
        self.record_lifecycle(&thread, &provider, RunnerLifecycleAction::Rejoined, &state)
            .await?;
        self.sessions.insert_ready(thread_id, session);
        Ok(state)
    }

    pub(crate) async fn record_lifecycle(
        &self,
        thread: &ThreadState,
        provider: &Arc<dyn RemoteRunnerProvider>,
        action: RunnerLifecycleAction,
        state: &RunnerSessionState,
    ) -> anyhow::Result<()> {
        persist_runner_state(self.store.as_ref(), thread, state.clone()).await?;
        self.bus
            .emit(
                thread,
                None,
                RoderEvent::RunnerLifecycle(RunnerLifecycle {
                    thread_id: thread.thread_id.clone(),
                    provider_id: provider.id(),
                    action,
                    state: Some(state.clone()),
                    error: None,
                }),
            )
            .await?;
        Ok(())
    }
}
