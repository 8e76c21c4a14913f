//! One ACP session: one Roder thread (the session id is the thread id),
//! with this connection attached as its approver while the session is open.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use roder_core::ApproverGuard;

use crate::options::Choices;

pub(crate) struct Session {
    pub id: String,
    /// The session's root as the client gave it.
    pub cwd: PathBuf,
    choices: Mutex<Choices>,
    /// The turn running for a `session/prompt`, if any.
    running: Mutex<Option<String>>,
    /// Set by `session/cancel`; a prompt whose turn has not started yet
    /// interrupts it as soon as it has.
    cancel_requested: AtomicBool,
    /// Held by the `session/prompt` in progress: one turn at a time.
    pub prompting: tokio::sync::Mutex<()>,
    _approver: ApproverGuard,
}

impl Session {
    pub fn new(id: String, cwd: PathBuf, choices: Choices, approver: ApproverGuard) -> Self {
        Self {
            id,
            cwd,
            choices: Mutex::new(choices),
            running: Mutex::new(None),
            cancel_requested: AtomicBool::new(false),
            prompting: tokio::sync::Mutex::new(()),
            _approver: approver,
        }
    }

    pub fn choices(&self) -> MutexGuard<'_, Choices> {
        self.choices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn running(&self) -> Option<String> {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub fn set_running(&self, turn_id: Option<String>) {
        *self.running.lock().unwrap_or_else(PoisonError::into_inner) = turn_id;
    }

    /// A new prompt starts: an earlier cancel no longer applies.
    pub fn clear_cancel(&self) {
        self.cancel_requested.store(false, Ordering::SeqCst);
    }

    /// Records a cancel; returns the turn to interrupt, if one runs.
    pub fn request_cancel(&self) -> Option<String> {
        self.cancel_requested.store(true, Ordering::SeqCst);
        self.running()
    }

    pub fn cancel_requested(&self) -> bool {
        self.cancel_requested.load(Ordering::SeqCst)
    }
}
