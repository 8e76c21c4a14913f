//! The writer lease: columns of the thread's row, with an owner, an expiry
//! on the database's clock and a fencing generation.
//!
//! A grant is one `UPDATE ... WHERE <free or expired> RETURNING`, so two
//! replicas asking at once cannot both win: Postgres re-checks the `WHERE`
//! on the row it locked. The generation comes from one sequence
//! (`roder_lease_generation`), so it only grows, across takeovers and even
//! across a thread deleted and re-created. Expiry is compared with `now()`
//! of the database, so replicas with skewed clocks agree on it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::writer_lease::{
    WriterIdentity, WriterLease, WriterLeaseOutcome, WriterLeaseRequest,
};
use sqlx::PgPool;

use crate::store::{PostgresThreadStore, to_u64};
use crate::thread_id;

/// A held writer lease of one thread of a [`PostgresThreadStore`].
pub struct PostgresWriterLease {
    thread_id: String,
    generation: u64,
    last_seq_at_grant: u64,
    ttl: Duration,
    pool: PgPool,
    released: AtomicBool,
}

impl std::fmt::Debug for PostgresWriterLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresWriterLease")
            .field("thread_id", &self.thread_id)
            .field("generation", &self.generation)
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// How often a grant is tried again when the lease was freed between the
/// failed grant and the read of its holder.
const RACE_RETRIES: usize = 3;

/// The ttl in milliseconds, at least 1.
fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}

pub(crate) async fn acquire(
    store: &PostgresThreadStore,
    thread_id: &str,
    request: WriterLeaseRequest,
) -> anyhow::Result<WriterLeaseOutcome> {
    thread_id::validate(thread_id)?;
    let holder = serde_json::to_string(&request.owner).context("cannot serialise the writer")?;
    for _ in 0..RACE_RETRIES {
        let asked = std::time::Instant::now();
        let granted: Option<(i64, i64)> = sqlx::query_as(
            "UPDATE roder_threads SET
                 lease_generation = nextval('roder_lease_generation'),
                 lease_owner_id = $2,
                 lease_holder = $3::jsonb,
                 lease_expires_at = now() + $4 * interval '1 millisecond'
             WHERE thread_id = $1 AND (lease_owner_id IS NULL OR lease_expires_at <= now())
             RETURNING lease_generation, last_seq",
        )
        .bind(thread_id)
        .bind(&request.owner.owner_id)
        .bind(&holder)
        .bind(ttl_ms(request.ttl))
        .fetch_optional(&store.pool)
        .await
        .with_context(|| format!("cannot take the writer lease of thread \"{thread_id}\""))?;
        if let Some((generation, last_seq)) = granted {
            let lease = Arc::new(PostgresWriterLease {
                thread_id: thread_id.to_string(),
                generation: to_u64(generation),
                last_seq_at_grant: to_u64(last_seq),
                ttl: request.ttl,
                pool: store.pool.clone(),
                released: AtomicBool::new(false),
            });
            crate::outage::lease_good_until(
                crate::outage::key_of(lease.as_ref()),
                asked + request.ttl,
            );
            return Ok(WriterLeaseOutcome::Acquired(lease));
        }
        let held: Option<(bool, Option<String>)> = sqlx::query_as(
            "SELECT (lease_owner_id IS NOT NULL AND lease_expires_at > now()) AS lease_live,
                    lease_holder::text AS lease_holder
             FROM roder_threads WHERE thread_id = $1",
        )
        .bind(thread_id)
        .fetch_optional(&store.pool)
        .await
        .with_context(|| format!("cannot read the writer lease of thread \"{thread_id}\""))?;
        let Some((live, holder)) = held else {
            bail!(
                "cannot take the writer lease of thread \"{thread_id}\": the thread does not exist; create the thread first"
            );
        };
        if live {
            let holder = holder
                .as_deref()
                .and_then(|json| serde_json::from_str::<WriterIdentity>(json).ok())
                .unwrap_or_else(unknown_holder);
            return Ok(WriterLeaseOutcome::Busy(holder));
        }
        // Released or expired between the two statements: try again.
    }
    bail!(
        "cannot take the writer lease of thread \"{thread_id}\": it changed hands {RACE_RETRIES} times while being asked for; try again"
    )
}

/// A live lease whose holder record cannot be read (written by a newer
/// roder, say). Still busy: never a grant.
fn unknown_holder() -> WriterIdentity {
    WriterIdentity::new(
        "unknown",
        0,
        "an unknown host (the holder record is unreadable)",
    )
}

impl PostgresWriterLease {
    /// The ttl this lease was granted with; each renewal extends it by this.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }
}

#[async_trait::async_trait]
impl WriterLease for PostgresWriterLease {
    fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    /// Read in the grant's own statement, under the row lock.
    fn last_seq_at_grant(&self) -> Option<u64> {
        Some(self.last_seq_at_grant)
    }

