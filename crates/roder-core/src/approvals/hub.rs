//! Who can answer asks, and the asks waiting for an answer.
//!
//! An approver attaches to a thread (an app-server connection that answers
//! approvals and follows the thread, an ACP session, `roder exec` on a
//! terminal) and stays attached while its [`ApproverGuard`] lives. An ask
//! is registered before it is announced, so an answer sent the moment the
//! `approval_requested` event arrives always finds it; the first answer
//! wins and every later one gets [`RuntimeError::ApprovalNotPending`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use roder_api::approval::ApprovalAnswer;
use roder_api::events::ApprovalRequested;
use tokio::sync::oneshot;

use crate::error::RuntimeError;

/// An answer and who gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answered {
    pub answer: ApprovalAnswer,
    pub client_id: String,
}

#[derive(Default)]
struct State {
    /// Attached approvers per thread.
    approvers: HashMap<String, usize>,
    /// Asks by approval id.
    pending: HashMap<String, Pending>,
}

struct Pending {
    request: ApprovalRequested,
    answer: oneshot::Sender<Answered>,
}

#[derive(Default, Clone)]
pub(crate) struct ApprovalHub {
    state: Arc<Mutex<State>>,
}

/// Keeps an approver attached to a thread until dropped.
///
/// ```no_run
/// # async fn demo(runtime: &roder_core::Runtime) {
/// let guard = runtime.attach_approver("thread-id");
/// // ... answer `approval_requested` events with `runtime.resolve_approval` ...
/// drop(guard); // asks made from now on no longer wait for this approver
/// # }
/// ```
#[must_use = "the approver is detached when the guard is dropped"]
pub struct ApproverGuard {
    hub: ApprovalHub,
    thread_id: String,
}

/// An ask registered in the hub; dropping it (the turn stopped waiting)
/// withdraws it, so a late answer gets a clear error.
pub(crate) struct PendingAsk {
    hub: ApprovalHub,
    approval_id: String,
    receiver: oneshot::Receiver<Answered>,
}

impl ApprovalHub {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn attach(&self, thread_id: &str) -> ApproverGuard {
        *self
            .state()
            .approvers
            .entry(thread_id.to_string())
            .or_default() += 1;
        ApproverGuard {
            hub: self.clone(),
            thread_id: thread_id.to_string(),
        }
    }

    pub fn has_approver(&self, thread_id: &str) -> bool {
        self.state()
            .approvers
            .get(thread_id)
            .is_some_and(|count| *count > 0)
    }

    /// Registers an ask before it is announced.
    pub fn register(&self, request: ApprovalRequested) -> PendingAsk {
        let (answer, receiver) = oneshot::channel();
        let approval_id = request.approval_id.clone();
        self.state()
            .pending
            .insert(approval_id.clone(), Pending { request, answer });
        PendingAsk {
            hub: self.clone(),
            approval_id,
            receiver,
        }
    }

    /// Answers an ask; the first answer wins.
    pub fn resolve(&self, approval_id: &str, answered: Answered) -> Result<(), RuntimeError> {
        let pending = self
            .state()
            .pending
            .remove(approval_id)
            .ok_or_else(|| RuntimeError::ApprovalNotPending(approval_id.to_string()))?;
        pending
            .answer
            .send(answered)
            .map_err(|_| RuntimeError::ApprovalNotPending(approval_id.to_string()))
    }

    pub fn is_pending(&self, approval_id: &str) -> bool {
        self.state().pending.contains_key(approval_id)
    }

    /// The asks of `thread_id` still waiting, oldest first.
    pub fn pending_of(&self, thread_id: &str) -> Vec<ApprovalRequested> {
        let mut asks: Vec<ApprovalRequested> = self
            .state()
            .pending
            .values()
            .filter(|pending| pending.request.thread_id == thread_id)
            .map(|pending| pending.request.clone())
            .collect();
        asks.sort_by_key(|ask| ask.expires_at);
        asks
    }
}

impl PendingAsk {
    /// The answer, when one comes.
    pub async fn answer(&mut self) -> Option<Answered> {
        (&mut self.receiver).await.ok()
    }
}

impl Drop for PendingAsk {
    fn drop(&mut self) {
        self.hub.state().pending.remove(&self.approval_id);
    }
}

impl Drop for ApproverGuard {
    fn drop(&mut self) {
        let mut state = self.hub.state();
        if let Some(count) = state.approvers.get_mut(&self.thread_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                state.approvers.remove(&self.thread_id);
            }
        }
    }
}

impl std::fmt::Debug for ApproverGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApproverGuard")
            .field("thread_id", &self.thread_id)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::approval::{ApprovalDecision, CallPreview, ToolEffects};

    fn ask(id: &str) -> ApprovalRequested {
        ApprovalRequested {
            thread_id: "t".into(),
            turn_id: "u".into(),
            approval_id: id.into(),
            call_id: "c".into(),
            tool_name: "shell".into(),
            effects: ToolEffects::EXECUTE,
            preview: CallPreview::default(),
            rules: Vec::new(),
            expires_at: time::OffsetDateTime::UNIX_EPOCH,
        }
    }

    fn answered(client: &str) -> Answered {
        Answered {
            answer: ApprovalAnswer {
                decision: ApprovalDecision::AllowOnce,
                message: None,
            },
            client_id: client.into(),
        }
    }

    #[tokio::test]
    async fn the_first_answer_wins() {
        let hub = ApprovalHub::default();
        let mut pending = hub.register(ask("a"));
        assert_eq!(hub.pending_of("t").len(), 1);
        hub.resolve("a", answered("one")).unwrap();
        assert_eq!(
            hub.resolve("a", answered("two")),
            Err(RuntimeError::ApprovalNotPending("a".into()))
        );
        assert_eq!(pending.answer().await.unwrap().client_id, "one");
        assert!(hub.pending_of("t").is_empty());
    }

    #[test]
    fn a_withdrawn_ask_cannot_be_answered() {
        let hub = ApprovalHub::default();
        drop(hub.register(ask("a")));
        assert!(!hub.is_pending("a"));
        assert!(hub.resolve("a", answered("late")).is_err());
    }

    #[test]
    fn approvers_count_per_thread() {
        let hub = ApprovalHub::default();
        assert!(!hub.has_approver("t"));
        let first = hub.attach("t");
        let second = hub.attach("t");
        assert!(hub.has_approver("t"));
        drop(first);
        assert!(hub.has_approver("t"));
        drop(second);
        assert!(!hub.has_approver("t"));
        assert!(!hub.has_approver("other"));
    }
}
