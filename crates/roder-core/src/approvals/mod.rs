//! Approvals at run time: the approvers attached to threads, the asks
//! waiting for them, the rules kept for good, and the public methods
//! clients answer through. What a call's fate is, is decided in
//! `policy.rs`; an ask is carried out in `ask.rs`.

pub(crate) mod ask;
mod hub;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use roder_api::approval::{
    ApprovalAnswer, ApprovalRules, NoApprover, SharedApprovalRuleStore, ThreadApprovals,
};
use roder_api::events::ApprovalRequested;
use roder_api::policy_mode::PolicyMode;
use roder_api::thread::ThreadMetadata;

pub use hub::ApproverGuard;
pub(crate) use hub::{Answered, ApprovalHub};

use crate::config::ApprovalsConfig;
use crate::runner::state::update_metadata;
use crate::runtime::Runtime;
use crate::threads::ThreadState;

/// The runtime's approval state.
pub(crate) struct Approvals {
    pub hub: ApprovalHub,
    /// The configuration's rules plus those kept by `allow_always` and
    /// `reject_always` since; swapped whole, so a decision reads a snapshot.
    rules: RwLock<Arc<ApprovalRules>>,
    store: Option<SharedApprovalRuleStore>,
    pub timeout: Duration,
    pub no_approver: NoApprover,
}

impl Approvals {
    pub fn new(config: &ApprovalsConfig, store: Option<SharedApprovalRuleStore>) -> Self {
        Self {
            hub: ApprovalHub::default(),
            rules: RwLock::new(Arc::new(config.rules.clone())),
            store,
            timeout: config.timeout,
            no_approver: config.no_approver,
        }
    }

    pub fn rules(&self) -> Arc<ApprovalRules> {
        self.rules
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Keeps `rules` for the rest of this runtime's life and in the rule
    /// store, if there is one. Returns whether they were persisted.
    pub async fn keep(&self, rules: &ApprovalRules) -> anyhow::Result<bool> {
        {
            let mut current = self
                .rules
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let mut merged = (**current).clone();
            merged.merge(rules);
            *current = Arc::new(merged);
        }
        let Some(store) = self.store.clone() else {
            return Ok(false);
        };
        let rules = rules.clone();
        // The store writes a file: off the async threads.
        tokio::task::spawn_blocking(move || store.keep(&rules))
            .await
            .map_err(|error| anyhow::anyhow!("the approval rule store panicked: {error}"))??;
        Ok(true)
    }
}

impl Runtime {
    /// Attaches an approver to a thread: while the guard lives, calls of
    /// the thread that need a person's decision are asked (an
    /// `approval_requested` event) instead of being settled by
    /// `[approvals] no_approver`.
    ///
    /// ```no_run
    /// # async fn demo(runtime: std::sync::Arc<roder_core::Runtime>, thread_id: &str) -> anyhow::Result<()> {
    /// use roder_api::approval::{ApprovalAnswer, ApprovalDecision};
    /// use roder_api::events::RoderEvent;
    ///
    /// let _approver = runtime.attach_approver(thread_id);
    /// let mut events = runtime.subscribe_events();
    /// while let Ok(envelope) = events.recv().await {
    ///     if let RoderEvent::ApprovalRequested(ask) = envelope.event {
    ///         println!("{}", ask.preview.summary);
    ///         let answer = ApprovalAnswer { decision: ApprovalDecision::AllowOnce, message: None };
    ///         runtime.resolve_approval(&ask.approval_id, answer, "me")?;
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub fn attach_approver(&self, thread_id: &str) -> ApproverGuard {
        self.approvals.hub.attach(thread_id)
    }

    /// Whether an approver is attached to the thread in this runtime.
    pub fn has_approver(&self, thread_id: &str) -> bool {
        self.approvals.hub.has_approver(thread_id)
    }

    /// Answers a pending ask for the client `client_id` (recorded in the
    /// log). The first answer wins; a later one, or one for an ask that
    /// timed out or whose turn ended, is
    /// [`RuntimeError::ApprovalNotPending`](crate::RuntimeError::ApprovalNotPending).
    pub fn resolve_approval(
        &self,
        approval_id: &str,
        answer: ApprovalAnswer,
        client_id: &str,
    ) -> anyhow::Result<()> {
        Ok(self.approvals.hub.resolve(
            approval_id,
            Answered {
                answer,
                client_id: client_id.to_string(),
            },
        )?)
    }

    /// Whether the ask `approval_id` still waits for an answer in this
    /// runtime.
    pub fn is_approval_pending(&self, approval_id: &str) -> bool {
        self.approvals.hub.is_pending(approval_id)
    }

    /// The thread's asks that wait for an answer, oldest first: what a
    /// client that attaches late must be shown.
    pub fn pending_approvals(&self, thread_id: &str) -> Vec<ApprovalRequested> {
        self.approvals.hub.pending_of(thread_id)
    }

    /// The runtime's own rules: the configuration's, and those kept by
    /// `allow_always` and `reject_always` since it started.
    pub fn approval_rules(&self) -> ApprovalRules {
        (*self.approvals.rules()).clone()
    }

    /// The mode a thread's next turn runs under (unless the turn names
    /// one): the thread's own, else the runtime's.
    pub fn thread_policy_mode(&self, metadata: &ThreadMetadata) -> PolicyMode {
        metadata.approvals.mode.unwrap_or(self.config.policy_mode)
    }

    /// Replaces a thread's approval settings (mode, rules, requirement).
    /// Takes effect for the thread's next call, even in a running turn
    /// (unless that turn named its own mode).
    ///
    /// ```no_run
    /// # async fn demo(runtime: &roder_core::Runtime, thread_id: &str) -> anyhow::Result<()> {
    /// use roder_api::approval::{ApprovalRequirement, ThreadApprovals};
    /// use roder_api::policy_mode::PolicyMode;
    ///
    /// runtime
    ///     .set_thread_approvals(thread_id, ThreadApprovals {
    ///         mode: Some(PolicyMode::AcceptEdits),
    ///         rules: Default::default(),
    ///         requirement: ApprovalRequirement::Required,
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub async fn set_thread_approvals(
        &self,
        thread_id: &str,
        approvals: ThreadApprovals,
    ) -> anyhow::Result<ThreadMetadata> {
        let thread = self.thread_state(thread_id).await?;
        self.update_thread_approvals(&thread, |current| *current = approvals)
            .await
    }

    /// Sets (or, with `None`, clears) a thread's own mode.
    pub async fn set_thread_policy_mode(
        &self,
        thread_id: &str,
        mode: Option<PolicyMode>,
    ) -> anyhow::Result<ThreadMetadata> {
        let thread = self.thread_state(thread_id).await?;
        self.update_thread_approvals(&thread, |current| current.mode = mode)
            .await
    }

    /// Changes the thread's approval settings in its metadata and in the
    /// live state running turns read.
    pub(crate) async fn update_thread_approvals(
        &self,
        thread: &ThreadState,
        change: impl FnOnce(&mut ThreadApprovals),
    ) -> anyhow::Result<ThreadMetadata> {
        let metadata = update_metadata(self.store.as_ref(), thread, |metadata| {
            change(&mut metadata.approvals);
        })
        .await?;
        thread.set_approvals(metadata.approvals.clone());
        Ok(metadata)
    }
}
