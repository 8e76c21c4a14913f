//! The other end of the connection: what we send the client (answers,
//! `session/update` notifications, our own requests) and the answers to
//! our requests it sends back.
//!
//! Every outgoing message goes through one queue to one writer, so a turn's
//! updates always leave before that turn's `session/prompt` answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, PoisonError};

use agent_client_protocol_schema::v1 as acp;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// Outgoing messages waiting for the writer; a slow client holds senders
/// back instead of growing memory without bound.
pub(crate) const QUEUE: usize = 1024;

type Answer = Result<Value, acp::Error>;

pub(crate) struct Peer {
    queue: mpsc::Sender<Vec<u8>>,
    /// Our requests waiting for the client's answer, by id; `None` once
    /// the connection has ended.
    pending: Mutex<Option<HashMap<i64, oneshot::Sender<Answer>>>>,
    next_id: AtomicI64,
}

impl Peer {
    pub fn new(queue: mpsc::Sender<Vec<u8>>) -> Self {
        Self {
            queue,
            pending: Mutex::new(Some(HashMap::new())),
            next_id: AtomicI64::new(0),
        }
    }

    /// Queues one message as one line (JSON escapes newlines in strings).
    pub async fn send(&self, message: &Value) {
        match serde_json::to_vec(message) {
            Ok(mut line) => {
                line.push(b'\n');
                // Fails only once the writer has stopped (stdout is gone).
                let _ = self.queue.send(line).await;
            }
            Err(error) => tracing::error!("could not encode an ACP message: {error}"),
        }
    }

    /// Answers the client's request `id`.
    pub async fn respond(&self, id: &Value, answer: Answer) {
        let message = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        };
        self.send(&message).await;
    }

    pub async fn notify<P: Serialize>(&self, method: &str, params: &P) {
        match serde_json::to_value(params) {
            Ok(params) => {
                self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
                    .await;
            }
            Err(error) => tracing::error!("could not encode {method}: {error}"),
        }
    }

    /// Sends a `session/update`.
    pub async fn update(&self, session_id: &str, update: acp::SessionUpdate) {
        let notification = acp::SessionNotification::new(session_id.to_string(), update);
        self.notify("session/update", &notification).await;
    }

    /// Sends a request to the client and waits for its answer (an error if
    /// the connection ends first).
    pub async fn request<P: Serialize>(&self, method: &str, params: &P) -> Answer {
        let params = serde_json::to_value(params).map_err(acp::Error::into_internal_error)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, receiver) = oneshot::channel();
        match self.pending().as_mut() {
            Some(pending) => pending.insert(id, answer),
            None => return Err(gone()),
        };
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        receiver.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Takes the client's answer to one of our requests. Returns false when
    /// no request of ours has that id.
    pub fn answered(&self, id: &Value, answer: Answer) -> bool {
        let Some(id) = id.as_i64() else {
            return false;
        };
        let waiting = self
            .pending()
            .as_mut()
            .and_then(|pending| pending.remove(&id));
        match waiting {
            Some(waiting) => {
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }

    /// Ends every request still waiting (the client closed the connection).
    pub fn close(&self) {
        self.pending().take();
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, Option<HashMap<i64, oneshot::Sender<Answer>>>> {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn gone() -> acp::Error {
    acp::Error::internal_error().data(json!("the client closed the connection"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_request_gets_the_answer_with_its_id_and_close_ends_the_rest() {
        let (queue, mut lines) = mpsc::channel(8);
        let peer = std::sync::Arc::new(Peer::new(queue));
        let asking = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("x/y", &json!({"a": 1})).await })
        };
        let sent: Value = serde_json::from_slice(&lines.recv().await.unwrap()).unwrap();
        assert_eq!(sent["method"], "x/y");
        assert!(!peer.answered(&json!(99), Ok(json!(null))));
        assert!(peer.answered(&sent["id"], Ok(json!({"ok": true}))));
        assert_eq!(asking.await.unwrap().unwrap(), json!({"ok": true}));

        let waiting = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.request("x/z", &json!({})).await })
        };
        lines.recv().await.unwrap();
        peer.close();
        assert!(waiting.await.unwrap().is_err());
    }
}
