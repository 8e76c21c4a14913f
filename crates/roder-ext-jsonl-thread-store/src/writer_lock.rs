//! The thread's writer lease: an exclusive OS file lock on
//! `<thread>/writer.lock`, held for as long as the lease lives.
//!
//! The kernel drops the lock when the file is closed, which happens when the
//! lease is released or dropped, and when the holding process dies however
//! it dies (`kill -9` included), so a lease never outlives its holder and
//! needs no renewal. The lock is per open file: two leases in one process
//! (two runtimes over one store directory) conflict like two processes do.
//! The file is opened close-on-exec, so a command a tool spawns never
//! inherits it (a `sleep` left running would otherwise hold the thread).
//!
//! The lock file's content is a record for humans and busy callers: the
//! holder's identity (so a refused writer can name who is writing) and a
//! grant counter (the lease's generation, which only grows). It is written
//! right after the lock is taken and read only by callers that failed to
//! take the lock. It is not fsynced: a power cut loses nothing but the
//! counter's last increments.
//! Blocking: call from `spawn_blocking`.

use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use roder_api::writer_lease::{WriterIdentity, WriterLease, WriterLeaseOutcome};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::event_log;
use crate::store::blocking;

/// The lock file, in the thread's directory.
pub(crate) const LOCK_FILE: &str = "writer.lock";

/// A record longer than this is not ours: it is not read past it.
const MAX_RECORD_BYTES: usize = 64 * 1024;

/// What `writer.lock` holds.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    /// How many times the lease was granted.
    generation: u64,
    /// The current holder; `None` once released.
    holder: Option<WriterIdentity>,
}

/// A held writer lease of one thread of a
/// [`JsonlThreadStore`](crate::JsonlThreadStore): the open, locked
/// `writer.lock`.
pub struct JsonlWriterLease {
    thread_id: String,
    generation: u64,
    last_seq_at_grant: u64,
    lock_path: PathBuf,
    /// `None` once released.
    file: Mutex<Option<File>>,
}

impl std::fmt::Debug for JsonlWriterLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonlWriterLease")
            .field("thread_id", &self.thread_id)
            .field("generation", &self.generation)
            .field("lock_path", &self.lock_path)
            .finish_non_exhaustive()
    }
}

/// Takes the lease of the thread whose directory is `dir`, or names the
/// holder. Never waits.
pub(crate) fn acquire(
    dir: &Path,
    thread_id: &str,
    owner: WriterIdentity,
    events_path: &Path,
) -> anyhow::Result<WriterLeaseOutcome> {
    let lock_path = dir.join(LOCK_FILE);
    let file = match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => bail!(
            "cannot take the writer lease of thread \"{thread_id}\": the thread does not exist (no directory `{}`); create the thread first",
            dir.display()
        ),
        Err(error) => {
            return Err(error)
                .with_context(|| format!("cannot open lock file `{}`", lock_path.display()));
        }
    };
    if let Some(holder) = try_lock(&file, &lock_path, &owner)? {
        return Ok(WriterLeaseOutcome::Busy(holder));
    }
    let generation = read_record(&file)
        .map_or(0, |record| record.generation)
        .saturating_add(1);
    write_record(
        &file,
        &Record {
            generation,
            holder: Some(owner),
        },
    )
    .with_context(|| format!("cannot write the holder into `{}`", lock_path.display()))?;
    // Read under the lease: nobody else writes the log from here on.
    let last_seq_at_grant = event_log::last_seq(events_path)?;
    register(&lock_path, generation);
    Ok(WriterLeaseOutcome::Acquired(Arc::new(JsonlWriterLease {
        thread_id: thread_id.to_string(),
        generation,
        last_seq_at_grant,
        lock_path,
        file: Mutex::new(Some(file)),
    })))
}

/// Takes the lock, or returns who holds it.
///
/// A lock whose record names no holder (released, or a new holder has not
/// recorded itself yet), or names the caller itself, is usually about to be
/// free or named: a process that forks keeps a copy of every open file
/// until its child's `exec` closes the close-on-exec ones, so a lease
/// released while a tool command is being spawned stays locked for a moment.
/// Those cases are retried for up to [`SETTLE`] before the answer is busy.
fn try_lock(
    file: &File,
    lock_path: &Path,
    owner: &WriterIdentity,
) -> anyhow::Result<Option<WriterIdentity>> {
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(None),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => {
                return Err(error)
                    .with_context(|| format!("cannot lock `{}`", lock_path.display()));
            }
        }
        let holder = read_record(file).and_then(|record| record.holder);
        let settling = holder
            .as_ref()
            .is_none_or(|holder| holder.owner_id == owner.owner_id);
        if !settling || started.elapsed() >= SETTLE {
            return Ok(Some(holder.unwrap_or_else(unknown_holder)));
        }
        std::thread::sleep(SETTLE_STEP);
    }
}

/// How long a lock without a recorded holder is given to settle.
const SETTLE: Duration = Duration::from_millis(100);
const SETTLE_STEP: Duration = Duration::from_millis(5);

