//! Process supervision for Roder: one way to run a host command so that it
//! cannot outlive the reason it was started.
//!
//! [`run`] starts a [`CommandSpec`] in its own process group, streams its
//! output to a sink, and kills the whole group on timeout, cancellation, or
//! when the `run` future is dropped. If the Roder process itself dies, even
//! by SIGKILL, this process's warden (see `warden.rs`) kills the groups of
//! the commands still running (Linux). Both the builtin tools'
//! local workspace and the unix-local runner use it, so host process
//! supervision is written once, with one output drain rule ([`DRAIN_GRACE`]).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod confine;
pub mod paths;
mod registry;
mod run;
mod spawn;
#[cfg(target_os = "linux")]
mod warden;

pub use confine::Confinement;
pub use confine::protections::{HostProtections, host_protections};
pub use registry::{AlreadyRunning, Reservation, RunningCommands};
pub use run::{CommandSpec, DRAIN_GRACE, Ending, Finished, OutputMode, Stream, run};
pub use spawn::{Supervised, spawn};

#[cfg(test)]
mod run_tests;
#[cfg(all(test, target_os = "linux"))]
mod warden_tests;
