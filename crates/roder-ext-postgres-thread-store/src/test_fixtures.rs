//! What this crate's tests share: a cluster with a migrated store, and
//! metadata and events to write.

use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent, ThreadCreated, TurnInterrupted};
use roder_api::thread::ThreadMetadata;
use roder_api::writer_lease::{
    WriterIdentity, WriterLease, WriterLeaseOutcome, WriterLeaseRequest,
};
use std::sync::Arc;
use time::OffsetDateTime;

use crate::PostgresThreadStore;
use crate::test_support::TestCluster;

/// A fresh cluster and a store over it; `None` when the test is skipped.
pub(crate) async fn setup() -> Option<(TestCluster, PostgresThreadStore)> {
    let cluster = TestCluster::start_or_skip().await.unwrap()?;
    let store = PostgresThreadStore::connect(&cluster.url())
        .await
        .unwrap_or_else(|error| panic!("{error:#}\n{}", cluster.log()));
    Some((cluster, store))
}

/// Another replica: its own pool over the same database.
pub(crate) async fn replica(cluster: &TestCluster) -> PostgresThreadStore {
    PostgresThreadStore::connect(&cluster.url()).await.unwrap()
}

/// Built from JSON so that fields roder-api adds later (with serde
/// defaults) need no change here.
pub(crate) fn metadata(thread_id: &str, updated_at: OffsetDateTime) -> ThreadMetadata {
    let updated_at = updated_at
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    serde_json::from_value(serde_json::json!({
        "thread_id": thread_id,
        "title": format!("title of {thread_id}"),
        "workspace": "/work/space",
        "provider": "mock",
        "model": "mock-model",
        "tool_allowlist": ["exec_command"],
        "created_at": "1970-01-01T00:00:00Z",
        "updated_at": updated_at,
    }))
    .unwrap()
}

pub(crate) fn event(thread_id: &str, seq: u64) -> EventEnvelope {
    let event = if seq == 1 {
        RoderEvent::ThreadCreated(ThreadCreated {
            thread_id: thread_id.to_string(),
            workspace: "/work/space".to_string(),
            runner_provider_id: None,
        })
    } else {
        RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: thread_id.to_string(),
            turn_id: format!("turn-{seq}"),
        })
    };
    EventEnvelope {
        seq,
        timestamp: OffsetDateTime::UNIX_EPOCH + Duration::from_secs(seq),
        thread_id: thread_id.to_string(),
        turn_id: None,
        event,
    }
}

pub(crate) fn events(thread_id: &str, seqs: std::ops::RangeInclusive<u64>) -> Vec<EventEnvelope> {
    seqs.map(|seq| event(thread_id, seq)).collect()
}

pub(crate) fn request(owner: &str, ttl: Duration) -> WriterLeaseRequest {
    WriterLeaseRequest {
        owner: WriterIdentity::new(owner, 4242, format!("host-of-{owner}")),
        ttl,
    }
}

pub(crate) fn acquired(outcome: WriterLeaseOutcome) -> Arc<dyn WriterLease> {
    match outcome {
        WriterLeaseOutcome::Acquired(lease) => lease,
        other => panic!("expected the lease, got {other:?}"),
    }
}

pub(crate) fn busy(outcome: WriterLeaseOutcome) -> WriterIdentity {
    match outcome {
        WriterLeaseOutcome::Busy(holder) => holder,
        other => panic!("expected busy, got {other:?}"),
    }
}

pub(crate) fn seqs(events: &[EventEnvelope]) -> Vec<u64> {
    events.iter().map(|envelope| envelope.seq).collect()
}
