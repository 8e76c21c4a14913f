//! Threads as they are persisted, and the store contract.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::events::EventEnvelope;
use crate::remote_runner::{RunnerDestination, RunnerSessionState, ThreadRunnerBinding};
use crate::tools::ToolSpec;
use crate::transcript::TranscriptItem;
use crate::writer_lease::{WriterLease, WriterLeaseOutcome, WriterLeaseRequest};

/// Everything about a thread except its events. Rewritten whole on change.
///
/// Never holds secrets: runner configs reach disk here, so providers read
/// credentials from their environment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadMetadata {
    pub thread_id: String,
    #[serde(default)]
    pub title: Option<String>,
    /// The local workspace directory (for unbound threads), as given.
    pub workspace: String,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub tool_allowlist: Vec<String>,
    #[serde(default)]
    pub developer_instructions: Option<String>,
    /// Tools the client declared and resolves itself.
    #[serde(default)]
    pub external_tools: Vec<ToolSpec>,
    /// The runtime-level destination in force when the thread was created.
    #[serde(default)]
    pub runner_destination: Option<RunnerDestination>,
    /// Set when the thread's workspace tools run in a runner.
    #[serde(default)]
    pub runner_binding: Option<ThreadRunnerBinding>,
    /// The last known session, to resume instead of creating a new one.
    #[serde(default)]
    pub runner_state: Option<RunnerSessionState>,
    /// Set when the runtime paused that session because nothing used it
    /// (`runner_idle`): the thread's next use resumes it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub runner_idle_paused: bool,
    /// The thread's own sandbox policy, when it has one; otherwise its
    /// runner destination's, else the runtime's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::sandbox_policy::SandboxPolicy>,
    /// Token usage of every turn so far.
    #[serde(default)]
    pub usage: crate::inference::TokenUsage,
    /// The seq of the thread's last `ContextCompacted`: a runtime reopening
    /// the thread rebuilds its state from there instead of reading the
    /// history the compaction summarized. Advisory: a reader checks that the
    /// event at that seq is a compaction, and reads the whole log otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction_seq: Option<u64>,
    #[serde(default)]
    pub archived: bool,
    /// The thread's own approval mode, rules and requirement.
    #[serde(
        default,
        skip_serializing_if = "crate::approval::ThreadApprovals::is_default"
    )]
    pub approvals: crate::approval::ThreadApprovals,
    /// The agent profile resolved when the thread was created: later turns,
    /// resumes and other processes use it as it is, never resolving again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Box<crate::profile::ProfileSnapshot>>,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub updated_at: OffsetDateTime,
}

/// A thread as loaded from its store.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadSnapshot {
    pub thread_id: String,
    pub metadata: Option<ThreadMetadata>,
    /// Every persisted event, in `seq` order.
    pub events: Vec<EventEnvelope>,
}

impl ThreadSnapshot {
    /// The conversation so far, rebuilt from the log (see
    /// [`apply_event`](crate::transcript::apply_event)).
    pub fn transcript(&self) -> Vec<TranscriptItem> {
        let mut transcript = Vec::new();
        for envelope in &self.events {
            crate::transcript::apply_event(&mut transcript, &envelope.event);
        }
        transcript
    }

    /// The `seq` of the last persisted event (0 when there is none).
    pub fn last_seq(&self) -> u64 {
        self.events.last().map_or(0, |envelope| envelope.seq)
    }
}

/// One bounded page of a thread's log ([`ThreadStore::load_events_page`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventsPage {
    pub events: Vec<EventEnvelope>,
    /// Whether events follow the page's last one.
    pub more: bool,
}

/// Keeps events of `events` while they fit `max_items` and `max_bytes` (their
/// compact JSON), the first always; for stores that page in memory.
pub fn page_of(events: Vec<EventEnvelope>, max_items: usize, max_bytes: usize) -> EventsPage {
    let total = events.len();
    let mut bytes = 0usize;
    let mut page = Vec::new();
    for envelope in events {
        let size = serde_json::to_string(&envelope).map_or(0, |line| line.len() + 1);
        if !page.is_empty() && (page.len() >= max_items || bytes.saturating_add(size) > max_bytes) {
            break;
        }
        bytes = bytes.saturating_add(size);
        page.push(envelope);
    }
    EventsPage {
        more: page.len() < total,
        events: page,
    }
}

/// Durable storage of threads: metadata plus an append-only event log.
#[async_trait::async_trait]
pub trait ThreadStore: Send + Sync + 'static {
    /// Writes metadata of a new thread. Fails if the thread exists.
    async fn create_thread(&self, metadata: ThreadMetadata) -> anyhow::Result<()>;

    /// Replaces a thread's metadata atomically.
    async fn update_thread_metadata(&self, metadata: ThreadMetadata) -> anyhow::Result<()>;

    async fn load_metadata(&self, thread_id: &str) -> anyhow::Result<Option<ThreadMetadata>>;

    /// Appends events in order. On return they are in the log.
    async fn append_events(&self, thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()>;

    /// Events with `seq > after_seq`, in order.
    async fn load_events(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> anyhow::Result<Vec<EventEnvelope>>;

    /// At most `max_items` events with `seq > after_seq`, in order, whose
    /// compact JSON lines total at most `max_bytes` (the first event always,
    /// however large, so a page never stalls). The default loads the events
    /// after `after_seq` and slices them; a store should read no further
    /// than the page.
    async fn load_events_page(
        &self,
        thread_id: &str,
        after_seq: u64,
        max_items: usize,
        max_bytes: usize,
    ) -> anyhow::Result<EventsPage> {
        let events = self.load_events(thread_id, after_seq).await?;
        Ok(page_of(events, max_items, max_bytes))
    }

    /// Metadata and all events; `None` when the thread does not exist.
    async fn load_thread(&self, thread_id: &str) -> anyhow::Result<Option<ThreadSnapshot>> {
        let metadata = self.load_metadata(thread_id).await?;
        let events = self.load_events(thread_id, 0).await?;
        if metadata.is_none() && events.is_empty() {
            return Ok(None);
        }
        Ok(Some(ThreadSnapshot {
            thread_id: thread_id.to_string(),
            metadata,
            events,
        }))
    }

    /// Metadata of every thread, most recently updated first.
    async fn list_threads(&self) -> anyhow::Result<Vec<ThreadMetadata>>;

    /// Removes a thread's metadata and log.
    async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()>;

    /// Grants the writer lease of `thread_id` (see [`crate::writer_lease`]),
    /// or names the live writer that holds it. Never waits for a holder.
    ///
    /// The default says this store has no leases, which is right only for a
    /// store no other process can open.
    async fn acquire_writer_lease(
        &self,
        _thread_id: &str,
        _request: WriterLeaseRequest,
    ) -> anyhow::Result<WriterLeaseOutcome> {
        Ok(WriterLeaseOutcome::Unsupported)
    }

    /// Appends under a held lease. A store that fences appends refuses one
    /// whose lease generation is no longer current; the default appends.
    async fn append_events_leased(
        &self,
        _lease: &dyn WriterLease,
        thread_id: &str,
        events: &[EventEnvelope],
    ) -> anyhow::Result<()> {
        self.append_events(thread_id, events).await
    }
}

/// Opens the store a runtime uses.
#[async_trait::async_trait]
pub trait ThreadStoreFactory: Send + Sync + 'static {
    fn id(&self) -> String;

    fn open(&self) -> anyhow::Result<Arc<dyn ThreadStore>>;
}
