//! Runner routing: how a thread's workspace tools reach a sandbox.
//!
//! * [`binding`]: validating a selection, auto-binding new threads.
//! * [`sessions`]: the single-flight session cache (one live session per thread).
//! * [`provision`]: resume-or-create, persisting the state before handing out.
//! * [`execution_lock`]: per-session serialization of workspace tools.
//! * [`lease`]: the provider-owned fence around one execution.
//! * [`deadline`]: what is left of a turn's deadline.
//! * [`lifecycle`]: pause, resume, detach, rejoin.
//! * [`idle`]: what becomes of sessions nothing uses any more (`on_idle`).
//! * [`idle_timer`]: the same for one thread after a quiet period.

pub(crate) mod binding;
pub(crate) mod deadline;
pub(crate) mod execution_lock;
pub(crate) mod idle;
pub(crate) mod idle_timer;
pub(crate) mod lease;
pub(crate) mod lifecycle;
pub(crate) mod provision;
pub(crate) mod sessions;
pub(crate) mod state;
