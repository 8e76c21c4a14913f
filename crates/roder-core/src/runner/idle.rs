//! Sessions nothing uses any more: [`Runtime::release_idle_runners`].
//!
//! A process that is about to exit holds live sessions that no later call of
//! it will use. Each destination's `on_idle` (`roder_api::runner_idle`) says
//! what becomes of them: paused (the default where the provider can pause),
//! so an idle sandbox holds no CPU, and marked in the thread's metadata so
//! the thread's next use, in any process, resumes it (`provision.rs`); or
//! kept running.

use roder_api::events::RunnerLifecycleAction;
use roder_api::remote_runner::RunnerSessionState;
use roder_api::runner_idle::{OnIdle, on_idle};

use crate::runner::state::update_metadata;
use crate::runtime::Runtime;

/// What [`Runtime::release_idle_runners`] did with one thread's session.
#[derive(Debug)]
pub struct IdleRelease {
    /// The session's state after pausing; `None` when it was kept running.
    pub paused: Option<RunnerSessionState>,
}

impl Runtime {
    /// Applies each live session's `on_idle` and forgets the session: call
    /// when this process will not use its sessions again (before exiting).
    /// A thread whose turn is running is left alone. Failures are returned
    /// per thread, after the others were released.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) {
    /// for (thread_id, outcome) in runtime.release_idle_runners().await {
    ///     if let Err(error) = outcome {
    ///         eprintln!("thread {thread_id}: its sandbox keeps running: {error:#}");
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn release_idle_runners(&self) -> Vec<(String, anyhow::Result<IdleRelease>)> {
        let mut released = Vec::new();
        for thread_id in self.sessions.ready_threads() {
            let outcome = self.release_idle(&thread_id).await;
            released.push((thread_id, outcome));
        }
        released
    }

    /// Applies `thread_id`'s `on_idle` to its live session and forgets the
    /// session, as [`Runtime::release_idle_runners`] does for every thread:
    /// what a long-lived server calls for one thread nobody has used for a
    /// while ([`Runtime::spawn_idle_release`]). Refused while the thread
    /// runs a turn, and when it has no live session.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let released = runtime.release_idle_runner("thread-1").await?;
    /// println!("paused: {}", released.paused.is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release_idle_runner(&self, thread_id: &str) -> anyhow::Result<IdleRelease> {
        self.release_idle(thread_id).await
    }

    async fn release_idle(&self, thread_id: &str) -> anyhow::Result<IdleRelease> {
        let (thread, destination, provider) = self.thread_destination(thread_id).await?;
        if thread.active_turn().is_some() {
            anyhow::bail!("thread \"{thread_id}\" is running a turn; its sandbox is not idle");
        }
        let idle = on_idle(&destination.config, provider.capabilities().pausable)
            .map_err(anyhow::Error::msg)?;
        let Some(session) = self.sessions.evict(thread_id) else {
            anyhow::bail!("thread \"{thread_id}\" has no live session");
        };
        if idle == OnIdle::Keep {
            return Ok(IdleRelease { paused: None });
        }
        let _writer = self.open_writer(&thread).await?;
        let (state, action) = if idle == OnIdle::Stop {
            (session.stop().await?, RunnerLifecycleAction::Stopped)
        } else {
            (session.pause().await?, RunnerLifecycleAction::Paused)
        };
        self.record_lifecycle(&thread, &provider, action, &state)
            .await?;
        update_metadata(self.store.as_ref(), &thread, |metadata| {
            metadata.runner_idle_paused = true;
        })
        .await?;
        Ok(IdleRelease {
            paused: Some(state),
        })
    }
}
