//! A connection as an approver: who it is, whether it answers approvals,
//! and the `approval/request`s it was sent and has not answered.
//!
//! Shared by the connection (which reads answers) and its forwarder (which
//! sends the requests and attaches the connection to the threads it
//! follows).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::protocol::RequestId;

/// Numbers connections, so every client id is unique in this process.
static CONNECTIONS: AtomicU64 = AtomicU64::new(1);

pub(crate) struct Approver {
    number: u64,
    client_id: OnceLock<String>,
    answers: AtomicBool,
    /// Request ids of `approval/request`s sent, with their approval ids.
    sent: Mutex<HashMap<RequestId, String>>,
    next_request: AtomicU64,
}

impl Approver {
    pub fn new() -> Self {
        Self {
            number: CONNECTIONS.fetch_add(1, Ordering::Relaxed),
            client_id: OnceLock::new(),
            answers: AtomicBool::new(false),
            sent: Mutex::new(HashMap::new()),
            next_request: AtomicU64::new(1),
        }
    }

    /// Set once, by `initialize`: the client's name and whether it answers.
    pub fn identify(&self, client_name: Option<&str>, answers: bool) {
        let name: String = client_name
            .unwrap_or("client")
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || "-_.".contains(*c))
            .take(40)
            .collect();
        let name = if name.is_empty() {
            "client".into()
        } else {
            name
        };
        let _ = self.client_id.set(format!("{name}#{}", self.number));
        self.answers.store(answers, Ordering::SeqCst);
    }

    pub fn client_id(&self) -> String {
        self.client_id
            .get()
            .cloned()
            .unwrap_or_else(|| format!("client#{}", self.number))
    }

    pub fn answers(&self) -> bool {
        self.answers.load(Ordering::SeqCst)
    }

    /// Records a request about to be sent for `approval_id`; returns its id.
    pub fn request(&self, approval_id: &str) -> RequestId {
        let id = RequestId::String(format!(
            "approval-{}",
            self.next_request.fetch_add(1, Ordering::Relaxed)
        ));
        self.sent().insert(id.clone(), approval_id.to_string());
        id
    }

    /// The approval an answer with this id is for (once).
    pub fn answered(&self, id: &RequestId) -> Option<String> {
        self.sent().remove(id)
    }

    /// Puts back a request whose answer could not be read, so a corrected
    /// answer is still taken.
    pub fn unanswered(&self, id: RequestId, approval_id: String) {
        self.sent().insert(id, approval_id);
    }

    fn sent(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, String>> {
        self.sent.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_name_the_client_and_answers_are_taken_once() {
        let approver = Approver::new();
        approver.identify(Some("web page!"), true);
        assert!(approver.client_id().starts_with("webpage#"));
        assert!(approver.answers());
        let id = approver.request("a1");
        assert_eq!(approver.answered(&id).as_deref(), Some("a1"));
        assert_eq!(approver.answered(&id), None);
        approver.unanswered(id.clone(), "a1".into());
        assert_eq!(approver.answered(&id).as_deref(), Some("a1"));
    }
}
