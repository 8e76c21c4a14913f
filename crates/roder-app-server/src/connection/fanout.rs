//! Routing runtime events to the connections that follow their thread.
//!
//! One task per server reads the runtime's broadcast and hands each event
//! to the inboxes of the connections subscribed to its thread, and to no
//! other: a connection that does not follow a thread costs that thread
//! nothing (no wake-up, no copy, no filter). Before this, every connection
//! read the whole broadcast and dropped what it did not follow, so an
//! event's cost grew with the number of connections.
//!
//! An inbox is bounded. When a route finds it full (or the router itself
//! fell behind the runtime's broadcast), the inbox is marked lagged and its
//! forwarder drops every subscription with -32008, as it does when the
//! client's own queue is full: the runtime never waits for a client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use roder_api::events::EventEnvelope;
use roder_core::Runtime;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Notify, broadcast, mpsc};
use tokio::task::AbortHandle;

use crate::follow::SharedFollowSource;

/// A server's router: which inboxes follow which thread.
pub(crate) struct Fanout {
    routes: Mutex<HashMap<String, Vec<Route>>>,
    next_inbox: AtomicU64,
    follow: Option<SharedFollowSource>,
    task: Mutex<Option<AbortHandle>>,
}

struct Route {
    inbox: u64,
    sender: mpsc::Sender<Arc<EventEnvelope>>,
    lag: Arc<Lag>,
}

/// Set when an inbox lost an event; its forwarder is woken to act on it.
#[derive(Default)]
pub(crate) struct Lag {
    lagged: AtomicBool,
    wake: Notify,
}

impl Lag {
    fn mark(&self) {
        if !self.lagged.swap(true, Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// Waits until the inbox lagged; clears the mark.
    pub async fn wait(&self) {
        loop {
            if self.lagged.swap(false, Ordering::SeqCst) {
                return;
            }
            self.wake.notified().await;
        }
    }
}

/// One connection's end of the router.
pub(crate) struct Inbox {
    pub id: u64,
    sender: mpsc::Sender<Arc<EventEnvelope>>,
    pub events: mpsc::Receiver<Arc<EventEnvelope>>,
    pub lag: Arc<Lag>,
}

impl Fanout {
    /// Starts routing `runtime`'s events. `follow` (when given) brings the
    /// events other processes write; see `crate::follow`.
    pub fn start(runtime: &Runtime, follow: Option<SharedFollowSource>) -> Arc<Self> {
        let fanout = Arc::new(Self {
            routes: Mutex::new(HashMap::new()),
            next_inbox: AtomicU64::new(1),
            follow,
            task: Mutex::new(None),
        });
        let task = tokio::spawn(route(runtime.subscribe_events(), Arc::downgrade(&fanout)));
        *fanout.task.lock().unwrap_or_else(PoisonError::into_inner) = Some(task.abort_handle());
        fanout
    }

    pub fn follow_source(&self) -> Option<&SharedFollowSource> {
        self.follow.as_ref()
    }

    /// A new inbox holding up to `capacity` events not yet forwarded.
    pub fn inbox(&self, capacity: usize) -> Inbox {
        let (sender, events) = mpsc::channel(capacity.max(1));
        Inbox {
            id: self.next_inbox.fetch_add(1, Ordering::Relaxed),
            sender,
            events,
            lag: Arc::default(),
        }
    }

    /// Routes `thread_id`'s events to `inbox` from now on (once, however
    /// often it is called). Events broadcast before this returns may or may
    /// not arrive; they are persisted already, so a log read after this
    /// call holds them.
    pub fn add(&self, thread_id: &str, inbox: &Inbox) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let routes = routes.entry(thread_id.to_string()).or_default();
        if routes.iter().all(|route| route.inbox != inbox.id) {
            routes.push(Route {
                inbox: inbox.id,
                sender: inbox.sender.clone(),
                lag: inbox.lag.clone(),
            });
        }
    }

    /// Stops routing `thread_id` to inbox `id`.
    pub fn remove(&self, thread_id: &str, id: u64) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = routes.get_mut(thread_id) {
            list.retain(|route| route.inbox != id);
            if list.is_empty() {
                routes.remove(thread_id);
            }
        }
    }

    /// How many threads have at least one follower here (for tests).
    #[cfg(test)]
    pub fn routed_threads(&self) -> usize {
        self.routes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    fn deliver(&self, envelope: EventEnvelope) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(list) = routes.get_mut(&envelope.thread_id) else {
            return;
        };
        let envelope = Arc::new(envelope);
        list.retain(|route| match route.sender.try_send(envelope.clone()) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                route.lag.mark();
                true
            }
            // The connection is gone without unsubscribing.
            Err(TrySendError::Closed(_)) => false,
        });
        if list.is_empty() {
            routes.remove(&envelope.thread_id);
        }
    }

    fn lag_all(&self) {
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        for route in routes.values().flatten() {
            route.lag.mark();
        }
    }
}

