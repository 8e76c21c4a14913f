//! A small tmpfs of a test's own, for what a full disk does.
//!
//! Tests run as root under CI (`.ci/run`), where `mount -t tmpfs` works;
//! elsewhere mounting may be refused, and the test is skipped with a note.

use std::path::{Path, PathBuf};

/// A tmpfs mounted in a temporary directory, unmounted (lazily) on drop.
pub struct Tmpfs {
    // Dropped after the unmount in `Drop`.
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size` (as `mount -o size=` takes it, e.g. `"1m"`).
    /// `Ok(None)` with a note on stderr where mounting is refused; under
    /// `CI=true` a refusal is an error, since the tests run as root there.
    pub fn mount(size: &str) -> std::io::Result<Option<Self>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("mnt");
        std::fs::create_dir(&path)?;
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&path)
            .output();
        match mounted {
            Ok(output) if output.status.success() => Ok(Some(Self { _dir: dir, path })),
            other => {
                let why = format!("{other:?}");
                if std::env::var("CI").as_deref() == Ok("true") {
                    return Err(std::io::Error::other(format!(
                        "mounting a tmpfs was refused under CI=true (the tests run as root there): {why}"
                    )));
                }
                eprintln!("skipping: cannot mount a tmpfs here (needs root): {why}");
                Ok(None)
            }
        }
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.path)
            .status();
    }
}