/// Refuses an append under `lease` unless this process holds it, for
/// `thread_id`, over the lock file `lock_path` (that is, of this store).
pub(crate) fn check_held(
    lock_path: &Path,
    lease: &dyn WriterLease,
    thread_id: &str,
) -> anyhow::Result<()> {
    if lease.thread_id() != thread_id {
        bail!(
            "append to thread \"{thread_id}\" refused: the writer lease given is for thread \"{}\"",
            lease.thread_id()
        );
    }
    let held = with_held(|held| held.get(lock_path).copied());
    if held != Some(lease.generation()) {
        bail!(
            "append to thread \"{thread_id}\" refused: its writer lease (generation {}) is not held over `{}` any more (it was released, or belongs to another store); take the lease again",
            lease.generation(),
            lock_path.display()
        );
    }
    Ok(())
}

/// The holder named when the lock is held but its record names nobody (or
/// cannot be read): the holder is between taking the lock and recording
/// itself. Still busy: never a grant.
fn unknown_holder() -> WriterIdentity {
    WriterIdentity {
        owner_id: "unknown".to_string(),
        pid: 0,
        host: "an unknown host (the holder has not recorded itself yet)".to_string(),
        since: OffsetDateTime::now_utc(),
    }
}

/// The record's first JSON value, read from the file's start. Trailing bytes are ignored: a holder that
/// died between writing a shorter record and truncating the file leaves the
/// end of the previous one behind.
fn read_record(file: &File) -> Option<Record> {
    let mut bytes = vec![0u8; MAX_RECORD_BYTES];
    let mut filled = 0;
    loop {
        let room = bytes.get_mut(filled..)?;
        if room.is_empty() {
            break;
        }
        match file.read_at(room, filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    bytes.truncate(filled);
    serde_json::Deserializer::from_slice(&bytes)
        .into_iter::<Record>()
        .next()?
        .ok()
}

/// Overwrites the record in place (the lock lives on the file, so the file
/// is never replaced).
fn write_record(file: &File, record: &Record) -> io::Result<()> {
    let bytes = serde_json::to_vec(record).map_err(io::Error::other)?;
    file.write_all_at(&bytes, 0)?;
    file.set_len(bytes.len() as u64)
}

/// Leases this process holds: lock file → generation.
fn with_held<T>(work: impl FnOnce(&mut HashMap<PathBuf, u64>) -> T) -> T {
    static HELD: OnceLock<Mutex<HashMap<PathBuf, u64>>> = OnceLock::new();
    let mut held = HELD
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    work(&mut held)
}

fn register(lock_path: &Path, generation: u64) {
    with_held(|held| held.insert(lock_path.to_path_buf(), generation));
}

fn unregister(lock_path: &Path, generation: u64) {
    with_held(|held| {
        if held.get(lock_path) == Some(&generation) {
            held.remove(lock_path);
        }
    });
}

impl JsonlWriterLease {
    fn take_file(&self) -> Option<File> {
        self.file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

#[async_trait::async_trait]
impl WriterLease for JsonlWriterLease {
    fn thread_id(&self) -> &str {
        &self.thread_id
    }

    fn generation(&self) -> u64 {
        self.generation
    }

    /// Read under the lock when the lease was granted.
    fn last_seq_at_grant(&self) -> Option<u64> {
        Some(self.last_seq_at_grant)
    }

    /// Nothing to extend: the kernel holds the lock until it is released or
    /// the process dies. Errors only once the lease was released.
    async fn renew(&self) -> anyhow::Result<()> {
        let held = self
            .file
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        if !held {
            bail!(
                "the writer lease of thread \"{}\" was released; take it again",
                self.thread_id
            );
        }
        Ok(())
    }

    /// Clears the holder from the record, then unlocks. Releasing twice is
    /// fine.
    async fn release(&self) -> anyhow::Result<()> {
        let Some(file) = self.take_file() else {
            return Ok(());
        };
        unregister(&self.lock_path, self.generation);
        let record = Record {
            generation: self.generation,
            holder: None,
        };
        let lock_path = self.lock_path.clone();
        blocking(move || {
            // The holder is cleared while the lock is still held, so it can
            // never erase the record of the next holder.
            let cleared = write_record(&file, &record);
            let unlocked = file.unlock();
            drop(file);
            cleared
                .and(unlocked)
                .with_context(|| format!("cannot release `{}`", lock_path.display()))
        })
        .await
    }
}

/// A lease dropped unreleased closes its file, which unlocks it. Its holder
/// stays in the record, which is harmless: the record is read only by a
/// caller that finds the file locked, and the next holder overwrites it.
impl Drop for JsonlWriterLease {
    fn drop(&mut self) {
        let file = self
            .file
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if file.is_some() {
            unregister(&self.lock_path, self.generation);
        }
    }
}

#[cfg(test)]
#[path = "writer_lock_tests.rs"]
mod tests;
