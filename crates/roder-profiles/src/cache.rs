//! The content-addressed archive cache under `$RODER_HOME/cache/profiles`:
//!
//! * `sha256/<hex>.tar`: an archive, named by its digest; written through a
//!   temporary file, fsynced, then renamed, and hashed again on every read
//!   (a corrupt entry is deleted and reads as absent, so it is fetched
//!   again);
//! * `refs/<sha256 of the url>.json`: `{url, etag, digest}` of the last
//!   fetch of a URL, to revalidate with `If-None-Match`.
//!
//! The ETag only saves bandwidth; the digest is the integrity check. These
//! functions block: callers run them on a blocking thread.
//!
//! A process keeps the entries it verified in memory ([`Verified`]), with
//! the identity of the file it read (device, inode, length, modification
//! time). A later read whose `stat` shows the same file uses the verified
//! copy instead of reading and hashing it again: a thread start with a
//! cached archive then costs a `stat`, not a read and a SHA-256. A file
//! replaced or rewritten since (a new inode or mtime) is read and verified
//! again, so a corrupt entry is still found and fetched again.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};

use crate::archive::{ArchiveRef, sha256_digest};
use crate::error::ProfileError;

/// The cache in one directory. Clones share the verified entries.
#[derive(Debug, Clone)]
pub struct ArchiveCache {
    root: PathBuf,
    verified: Arc<Mutex<Verified>>,
}

/// What a process holds in memory of the entries it verified: at most
/// [`Verified::MAX_BYTES`] of archives, all dropped when one more would not
/// fit (a process meets a handful of archives; the bound only keeps a
/// stream of distinct ones from growing it).
#[derive(Debug, Default)]
struct Verified {
    entries: HashMap<String, (FileIdentity, Arc<[u8]>)>,
    bytes: usize,
}

impl Verified {
    const MAX_BYTES: usize = 64 * 1024 * 1024;

    fn get(&self, digest: &str, identity: &FileIdentity) -> Option<Arc<[u8]>> {
        self.entries
            .get(digest)
            .filter(|(seen, _)| seen == identity)
            .map(|(_, bytes)| bytes.clone())
    }

    fn insert(&mut self, digest: &str, identity: FileIdentity, bytes: Arc<[u8]>) {
        if let Some((_, old)) = self.entries.remove(digest) {
            self.bytes = self.bytes.saturating_sub(old.len());
        }
        if self.bytes + bytes.len() > Self::MAX_BYTES {
            self.entries.clear();
            self.bytes = 0;
        }
        self.bytes += bytes.len();
        self.entries.insert(digest.to_string(), (identity, bytes));
    }

    fn forget(&mut self, digest: &str) {
        if let Some((_, old)) = self.entries.remove(digest) {
            self.bytes = self.bytes.saturating_sub(old.len());
        }
    }
}

/// Which file a path held when it was read: a rewrite or a replacement
/// changes one of these.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileIdentity {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
}

impl FileIdentity {
    fn of(metadata: &std::fs::Metadata) -> FileIdentity {
        FileIdentity {
            dev: metadata.dev(),
            ino: metadata.ino(),
            len: metadata.len(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
        }
    }
}

/// What the last fetch of a URL returned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UrlRef {
    pub url: String,
    pub etag: Option<String>,
    pub digest: String,
}

impl ArchiveCache {
    pub fn new(root: impl Into<PathBuf>) -> ArchiveCache {
        ArchiveCache {
            root: root.into(),
            verified: Arc::default(),
        }
    }

    fn verified(&self) -> std::sync::MutexGuard<'_, Verified> {
        self.verified.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where the archive with this reference's digest lives.
    pub fn blob_path(&self, reference: &ArchiveRef) -> Result<PathBuf, ProfileError> {
        Ok(self
            .root
            .join("sha256")
            .join(format!("{}.tar", reference.hex()?)))
    }

    /// The cached archive, verified against `reference` (when this process
    /// read the same file before: then); a corrupt entry is removed and
    /// reads as `None`.
    pub fn get(&self, reference: &ArchiveRef) -> Result<Option<Arc<[u8]>>, ProfileError> {
        let path = self.blob_path(reference)?;
        let missing = |error: std::io::Error| match error.kind() {
            std::io::ErrorKind::NotFound => Ok(None),
            _ => Err(io(&path, error)),
        };
        let mut file = match std::fs::File::open(&path) {
            Ok(file) => file,
            Err(error) => return missing(error),
        };
        let identity = match file.metadata() {
            Ok(metadata) => FileIdentity::of(&metadata),
            Err(error) => return missing(error),
        };
        if let Some(bytes) = self.verified().get(&reference.digest, &identity) {
            return Ok(Some(bytes));
        }
        let mut bytes = Vec::new();
        if let Err(error) = std::io::Read::read_to_end(&mut file, &mut bytes) {
            return missing(error);
        }
        if bytes.len() as u64 == reference.size && sha256_digest(&bytes) == reference.digest {
            let bytes: Arc<[u8]> = bytes.into();
            self.verified()
                .insert(&reference.digest, identity, bytes.clone());
            return Ok(Some(bytes));
        }
        self.verified().forget(&reference.digest);
        tracing::warn!(
            "profile archive cache entry {} is corrupt; removing it",
            path.display()
        );
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(None),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(io(&path, error)),
        }
    }

    /// Stores verified bytes under their digest.
    pub fn insert(&self, reference: &ArchiveRef, bytes: &[u8]) -> Result<(), ProfileError> {
        reference.verify(bytes)?;
        let path = self.blob_path(reference)?;
        write_atomically(&path, bytes)
    }

    pub fn url_ref(&self, url: &str) -> Option<UrlRef> {
        let text = std::fs::read_to_string(self.ref_path(url)).ok()?;
        serde_json::from_str(&text)
            .ok()
            .filter(|found: &UrlRef| found.url == url)
    }

    pub fn set_url_ref(&self, entry: &UrlRef) -> Result<(), ProfileError> {
        let path = self.ref_path(&entry.url);
        let text = serde_json::to_vec_pretty(entry)
            .map_err(|error| ProfileError::Io(error.to_string()))?;
        write_atomically(&path, &text)
    }

    fn ref_path(&self, url: &str) -> PathBuf {
        let digest = sha256_digest(url.as_bytes());
        let hex = digest.trim_start_matches("sha256:");
        self.root.join("refs").join(format!("{hex}.json"))
    }
}

