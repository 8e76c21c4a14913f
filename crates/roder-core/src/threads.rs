//! Live per-thread state: the log cursor and the running turn.
//!
//! A thread's state is loaded lazily from the store the first time the
//! runtime touches the thread, so a runtime over an existing store continues
//! each log where it ended. Another process may write the thread between two
//! of this runtime's turns; taking the thread's writer lease (`writer.rs`)
//! catches the state up with the log before anything is written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use roder_api::approval::ThreadApprovals;
use roder_api::events::{ContextCompacted, EventEnvelope, RoderEvent};
use roder_api::transcript::TranscriptItem;
use roder_api::writer_lease::WriterLease;
use tokio_util::sync::CancellationToken;

use crate::turn::recovery::TurnTracker;

/// The turn a thread is running. At most one per thread.
#[derive(Clone)]
pub(crate) struct ActiveTurn {
    pub turn_id: String,
    pub cancellation: CancellationToken,
    /// Completes when the turn has emitted its terminal event.
    pub finished: Arc<tokio::sync::Notify>,
    pub done: Arc<std::sync::atomic::AtomicBool>,
}

pub(crate) struct ThreadState {
    pub thread_id: String,
    /// Next `seq` to assign. Held while appending, so numbering, persistence
    /// and broadcast happen in one order.
    pub log: tokio::sync::Mutex<LogCursor>,
    /// Serializes read-modify-write of the thread's metadata.
    pub metadata_lock: tokio::sync::Mutex<()>,
    pub active: Mutex<Option<ActiveTurn>>,
    /// The thread's approval settings as its metadata last had them: read
    /// at every call, so a change applies to a running turn's next call.
    approvals: Mutex<Arc<ThreadApprovals>>,
}

pub(crate) struct LogCursor {
    pub next_seq: u64,
    /// The conversation so far, kept in step with the log's
    /// `TranscriptItemAppended` events, so a turn never re-reads the log.
    pub transcript: Vec<TranscriptItem>,
    /// The log's last turn, to close it if its process died.
    pub turns: TurnTracker,
    /// Tokens the thread's model requests used (every `UsageUpdated`).
    pub usage: roder_api::inference::TokenUsage,
    /// The store's writer lease while this runtime writes the thread.
    pub writer: Option<Arc<dyn WriterLease>>,
    /// How many writers of this runtime share `writer` (a turn and the
    /// lifecycle operations it runs, say); the lease is given up at zero.
    pub writer_holders: usize,
    /// Stops the lease's renewal task.
    pub writer_renewal: Option<CancellationToken>,
    /// The release of the last lease, while it is in flight.
    pub writer_release: Option<tokio::task::JoinHandle<()>>,
}

impl LogCursor {
    /// Completes `event` with what only the log knows, before it is
    /// appended: a compaction records the thread's usage so far, so a
    /// runtime can later rebuild the thread from the compaction on.
    pub fn stamp(&self, event: &mut RoderEvent) {
        if let RoderEvent::ContextCompacted(compacted) = event {
            compacted.thread_usage = Some(self.usage.clone());
        }
    }

    /// Keeps the cursor in step with one persisted event.
    pub fn observe(&mut self, envelope: &EventEnvelope) {
        self.next_seq = self.next_seq.max(envelope.seq + 1);
        roder_api::transcript::apply_event(&mut self.transcript, &envelope.event);
        match &envelope.event {
            RoderEvent::UsageUpdated(updated) => self.usage.add(&updated.usage),
            RoderEvent::ContextCompacted(ContextCompacted {
                thread_usage: Some(usage),
                ..
            }) => self.usage = usage.clone(),
            _ => {}
        }
        self.turns.observe(envelope);
    }
}

impl ThreadState {
    /// The state of a thread whose persisted log is `events`.
    pub fn from_log(thread_id: String, events: &[EventEnvelope]) -> Self {
        let mut cursor = LogCursor {
            next_seq: 1,
            transcript: Vec::new(),
            turns: TurnTracker::default(),
            usage: Default::default(),
            writer: None,
            writer_holders: 0,
            writer_renewal: None,
            writer_release: None,
        };
        for envelope in events {
            cursor.observe(envelope);
        }
        Self {
            thread_id,
            log: tokio::sync::Mutex::new(cursor),
            metadata_lock: tokio::sync::Mutex::new(()),
            active: Mutex::new(None),
            approvals: Mutex::new(Arc::default()),
        }
    }

    pub fn approvals(&self) -> Arc<ThreadApprovals> {
        self.approvals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    pub fn set_approvals(&self, approvals: ThreadApprovals) {
        *self
            .approvals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(approvals);
    }

    pub fn active_turn(&self) -> Option<ActiveTurn> {
        self.active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Claims the thread for new work `turn_id` (a turn, a compaction), or
    /// says which turn holds it.
    pub fn claim_new(&self, turn_id: String) -> Result<ActiveTurn, crate::error::RuntimeError> {
        let active = ActiveTurn {
            turn_id,
            cancellation: CancellationToken::new(),
            finished: Arc::new(tokio::sync::Notify::new()),
            done: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        };
        self.claim(active.clone())
            .map_err(|running| crate::error::RuntimeError::ThreadBusy {
                thread_id: self.thread_id.clone(),
                turn_id: running.turn_id,
            })?;
        Ok(active)
    }

    /// Claims the thread for a new turn, or returns the turn already running.
    pub fn claim(&self, turn: ActiveTurn) -> Result<(), ActiveTurn> {
        let mut active = self
            .active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match active.as_ref() {
            Some(running) => Err(running.clone()),
            None => {
                *active = Some(turn);
                Ok(())
            }
        }
    }

    pub fn release(&self, turn_id: &str) {
        let mut active = self
            .active
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if active.as_ref().is_some_and(|turn| turn.turn_id == turn_id) {
            *active = None;
        }
    }
}

/// Thread states by id.
#[derive(Default)]
pub(crate) struct ThreadTable {
    threads: Mutex<HashMap<String, Arc<ThreadState>>>,
}

impl ThreadTable {
    pub fn get(&self, thread_id: &str) -> Option<Arc<ThreadState>> {
        self.threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(thread_id)
            .cloned()
    }

    /// Inserts `state` unless another task loaded the thread first; returns
    /// the state that is in the table.
    pub fn insert_if_absent(&self, state: ThreadState) -> Arc<ThreadState> {
        let mut threads = self
            .threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        threads
            .entry(state.thread_id.clone())
            .or_insert_with(|| Arc::new(state))
            .clone()
    }

    /// `(thread_id, turn_id)` of every turn running in this table's threads.
    pub fn running_turns(&self) -> Vec<(String, String)> {
        self.threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
            .filter_map(|thread| {
                thread
                    .active_turn()
                    .map(|turn| (thread.thread_id.clone(), turn.turn_id))
            })
            .collect()
    }

    pub fn remove(&self, thread_id: &str) {
        self.threads
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(thread_id);
    }
}
