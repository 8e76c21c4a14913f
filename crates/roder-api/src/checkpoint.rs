//! Workspace checkpoints: what lets a thread be rolled back or forked
//! together with its files.
//!
//! A conversation alone can be rewound by dropping turns from the model's
//! context; the files the agent changed cannot. A [`WorkspaceCheckpointer`]
//! is the capability a backend offers for that: at the start of each turn
//! the runtime asks it for a checkpoint of the thread's workspace (a git
//! commit object of the worktree's whole state, a copy of a directory, a
//! committed container), records it as an event, and later restores it
//! (rollback) or makes a new workspace from it (fork).
//!
//! A checkpointer says which workspaces it handles ([`handles`]); a
//! workspace none handles has no checkpoints, and rolling back or forking
//! its thread is refused as not supported.
//!
//! [`handles`]: WorkspaceCheckpointer::handles

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::remote_runner::{RunnerSessionState, ThreadRunnerBinding};
use crate::transcript::TranscriptItem;

/// Where a thread's files are, as a checkpointer sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckpointWorkspace {
    /// A local directory: a thread without a runner.
    Local { path: PathBuf },
    /// A runner-bound thread: its binding, and its session's persisted
    /// state once it has one.
    Runner {
        binding: Box<ThreadRunnerBinding>,
        state: Option<Box<RunnerSessionState>>,
    },
}

impl CheckpointWorkspace {
    /// The runner provider of a runner-bound workspace.
    ///
    /// ```
    /// use roder_api::checkpoint::CheckpointWorkspace;
    ///
    /// let local = CheckpointWorkspace::Local { path: "/work/repo".into() };
    /// assert_eq!(local.provider_id(), None);
    /// ```
    pub fn provider_id(&self) -> Option<&str> {
        match self {
            CheckpointWorkspace::Local { .. } => None,
            CheckpointWorkspace::Runner { binding, .. } => Some(&binding.destination.provider_id),
        }
    }

    /// The directory of the workspace (a host path for local threads, a
    /// runner path otherwise).
    pub fn root(&self) -> &std::path::Path {
        match self {
            CheckpointWorkspace::Local { path } => path,
            CheckpointWorkspace::Runner { binding, .. } => &binding.workspace,
        }
    }
}

/// One checkpoint of a workspace, as recorded in the thread's log.
/// Persisted: never holds secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCheckpoint {
    /// The checkpointer that took it ([`WorkspaceCheckpointer::id`]); only it
    /// can restore it.
    pub checkpointer: String,
    /// What identifies the saved state: a commit id, a directory, an image.
    pub id: String,
    /// Where it is kept alive, when that is not `id` itself (a git ref under
    /// `refs/roder/checkpoints/`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Whatever else the checkpointer needs to restore it.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub metadata: serde_json::Value,
}

/// What a checkpoint is asked for.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointRequest<'a> {
    pub thread_id: &'a str,
    /// The turn that is starting (the checkpoint is the state before it).
    pub turn_id: &'a str,
    pub workspace: &'a CheckpointWorkspace,
}

/// The workspace a fork works in, made from a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForkedWorkspace {
    /// A new local directory.
    Local { path: PathBuf },
    /// A new runner workspace: the fork's thread is bound to it.
    Runner {
        provider_id: String,
        /// The destination config (never secrets: it is persisted).
        config: serde_json::Value,
        /// Absolute runner path of the fork's workspace root.
        workspace: PathBuf,
        read_roots: Vec<PathBuf>,
    },
}

/// A backend's checkpoints: taken at turn start, restored by a rollback,
/// copied by a fork. Implementations must not block the async thread.
///
/// ```
/// use roder_api::checkpoint::{
///     CheckpointRequest, CheckpointWorkspace, WorkspaceCheckpoint, WorkspaceCheckpointer,
/// };
///
/// /// Checkpoints nothing: every workspace is someone else's.
/// struct Never;
///
/// #[async_trait::async_trait]
/// impl WorkspaceCheckpointer for Never {
///     fn id(&self) -> String { "never".into() }
///     fn handles(&self, _workspace: &CheckpointWorkspace) -> bool { false }
///     async fn checkpoint(&self, _request: CheckpointRequest<'_>) -> anyhow::Result<Option<WorkspaceCheckpoint>> {
///         Ok(None)
///     }
///     async fn restore(&self, _w: &CheckpointWorkspace, _c: &WorkspaceCheckpoint) -> anyhow::Result<()> {
///         anyhow::bail!("rollback is not supported by the never checkpointer")
///     }
/// }
/// # let local = CheckpointWorkspace::Local { path: "/w".into() };
/// # assert!(!Never.handles(&local));
/// ```
#[async_trait::async_trait]
pub trait WorkspaceCheckpointer: Send + Sync + 'static {
    /// Stable id, recorded in every checkpoint it takes.
    fn id(&self) -> String;

    /// Whether this checkpointer is the one for `workspace` (by kind: a
    /// runner provider, a local directory). No I/O.
    fn handles(&self, workspace: &CheckpointWorkspace) -> bool;

    /// Saves the workspace's current state. `Ok(None)` when this workspace
    /// has no cheap checkpoint after all (a local directory outside any git
    /// repository, say): the turn then simply has none.
    async fn checkpoint(
        &self,
        request: CheckpointRequest<'_>,
    ) -> anyhow::Result<Option<WorkspaceCheckpoint>>;

    /// Puts the workspace back to `checkpoint`: files created since are
    /// removed, edited and deleted ones come back.
    async fn restore(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<()>;

    /// A new workspace, of the same kind, holding `checkpoint`'s state. The
    /// source workspace is not touched.
    async fn fork(
        &self,
        _workspace: &CheckpointWorkspace,
        _checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<ForkedWorkspace> {
        anyhow::bail!(
            "forking a workspace is not supported by the \"{}\" checkpointer",
            self.id()
        )
    }

    /// The fork's thread exists now (e.g. record it as the workspace's
    /// owner).
    async fn adopt(&self, _forked: &ForkedWorkspace, _thread_id: &str) -> anyhow::Result<()> {
        Ok(())
    }

    /// The fork's thread could not be created: remove what `fork` made.
    async fn discard(&self, _forked: &ForkedWorkspace) -> anyhow::Result<()> {
        Ok(())
    }

    /// Removes checkpoints it took that nothing needs any more (past the
    /// retention, or of a thread being deleted), or with `dry_run` only
    /// says what it would remove. One already gone is not an error, so a
    /// collection that stopped half way can run again.
    async fn remove_checkpoints(
        &self,
        _workspace: &CheckpointWorkspace,
        _checkpoints: &[WorkspaceCheckpoint],
        _dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        anyhow::bail!(
            "removing checkpoints is not supported by the \"{}\" checkpointer",
            self.id()
        )
    }
}

/// One checkpoint a collection removed (or, in a dry run, would remove).
///
/// ```
/// let removed = roder_api::checkpoint::RemovedCheckpoint {
///     checkpointer: "git".into(),
///     id: "refs/roder/checkpoints/t/u".into(),
///     bytes: None,
/// };
/// assert_eq!(removed.bytes.unwrap_or(0), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemovedCheckpoint {
    pub checkpointer: String,
    /// What was removed: a git ref, a directory, an image.
    pub id: String,
    /// The bytes it frees, where the checkpointer can tell (a git ref's
    /// objects are freed by git's own garbage collection, later).
    pub bytes: Option<u64>,
}

