//! Process supervision for Roder: one way to run a host command so that it
//! cannot outlive the reason it was started.
//!
//! [`run`] starts a [`CommandSpec`] in its own process group under a tiny
//! keeper process (see `keeper.rs`), streams its output to a sink, and ends it
//! as a whole tree on timeout, cancellation, or when the `run` future is
//! dropped. If the Roder process itself dies, even by SIGKILL, the keeper
//! kills the command and its descendants (Linux). Both the builtin tools'
//! local workspace and the unix-local runner use it, so host process
//! supervision is written once, with one output drain rule ([`DRAIN_GRACE`]).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

#[cfg(target_os = "linux")]
mod keeper;
mod run;
mod spawn;

pub use run::{CommandSpec, DRAIN_GRACE, Ending, Finished, OutputMode, Stream, run};
pub use spawn::{Supervised, spawn};

#[cfg(all(test, target_os = "linux"))]
mod keeper_tests;
#[cfg(test)]
mod run_tests;
