//! The commands a session is running, by command id, so that
//! `cancel_command` (called from another task) can reach them: the registry
//! every runner shares, [`roder_sandbox::RunningCommands`]. Each entry is the
//! cancellation token of one `roder_sandbox::run`, which kills the command's
//! process group when it fires.

pub(crate) use roder_sandbox::RunningCommands;
