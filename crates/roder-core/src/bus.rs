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

    /// Broadcasts an event of `thread_id` that the log could not take (a
    /// full disk), so those waiting for it learn of it, with the seq it
    /// would have had. Not persisted: the log gets its own account later
    /// (the next writer closes a turn whose end is missing).
    pub fn broadcast_unrecorded(
        &self,
        cursor: &LogCursor,
        thread_id: &str,
        turn_id: Option<&str>,
        event: RoderEvent,
    ) {
        let _ = self.sender.send(EventEnvelope {
            seq: cursor.next_seq,
            timestamp: OffsetDateTime::now_utc(),
            thread_id: thread_id.to_string(),
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
        let mut emitted = self
            .emit_all_locked(cursor, thread_id, turn_id, vec![event])
            .await?;
        emitted
            .pop()
            .ok_or_else(|| anyhow::anyhow!("internal error: an emitted event went missing"))
    }

    /// Numbers, persists and broadcasts `events` of `thread` in order, in one
    /// append: a turn step's events cost the store one write, not one each.
    pub async fn emit_all(
        &self,
        thread: &ThreadState,
        turn_id: Option<&str>,
        events: Vec<RoderEvent>,
    ) -> anyhow::Result<Vec<EventEnvelope>> {
        let mut cursor = thread.log.lock().await;
        self.emit_all_locked(&mut cursor, &thread.thread_id, turn_id, events)
            .await
    }

    async fn emit_all_locked(
        &self,
        cursor: &mut LogCursor,
        thread_id: &str,
        turn_id: Option<&str>,
        events: Vec<RoderEvent>,
    ) -> anyhow::Result<Vec<EventEnvelope>> {
        // The seqs are taken before the append is awaited. If this future is
        // dropped mid-append (a turn cancelled past its grace period), the
        // store may or may not have written them; a store that refuses gaps
        // then refuses the next seq, and `resync` renumbers from the log.
        let first_seq = cursor.next_seq;
        let timestamp = OffsetDateTime::now_utc();
        let mut envelopes: Vec<EventEnvelope> = events
            .into_iter()
            .zip(first_seq..)
            .map(|(mut event, seq)| {
                cursor.stamp(&mut event);
                EventEnvelope {
                    seq,
                    timestamp,
                    thread_id: thread_id.to_string(),
                    turn_id: turn_id.map(str::to_string),
                    event,
                }
            })
            .collect();
        if envelopes.is_empty() {
            return Ok(envelopes);
        }
        cursor.next_seq = first_seq + envelopes.len() as u64;
        let mut appended = self.append(cursor, thread_id, &envelopes).await;
        if appended.is_err() && self.resync(cursor, thread_id, &mut envelopes).await {
            appended = self.append(cursor, thread_id, &envelopes).await;
        }
        if let Err(error) = appended {
            cursor.next_seq = envelopes.first().map_or(first_seq, |first| first.seq);
            return Err(anyhow::anyhow!(
                "could not persist event of thread \"{thread_id}\": {error:#}"
            ));
        }
        for envelope in &envelopes {
            cursor.observe(envelope);
            // No receivers is fine: nobody is watching.
            let _ = self.sender.send(envelope.clone());
        }
        Ok(envelopes)
    }

    async fn append(
        &self,
        cursor: &LogCursor,
        thread_id: &str,
        batch: &[EventEnvelope],
    ) -> anyhow::Result<()> {
        match &cursor.writer {
            Some(lease) => {
                self.store
                    .append_events_leased(lease.as_ref(), thread_id, batch)
                    .await
            }
            None => self.store.append_events(thread_id, batch).await,
        }
    }

    /// After a failed append: when the log ends before the batch's first
    /// seq - 1 (an earlier append was dropped and never written), renumbers
    /// the batch to follow the log and says to try again. A log that
    /// reaches the first seq or beyond means another writer: no retry.
    async fn resync(
        &self,
        cursor: &mut LogCursor,
        thread_id: &str,
        envelopes: &mut [EventEnvelope],
    ) -> bool {
        let Some(wanted) = envelopes.first().map(|first| first.seq) else {
            return false;
        };
        let Ok(events) = self.store.load_events(thread_id, 0).await else {
            return false;
        };
        let on_disk = events.last().map_or(0, |last| last.seq);
        if on_disk + 1 >= wanted {
            return false;
        }
        tracing::warn!(
            thread_id,
            on_disk,
            wanted,
            "an earlier append never reached the log; renumbering from it"
        );
        for (envelope, seq) in envelopes.iter_mut().zip(on_disk + 1..) {
            envelope.seq = seq;
        }
        cursor.next_seq = on_disk + 1 + envelopes.len() as u64;
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
