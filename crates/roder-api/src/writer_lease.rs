//! One writer per thread, across processes.
//!
//! A thread's log is only consistent when one process appends to it: two
//! writers would both number their events from the same last `seq`. A store
//! that several processes can open grants a **writer lease** per thread
//! ([`ThreadStore::acquire_writer_lease`](crate::thread::ThreadStore::acquire_writer_lease));
//! the runtime holds it while it writes (a turn, a lifecycle operation) and
//! refuses to write without it.
//!
//! The shape fits both kinds of store:
//!
//! * an embedded store (JSONL) takes an OS file lock: the kernel releases it
//!   when the process dies, so the lease never outlives its holder and
//!   [`WriterLease::renew`] has nothing to do;
//! * a shared database store keeps a row with an owner, an expiry on the
//!   database's clock and a fencing [`generation`](WriterLease::generation)
//!   that only grows; a holder renews before the expiry, and every append
//!   carries the generation it was granted so that a holder that paused past
//!   its expiry is refused.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// Who holds (or asks for) a thread's writer lease; shown in busy errors.
///
/// ```
/// use roder_api::writer_lease::WriterIdentity;
///
/// let me = WriterIdentity::new("runtime-7f3a", 4242, "build-host");
/// assert_eq!(me.pid, 4242);
/// assert!(me.to_string().contains("pid 4242 on build-host"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriterIdentity {
    /// Unique per runtime instance: two runtimes in one process differ.
    pub owner_id: String,
    pub pid: u32,
    pub host: String,
    #[serde(with = "time::serde::rfc3339")]
    pub since: OffsetDateTime,
}

impl WriterIdentity {
    /// An identity whose `since` is now.
    pub fn new(owner_id: impl Into<String>, pid: u32, host: impl Into<String>) -> Self {
        Self {
            owner_id: owner_id.into(),
            pid,
            host: host.into(),
            since: OffsetDateTime::now_utc(),
        }
    }
}

impl std::fmt::Display for WriterIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let since = self
            .since
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_else(|_| self.since.unix_timestamp().to_string());
        write!(f, "pid {} on {} since {since}", self.pid, self.host)
    }
}

/// What a writer asks the store for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriterLeaseRequest {
    pub owner: WriterIdentity,
    /// How long the lease lasts without a renewal, for stores whose leases
    /// expire (a database row). Stores whose leases die with the process
    /// (file locks) ignore it.
    pub ttl: Duration,
}

/// A held writer lease. Dropping it without [`release`](WriterLease::release)
/// is allowed: a file lock is closed with it, a database row expires.
#[async_trait::async_trait]
pub trait WriterLease: Send + Sync + 'static {
    /// The thread this lease is for.
    fn thread_id(&self) -> &str;

    /// The fencing token: grows with every grant of this thread's lease.
    /// Stores that fence appends compare it under their row lock.
    fn generation(&self) -> u64;

    /// The `seq` of the thread's last persisted event when the lease was
    /// granted, when the store knows it without reading the log. The runtime
    /// then skips re-reading a log nobody else wrote; `None` makes it check.
    fn last_seq_at_grant(&self) -> Option<u64> {
        None
    }

    /// Extends the lease by its ttl. Errors when the lease was lost (another
    /// writer took over after an expiry); the holder must stop writing.
    async fn renew(&self) -> anyhow::Result<()>;

    /// Gives the lease up.
    async fn release(&self) -> anyhow::Result<()>;
}

/// The answer to [`ThreadStore::acquire_writer_lease`](crate::thread::ThreadStore::acquire_writer_lease).
pub enum WriterLeaseOutcome {
    /// The caller now holds the lease.
    Acquired(Arc<dyn WriterLease>),
    /// Another live writer holds it.
    Busy(WriterIdentity),
    /// The store has no leases (an in-memory store only one process sees).
    Unsupported,
}

impl std::fmt::Debug for WriterLeaseOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WriterLeaseOutcome::Acquired(lease) => f
                .debug_struct("Acquired")
                .field("thread_id", &lease.thread_id())
                .field("generation", &lease.generation())
                .finish(),
            WriterLeaseOutcome::Busy(holder) => f.debug_tuple("Busy").field(holder).finish(),
            WriterLeaseOutcome::Unsupported => f.write_str("Unsupported"),
        }
    }
}

/// A thread's writer lease is held by another writer. Wrapped in the
/// `anyhow::Error` the runtime returns, so callers can branch on it with
/// `downcast_ref::<ThreadWriterBusy>()` (`roder exec` exits 75).
///
/// ```
/// use roder_api::writer_lease::{ThreadWriterBusy, WriterIdentity};
///
/// let busy = ThreadWriterBusy {
///     thread_id: "t1".into(),
///     holder: WriterIdentity::new("other", 99, "box"),
/// };
/// assert!(busy.to_string().starts_with("thread \"t1\" is busy: another process is writing it (pid 99 on box since "));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "thread \"{thread_id}\" is busy: another process is writing it ({holder}); wait for its turn to end or stop that process"
)]
pub struct ThreadWriterBusy {
    pub thread_id: String,
    pub holder: WriterIdentity,
}
