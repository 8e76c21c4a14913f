//! Reopening a thread: which events its live state is rebuilt from.
//!
//! A long session's log is mostly history that a compaction has already
//! summarized: every `ContextCompacted` replaces the transcript before it,
//! carries the thread's usage so far, and names the turn it compacted in.
//! So the state rebuilt from the last compaction on is the state rebuilt
//! from the whole log, and a runtime reopening the thread reads only that
//! far back. The thread's metadata says where the last compaction is; the
//! log has the last word (see [`rebuild_events`]).

use roder_api::events::{ContextCompacted, EventEnvelope, RoderEvent};
use roder_api::thread::{ThreadMetadata, ThreadStore};

use crate::runner::state::update_metadata;
use crate::threads::ThreadState;

/// The events to rebuild the live state of a thread from: those from its
/// last compaction on when the metadata names one and the log has that
/// compaction there, with the usage it needs; the whole log otherwise (a
/// thread never compacted, a log written before compactions carried their
/// usage, metadata out of step after a crash).
pub(crate) async fn rebuild_events(
    store: &dyn ThreadStore,
    metadata: &ThreadMetadata,
) -> anyhow::Result<Vec<EventEnvelope>> {
    let thread_id = metadata.thread_id.as_str();
    if let Some(seq) = metadata.last_compaction_seq.filter(|seq| *seq > 0) {
        let events = store.load_events(thread_id, seq - 1).await?;
        if starts_with_compaction(&events, seq) {
            return Ok(events);
        }
        tracing::debug!(
            "thread {thread_id}: seq {seq} is not a compaction with its usage; reading the whole log"
        );
    }
    store.load_events(thread_id, 0).await
}

fn starts_with_compaction(events: &[EventEnvelope], seq: u64) -> bool {
    events.first().is_some_and(|first| {
        first.seq == seq
            && matches!(
                &first.event,
                RoderEvent::ContextCompacted(ContextCompacted {
                    thread_usage: Some(_),
                    ..
                })
            )
    })
}

/// Records in the thread's metadata that its last compaction is at `seq`.
/// A failure costs only the shortcut (the next reopen reads more of the
/// log), so it is logged, not returned.
pub(crate) async fn remember_compaction(store: &dyn ThreadStore, thread: &ThreadState, seq: u64) {
    let recorded = update_metadata(store, thread, |metadata| {
        metadata.last_compaction_seq = Some(seq);
    })
    .await;
    if let Err(error) = recorded {
        tracing::warn!(
            "thread {}: could not record its last compaction (seq {seq}): {error:#}",
            thread.thread_id
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::events::{CompactionTrigger, TurnInterrupted};
    use roder_api::inference::TokenUsage;

    fn envelope(seq: u64, event: RoderEvent) -> EventEnvelope {
        EventEnvelope {
            seq,
            timestamp: time::OffsetDateTime::UNIX_EPOCH,
            thread_id: "t".into(),
            turn_id: None,
            event,
        }
    }

    fn compaction(thread_usage: Option<TokenUsage>) -> RoderEvent {
        RoderEvent::ContextCompacted(ContextCompacted {
            thread_id: "t".into(),
            turn_id: None,
            summary: "s".into(),
            transcript: Vec::new(),
            replaced_through_seq: 1,
            replaced_items: 1,
            tokens_before: 2,
            tokens_after: 1,
            trigger: CompactionTrigger::Manual,
            thread_usage,
        })
    }

    #[test]
    fn only_a_compaction_with_its_usage_at_that_seq_is_a_starting_point() {
        let interrupted = RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: "t".into(),
            turn_id: "u".into(),
        });
        let usage = Some(TokenUsage::default());
        assert!(starts_with_compaction(
            &[envelope(5, compaction(usage.clone()))],
            5
        ));
        assert!(!starts_with_compaction(
            &[envelope(6, compaction(usage))],
            5
        ));
        assert!(!starts_with_compaction(&[envelope(5, compaction(None))], 5));
        assert!(!starts_with_compaction(&[envelope(5, interrupted)], 5));
        assert!(!starts_with_compaction(&[], 5));
    }
}
