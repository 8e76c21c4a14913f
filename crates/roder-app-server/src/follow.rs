//! Events of threads another process writes.
//!
//! The runtime broadcasts only the events its own process appends. When
//! many replicas share one store, a client on replica B that follows a
//! thread whose turn runs on replica A needs the store itself to push them:
//! a [`ThreadFollowSource`] (the Postgres store's LISTEN/NOTIFY follower,
//! wired by `roder-cli`). Each subscription then merges two sources, the
//! local bus (fast, and the only one with transient deltas) and the store's
//! follower (complete whoever writes); the connection drops every seq it
//! already sent, so an event arrives once whichever source brings it first.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures::stream::BoxStream;
use roder_api::events::EventEnvelope;

/// Every persisted event of one thread after a cursor, in `seq` order, as
/// any process appends them. The stream ends or yields an error when the
/// source can no longer follow; the connection then follows again from the
/// last seq it received.
pub type FollowStream = BoxStream<'static, anyhow::Result<EventEnvelope>>;

/// The last seq of a thread a connection has sent, every one before it
/// included; it only grows, as events arrive from either source.
pub type SentCursor = Arc<AtomicU64>;

/// Where a connection follows threads written by other processes.
pub trait ThreadFollowSource: Send + Sync + 'static {
    /// Follows `thread_id` from `after_seq` (exclusive).
    fn follow(&self, thread_id: &str, after_seq: u64) -> FollowStream;

    /// [`follow`](Self::follow), told what the connection already sent
    /// (`sent`, which the local bus moves on for a thread this process
    /// writes), so a source may skip those events and the reads for them.
    /// The default ignores it.
    fn follow_after_sent(&self, thread_id: &str, after_seq: u64, sent: SentCursor) -> FollowStream {
        let _ = sent;
        self.follow(thread_id, after_seq)
    }
}

impl<F> ThreadFollowSource for F
where
    F: Fn(&str, u64) -> FollowStream + Send + Sync + 'static,
{
    fn follow(&self, thread_id: &str, after_seq: u64) -> FollowStream {
        self(thread_id, after_seq)
    }
}

/// A source shared by every connection of a server.
pub type SharedFollowSource = Arc<dyn ThreadFollowSource>;
