//! Agent profiles: one file says who the agent is (instructions, model,
//! tools allowed and denied, mode, sandbox narrowing, runner, MCP servers,
//! limits), from builtins, `$RODER_HOME/profiles`, the workspace's
//! `.roder/profiles`, or a profile archive verified by digest and size
//! (embedded in a request, or fetched over HTTP with ETag revalidation into
//! a content-addressed cache).
//!
//! [`Resolver::resolve`] turns a selector into the
//! [`ProfileSnapshot`](roder_api::profile::ProfileSnapshot) a thread keeps;
//! `roder_core::Runtime::create_thread_with_profile` applies it.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod archive;
mod background;
pub mod builtins;
pub mod cache;
mod error;
pub mod fetch;
pub mod file;
mod memo;
mod resolve;
mod secrets;
mod selector;
mod tool_names;

pub use archive::{ArchiveRef, VerifiedArchive, pack};
pub use error::ProfileError;
pub use fetch::FetchOutcome;
pub use resolve::{ArchiveSource, Listed, MAX_DEPTH, ProfileRequest, Resolver};
pub use selector::{BUILTIN_PREFIX, Selector};
