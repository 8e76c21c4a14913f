//! Reads by cursor: `seq > after_seq` on the `(thread_id, seq)` primary
//! key, in order.
//!
//! A page is cut in SQL: the inner query reads at most `max_items + 1` rows
//! from the index, a window sums their compact JSON sizes (plus one for the
//! newline, as the JSONL store counts them), and only the rows inside the
//! page are sent back, with a flag saying whether more follow. A 100,000-
//! event thread's first page reads a page's worth of rows.

use anyhow::Context;
use roder_api::events::EventEnvelope;
use roder_api::thread::EventsPage;
use sqlx::PgPool;

use crate::store::to_i64;
use crate::thread_id;

/// Every event after `after_seq`, in order.
pub(crate) async fn load_after(
    pool: &PgPool,
    thread_id: &str,
    after_seq: u64,
) -> anyhow::Result<Vec<EventEnvelope>> {
    thread_id::validate(thread_id)?;
    let after = to_i64(after_seq, "seq").unwrap_or(i64::MAX);
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT seq, envelope::text FROM roder_events
         WHERE thread_id = $1 AND seq > $2 ORDER BY seq",
    )
    .bind(thread_id)
    .bind(after)
    .fetch_all(pool)
    .await
    .with_context(|| format!("cannot read events of thread \"{thread_id}\""))?;
    Ok(parse(thread_id, rows))
}

/// At most `max_items` events after `after_seq` within `max_bytes` (the
/// first always).
pub(crate) async fn load_page(
    pool: &PgPool,
    thread_id: &str,
    after_seq: u64,
    max_items: usize,
    max_bytes: usize,
) -> anyhow::Result<EventsPage> {
    thread_id::validate(thread_id)?;
    let after = to_i64(after_seq, "seq").unwrap_or(i64::MAX);
    let items = i64::try_from(max_items.max(1)).unwrap_or(i64::MAX - 1);
    let bytes = i64::try_from(max_bytes).unwrap_or(i64::MAX);
    let rows: Vec<(i64, String, bool)> = sqlx::query_as(
        "WITH head AS (
             SELECT seq, envelope FROM roder_events
             WHERE thread_id = $1 AND seq > $2 ORDER BY seq LIMIT $3 + 1
         ), sized AS (
             SELECT seq, envelope,
                    row_number() OVER (ORDER BY seq) AS n,
                    sum(octet_length(envelope::text) + 1) OVER (ORDER BY seq) AS running
             FROM head
         ), kept AS (
             SELECT seq, envelope FROM sized WHERE n = 1 OR (n <= $3 AND running <= $4)
         )
         SELECT seq, envelope::text AS envelope,
                (SELECT count(*) FROM head) > (SELECT count(*) FROM kept) AS more
         FROM kept ORDER BY seq",
    )
    .bind(thread_id)
    .bind(after)
    .bind(items)
    .bind(bytes)
    .fetch_all(pool)
    .await
    .with_context(|| format!("cannot read a page of thread \"{thread_id}\""))?;
    let more = rows.first().is_some_and(|(_, _, more)| *more);
    let events = parse(
        thread_id,
        rows.into_iter()
            .map(|(seq, envelope, _)| (seq, envelope))
            .collect(),
    );
    Ok(EventsPage { events, more })
}

/// Parses rows, skipping (with a warning) envelopes this build cannot read,
/// as the JSONL store skips lines of unknown event types.
fn parse(thread_id: &str, rows: Vec<(i64, String)>) -> Vec<EventEnvelope> {
    rows.into_iter()
        .filter_map(|(seq, json)| match serde_json::from_str(&json) {
            Ok(envelope) => Some(envelope),
            Err(error) => {
                tracing::warn!(thread_id, seq, "skipping an unreadable event: {error}");
                None
            }
        })
        .collect()
}
