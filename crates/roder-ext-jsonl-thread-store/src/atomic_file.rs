//! Whole-file writes a reader never sees half done.
//!
//! The bytes go to a temporary file in the same directory (same filesystem,
//! so the final step is a rename, not a copy), are fsynced, and then take
//! the target's name in one step. The directory is fsynced too, so the new
//! name survives a power cut. Blocking: call from `spawn_blocking`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// How the temp file takes the target's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Replace whatever is there (rename).
    Replace,
    /// Fail with `AlreadyExists` if the target exists (hard link, which,
    /// unlike rename, refuses to overwrite; so two racing creators cannot
    /// both win).
    CreateNew,
}

pub(crate) fn write(target: &Path, bytes: &[u8], placement: Placement) -> io::Result<()> {
    let dir = target
        .parent()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "target has no parent"))?;
    let temp = temp_path(dir, target);
    let result = write_temp(&temp, bytes).and_then(|()| match placement {
        Placement::Replace => std::fs::rename(&temp, target),
        Placement::CreateNew => std::fs::hard_link(&temp, target),
    });
    // After a rename the temp name is gone; after a link (or a failure) it
    // is a leftover to remove. Failing to remove it loses nothing.
    if placement == Placement::CreateNew || result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result?;
    File::open(dir)?.sync_all()
}

/// A hidden, unique name next to the target (hidden so it is never mistaken
/// for data; unique so concurrent writers never share one).
fn temp_path(dir: &Path, target: &Path) -> PathBuf {
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()))
}

fn write_temp(temp: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replace_overwrites_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("metadata.json");
        write(&target, b"one", Placement::Replace).unwrap();
        write(&target, b"two", Placement::Replace).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        assert_eq!(entries(dir.path()), vec!["metadata.json"]);
    }

    #[test]
    fn create_new_refuses_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("metadata.json");
        write(&target, b"one", Placement::CreateNew).unwrap();
        let error = write(&target, b"two", Placement::CreateNew).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).unwrap(), b"one");
        assert_eq!(entries(dir.path()), vec!["metadata.json"]);
    }
}
