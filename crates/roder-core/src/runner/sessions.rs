//! One live runner session per thread, initialized at most once at a time.
//!
//! A slot is `Initializing` (a shared future every caller awaits) or `Ready`.
//! Initialization runs on its own task, detached from the caller, so an
//! interrupted turn cannot strand it: the task finishes, records the outcome
//! in the slot (success: `Ready`; failure: slot removed so the next caller
//! retries) and only then resolves the future its waiters share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use roder_api::remote_runner::RemoteRunnerSession;

type InitOutcome = Result<Arc<dyn RemoteRunnerSession>, String>;

enum Slot {
    Initializing {
        generation: u64,
        outcome: Shared<BoxFuture<'static, InitOutcome>>,
    },
    Ready(Arc<dyn RemoteRunnerSession>),
}

#[derive(Default)]
struct Slots {
    by_thread: HashMap<String, Slot>,
    next_generation: u64,
}

#[derive(Default, Clone)]
pub(crate) struct SessionCache {
    slots: Arc<Mutex<Slots>>,
}

impl SessionCache {
    fn slots(&self) -> std::sync::MutexGuard<'_, Slots> {
        self.slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The cached session, or the outcome of the one initialization in flight,
    /// or a new initialization from `init` (only called when nothing is cached
    /// or in flight).
    pub async fn get_or_init<F>(
        &self,
        thread_id: &str,
        init: F,
    ) -> anyhow::Result<Arc<dyn RemoteRunnerSession>>
    where
        F: FnOnce() -> BoxFuture<'static, anyhow::Result<Arc<dyn RemoteRunnerSession>>>,
    {
        let outcome = {
            let mut slots = self.slots();
            match slots.by_thread.get(thread_id) {
                Some(Slot::Ready(session)) => return Ok(session.clone()),
                Some(Slot::Initializing { outcome, .. }) => outcome.clone(),
                None => {
                    let generation = slots.next_generation;
                    slots.next_generation += 1;
                    let outcome = self.spawn_init(thread_id.to_string(), generation, init());
                    slots.by_thread.insert(
                        thread_id.to_string(),
                        Slot::Initializing {
                            generation,
                            outcome: outcome.clone(),
                        },
                    );
                    outcome
                }
            }
        };
        outcome.await.map_err(anyhow::Error::msg)
    }

    fn spawn_init(
        &self,
        thread_id: String,
        generation: u64,
        init: BoxFuture<'static, anyhow::Result<Arc<dyn RemoteRunnerSession>>>,
    ) -> Shared<BoxFuture<'static, InitOutcome>> {
        let slots = self.slots.clone();
        let task = tokio::spawn(async move {
            // A panicking provider fails this initialization like an error
            // would: the slot is cleared below and the next call retries.
            let outcome = match std::panic::AssertUnwindSafe(init).catch_unwind().await {
                Ok(outcome) => outcome.map_err(|error| format!("{error:#}")),
                Err(panic) => Err(format!(
                    "the runner provider panicked while provisioning ({})",
                    crate::turn::tool_call::panic_message(panic.as_ref())
                )),
            };
            let mut slots = slots
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let ours = matches!(
                slots.by_thread.get(&thread_id),
                Some(Slot::Initializing { generation: current, .. }) if *current == generation
            );
            if ours {
                match &outcome {
                    Ok(session) => {
                        slots
                            .by_thread
                            .insert(thread_id, Slot::Ready(session.clone()));
                    }
                    Err(_) => {
                        slots.by_thread.remove(&thread_id);
                    }
                }
            }
            outcome
        });
        async move {
            task.await
                .unwrap_or_else(|error| Err(format!("runner initialization task failed: {error}")))
        }
        .boxed()
        .shared()
    }

    /// Caches `session` as the thread's live session (after a rejoin).
    pub fn insert_ready(&self, thread_id: &str, session: Arc<dyn RemoteRunnerSession>) {
        self.slots()
            .by_thread
            .insert(thread_id.to_string(), Slot::Ready(session));
    }

    /// The threads whose session is live (not initializing).
    pub fn ready_threads(&self) -> Vec<String> {
        self.slots()
            .by_thread
            .iter()
            .filter(|(_, slot)| matches!(slot, Slot::Ready(_)))
            .map(|(thread_id, _)| thread_id.clone())
            .collect()
    }

    /// Forgets the thread's session (after a detach) and returns it if it
    /// was live. An initialization in flight is left to finish; its result
    /// is then dropped.
    pub fn evict(&self, thread_id: &str) -> Option<Arc<dyn RemoteRunnerSession>> {
        match self.slots().by_thread.remove(thread_id) {
            Some(Slot::Ready(session)) => Some(session),
            _ => None,
        }
    }
}
