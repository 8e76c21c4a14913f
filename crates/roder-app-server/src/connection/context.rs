//! What a request handler can reach: the runtime, this connection's
//! subscriptions and limits.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use roder_core::Runtime;
use tokio::sync::{mpsc, oneshot};

use super::forwarder::Command;
use super::limits::ConnectionLimits;

pub(crate) struct Context {
    pub runtime: Arc<Runtime>,
    pub limits: ConnectionLimits,
    pub subscriptions: Subscriptions,
    /// Who the client is and whether it answers approvals.
    pub approver: Arc<super::approver::Approver>,
    initialized: AtomicBool,
}

impl Context {
    pub fn new(
        runtime: Arc<Runtime>,
        limits: ConnectionLimits,
        subscriptions: Subscriptions,
        approver: Arc<super::approver::Approver>,
    ) -> Self {
        Self {
            runtime,
            limits,
            subscriptions,
            approver,
            initialized: AtomicBool::new(false),
        }
    }

    /// A thread as this server describes it.
    pub fn thread_info(
        &self,
        metadata: roder_api::thread::ThreadMetadata,
    ) -> crate::protocol::ThreadInfo {
        crate::convert::thread_info(metadata, self.runtime.config().policy_mode)
    }

    pub fn is_initialized(&self) -> bool {
        self.initialized.load(Ordering::SeqCst)
    }

    /// Marks the connection initialized; false if it already was.
    pub fn mark_initialized(&self) -> bool {
        !self.initialized.swap(true, Ordering::SeqCst)
    }
}

/// Handle on the connection's forwarder task.
#[derive(Clone)]
pub(crate) struct Subscriptions {
    commands: mpsc::Sender<Command>,
}

impl Subscriptions {
    pub fn new(commands: mpsc::Sender<Command>) -> Self {
        Self { commands }
    }

    /// Subscribes to `thread_id`: its events after `after_seq` are queued as
    /// notifications before this returns, live ones follow. Returns the last
    /// seq queued.
    pub async fn subscribe(&self, thread_id: &str, after_seq: u64) -> anyhow::Result<u64> {
        let (done, answer) = oneshot::channel();
        self.commands
            .send(Command::Subscribe {
                thread_id: thread_id.to_string(),
                after_seq,
                done,
            })
            .await
            .map_err(|_| anyhow::anyhow!("the connection is closing"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the connection is closing"))?
    }

    /// Stops notifications of `thread_id`; false if none were sent.
    pub async fn unsubscribe(&self, thread_id: &str) -> anyhow::Result<bool> {
        let (done, answer) = oneshot::channel();
        self.commands
            .send(Command::Unsubscribe {
                thread_id: thread_id.to_string(),
                done,
            })
            .await
            .map_err(|_| anyhow::anyhow!("the connection is closing"))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the connection is closing"))
    }
}
