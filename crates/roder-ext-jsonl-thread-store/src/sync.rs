//! When appended events are forced to the disk (`[store] sync`).
//!
//! An append that returned is in the file: every reader sees it and a
//! crash of the process loses nothing. Only a power cut (or a kernel
//! crash) can lose what the kernel had not written yet. The mode chooses
//! how much of that window a log may have:
//!
//! * `none`: never synced by the store; the kernel writes it back within
//!   seconds.
//! * `turn` (default): the log is synced by the append that records a tool
//!   call about to run (`tool_call_started`, `external_tool_call_requested`)
//!   and by the one that ends a turn, so no tool's effect on the world is
//!   ever ahead of the log, and a finished turn is on the disk.
//! * `always`: every append is synced.
//!
//! The mode is the store directory's, set once per process by whoever
//! opens it ([`set_mode`]); the store and its factory stay the one-field
//! literals they are (the shared conformance suite builds them so).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use roder_api::events::{EventEnvelope, RoderEvent};
use serde::{Deserialize, Serialize};

/// When appends are forced to the disk; see the module's text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncMode {
    None,
    #[default]
    Turn,
    Always,
}

impl SyncMode {
    /// The name `[store] sync` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Turn => "turn",
            Self::Always => "always",
        }
    }

    /// Whether an append of `events` must reach the disk before it returns.
    pub fn must_sync(self, events: &[EventEnvelope]) -> bool {
        match self {
            Self::None => false,
            Self::Always => true,
            Self::Turn => events.iter().any(|envelope| {
                matches!(
                    envelope.event,
                    RoderEvent::ToolCallStarted(_)
                        | RoderEvent::ExternalToolCallRequested(_)
                        | RoderEvent::TurnCompleted(_)
                        | RoderEvent::TurnFailed(_)
                        | RoderEvent::TurnInterrupted(_)
                        | RoderEvent::TurnDeadlineExceeded(_)
                )
            }),
        }
    }
}

impl std::str::FromStr for SyncMode {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        match text {
            "none" => Ok(Self::None),
            "turn" => Ok(Self::Turn),
            "always" => Ok(Self::Always),
            other => anyhow::bail!(
                "unknown store sync mode \"{other}\" (expected \"none\", \"turn\" or \"always\")"
            ),
        }
    }
}

fn modes() -> &'static Mutex<HashMap<PathBuf, SyncMode>> {
    static MODES: OnceLock<Mutex<HashMap<PathBuf, SyncMode>>> = OnceLock::new();
    MODES.get_or_init(Mutex::default)
}

/// Sets the sync mode of the store over `base_path` in this process (the
/// path as the store is built with). Unset directories use `turn`.
pub fn set_mode(base_path: &Path, mode: SyncMode) {
    modes()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(base_path.to_path_buf(), mode);
}

/// The sync mode of the store over `base_path`.
pub fn mode(base_path: &Path) -> SyncMode {
    modes()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(base_path)
        .copied()
        .unwrap_or_default()
}

fn syncs() -> &'static Mutex<HashMap<PathBuf, u64>> {
    static SYNCS: OnceLock<Mutex<HashMap<PathBuf, u64>>> = OnceLock::new();
    SYNCS.get_or_init(Mutex::default)
}

/// How many times appends in this process have synced the log at `log`
/// (a thread's `events.jsonl`): what the tests read to see a mode honoured.
pub fn syncs_of(log: &Path) -> u64 {
    syncs()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(log)
        .copied()
        .unwrap_or(0)
}

/// Forces `file`'s data to the disk; for a file this append created, its
/// directory entry too.
pub(crate) fn sync(file: &std::fs::File, log: &Path, created: bool) -> std::io::Result<()> {
    file.sync_data()?;
    if created && let Some(dir) = log.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    *syncs()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry(log.to_path_buf())
        .or_default() += 1;
    Ok(())
}
