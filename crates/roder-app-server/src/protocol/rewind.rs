//! `thread/rewindTargets`, `thread/rollback`, `thread/fork`: going back to
//! the end of a turn, workspace included, or starting a new thread there.
//!
//! Turns are numbered from 1; turn 0 is before the first. Going back to
//! turn N restores the workspace checkpoint taken when turn N+1 started.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadRollbackParams {
    pub thread_id: String,
    /// Keep turns 1..=toTurn; undo the rest.
    pub to_turn: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ThreadForkParams {
    pub thread_id: String,
    /// Fork at the end of this turn (default: the thread's current turn,
    /// from its workspace as it is now).
    #[serde(default)]
    pub at_turn: Option<u32>,
}

/// A saved workspace state, as recorded in the thread's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointInfo {
    /// The checkpointer that took it (`git`, `unix-local`, ...).
    pub checkpointer: String,
    /// A commit id, a directory, an image.
    pub id: String,
    /// Where it is kept alive (a git ref), when not `id` itself.
    pub reference: Option<String>,
}

/// A turn a thread can go back to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RewindTargetInfo {
    pub turn: u32,
    /// The id of that turn (none for turn 0, or a turn a fork inherited).
    pub turn_id: Option<String>,
    /// Its user message.
    pub message: Option<String>,
    /// What the workspace is put back to.
    pub checkpoint: CheckpointInfo,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRewindTargetsResult {
    /// Oldest first; the thread's current turn is not listed.
    pub targets: Vec<RewindTargetInfo>,
}

/// What `thread/rollback` wrote (the `thread_rolled_back` event also
/// reaches subscribers as a `thread/event`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ThreadRollbackResult {
    pub to_turn: u32,
    /// The turns undone, oldest first (the log keeps them).
    pub rolled_back_turns: Vec<String>,
    pub checkpoint: CheckpointInfo,
}
