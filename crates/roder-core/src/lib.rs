//! The Roder runtime: threads, turns, the agent loop, the event bus and runner
//! routing.
//!
//! Where to look:
//! * [`runtime`]: the public API ([`Runtime`]).
//! * `turn/`: the agent loop (inference → tool calls → results → inference).
//! * `bus`: event numbering, persistence and broadcast.
//! * `routing`: how one tool call reaches the local workspace, a runner
//!   session or the client (external tools).
//! * `runner/`: binding validation, the single-flight session cache,
//!   provider leases, deadline accounting and lifecycle operations.
//! * `policy`: which tools a thread is offered, and whether a call runs,
//!   asks a person or is refused (modes, effects, rules); `approvals`:
//!   carrying out an ask, and the approvers answering it.
//! * `turn/compaction`, `compact`: keeping long threads inside the window.
//! * `history`: a thread's log in bounded pages.
//! * `checkpoint`, `rewind`, `rollback`, `fork`: workspace checkpoints at
//!   turn start, and going back to or forking from them.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod approvals;
mod bus;
mod checkpoint;
mod compact;
pub mod config;
mod error;
mod external;
mod fork;
mod history;
mod instructions;
mod memory_store;
mod policy;
mod profile;
mod reopen;
pub mod requests;
mod retention;
mod rewind;
mod rollback;
mod routing;
mod runner;
pub mod runtime;
mod thread_tools;
mod threads;
mod trace;
mod turn;
mod workdirs;
mod writer;

pub use approvals::ApproverGuard;
pub use config::{ApprovalsConfig, DynamicWorkflowsConfig, RuntimeConfig, SpeedPolicy};
pub use error::RuntimeError;
pub use history::{MAX_HISTORY_BYTES, MAX_HISTORY_ITEMS, ThreadHistoryPage};
pub use instructions::default_instructions;
pub use memory_store::MemoryThreadStore;
pub use requests::{
    CreateThreadRequest, ExternalToolResolution, StartTurnRequest, ThreadEventsPage,
    ThreadRunnerSelection, TurnOptions,
};
pub use rewind::{RewindTarget, rewind_targets_of};
pub use runner::idle::IdleRelease;
pub use runtime::Runtime;
pub use turn::compaction::{SUMMARY_INSTRUCTIONS, SUMMARY_PREFIX};
pub use workdirs::{WORKTREE_ID_KEY, WorkdirSelection};
