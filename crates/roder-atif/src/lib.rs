//! A Roder thread as an ATIF trajectory: the Agent Trajectory Interchange
//! Format that Harbor (the evaluation framework behind Terminal-Bench)
//! reads in its viewer, analysers and dataset exports. Pure: it turns the
//! events a thread store loaded into a serializable document; `roder threads
//! export ID --format atif` writes it.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod convert;
pub mod model;

pub use convert::{AgentInfo, ExportError, trajectory};
pub use model::Trajectory;
