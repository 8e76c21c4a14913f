//! Errors of a disk that cannot take more: what the person reads names the
//! disk (the filesystem's mount point and what is free on it), the file,
//! and the fix.

use std::io;
use std::path::{Path, PathBuf};

/// Whether `error` says the filesystem cannot take a write (full, over
/// quota, read-only).
pub(crate) fn is_out_of_space(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull
            | io::ErrorKind::QuotaExceeded
            | io::ErrorKind::ReadOnlyFilesystem
    )
}

/// `error` from writing `path`, made into the message a person can act on
/// when the disk is the cause; other errors get `what` as context only.
pub(crate) fn explain(error: io::Error, path: &Path, what: &str) -> anyhow::Error {
    if !is_out_of_space(&error) {
        return anyhow::Error::new(error).context(format!("{what} `{}`", path.display()));
    }
    let mount = mount_point(path);
    let place = match &mount {
        Some(mount) => format!("the filesystem mounted at {}", mount.display()),
        None => "its filesystem".to_string(),
    };
    let state = if error.kind() == io::ErrorKind::ReadOnlyFilesystem {
        format!("{place} is read-only")
    } else {
        match free_bytes(path) {
            Some(free) => format!("{place} is full ({free} bytes free)"),
            None => format!("{place} is full"),
        }
    };
    anyhow::anyhow!(
        "{what} `{}`: {state} ({error}). Nothing was left half-written; free space there (or point RODER_HOME at another disk) and continue the thread",
        path.display()
    )
}

/// Whether a thread can be written under `dir`: it is made if missing,
/// and a file is created in it and removed. Blocking. What `roder exec`
/// checks before it starts, so a read-only or full `RODER_HOME` is a clear
/// error before anything is half done.
pub fn check_writable(dir: &Path) -> anyhow::Result<()> {
    let what = "cannot write to the thread store directory";
    std::fs::create_dir_all(dir).map_err(|error| explain(error, dir, what))?;
    let probe = dir.join(format!(".write-check-{}", std::process::id()));
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe);
    match created {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(error) => Err(explain(error, dir, what)),
    }
}

/// The mount point holding `path`: the longest mount in
/// `/proc/self/mounts` that is an ancestor of it.
fn mount_point(path: &Path) -> Option<PathBuf> {
    let mut existing = path;
    let real = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break real;
        }
        existing = existing.parent()?;
    };
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts
        .lines()
        .filter_map(|line| line.split_whitespace().nth(1))
        .map(unescape)
        .filter(|mount| real.starts_with(mount))
        .max_by_key(|mount| mount.as_os_str().len())
}

/// `/proc/self/mounts` writes space, tab, newline and backslash as octal
/// escapes (`\040`).
fn unescape(field: &str) -> PathBuf {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let octal = bytes
            .get(index + 1..index + 4)
            .filter(|digits| byte == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal {
            Some(digits) => {
                let value = digits
                    .iter()
                    .fold(0_u32, |value, digit| value * 8 + u32::from(digit - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                index += 4;
            }
            None => {
                out.push(byte);
                index += 1;
            }
        }
    }
    use std::os::unix::ffi::OsStringExt as _;
    PathBuf::from(std::ffi::OsString::from_vec(out))
}

/// Bytes an unprivileged writer may still use on `path`'s filesystem.
// The statvfs field types differ between targets.
#[allow(clippy::useless_conversion)]
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut existing = path;
    while !existing.exists() {
        existing = existing.parent()?;
    }
    let c_path = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    let mut stat = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c_path` is a NUL-terminated path and `stat` is written by
    // the call before it is read (only on success).
    let result = unsafe { libc::statvfs(c_path.as_ptr(), stat.as_mut_ptr()) };
    if result != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `stat`.
    let stat = unsafe { stat.assume_init() };
    Some(u64::from(stat.f_bavail).saturating_mul(u64::from(stat.f_frsize)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_full_disk_names_the_mount_the_file_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        let error = explain(
            io::Error::from(io::ErrorKind::StorageFull),
            &path,
            "cannot append to",
        )
        .to_string();
        assert!(
            error.contains("is full") && error.contains("bytes free"),
            "{error}"
        );
        assert!(error.contains(&path.display().to_string()), "{error}");
        assert!(error.contains("the filesystem mounted at /"), "{error}");
        assert!(error.contains("free space there"), "{error}");
        let read_only = explain(
            io::Error::from(io::ErrorKind::ReadOnlyFilesystem),
            &path,
            "cannot write",
        )
        .to_string();
        assert!(read_only.contains("is read-only"), "{read_only}");
        let other = explain(io::Error::other("boom"), &path, "cannot write").to_string();
        assert!(!other.contains("full"), "{other}");
    }

    #[test]
    fn mount_fields_are_unescaped() {
        assert_eq!(unescape(r"/mnt/a\040b"), PathBuf::from("/mnt/a b"));
        assert_eq!(unescape(r"/x\\"), PathBuf::from(r"/x\\"));
    }

    proptest! {
        #[test]
        fn unescape_never_panics(field in ".*") {
            let _ = unescape(&field);
        }
    }
}
