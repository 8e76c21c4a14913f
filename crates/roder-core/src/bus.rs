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
        mut event: RoderEvent,
    ) -> anyhow::Result<EventEnvelope> {
        cursor.stamp(&mut event);
        // The seq is taken before the append is awaited. If this future is
        // dropped mid-append (a turn cancelled past its grace period), the
        // store may or may not have written it; a store that refuses gaps
        // then refuses the next seq, and `resync` renumbers from the log.
        let mut envelope = EventEnvelope {
            seq: cursor.next_seq,
            timestamp: OffsetDateTime::now_utc(),
            thread_id: thread_id.to_string(),
            turn_id: turn_id.map(str::to_string),
            event,
        };
        cursor.next_seq += 1;
        let mut appended = self.append(cursor, thread_id, &envelope).await;
        if appended.is_err() && self.resync(cursor, thread_id, &mut envelope).await {
            appended = self.append(cursor, thread_id, &envelope).await;
        }
        if let Err(error) = appended {
            cursor.next_seq = envelope.seq;
            return Err(anyhow::anyhow!(
                "could not persist event of thread \"{thread_id}\": {error:#}"
            ));
        }
        cursor.observe(&envelope);
        // No receivers is fine: nobody is watching.
        let _ = self.sender.send(envelope.clone());
        Ok(envelope)
    }

    async fn append(
        &self,
        cursor: &LogCursor,
        thread_id: &str,
        envelope: &EventEnvelope,
    ) -> anyhow::Result<()> {
        let batch = std::slice::from_ref(envelope);
        match &cursor.writer {
            Some(lease) => {
                self.store
                    .append_events_leased(lease.as_ref(), thread_id, batch)
                    .await
            }
            None => self.store.append_events(thread_id, batch).await,
        }
    }

    /// After a failed append: when the log ends before `envelope.seq - 1`
    /// (an earlier append was dropped and never written), renumbers
    /// `envelope` to follow the log and says to try again. A log that
    /// reaches `envelope.seq` or beyond means another writer: no retry.
    async fn resync(
        &self,
        cursor: &mut LogCursor,
        thread_id: &str,
        envelope: &mut EventEnvelope,
    ) -> bool {
        let Ok(events) = self.store.load_events(thread_id, 0).await else {
            return false;
        };
        let on_disk = events.last().map_or(0, |last| last.seq);
        if on_disk + 1 >= envelope.seq {
            return false;
        }
        tracing::warn!(
            thread_id,
            on_disk,
            wanted = envelope.seq,
            "an earlier append never reached the log; renumbering from it"
        );
        envelope.seq = on_disk + 1;
        cursor.next_seq = envelope.seq + 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory_store::MemoryThreadStore;
    use roder_api::events::ThreadCreated;

    fn created() -> RoderEvent {
        RoderEvent::ThreadCreated(ThreadCreated {
            thread_id: "t".into(),
            workspace: "/w".into(),
            runner_provider_id: None,
        })
    }

    #[tokio::test]
    async fn a_seq_lost_with_a_dropped_append_is_reused_not_left_as_a_gap() {
        let store = Arc::new(MemoryThreadStore::default());
        let bus = EventBus::new(store.clone(), 16);
        let thread = ThreadState::from_log("t".into(), &[]);
        bus.emit(&thread, None, created()).await.unwrap();
        // An append whose future was dropped before the store wrote it.
        thread.log.lock().await.next_seq += 1;
        let envelope = bus.emit(&thread, None, created()).await.unwrap();
        assert_eq!(envelope.seq, 2);
        let next = bus.emit(&thread, None, created()).await.unwrap();
        assert_eq!(next.seq, 3);
        let seqs: Vec<u64> = store
            .load_events("t", 0)
            .await
            .unwrap()
            .iter()
            .map(|event| event.seq)
            .collect();
        assert_eq!(seqs, vec![1, 2, 3]);
    }
}
