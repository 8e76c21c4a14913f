//! A thread's history in bounded pages: [`Runtime::read_thread_history`].
//!
//! A page is bounded by events and by bytes and read through
//! [`ThreadStore::load_events_page`](roder_api::thread::ThreadStore::load_events_page),
//! so a client can walk a thread of any length without the runtime loading
//! its whole log (nor caching the thread's live state).

use roder_api::events::EventEnvelope;
use roder_api::thread::EventsPage;

use crate::error::RuntimeError;
use crate::runtime::Runtime;

/// Largest page, in events, whatever the client asks.
pub const MAX_HISTORY_ITEMS: usize = 10_000;
/// Largest page, in bytes of compact JSON, whatever the client asks.
pub const MAX_HISTORY_BYTES: usize = 16 * 1024 * 1024;

/// One page of a thread's persisted events, oldest first.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadHistoryPage {
    pub events: Vec<EventEnvelope>,
    /// Pass it back for the next page; `None` at the end of the log.
    pub next_cursor: Option<String>,
}

const CURSOR_PREFIX: &str = "after-seq-";

fn encode_cursor(seq: u64) -> String {
    format!("{CURSOR_PREFIX}{seq}")
}

fn decode_cursor(cursor: &str) -> Result<u64, RuntimeError> {
    cursor
        .strip_prefix(CURSOR_PREFIX)
        .and_then(|seq| seq.parse().ok())
        .ok_or_else(|| RuntimeError::ForeignCursor(cursor.to_string()))
}

impl Runtime {
    /// The events of `thread_id` after `cursor` (none: from the start), at
    /// most `max_items` (1 to 10,000) whose JSON totals at most `max_bytes`
    /// (up to 16 MiB); a page holds at least one event when any is left.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let mut cursor = None;
    /// loop {
    ///     let page = runtime.read_thread_history("t", cursor.as_deref(), 500, 1 << 20).await?;
    ///     for envelope in &page.events { println!("{}", envelope.seq); }
    ///     match page.next_cursor { Some(next) => cursor = Some(next), None => break }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_thread_history(
        &self,
        thread_id: &str,
        cursor: Option<&str>,
        max_items: usize,
        max_bytes: usize,
    ) -> anyhow::Result<ThreadHistoryPage> {
        let after_seq = cursor.map(decode_cursor).transpose()?.unwrap_or(0);
        let page = self
            .read_thread_events_page(thread_id, after_seq, max_items, max_bytes)
            .await?;
        let next_cursor = match page.events.last() {
            Some(last) if page.more => Some(encode_cursor(last.seq)),
            _ => None,
        };
        Ok(ThreadHistoryPage {
            events: page.events,
            next_cursor,
        })
    }
}

impl Runtime {
    /// Like [`Runtime::read_thread_history`] with the log's own cursor: the
    /// events with `seq > after_seq` (0: from the start), bounded the same
    /// way. A cursor past the end of the log is
    /// [`RuntimeError::CursorOutOfRange`]; the log before the cursor is not
    /// read.
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime) -> anyhow::Result<()> {
    /// let page = runtime.read_thread_events_page("t", 0, 500, 1 << 20).await?;
    /// let next = page.events.last().map_or(0, |envelope| envelope.seq);
    /// if page.more {
    ///     runtime.read_thread_events_page("t", next, 500, 1 << 20).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn read_thread_events_page(
        &self,
        thread_id: &str,
        after_seq: u64,
        max_items: usize,
        max_bytes: usize,
    ) -> anyhow::Result<EventsPage> {
        if self.store.load_metadata(thread_id).await?.is_none() {
            return Err(RuntimeError::ThreadNotFound(thread_id.to_string()).into());
        }
        let page = self
            .store
            .load_events_page(
                thread_id,
                after_seq,
                max_items.clamp(1, MAX_HISTORY_ITEMS),
                max_bytes.clamp(1, MAX_HISTORY_BYTES),
            )
            .await?;
        if page.events.is_empty() && after_seq > 0 {
            let last_seq = self.last_seq(thread_id).await?;
            if after_seq > last_seq {
                return Err(RuntimeError::CursorOutOfRange {
                    thread_id: thread_id.to_string(),
                    cursor: after_seq,
                    last_seq,
                }
                .into());
            }
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_foreign_ones_are_refused() {
        assert_eq!(decode_cursor(&encode_cursor(42)).unwrap(), 42);
        for bad in ["", "42", "after-seq-", "after-seq-x", "after-seq--1"] {
            let error = decode_cursor(bad).unwrap_err().to_string();
            assert!(
                error.contains("is not one this runtime returned"),
                "{error}"
            );
        }
    }
}
