//! Tool calls the client resolves (`ExternalToolCallRequested` →
//! `Runtime::resolve_external_tool_call`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;

use crate::error::RuntimeError;
use crate::requests::ExternalToolResolution;

#[derive(Default, Clone)]
pub(crate) struct ExternalCalls {
    pending: Arc<Mutex<HashMap<String, oneshot::Sender<ExternalToolResolution>>>>,
}

/// A registered request; dropping it (turn interrupted) unregisters it, so a
/// late resolution gets a clear "no pending call" error.
pub(crate) struct PendingExternalCall {
    pub request_id: String,
    receiver: oneshot::Receiver<ExternalToolResolution>,
    calls: ExternalCalls,
}

impl ExternalCalls {
    fn pending(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<ExternalToolResolution>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Registers a new request before it is announced, so a client that
    /// answers immediately always finds it.
    pub fn register(&self) -> PendingExternalCall {
        let request_id = uuid::Uuid::new_v4().to_string();
        let (sender, receiver) = oneshot::channel();
        self.pending().insert(request_id.clone(), sender);
        PendingExternalCall {
            request_id,
            receiver,
            calls: self.clone(),
        }
    }

    pub fn resolve(
        &self,
        request_id: &str,
        resolution: ExternalToolResolution,
    ) -> Result<(), RuntimeError> {
        let sender = self
            .pending()
            .remove(request_id)
            .ok_or_else(|| RuntimeError::ExternalCallNotFound(request_id.to_string()))?;
        sender
            .send(resolution)
            .map_err(|_| RuntimeError::ExternalCallNotFound(request_id.to_string()))
    }
}

impl PendingExternalCall {
    pub async fn wait(mut self) -> anyhow::Result<ExternalToolResolution> {
        (&mut self.receiver)
            .await
            .map_err(|_| anyhow::anyhow!("external tool call {} was abandoned", self.request_id))
    }
}

impl Drop for PendingExternalCall {
    fn drop(&mut self) {
        self.calls.pending().remove(&self.request_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolution_reaches_the_waiter_once() {
        let calls = ExternalCalls::default();
        let pending = calls.register();
        let id = pending.request_id.clone();
        calls
            .resolve(
                &id,
                ExternalToolResolution {
                    output: "ok".to_string(),
                    is_error: false,
                },
            )
            .unwrap();
        assert_eq!(pending.wait().await.unwrap().output, "ok");
        let again = calls.resolve(
            &id,
            ExternalToolResolution {
                output: "late".to_string(),
                is_error: false,
            },
        );
        assert_eq!(again, Err(RuntimeError::ExternalCallNotFound(id)));
    }

    #[test]
    fn dropped_request_is_unregistered() {
        let calls = ExternalCalls::default();
        let id = calls.register().request_id.clone();
        assert!(calls.pending().get(&id).is_none());
    }
}
