//! The agent loop.
//!
//! * `start`: `Runtime::start_turn` / `interrupt_turn` (claiming the thread).
//! * `plan`: everything a running turn needs, resolved once at its start.
//! * `driver`: the turn's task: runs the loop, enforces interrupt and
//!   deadline, emits exactly one terminal event.
//! * `round`: one model request and the tool calls it asks for.
//! * `record`: the turn's bookkeeping of tool calls still open.

mod driver;
pub(crate) mod plan;
mod record;
pub(crate) mod round;
mod start;
