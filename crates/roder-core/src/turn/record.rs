//! Tool calls a turn has announced but whose results are not yet in the
//! transcript.
//!
//! A call is `Running` until its executor returns, then `Finished` with its
//! result (its `ToolCallCompleted` is already in the log) until the result
//! is appended to the transcript. When a turn ends early (interrupt,
//! deadline, failure), finished calls keep their real result and only
//! running ones get a note, so the next turn sends the model a well-formed
//! history and no call is reported twice.

use std::sync::Mutex;

use roder_api::tools::ToolResult;

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallState {
    Running,
    Finished(ToolResult),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct OpenCall {
    pub call_id: String,
    pub tool_name: String,
    pub state: CallState,
}

#[derive(Default)]
pub(crate) struct OpenCalls {
    calls: Mutex<Vec<OpenCall>>,
}

impl OpenCalls {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<OpenCall>> {
        self.calls
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn open(&self, call_id: &str, tool_name: &str) {
        self.calls().push(OpenCall {
            call_id: call_id.to_string(),
            tool_name: tool_name.to_string(),
            state: CallState::Running,
        });
    }

    /// Records that the call's executor returned `result`.
    pub fn finish(&self, result: &ToolResult) {
        if let Some(call) = self
            .calls()
            .iter_mut()
            .find(|call| call.call_id == result.id)
        {
            call.state = CallState::Finished(result.clone());
        }
    }

    /// The call's result is in the transcript: nothing is left to do for it.
    pub fn answered(&self, call_id: &str) {
        self.calls().retain(|call| call.call_id != call_id);
    }

    /// The calls not yet answered, in the order they were announced.
    pub fn take(&self) -> Vec<OpenCall> {
        std::mem::take(&mut *self.calls())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(id: &str, text: &str) -> ToolResult {
        ToolResult {
            id: id.into(),
            name: "exec_command".into(),
            text: text.into(),
            data: serde_json::Value::Null,
            is_error: false,
        }
    }

    #[test]
    fn finished_calls_keep_their_result_until_answered() {
        let calls = OpenCalls::default();
        calls.open("a", "exec_command");
        calls.open("b", "exec_command");
        calls.open("c", "exec_command");
        calls.finish(&result("b", "real"));
        calls.answered("c");
        let left = calls.take();
        assert_eq!(left.len(), 2);
        assert_eq!(left[0].state, CallState::Running);
        assert_eq!(left[1].state, CallState::Finished(result("b", "real")));
        assert!(calls.take().is_empty());
    }
}