/// One archive `roder gc` removed (or, in a dry run, would remove).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    pub digest: String,
    pub bytes: u64,
}

impl ArchiveCache {
    /// Removes every cached archive whose digest is not in `keep` (the
    /// digests live threads' snapshots name), with the URL records that
    /// point at one; `dry_run` only lists them. A thread never reads the
    /// cache after its start (it keeps its snapshot), so an unreferenced
    /// entry only saves a later start a download.
    pub fn collect(
        &self,
        keep: &std::collections::HashSet<String>,
        dry_run: bool,
    ) -> Result<Vec<Collected>, ProfileError> {
        let blobs = self.root.join("sha256");
        let entries = match std::fs::read_dir(&blobs) {
            Ok(entries) => entries,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(error) => return Err(io(&blobs, error)),
        };
        let mut collected = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|error| io(&blobs, error))?;
            let path = entry.path();
            let Some(hex) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_suffix(".tar"))
            else {
                continue;
            };
            let digest = format!("sha256:{hex}");
            if keep.contains(&digest) {
                continue;
            }
            let bytes = entry.metadata().map(|metadata| metadata.len()).unwrap_or(0);
            if !dry_run {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(io(&path, error)),
                }
                self.verified().forget(&digest);
            }
            collected.push(Collected { digest, bytes });
        }
        if !dry_run {
            self.forget_refs_to(&collected)?;
        }
        collected.sort_by(|a, b| a.digest.cmp(&b.digest));
        Ok(collected)
    }

    /// Removes the URL records whose digest was collected.
    fn forget_refs_to(&self, collected: &[Collected]) -> Result<(), ProfileError> {
        let refs = self.root.join("refs");
        let Ok(entries) = std::fs::read_dir(&refs) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let names_collected = std::fs::read_to_string(&path)
                .ok()
                .and_then(|text| serde_json::from_str::<UrlRef>(&text).ok())
                .is_some_and(|found| collected.iter().any(|gone| gone.digest == found.digest));
            if names_collected {
                match std::fs::remove_file(&path) {
                    Ok(()) => {}
                    Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
                    Err(error) => return Err(io(&path, error)),
                }
            }
        }
        Ok(())
    }
}

fn io(path: &Path, error: std::io::Error) -> ProfileError {
    ProfileError::Io(format!("profile archive cache {}: {error}", path.display()))
}

/// Temporary file in the same directory, fsync, rename, fsync the directory:
/// a reader sees the whole file or none.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ProfileError> {
    let dir = path
        .parent()
        .ok_or_else(|| ProfileError::Io(format!("{} has no parent", path.display())))?;
    std::fs::create_dir_all(dir).map_err(|error| io(dir, error))?;
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let temp = dir.join(format!(
        ".{}.{}.{}.tmp",
        path.file_name()
            .and_then(|name| name.to_str())
            .unwrap_or("entry"),
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temp, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if let Err(error) = result {
        let _ = std::fs::remove_file(&temp);
        return Err(io(path, error));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn collect_removes_what_no_thread_names_and_its_url_records() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ArchiveCache::new(dir.path());
        let kept = ArchiveRef::of("kept", b"kept archive bytes");
        let gone = ArchiveRef::of("gone", b"an archive no thread uses");
        for (reference, bytes) in [
            (&kept, &b"kept archive bytes"[..]),
            (&gone, &b"an archive no thread uses"[..]),
        ] {
            cache.insert(reference, bytes).unwrap();
            cache
                .set_url_ref(&UrlRef {
                    url: format!("http://127.0.0.1:1/{}.tar", reference.id),
                    etag: Some("\"e\"".into()),
                    digest: reference.digest.clone(),
                })
                .unwrap();
        }
        let keep: HashSet<String> = [kept.digest.clone()].into();

        let listed = cache.collect(&keep, true).unwrap();
        assert_eq!(
            listed,
            [Collected {
                digest: gone.digest.clone(),
                bytes: gone.size
            }]
        );
        assert!(
            cache.get(&gone).unwrap().is_some(),
            "a dry run removes nothing"
        );

        assert_eq!(cache.collect(&keep, false).unwrap(), listed);
        assert!(cache.get(&gone).unwrap().is_none());
        assert!(cache.get(&kept).unwrap().is_some());
        assert!(cache.url_ref("http://127.0.0.1:1/gone.tar").is_none());
        assert!(cache.url_ref("http://127.0.0.1:1/kept.tar").is_some());
        assert!(cache.collect(&keep, false).unwrap().is_empty());
    }
}
