//! The Postgres [`ThreadStore`] and its factory.
//!
//! Three tables (see `migrations/`): `roder_threads` (one row per thread:
//! where its log ends and its writer lease), `roder_thread_metadata`,
//! `roder_events` (keyed by `(thread_id, seq)`, which is also the read
//! cursor's index). Every call is one short transaction or one statement,
//! so any number of store instances, in any number of processes, share one
//! database.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use roder_api::events::EventEnvelope;
use roder_api::thread::{EventsPage, ThreadMetadata, ThreadStore, ThreadStoreFactory};
use roder_api::writer_lease::{WriterLease, WriterLeaseOutcome, WriterLeaseRequest};
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use crate::follow::Follower;
use crate::{append, lease, page, schema, thread_id};

/// How a [`PostgresThreadStore`] connects.
#[derive(Debug, Clone)]
pub struct PostgresStoreOptions {
    /// Connections in the pool (each append holds one for its transaction).
    pub max_connections: u32,
    /// How long a call waits for a free connection (or a new one) before it
    /// fails; a database that is down fails calls after this.
    pub acquire_timeout: Duration,
}

impl Default for PostgresStoreOptions {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(10),
        }
    }
}

/// A thread store over one PostgreSQL database. Cheap to clone (a pool).
#[derive(Clone)]
pub struct PostgresThreadStore {
    pub(crate) pool: PgPool,
    pub(crate) follower: Arc<Follower>,
    /// Set once the schema is migrated: at once by [`connect`](Self::connect),
    /// by the first call of a [`connect_lazy`](Self::connect_lazy) store.
    migrated: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for PostgresThreadStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresThreadStore")
            .finish_non_exhaustive()
    }
}

/// The id [`PostgresThreadStoreFactory`] registers under.
pub const FACTORY_ID: &str = "postgres";

