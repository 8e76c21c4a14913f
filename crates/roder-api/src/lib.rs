//! Canonical types and extension traits of the Roder agent runtime.
//!
//! This crate has no I/O and no runtime: it is the contract between the core
//! (`roder-core`) and every extension (inference engines, tools, thread stores,
//! runner providers). Anything two sibling crates need to agree on lives here.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod approval;
pub mod catalog;
pub mod checkpoint;
pub mod command_shell;
pub mod deadline;
pub mod events;
pub mod extension;
pub mod inference;
pub mod policy_mode;
pub mod profile;
pub mod remote_runner;
pub mod runner_idle;
pub mod runner_workspace;
pub mod sandbox_policy;
pub mod stop_reason;
pub mod telemetry;
pub mod thread;
pub mod thread_id;
pub mod thread_tools;
pub mod tools;
pub mod transcript;
pub mod workdir;
pub mod writer_lease;
