//! The agent loop.
//!
//! * `start`: `Runtime::start_turn` / `interrupt_turn` (claiming the thread).
//! * `plan`: everything a running turn needs, resolved once at its start.
//! * `driver`: the turn's task: runs the loop, enforces interrupt and
//!   deadline, emits exactly one terminal event.
//! * `context`: what every part of a turn shares (emitting, cancellation).
//! * `round`: one model request and the tool calls it asks for.
//! * `model`: streaming one model response (phases, stop reason, cut-off calls).
//! * `tool_call`: one tool call (parsed once, panics contained).
//! * `record`: the turn's bookkeeping of tool calls not yet answered.
//! * `recovery`: closing a turn a dead process left open.
//! * `compaction`: keeping a long thread's requests inside the window.

pub(crate) mod compaction;
pub(crate) mod context;
mod driver;
mod gauge;
mod model;
pub(crate) mod plan;
mod record;
pub(crate) mod recovery;
mod round;
mod start;
pub(crate) mod tool_call;