impl PostgresThreadStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`) and
    /// migrates the schema.
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Self::connect_with(url, PostgresStoreOptions::default()).await
    }

    /// [`connect`](Self::connect) with options.
    pub async fn connect_with(url: &str, options: PostgresStoreOptions) -> anyhow::Result<Self> {
        let connect = parse_url(url)?;
        let pool = pool_options(&options)
            .connect_with(connect)
            .await
            .with_context(|| format!("cannot connect to Postgres at {}", redacted(url)))?;
        let store = Self::over(pool);
        store.ready().await?;
        Ok(store)
    }

    /// A store that connects and migrates on its first call (for callers
    /// that cannot wait here, like a synchronous factory). A bad URL fails
    /// here; an unreachable database fails each call until it is reached.
    /// Needs a tokio runtime.
    pub fn connect_lazy(url: &str, options: PostgresStoreOptions) -> anyhow::Result<Self> {
        let connect = parse_url(url)?;
        Ok(Self::over(
            pool_options(&options).connect_lazy_with(connect),
        ))
    }

    /// A store over `pool`; the schema is migrated on its first call.
    pub fn from_pool(pool: PgPool) -> Self {
        Self::over(pool)
    }

    fn over(pool: PgPool) -> Self {
        let follower = Arc::new(Follower::new(pool.clone()));
        Self {
            pool,
            follower,
            migrated: Arc::default(),
        }
    }

    /// Migrates the schema unless this store did already.
    pub async fn ready(&self) -> anyhow::Result<()> {
        self.migrated
            .get_or_try_init(|| async {
                schema::migrate(&self.pool).await.with_context(|| {
                    format!(
                        "cannot migrate the roder schema at {}",
                        describe(&self.pool)
                    )
                })
            })
            .await?;
        Ok(())
    }

    /// The pool, for callers that want to inspect the tables.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Closes the pool: calls after this fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

fn parse_url(url: &str) -> anyhow::Result<PgConnectOptions> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        bail!(
            "invalid Postgres URL {}: it must start with postgres:// or postgresql://",
            redacted(url)
        );
    }
    url.parse()
        .with_context(|| format!("invalid Postgres URL {}", redacted(url)))
}

fn pool_options(options: &PostgresStoreOptions) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(options.max_connections)
        .acquire_timeout(options.acquire_timeout)
}

/// Where a pool connects, without credentials.
fn describe(pool: &PgPool) -> String {
    let options = pool.connect_options();
    format!(
        "postgres://{}@{}:{}/{}",
        options.get_username(),
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("")
    )
}

/// `url` with its password replaced, for errors and logs.
pub fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(an unparsable URL)".to_string();
    };
    let Some((credentials, host)) = rest.rsplit_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

/// Opens one shared [`PostgresThreadStore`]; built by connecting (the
/// trait's `open` is synchronous, and connecting is not).
#[derive(Debug, Clone)]
pub struct PostgresThreadStoreFactory {
    pub store: PostgresThreadStore,
}

impl PostgresThreadStoreFactory {
    /// Connects and migrates (see [`PostgresThreadStore::connect`]).
    pub async fn connect(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            store: PostgresThreadStore::connect(url).await?,
        })
    }

    /// Connects on first use (see [`PostgresThreadStore::connect_lazy`]).
    pub fn lazy(url: &str) -> anyhow::Result<Self> {
        Ok(Self {
            store: PostgresThreadStore::connect_lazy(url, PostgresStoreOptions::default())?,
        })
    }
}

impl ThreadStoreFactory for PostgresThreadStoreFactory {
    fn id(&self) -> String {
        FACTORY_ID.to_string()
    }

    fn open(&self) -> anyhow::Result<Arc<dyn ThreadStore>> {
        Ok(Arc::new(self.store.clone()))
    }
}

pub(crate) fn to_i64(value: u64, what: &str) -> anyhow::Result<i64> {
    i64::try_from(value).with_context(|| format!("{what} {value} is out of range for the store"))
}

pub(crate) fn to_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

#[async_trait::async_trait]
impl ThreadStore for PostgresThreadStore {
    async fn create_thread(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        self.ready().await?;
        let thread = metadata.thread_id.clone();
        thread_id::validate(&thread)?;
        let json = serde_json::to_string(&metadata)
            .with_context(|| format!("cannot serialise metadata of thread \"{thread}\""))?;
        let mut tx = self
            .pool
            .begin()
            .await
            .context("cannot begin a transaction")?;
        // The row may exist already: a thread's first events may come first.
        sqlx::query("INSERT INTO roder_threads (thread_id) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(&thread)
            .execute(&mut *tx)
            .await
            .with_context(|| format!("cannot create thread \"{thread}\""))?;
        let inserted = sqlx::query(
            "INSERT INTO roder_thread_metadata (thread_id, metadata, updated_at)
             VALUES ($1, $2::json, $3::text::timestamptz) ON CONFLICT DO NOTHING",
        )
        .bind(&thread)
        .bind(&json)
        .bind(timestamp(metadata.updated_at)?)
        .execute(&mut *tx)
        .await
        .with_context(|| format!("cannot write metadata of thread \"{thread}\""))?;
        if inserted.rows_affected() == 0 {
            bail!("thread \"{thread}\" already exists");
        }
        tx.commit()
            .await
            .with_context(|| format!("cannot create thread \"{thread}\""))
    }

    async fn update_thread_metadata(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        self.ready().await?;
        let thread = metadata.thread_id.clone();
        thread_id::validate(&thread)?;
        let json = serde_json::to_string(&metadata)
            .with_context(|| format!("cannot serialise metadata of thread \"{thread}\""))?;
        let updated = sqlx::query(
            "UPDATE roder_thread_metadata SET metadata = $2::json, updated_at = $3::text::timestamptz WHERE thread_id = $1",
        )
        .bind(&thread)
        .bind(&json)
        .bind(timestamp(metadata.updated_at)?)
        .execute(&self.pool)
        .await
        .with_context(|| format!("cannot update metadata of thread \"{thread}\""))?;
        if updated.rows_affected() == 0 {
            bail!("cannot update metadata: thread \"{thread}\" does not exist");
        }
        Ok(())
    }

    async fn load_metadata(&self, thread_id: &str) -> anyhow::Result<Option<ThreadMetadata>> {
        self.ready().await?;
        thread_id::validate(thread_id)?;
        let json: Option<String> = sqlx::query_scalar(
            "SELECT metadata::text FROM roder_thread_metadata WHERE thread_id = $1",
        )
        .bind(thread_id)
        .fetch_optional(&self.pool)
        .await
        .with_context(|| format!("cannot read metadata of thread \"{thread_id}\""))?;
        json.map(|json| {
            serde_json::from_str(&json)
                .with_context(|| format!("metadata of thread \"{thread_id}\" is not valid"))
        })
        .transpose()
    }

    async fn append_events(&self, thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()> {
        self.ready().await?;
        append::append(self, None, thread_id, events).await
    }

    async fn load_events(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> anyhow::Result<Vec<EventEnvelope>> {
        self.ready().await?;
        page::load_after(&self.pool, thread_id, after_seq).await
    }

    async fn load_events_page(
        &self,
        thread_id: &str,
        after_seq: u64,
        max_items: usize,
        max_bytes: usize,
    ) -> anyhow::Result<EventsPage> {
        self.ready().await?;
        page::load_page(&self.pool, thread_id, after_seq, max_items, max_bytes).await
    }

    async fn list_threads(&self) -> anyhow::Result<Vec<ThreadMetadata>> {
        self.ready().await?;
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT thread_id, metadata::text FROM roder_thread_metadata
             ORDER BY updated_at DESC, thread_id",
        )
        .fetch_all(&self.pool)
        .await
        .context("cannot list threads")?;
        // One unreadable row never hides the others.
        Ok(rows
            .into_iter()
            .filter_map(|(thread, json)| match serde_json::from_str(&json) {
                Ok(metadata) => Some(metadata),
                Err(error) => {
                    tracing::warn!(thread_id = %thread, "skipping unreadable metadata: {error}");
                    None
                }
            })
            .collect())
    }

    async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()> {
        self.ready().await?;
        thread_id::validate(thread_id)?;
        // Metadata and events go with the row (ON DELETE CASCADE).
        sqlx::query("DELETE FROM roder_threads WHERE thread_id = $1")
            .bind(thread_id)
            .execute(&self.pool)
            .await
            .with_context(|| format!("cannot delete thread \"{thread_id}\""))?;
        Ok(())
    }

    async fn acquire_writer_lease(
        &self,
        thread_id: &str,
        request: WriterLeaseRequest,
    ) -> anyhow::Result<WriterLeaseOutcome> {
        self.ready().await?;
        lease::acquire(self, thread_id, request).await
    }

    async fn append_events_leased(
        &self,
        lease: &dyn WriterLease,
        thread_id: &str,
        events: &[EventEnvelope],
    ) -> anyhow::Result<()> {
        self.ready().await?;
        append::append(self, Some(lease), thread_id, events).await
    }
}

/// `updated_at` as RFC 3339, cast to `timestamptz` in SQL (it orders the
/// listing; the metadata's own JSON keeps the exact value).
fn timestamp(at: time::OffsetDateTime) -> anyhow::Result<String> {
    at.format(&time::format_description::well_known::Rfc3339)
        .context("cannot format a metadata timestamp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redacted("postgres://roder:s3cret@db:5432/roder"),
            "postgres://roder:***@db:5432/roder"
        );
        assert_eq!(redacted("postgres://db/roder"), "postgres://db/roder");
        assert_eq!(redacted("nonsense"), "(an unparsable URL)");
    }
}