/// The git ref a checkpoint of `turn_id` in thread `thread_id` is kept
/// reachable by, outside any branch.
///
/// ```
/// assert_eq!(
///     roder_api::checkpoint::checkpoint_ref("t1", "u2"),
///     "refs/roder/checkpoints/t1/u2"
/// );
/// ```
pub fn checkpoint_ref(thread_id: &str, turn_id: &str) -> String {
    format!("refs/roder/checkpoints/{thread_id}/{turn_id}")
}

/// A checkpoint was taken at the start of a turn (the state before it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCheckpointed {
    pub thread_id: String,
    pub turn_id: String,
    pub checkpoint: WorkspaceCheckpoint,
}

/// A turn started without its checkpoint: rolling back to the turn before
/// it, or forking there, is not possible. The turn itself runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceCheckpointFailed {
    pub thread_id: String,
    pub turn_id: String,
    pub checkpointer: String,
    pub error: String,
}

/// The thread went back to the end of turn `to_turn`: its workspace holds
/// `checkpoint` again and later requests carry `transcript` (the
/// conversation through `to_turn`). The log keeps the rolled-back turns;
/// rebuilding a transcript replaces everything before this event with
/// `transcript`, as for a compaction.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadRolledBack {
    pub thread_id: String,
    /// Turns are numbered from 1; 0 is before the first turn.
    pub to_turn: u32,
    /// Ids of the turns undone, oldest first.
    pub rolled_back_turns: Vec<String>,
    /// The checkpoint restored (the one taken when turn `to_turn + 1`
    /// started).
    pub checkpoint: WorkspaceCheckpoint,
    pub transcript: Vec<TranscriptItem>,
}

/// The thread was made as a fork of `source_thread_id` at the end of its
/// turn `at_turn`: its workspace is a copy of `checkpoint`, its transcript
/// starts as `transcript`, and its own turns are numbered from
/// `at_turn + 1`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadForked {
    pub thread_id: String,
    pub source_thread_id: String,
    pub at_turn: u32,
    pub checkpoint: WorkspaceCheckpoint,
    pub transcript: Vec<TranscriptItem>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::RoderEvent;
    use crate::transcript::apply_event;

    fn user(text: &str) -> TranscriptItem {
        TranscriptItem::UserMessage {
            text: text.into(),
            images: vec![],
        }
    }

    fn checkpoint() -> WorkspaceCheckpoint {
        WorkspaceCheckpoint {
            checkpointer: "git".into(),
            id: "abc".into(),
            reference: Some(checkpoint_ref("t", "u")),
            metadata: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_rollback_or_a_fork_replaces_the_transcript_being_rebuilt() {
        let mut transcript = vec![user("one"), user("two"), user("three")];
        let rolled_back = RoderEvent::ThreadRolledBack(ThreadRolledBack {
            thread_id: "t".into(),
            to_turn: 1,
            rolled_back_turns: vec!["u2".into(), "u3".into()],
            checkpoint: checkpoint(),
            transcript: vec![user("one")],
        });
        apply_event(&mut transcript, &rolled_back);
        assert_eq!(transcript, vec![user("one")]);
        let forked = RoderEvent::ThreadForked(ThreadForked {
            thread_id: "f".into(),
            source_thread_id: "t".into(),
            at_turn: 1,
            checkpoint: checkpoint(),
            transcript: vec![user("zero")],
        });
        apply_event(&mut transcript, &forked);
        assert_eq!(transcript, vec![user("zero")]);
    }

    #[test]
    fn events_round_trip_with_their_tags() {
        let event = RoderEvent::WorkspaceCheckpointed(WorkspaceCheckpointed {
            thread_id: "t".into(),
            turn_id: "u".into(),
            checkpoint: checkpoint(),
        });
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "workspace_checkpointed");
        assert_eq!(
            json["checkpoint"]["reference"],
            "refs/roder/checkpoints/t/u"
        );
        assert!(json["checkpoint"].get("metadata").is_none());
        let back: RoderEvent = serde_json::from_value(json).unwrap();
        assert_eq!(back, event);
    }
}
