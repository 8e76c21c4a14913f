//! Roder's embedded default thread store: one directory per thread holding
//! `metadata.json` (rewritten whole, atomically) and `events.jsonl`
//! (append-only, one [`EventEnvelope`](roder_api::events::EventEnvelope) per
//! line).
//!
//! Plain files keep a thread inspectable with `cat` and `jq`, need no server,
//! and make crash behaviour simple to reason about: metadata is replaced by
//! rename, and the log only ever grows, so a crash can at worst leave a torn
//! last line, which loading skips.
//!
//! ```no_run
//! use std::sync::Arc;
//! use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
//!
//! let factory = Arc::new(JsonlThreadStoreFactory { base_path: "/var/lib/roder/threads".into() });
//! // builder.thread_store_factory(factory);
//! # let _ = factory;
//! ```
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod atomic_file;
mod disk;
mod event_log;
mod page;
mod seek;
pub mod store;
pub mod sync;
mod tail;
/// The id rule every store shares.
use roder_api::thread_id;
mod writer_lock;

pub use disk::check_writable;
pub use store::{JsonlThreadStore, JsonlThreadStoreFactory};
pub use sync::SyncMode;
pub use writer_lock::JsonlWriterLease;
