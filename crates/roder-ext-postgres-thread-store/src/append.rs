//! Appends: one call of `roder_append` (migrations/0002), one implicit
//! transaction that locks the thread's row, checks the lease and the seq
//! under that lock, inserts the events, moves the log's end and notifies.
//!
//! The row lock is what makes the checks true at commit: a takeover
//! (`lease.rs`) updates the same row, so it waits for an append in flight
//! and the append after it sees the new generation. Two appenders of one
//! thread are serialised; the second sees the first's `last_seq` and is
//! refused instead of writing a seq twice.

use anyhow::{Context, anyhow, bail};
use roder_api::events::EventEnvelope;
use roder_api::writer_lease::{WriterIdentity, WriterLease};
use sqlx::postgres::PgDatabaseError;

use crate::follow::CHANNEL;
use crate::store::{PostgresThreadStore, to_i64};
use crate::thread_id;

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
    let Some(first) = events.first() else {
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

    // One round trip: `roder_append` (migrations/0002) locks the row,
    // checks the fence and the seq, inserts, moves the end and notifies
    // (delivered at commit, to every replica listening: see `follow.rs`).
    let generation = lease.map(|lease| i64::try_from(lease.generation()).unwrap_or(i64::MAX));
    // A leased append rides out a database restart until its lease would
    // expire (`outage.rs`); an unleased one is tried once.
    let deadline = match lease {
        Some(lease) => crate::outage::retry_deadline(crate::outage::key_of(lease)),
        None => std::time::Instant::now(),
    };
    let (appended, retried) = crate::outage::retry_until(deadline, "appending events", || {
        sqlx::query("SELECT roder_append($1, $2, $3, $4, $5)")
            .bind(thread_id)
            .bind(generation)
            .bind(&seqs)
            .bind(&bodies)
            .bind(CHANNEL)
            .execute(&store.pool)
    })
    .await;
    match appended {
        Ok(_) => Ok(()),
        // A try cut off by the restart may have committed before the
        // connection went: then the log already holds this very batch, and
        // the retry's refusal ("the log ends at seq N") is its success.
        Err(sqlx::Error::Database(error))
            if retried
                && error.code().as_deref() == Some("RD005")
                && already_written(store, thread_id, &seqs, &bodies).await =>
        {
            Ok(())
        }
        Err(sqlx::Error::Database(error)) => {
            let code = error.code().map(|code| code.into_owned());
            let detail = error
                .try_downcast_ref::<PgDatabaseError>()
                .and_then(PgDatabaseError::detail)
                .unwrap_or_default()
                .to_string();
            Err(match code.as_deref() {
                Some(code) if code.starts_with("RD") => {
                    refusal(thread_id, lease, first.seq, code, &detail)
                }
                _ => anyhow::Error::new(sqlx::Error::Database(error))
                    .context(format!("cannot append to thread \"{thread_id}\"")),
            })
        }
        Err(error) => {
            Err(anyhow::Error::new(error)
                .context(format!("cannot append to thread \"{thread_id}\"")))
        }
    }
}

/// Whether the log holds exactly `bodies` at `seqs` (a batch whose commit
/// was not acknowledged before the connection was lost).
async fn already_written(
    store: &PostgresThreadStore,
    thread_id: &str,
    seqs: &[i64],
    bodies: &[String],
) -> bool {
    let (Some(first), Some(last)) = (seqs.first(), seqs.last()) else {
        return false;
    };
    let stored: Result<Vec<(String,)>, _> = sqlx::query_as(
        "SELECT envelope::text FROM roder_events
         WHERE thread_id = $1 AND seq BETWEEN $2 AND $3 ORDER BY seq",
    )
    .bind(thread_id)
    .bind(first)
    .bind(last)
    .fetch_all(&store.pool)
    .await;
    stored.is_ok_and(|rows| {
        rows.len() == bodies.len() && rows.iter().zip(bodies).all(|((row,), body)| row == body)
    })
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

/// The message of a refusal `roder_append` raised under the row lock.
fn refusal(
    thread_id: &str,
    lease: Option<&dyn WriterLease>,
    first_seq: u64,
    code: &str,
    detail: &str,
) -> anyhow::Error {
    let holder = |json: &str| {
        serde_json::from_str::<WriterIdentity>(json)
            .map_or_else(|_| "nobody".to_string(), |holder| holder.to_string())
    };
    let generation = lease.map_or(0, |lease| lease.generation());
    match code {
        "RD001" => anyhow!(
            "append to thread \"{thread_id}\" refused: the thread does not exist (it was deleted); its writer lease went with it"
        ),
        "RD002" => anyhow!(
            "append to thread \"{thread_id}\" refused: another writer holds its writer lease ({}); take the lease before writing",
            holder(detail)
        ),
        "RD003" => {
            let (current, json) = detail.split_once(' ').unwrap_or((detail, ""));
            anyhow!(
                "append to thread \"{thread_id}\" refused: its writer lease of generation {generation} is stale (the current generation is {current}, held by {}); this writer lost the thread and must stop",
                holder(json)
            )
        }
        "RD004" => anyhow!(
            "append to thread \"{thread_id}\" refused: its writer lease of generation {generation} expired or was released; renew or take the lease again"
        ),
        "RD005" => {
            let on_log: u64 = detail.parse().unwrap_or(0);
            anyhow!(
                "append of seq {first_seq} to thread \"{thread_id}\" refused: its log ends at seq {on_log}, so the next seq is {}; another writer may be appending to this thread (take its writer lease before writing)",
                on_log.saturating_add(1)
            )
        }
        other => {
            anyhow!("append to thread \"{thread_id}\" refused by the database ({other}: {detail})")
        }
    }
}