    /// Moves the expiry to the database's `now()` plus the ttl. Fails once
    /// released, and when another writer took the lease over (the
    /// generation moved on) or the thread was deleted. A lease that expired
    /// but that nobody took is extended: nobody else can have written.
    async fn renew(&self) -> anyhow::Result<()> {
        if self.released.load(Ordering::SeqCst) {
            bail!(
                "the writer lease of thread \"{}\" was released; take it again",
                self.thread_id
            );
        }
        let generation = i64::try_from(self.generation).unwrap_or(i64::MAX);
        // Through a database restart: tried again until the lease would
        // expire anyway (`outage.rs`).
        let deadline = crate::outage::retry_deadline(crate::outage::key_of(self));
        let mut asked = std::time::Instant::now();
        let (renewed, _) = crate::outage::retry_until(deadline, "renewing a writer lease", || {
            asked = std::time::Instant::now();
            sqlx::query(
                "UPDATE roder_threads SET lease_expires_at = now() + $3 * interval '1 millisecond'
                 WHERE thread_id = $1 AND lease_generation = $2 AND lease_owner_id IS NOT NULL",
            )
            .bind(&self.thread_id)
            .bind(generation)
            .bind(ttl_ms(self.ttl))
            .execute(&self.pool)
        })
        .await;
        let renewed = renewed.with_context(|| {
            format!(
                "cannot renew the writer lease of thread \"{}\"",
                self.thread_id
            )
        })?;
        if renewed.rows_affected() == 0 {
            bail!(
                "the writer lease of thread \"{}\" (generation {}) was lost: another writer took it over after it expired, or the thread was deleted; stop writing",
                self.thread_id,
                self.generation
            );
        }
        crate::outage::lease_good_until(crate::outage::key_of(self), asked + self.ttl);
        Ok(())
    }

    /// Frees the row, unless another writer already took it over.
    /// Releasing twice is fine.
    async fn release(&self) -> anyhow::Result<()> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        crate::outage::forget_lease(crate::outage::key_of(self));
        release_row(&self.pool, &self.thread_id, self.generation).await
    }
}

async fn release_row(pool: &PgPool, thread_id: &str, generation: u64) -> anyhow::Result<()> {
    let generation = i64::try_from(generation).unwrap_or(i64::MAX);
    sqlx::query(
        "UPDATE roder_threads SET lease_owner_id = NULL, lease_holder = NULL, lease_expires_at = NULL
         WHERE thread_id = $1 AND lease_generation = $2",
    )
    .bind(thread_id)
    .bind(generation)
    .execute(pool)
    .await
    .with_context(|| format!("cannot release the writer lease of thread \"{thread_id}\""))?;
    Ok(())
}

/// A lease dropped unreleased is released from a task when a runtime is
/// there; otherwise (shutdown) its row expires.
impl Drop for PostgresWriterLease {
    fn drop(&mut self) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        crate::outage::forget_lease(crate::outage::key_of(self));
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pool = self.pool.clone();
        let thread_id = std::mem::take(&mut self.thread_id);
        let generation = self.generation;
        handle.spawn(async move {
            if let Err(error) = release_row(&pool, &thread_id, generation).await {
                tracing::debug!(%thread_id, "a dropped writer lease was not released: {error:#}");
            }
        });
    }
}

/// A thread's writer lease as the database sees it now
/// ([`PostgresThreadStore::writer_lease_status`]).
#[derive(Debug, Clone, PartialEq)]
pub struct WriterLeaseStatus {
    /// The last generation granted (0: never leased).
    pub generation: u64,
    /// The holder named on the row, `None` once released.
    pub holder: Option<WriterIdentity>,
    /// Time left before the expiry on the database's clock; `None` when
    /// nobody holds it or it has expired.
    pub expires_in: Option<Duration>,
}

impl PostgresThreadStore {
    /// Who holds `thread_id`'s lease and for how long yet, on the
    /// database's clock; `None` when the thread does not exist. For
    /// operators and tests: a takeover is possible once `expires_in` is
    /// `None`.
    pub async fn writer_lease_status(
        &self,
        thread_id: &str,
    ) -> anyhow::Result<Option<WriterLeaseStatus>> {
        thread_id::validate(thread_id)?;
        self.ready().await?;
        let row: Option<(i64, Option<String>, Option<f64>)> = sqlx::query_as(
            "SELECT lease_generation, lease_holder::text,
                    CASE WHEN lease_owner_id IS NOT NULL AND lease_expires_at > clock_timestamp()
                         THEN extract(epoch FROM lease_expires_at - clock_timestamp())::float8 END
             FROM roder_threads WHERE thread_id = $1",
        )
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await
        .with_context(|| format!("cannot read the writer lease of thread \"{thread_id}\""))?;
        Ok(row.map(|(generation, holder, left)| WriterLeaseStatus {
            generation: to_u64(generation),
            holder: holder.and_then(|json| serde_json::from_str(&json).ok()),
            expires_in: left.map(|seconds| Duration::from_secs_f64(seconds.max(0.0))),
        }))
    }
}
