//! [`Runtime::spawn_idle_release`]: a long-lived process (the app server)
//! never exits between a thread's turns, so "the process is done with its
//! sessions" never comes; instead a thread whose log has been quiet for the
//! timeout has its sandbox released by its `on_idle` (paused by default),
//! and its next turn resumes it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::runtime::Runtime;

impl Runtime {
    /// Watches the event bus and releases the live session of every thread
    /// that has had no event for `timeout` (see
    /// [`Runtime::release_idle_runner`]). A thread running a turn is
    /// retried later; one without a live session is forgotten. Abort the
    /// returned task to stop watching.
    ///
    /// ```no_run
    /// # fn demo(runtime: std::sync::Arc<roder_core::Runtime>) {
    /// let watcher = runtime.spawn_idle_release(std::time::Duration::from_secs(600));
    /// // ... at shutdown:
    /// watcher.abort();
    /// # }
    /// ```
    pub fn spawn_idle_release(self: &Arc<Self>, timeout: Duration) -> JoinHandle<()> {
        let runtime = Arc::clone(self);
        let mut events = self.subscribe_events();
        let tick = (timeout / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        tokio::spawn(async move {
            let mut last_seen: HashMap<String, Instant> = HashMap::new();
            let mut ticks = tokio::time::interval(tick);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    event = events.recv() => match event {
                        Ok(envelope) => {
                            last_seen.insert(envelope.thread_id, Instant::now());
                        }
                        // Lagging only means some threads were active.
                        Err(RecvError::Lagged(_)) => {}
                        Err(RecvError::Closed) => return,
                    },
                    _ = ticks.tick() => {
                        let now = Instant::now();
                        let quiet: Vec<String> = last_seen
                            .iter()
                            .filter(|(_, seen)| now.duration_since(**seen) >= timeout)
                            .map(|(thread, _)| thread.clone())
                            .collect();
                        for thread in quiet {
                            if !runtime.has_live_runner(&thread) {
                                last_seen.remove(&thread);
                                continue;
                            }
                            match runtime.release_idle_runner(&thread).await {
                                Ok(_) => {
                                    last_seen.remove(&thread);
                                }
                                Err(error) => {
                                    tracing::debug!(%thread, "idle sandbox not released yet: {error:#}");
                                    last_seen.insert(thread, Instant::now());
                                }
                            }
                        }
                    }
                }
            }
        })
    }

    fn has_live_runner(&self, thread_id: &str) -> bool {
        self.sessions
            .ready_threads()
            .iter()
            .any(|thread| thread == thread_id)
    }
}
