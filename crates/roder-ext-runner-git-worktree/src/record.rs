//! `materialization.json`: what a worktree was made from and its state.
//!
//! The record is the source of truth for a worktree's identity (repository,
//! selector, the commit and tree it started from) and for what git cannot
//! tell (the bound thread, a failed cleanup). Everything observable in the
//! checkout (cleanliness, current commit and branch) is read live instead.
//! Writes go to a temporary file that is renamed over the record, so a crash
//! leaves either the old record or the new one, never a torn file.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use tokio::io::AsyncWriteExt;

/// Format version, bumped on incompatible changes.
pub(crate) const VERSION: u32 = 1;

/// The state git cannot tell us; `corrupted` and `not_found` are observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RecordState {
    Active,
    /// Removal failed; cleanup must be run again.
    CleanupPending,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) version: u32,
    pub(crate) id: String,
    /// The source repository's top level (its git directory when bare).
    pub(crate) repository: PathBuf,
    /// The source's common git directory: the lock key for its worktree
    /// list, shared by every path that reaches the same repository.
    pub(crate) common_dir: PathBuf,
    /// The selector as requested (`HEAD` by default).
    pub(crate) selector: String,
    pub(crate) base_commit: String,
    pub(crate) base_tree: String,
    /// Absolute, canonical path of the checkout.
    pub(crate) checkout: PathBuf,
    pub(crate) state: RecordState,
    #[serde(default)]
    pub(crate) primary_thread_id: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) created_at: OffsetDateTime,
}

/// Reads a record; `None` when there is none.
pub(crate) async fn read(path: &Path) -> anyhow::Result<Option<Record>> {
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("cannot read worktree record `{}`", path.display()));
        }
    };
    let record: Record = serde_json::from_slice(&bytes)
        .with_context(|| format!("worktree record `{}` is not valid", path.display()))?;
    if record.version != VERSION {
        anyhow::bail!(
            "worktree record `{}` has version {}; this build reads version {VERSION}",
            path.display(),
            record.version
        );
    }
    Ok(Some(record))
}

/// Replaces the record atomically: temp file in the same directory, synced,
/// then renamed over the old one.
pub(crate) async fn write(path: &Path, record: &Record) -> anyhow::Result<()> {
    let bytes = serde_json::to_vec_pretty(record).context("cannot encode worktree record")?;
    let dir = path
        .parent()
        .with_context(|| format!("record path `{}` has no parent", path.display()))?;
    let temp = dir.join(format!(
        ".{}.{}.tmp",
        crate::layout::RECORD,
        uuid::Uuid::new_v4()
    ));
    let written = async {
        let mut file = tokio::fs::File::create(&temp).await?;
        file.write_all(&bytes).await?;
        file.write_all(b"\n").await?;
        file.sync_all().await?;
        drop(file);
        tokio::fs::rename(&temp, path).await
    }
    .await;
    if let Err(error) = written {
        let _ = tokio::fs::remove_file(&temp).await;
        return Err(error)
            .with_context(|| format!("cannot write worktree record `{}`", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            version: VERSION,
            id: "wt-1".to_string(),
            repository: "/repo".into(),
            common_dir: "/repo/.git".into(),
            selector: "HEAD".to_string(),
            base_commit: "c".repeat(40),
            base_tree: "t".repeat(40),
            checkout: "/root/wt-1/checkout".into(),
            state: RecordState::Active,
            primary_thread_id: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
        }
    }

    #[tokio::test]
    async fn round_trips_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("materialization.json");
        assert_eq!(read(&path).await.unwrap(), None);
        let mut record = sample();
        write(&path, &record).await.unwrap();
        record.primary_thread_id = Some("t1".to_string());
        record.state = RecordState::CleanupPending;
        write(&path, &record).await.unwrap();
        assert_eq!(read(&path).await.unwrap(), Some(record));
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("materialization.json")]
        );
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(json["state"], "cleanup_pending");
        assert_eq!(json["created_at"], "1970-01-01T00:00:00Z");
    }

    #[tokio::test]
    async fn torn_or_foreign_records_are_errors_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("materialization.json");
        std::fs::write(&path, "{\"version\": 1, \"id\"").unwrap();
        let error = read(&path).await.unwrap_err().to_string();
        assert!(error.contains("is not valid") && error.contains("materialization.json"));
        let mut future = serde_json::to_value(sample()).unwrap();
        future["version"] = 99.into();
        std::fs::write(&path, future.to_string()).unwrap();
        let error = read(&path).await.unwrap_err().to_string();
        assert!(error.contains("version 99"), "{error}");
    }
}
