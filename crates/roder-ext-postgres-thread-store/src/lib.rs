//! A [`ThreadStore`](roder_api::thread::ThreadStore) in PostgreSQL, for
//! many replicas of one service: any replica can serve any thread, and one
//! writes it at a time.
//!
//! * Threads, metadata and events are tables; an append is one transaction
//!   that locks the thread's row, checks the seq and the writer lease under
//!   that lock, inserts and notifies.
//! * The writer lease is the thread's row: an owner, an expiry on the
//!   database's clock and a fencing generation from one sequence, so a
//!   replica that paused past its expiry can never write after another
//!   took over.
//! * [`PostgresThreadStore::follow`] follows a thread live from any replica
//!   (LISTEN/NOTIFY wakes, the log is read by cursor).
//!
//! ```no_run
//! # async fn wire() -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use roder_ext_postgres_thread_store::PostgresThreadStoreFactory;
//!
//! let factory = PostgresThreadStoreFactory::connect("postgres://roder@127.0.0.1/roder").await?;
//! // builder.thread_store_factory(Arc::new(factory));
//! # let _ = Arc::new(factory);
//! # Ok(())
//! # }
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod append;
pub mod follow;
mod lease;
mod outage;
mod page;
pub mod schema;
pub mod store;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
/// The id rule every store shares.
use roder_api::thread_id;

pub use follow::ThreadFollower;
pub use lease::{PostgresWriterLease, WriterLeaseStatus};
pub use store::{PostgresStoreOptions, PostgresThreadStore, PostgresThreadStoreFactory};

#[cfg(test)]
mod follow_tests;
#[cfg(test)]
mod lease_tests;
#[cfg(test)]
mod partition_tests;
#[cfg(test)]
mod restart_tests;
#[cfg(test)]
mod store_tests;
#[cfg(test)]
mod test_fixtures;