impl Drop for Fanout {
    fn drop(&mut self) {
        if let Some(task) = self
            .task
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            task.abort();
        }
    }
}

async fn route(mut events: broadcast::Receiver<EventEnvelope>, fanout: Weak<Fanout>) {
    loop {
        let received = events.recv().await;
        let Some(fanout) = fanout.upgrade() else {
            return;
        };
        match received {
            Ok(envelope) => fanout.deliver(envelope),
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(missed, "the app server's router fell behind the event bus");
                fanout.lag_all();
            }
            Err(RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::extension::ExtensionRegistryBuilder;
    use roder_core::{RuntimeConfig, StartTurnRequest};
    use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
    use roder_testkit::{ScriptedEngine, final_round};
    use std::time::Duration;

    fn runtime(store: &std::path::Path, turns: usize) -> Arc<Runtime> {
        let mut builder = ExtensionRegistryBuilder::new();
        let rounds = (0..turns).map(|_| final_round("done")).collect();
        builder.inference_engine(ScriptedEngine::new(rounds));
        builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
            base_path: store.to_path_buf(),
        }));
        Arc::new(Runtime::new(builder.build().unwrap(), RuntimeConfig::default()).unwrap())
    }

    /// Runs one scripted turn of `thread_id` and waits for its end.
    async fn turn(runtime: &Arc<Runtime>, thread_id: &str, workspace: &str) {
        let mut bus = runtime.subscribe_events();
        let mut request = StartTurnRequest::new(thread_id, "hi");
        request.workspace = workspace.to_string();
        runtime.start_turn(request).await.unwrap();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), bus.recv())
                .await
                .unwrap()
                .unwrap();
            if event.thread_id == thread_id && event.event.is_terminal() {
                return;
            }
        }
    }

    #[tokio::test]
    async fn events_reach_only_the_inboxes_following_their_thread() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().display().to_string();
        let runtime = runtime(&dir.path().join("threads"), 3);
        let fanout = Fanout::start(&runtime, None);
        let (mut first, mut second, mut idle) =
            (fanout.inbox(64), fanout.inbox(64), fanout.inbox(64));
        let one = runtime
            .create_thread(Some(workspace.clone()))
            .await
            .unwrap();
        let two = runtime
            .create_thread(Some(workspace.clone()))
            .await
            .unwrap();
        let three = runtime
            .create_thread(Some(workspace.clone()))
            .await
            .unwrap();
        fanout.add(&one.thread_id, &first);
        fanout.add(&one.thread_id, &first); // once, however often
        fanout.add(&two.thread_id, &second);
        assert_eq!(fanout.routed_threads(), 2);

        turn(&runtime, &one.thread_id, &workspace).await;
        turn(&runtime, &two.thread_id, &workspace).await;
        // A thread nobody follows: routed nowhere.
        turn(&runtime, &three.thread_id, &workspace).await;
        tokio::time::sleep(Duration::from_millis(200)).await;

        let mut seqs = Vec::new();
        while let Ok(event) = first.events.try_recv() {
            assert_eq!(event.thread_id, one.thread_id, "its thread only");
            if !event.event.is_transient() {
                seqs.push(event.seq);
            }
        }
        let expected: Vec<u64> = (2..=runtime.last_seq(&one.thread_id).await.unwrap()).collect();
        assert_eq!(seqs, expected, "every event of the turn, once");
        let mut count = 0;
        while let Ok(event) = second.events.try_recv() {
            assert_eq!(event.thread_id, two.thread_id);
            count += 1;
        }
        assert!(count > 0);
        assert!(
            idle.events.try_recv().is_err(),
            "an inbox that follows nothing gets nothing"
        );

        fanout.remove(&one.thread_id, first.id);
        fanout.remove(&two.thread_id, second.id);
        assert_eq!(fanout.routed_threads(), 0);
    }

    #[tokio::test]
    async fn a_full_inbox_is_marked_lagged_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = dir.path().display().to_string();
        let runtime = runtime(&dir.path().join("threads"), 1);
        let fanout = Fanout::start(&runtime, None);
        let inbox = fanout.inbox(1);
        let thread = runtime
            .create_thread(Some(workspace.clone()))
            .await
            .unwrap();
        fanout.add(&thread.thread_id, &inbox);
        turn(&runtime, &thread.thread_id, &workspace).await;
        tokio::time::timeout(Duration::from_secs(10), inbox.lag.wait())
            .await
            .expect("the overflow is reported");
    }
}
