//! Tool calls a turn has announced but not yet answered.
//!
//! When a turn ends early (interrupt, deadline, failure), each open call gets
//! an error result in the transcript, so the next turn sends the model a
//! well-formed history (every tool call answered).

use std::sync::Mutex;

#[derive(Default)]
pub(crate) struct OpenCalls {
    calls: Mutex<Vec<(String, String)>>,
}

impl OpenCalls {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<(String, String)>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn open(&self, call_id: &str, tool_name: &str) {
        self.calls()
            .push((call_id.to_string(), tool_name.to_string()));
    }

    pub fn close(&self, call_id: &str) {
        self.calls().retain(|(id, _)| id != call_id);
    }

    /// The calls still open, in the order they were announced.
    pub fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.calls())
    }
}
