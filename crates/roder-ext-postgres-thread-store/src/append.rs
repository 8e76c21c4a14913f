//! Appends: one transaction that locks the thread's row, checks the lease
//! and the seq under that lock, inserts the events and moves the log's end.
//!
//! The row lock is what makes the checks true at commit: a takeover
//! (`lease.rs`) updates the same row, so it waits for an append in flight
//! and the append after it sees the new generation. Two appenders of one
//! thread are serialised; the second sees the first's `last_seq` and is
//! refused instead of writing a seq twice.

use anyhow::{Context, bail};
use roder_api::events::EventEnvelope;
use roder_api::writer_lease::{WriterIdentity, WriterLease};

use crate::follow::CHANNEL;
use crate::store::{PostgresThreadStore, to_i64, to_u64};
use crate::thread_id;

/// The thread's row as an append sees it, locked.
struct Head {
    last_seq: i64,
    lease_generation: i64,
    /// A holder is named and its expiry is ahead on the database's clock.
    lease_live: bool,
    lease_holder: Option<String>,
}

type HeadRow = (i64, i64, bool, Option<String>);

/// Appends `events` to `thread_id`, under `lease` when given.
///
/// Without a lease the append is refused while another writer holds a live
/// lease: nothing bypasses the fence. With one, it is refused unless the
/// lease is this thread's current generation and has not expired.
pub(crate) async fn append(
    store: &PostgresThreadStore,
    lease: Option<&dyn WriterLease>,
    thread_id: &str,
    events: &[EventEnvelope],
) -> anyhow::Result<()> {
    thread_id::validate(thread_id)?;
    if let Some(lease) = lease
        && lease.thread_id() != thread_id
    {
        bail!(
            "append to thread \"{thread_id}\" refused: the writer lease given is for thread \"{}\"",
            lease.thread_id()
        );
    }
    let (Some(first), Some(last)) = (events.first(), events.last()) else {
        return Ok(());
    };
    check_batch(thread_id, events)?;
    let mut seqs = Vec::with_capacity(events.len());
    let mut bodies = Vec::with_capacity(events.len());
    for envelope in events {
        seqs.push(to_i64(envelope.seq, "seq")?);
        bodies.push(
            serde_json::to_string(envelope)
                .with_context(|| format!("cannot serialise events of thread \"{thread_id}\""))?,
        );
    }

    let mut tx = store.pool.begin().await.context("cannot begin an append")?;
    if lease.is_none() {
        // The contract lets events come before metadata: the first append
        // creates the thread's row. A leased append needs the row (the lease
        // lives on it), so it never re-creates a deleted thread.
        sqlx::query("INSERT INTO roder_threads (thread_id) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(thread_id)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("cannot create thread \"{thread_id}\""))?;
    }
    let head: Option<HeadRow> = sqlx::query_as(
        "SELECT last_seq, lease_generation,
                (lease_owner_id IS NOT NULL AND lease_expires_at > now()) AS lease_live,
                lease_holder::text AS lease_holder
         FROM roder_threads WHERE thread_id = $1 FOR UPDATE",
    )
    .bind(thread_id)
    .fetch_optional(&mut *tx)
    .await
    .with_context(|| format!("cannot lock thread \"{thread_id}\" for an append"))?;
    let Some((last_seq, lease_generation, lease_live, lease_holder)) = head else {
        bail!(
            "append to thread \"{thread_id}\" refused: the thread does not exist (it was deleted); its writer lease went with it"
        );
    };
    let head = Head {
        last_seq,
        lease_generation,
        lease_live,
        lease_holder,
    };
    check_lease(thread_id, lease, &head)?;
    let on_log = to_u64(head.last_seq);
    if Some(first.seq) != on_log.checked_add(1) {
        bail!(
            "append of seq {} to thread \"{thread_id}\" refused: its log ends at seq {on_log}, so the next seq is {}; another writer may be appending to this thread (take its writer lease before writing)",
            first.seq,
            on_log.saturating_add(1)
        );
    }
    sqlx::query(
        "INSERT INTO roder_events (thread_id, seq, envelope)
         SELECT $1, seq, envelope::json FROM UNNEST($2::bigint[], $3::text[]) AS batch (seq, envelope)",
    )
    .bind(thread_id)
    .bind(&seqs)
    .bind(&bodies)
    .execute(&mut *tx)
    .await
    .with_context(|| format!("cannot insert events of thread \"{thread_id}\""))?;
    let last_seq = to_i64(last.seq, "seq")?;
    sqlx::query("UPDATE roder_threads SET last_seq = $2 WHERE thread_id = $1")
        .bind(thread_id)
        .bind(last_seq)
        .execute(&mut *tx)
        .await
        .with_context(|| format!("cannot move the end of thread \"{thread_id}\"'s log"))?;
    // Delivered at commit, to every replica listening (see `follow.rs`).
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(format!("{thread_id} {last_seq}"))
        .execute(&mut *tx)
        .await
        .with_context(|| format!("cannot notify followers of thread \"{thread_id}\""))?;
    tx.commit()
        .await
        .with_context(|| format!("cannot commit an append to thread \"{thread_id}\""))
}

/// Every envelope names the thread, and seqs are consecutive.
fn check_batch(thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()> {
    if let Some(stray) = events.iter().find(|event| event.thread_id != thread_id) {
        bail!(
            "event seq {} belongs to thread \"{}\", not \"{thread_id}\"",
            stray.seq,
            stray.thread_id
        );
    }
    if let Some((before, after)) = events
        .iter()
        .zip(events.iter().skip(1))
        .find(|(before, after)| Some(after.seq) != before.seq.checked_add(1))
    {
        bail!(
            "append to thread \"{thread_id}\" refused: seq {} follows seq {} in one batch; events must be numbered consecutively",
            after.seq,
            before.seq
        );
    }
    Ok(())
}

/// The fence, checked under the row lock.
fn check_lease(
    thread_id: &str,
    lease: Option<&dyn WriterLease>,
    head: &Head,
) -> anyhow::Result<()> {
    let holder = || {
        head.lease_holder
            .as_deref()
            .and_then(|json| serde_json::from_str::<WriterIdentity>(json).ok())
            .map_or_else(|| "nobody".to_string(), |holder| holder.to_string())
    };
    let current = to_u64(head.lease_generation);
    match lease {
        None if head.lease_live => bail!(
            "append to thread \"{thread_id}\" refused: another writer holds its writer lease ({}); take the lease before writing",
            holder()
        ),
        None => Ok(()),
        Some(lease) if lease.generation() != current => bail!(
            "append to thread \"{thread_id}\" refused: its writer lease of generation {} is stale (the current generation is {current}, held by {}); this writer lost the thread and must stop",
            lease.generation(),
            holder()
        ),
        Some(lease) if !head.lease_live => bail!(
            "append to thread \"{thread_id}\" refused: its writer lease of generation {} expired or was released; renew or take the lease again",
            lease.generation()
        ),
        Some(_) => Ok(()),
    }
}
