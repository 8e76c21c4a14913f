//! The event bus: numbering, persistence, broadcast.
//!
//! An event is appended to the thread's log *before* it is broadcast, under
//! the thread's log lock. A client that reads the log after a cursor and then
//! follows the broadcast (dropping `seq`s it already has) therefore sees every
//! event exactly once, in order.
//!
//! Transient events ([`RoderEvent::is_transient`]: streamed message and
//! reasoning deltas) are broadcast only. Their text reaches the log whole, in
//! the `TranscriptItemAppended` that follows, so storing every fragment too
//! would store the model's output twice (and a 20 MB answer as 20 MB of
//! one-line events). A transient event carries the `seq` of the last
//! persisted event before it and never advances the numbering: clients drop
//! repeated `seq`s among persisted events only.

use std::sync::Arc;

use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::thread::ThreadStore;
use time::OffsetDateTime;
use tokio::sync::broadcast;

use crate::threads::{LogCursor, ThreadState};

pub(crate) struct EventBus {
    sender: broadcast::Sender<EventEnvelope>,
    store: Arc<dyn ThreadStore>,
}

impl EventBus {
    /// A subscriber more than `capacity` events behind gets
    /// `RecvError::Lagged` and must catch up from the persisted log.
    pub fn new(store: Arc<dyn ThreadStore>, capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity);
        Self { sender, store }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<EventEnvelope> {
        self.sender.subscribe()
    }

    /// Numbers, persists and broadcasts one event of `thread`.
    pub async fn emit(
        &self,
        thread: &ThreadState,
        turn_id: Option<&str>,
        event: RoderEvent,
    ) -> anyhow::Result<EventEnvelope> {
        let mut cursor = thread.log.lock().await;
        self.emit_locked(&mut cursor, &thread.thread_id, turn_id, event)
            .await
    }

    /// Broadcasts a transient event of `thread` without persisting it.
    pub async fn publish_transient(
        &self,
        thread: &ThreadState,
        turn_id: Option<&str>,
        event: RoderEvent,
    ) {
        let seq = thread.log.lock().await.next_seq.saturating_sub(1);
        let _ = self.sender.send(EventEnvelope {
            seq,
            timestamp: OffsetDateTime::now_utc(),
            thread_id: thread.thread_id.clone(),
            turn_id: turn_id.map(str::to_string),
            event,
        });
    }

    /// Like [`emit`](Self::emit) for a caller that already holds the log lock.
    pub async fn emit_locked(
        &self,
        cursor: &mut LogCursor,
        thread_id: &str,
        turn_id: Option<&str>,
        event: RoderEvent,
    ) -> anyhow::Result<EventEnvelope> {
        // The seq is taken before the append is awaited: if this future is
        // dropped mid-append (a turn cancelled past its grace period) the
        // number stays used, so a seq can be missing but is never repeated.
        let envelope = EventEnvelope {
            seq: cursor.next_seq,
            timestamp: OffsetDateTime::now_utc(),
            thread_id: thread_id.to_string(),
            turn_id: turn_id.map(str::to_string),
            event,
        };
        cursor.next_seq += 1;
        let batch = std::slice::from_ref(&envelope);
        let appended = match &cursor.writer {
            Some(lease) => {
                self.store
                    .append_events_leased(lease.as_ref(), thread_id, batch)
                    .await
            }
            None => self.store.append_events(thread_id, batch).await,
        };
        if let Err(error) = appended {
            cursor.next_seq -= 1;
            return Err(anyhow::anyhow!(
                "could not persist event of thread \"{thread_id}\": {error:#}"
            ));
        }
        cursor.observe(&envelope);
        // No receivers is fine: nobody is watching.
        let _ = self.sender.send(envelope.clone());
        Ok(envelope)
    }
}
