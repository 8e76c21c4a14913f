//! The JSONL [`ThreadStore`] and its factory.
//!
//! Layout under `base_path`:
//!
//! ```text
//! <base_path>/<thread_id>/metadata.json   whole-file rewrite: temp + fsync + rename
//! <base_path>/<thread_id>/events.jsonl    append-only, one EventEnvelope per line
//! <base_path>/<thread_id>/writer.lock     the writer lease's OS lock and holder record
//! ```
//!
//! Every call reads or writes the files, so several store instances over one
//! directory (the runtime's and a test's, or two processes) see each other's
//! changes at once. The one thing remembered between calls is where each log
//! ends (`tail.rs`), and it is checked against the file before it is used.
//! One writer per thread is enforced twice: the writer lease
//! (`writer_lock.rs`) keeps a second process from starting to write, and
//! every append is refused unless it continues the log's numbering.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use roder_api::events::EventEnvelope;
use roder_api::thread::{EventsPage, ThreadMetadata, ThreadStore, ThreadStoreFactory};
use roder_api::writer_lease::{WriterLease, WriterLeaseOutcome, WriterLeaseRequest};

use crate::atomic_file::{self, Placement};
use crate::event_log::Batch;
use crate::{event_log, page, tail, thread_id, writer_lock};

const METADATA_FILE: &str = "metadata.json";
const EVENTS_FILE: &str = "events.jsonl";

/// Thread store over a directory of per-thread directories.
///
/// Built with a struct literal; the directory is created on the first write
/// (or by [`JsonlThreadStoreFactory::open`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlThreadStore {
    pub base_path: PathBuf,
}

/// Opens a [`JsonlThreadStore`] over `base_path`, creating the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonlThreadStoreFactory {
    pub base_path: PathBuf,
}

/// The id [`JsonlThreadStoreFactory`] registers under.
pub const FACTORY_ID: &str = "jsonl";

impl JsonlThreadStore {
    pub fn new(base_path: impl Into<PathBuf>) -> Self {
        Self {
            base_path: base_path.into(),
        }
    }

    /// The directory of a thread, after checking the id is path-safe.
    fn thread_dir(&self, thread_id: &str) -> anyhow::Result<PathBuf> {
        thread_id::validate(thread_id)?;
        Ok(self.base_path.join(thread_id))
    }

    async fn write_metadata(
        &self,
        metadata: &ThreadMetadata,
        placement: Placement,
    ) -> anyhow::Result<()> {
        let dir = self.thread_dir(&metadata.thread_id)?;
        let bytes = serde_json::to_vec_pretty(metadata).with_context(|| {
            format!(
                "cannot serialise metadata of thread \"{}\"",
                metadata.thread_id
            )
        })?;
        let thread = metadata.thread_id.clone();
        blocking(move || {
            let target = dir.join(METADATA_FILE);
            match placement {
                Placement::CreateNew => std::fs::create_dir_all(&dir)
                    .map_err(|error| crate::disk::explain(error, &dir, "cannot create"))?,
                Placement::Replace => {
                    if !target.try_exists()? {
                        bail!(
                            "thread \"{thread}\" does not exist (no `{}`)",
                            target.display()
                        );
                    }
                }
            }
            match atomic_file::write(&target, &bytes, placement) {
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    bail!("thread \"{thread}\" already exists")
                }
                Err(error) => Err(crate::disk::explain(error, &target, "cannot write")),
                Ok(()) => Ok(()),
            }
        })
        .await
    }
}

/// Runs filesystem work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> anyhow::Result<T> + Send + 'static,
) -> anyhow::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .context("thread store I/O task failed")?
}

/// Reads one metadata file; `None` when it does not exist.
fn read_metadata(path: &Path) -> anyhow::Result<Option<ThreadMetadata>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot read `{}`", path.display()));
        }
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .with_context(|| format!("`{}` is not valid thread metadata", path.display()))
}

/// Metadata of every thread directory under `base`, newest update first.
///
/// Entries that are not threads (stray files, invalid names, directories
/// without metadata or with unreadable metadata) are skipped: one damaged
/// thread must not hide the others.
fn list_blocking(base: &Path) -> anyhow::Result<Vec<ThreadMetadata>> {
    let entries = match std::fs::read_dir(base) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot list `{}`", base.display()));
        }
    };
    let mut threads = Vec::new();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot list `{}`", base.display()))?;
        let name = entry.file_name();
        let Some(name) = name.to_str().filter(|name| thread_id::is_valid(name)) else {
            continue;
        };
        if let Ok(Some(metadata)) = read_metadata(&base.join(name).join(METADATA_FILE)) {
            threads.push(metadata);
        }
    }
    threads.sort_by(|a, b| {
        b.updated_at
            .cmp(&a.updated_at)
            .then_with(|| a.thread_id.cmp(&b.thread_id))
    });
    Ok(threads)
}

/// Removes a thread directory; renames it out of the listing first so a
/// crash mid-removal leaves no half thread behind.
fn delete_blocking(base: &Path, dir: &Path, thread: &str) -> anyhow::Result<()> {
    let doomed = base.join(format!(
        ".deleted-{thread}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    match std::fs::rename(dir, &doomed) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(error) => {
            return Err(error).with_context(|| format!("cannot delete `{}`", dir.display()));
        }
    }
    std::fs::remove_dir_all(&doomed)
        .with_context(|| format!("cannot remove `{}`", doomed.display()))
}

#[async_trait::async_trait]
impl ThreadStore for JsonlThreadStore {
    async fn create_thread(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        self.write_metadata(&metadata, Placement::CreateNew).await
    }

    /// Fails when the thread does not exist, so a late update cannot
    /// resurrect a deleted thread.
    async fn update_thread_metadata(&self, metadata: ThreadMetadata) -> anyhow::Result<()> {
        self.write_metadata(&metadata, Placement::Replace).await
    }

    async fn load_metadata(&self, thread_id: &str) -> anyhow::Result<Option<ThreadMetadata>> {
        let path = self.thread_dir(thread_id)?.join(METADATA_FILE);
        blocking(move || read_metadata(&path)).await
    }

    /// Events may be appended before the metadata exists (the trait allows
    /// a thread with events and no metadata), so the directory is created.
    /// The events must be numbered consecutively and the first must be the
    /// next `seq` on disk; otherwise nothing is written.
    async fn append_events(&self, thread_id: &str, events: &[EventEnvelope]) -> anyhow::Result<()> {
        let dir = self.thread_dir(thread_id)?;
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        if let Some(stray) = events.iter().find(|event| event.thread_id != thread_id) {
            bail!(
                "event seq {} belongs to thread \"{}\", not \"{thread_id}\"",
                stray.seq,
                stray.thread_id
            );
        }
        if let Some((before, after)) = events
            .iter()
            .zip(events.iter().skip(1))
            .find(|(before, after)| Some(after.seq) != before.seq.checked_add(1))
        {
            bail!(
                "append to thread \"{thread_id}\" refused: seq {} follows seq {} in one batch; events must be numbered consecutively",
                after.seq,
                before.seq
            );
        }
        let (first_seq, last_seq) = (first.seq, last.seq);
        let sync = crate::sync::mode(&self.base_path).must_sync(events);
        let lines = event_log::encode(events)
            .with_context(|| format!("cannot serialise events of thread \"{thread_id}\""))?;
        let thread = thread_id.to_string();
        blocking(move || {
            std::fs::create_dir_all(&dir)
                .map_err(|error| crate::disk::explain(error, &dir, "cannot create"))?;
            let batch = Batch {
                first_seq,
                last_seq,
                lines: &lines,
            };
            event_log::append(&dir.join(EVENTS_FILE), &thread, batch, sync)
        })
        .await
    }

    async fn load_events(
        &self,
        thread_id: &str,
        after_seq: u64,
    ) -> anyhow::Result<Vec<EventEnvelope>> {
        let path = self.thread_dir(thread_id)?.join(EVENTS_FILE);
        blocking(move || {
            event_log::read(&path, after_seq)
                .with_context(|| format!("cannot read `{}`", path.display()))
        })
        .await
    }

    /// Reads the log line by line and stops at the page's end.
    async fn load_events_page(
        &self,
        thread_id: &str,
        after_seq: u64,
        max_items: usize,
        max_bytes: usize,
    ) -> anyhow::Result<EventsPage> {
        let path = self.thread_dir(thread_id)?.join(EVENTS_FILE);
        blocking(move || {
            page::read_page(&path, after_seq, max_items, max_bytes)
                .with_context(|| format!("cannot read `{}`", path.display()))
        })
        .await
    }

    async fn list_threads(&self) -> anyhow::Result<Vec<ThreadMetadata>> {
        let base = self.base_path.clone();
        blocking(move || list_blocking(&base)).await
    }

    /// Idempotent: deleting a thread that does not exist succeeds. It does
    /// not consult the writer lease: a holder keeps its lock on the deleted
    /// directory's file, and a re-created thread has a fresh one.
    async fn delete_thread(&self, thread_id: &str) -> anyhow::Result<()> {
        let dir = self.thread_dir(thread_id)?;
        let base = self.base_path.clone();
        let thread = thread_id.to_string();
        blocking(move || {
            tail::forget(&dir.join(EVENTS_FILE));
            delete_blocking(&base, &dir, &thread)
        })
        .await
    }

    /// An exclusive OS lock on `<thread>/writer.lock`, held until the lease
    /// is released or dropped, or the process dies. The thread must exist
    /// (its directory: [`create_thread`](Self::create_thread) or a first
    /// append makes it). `request.ttl` is ignored: the lock never expires
    /// while its holder lives.
    async fn acquire_writer_lease(
        &self,
        thread_id: &str,
        request: WriterLeaseRequest,
    ) -> anyhow::Result<WriterLeaseOutcome> {
        let dir = self.thread_dir(thread_id)?;
        let thread = thread_id.to_string();
        blocking(move || {
            let events = dir.join(EVENTS_FILE);
            writer_lock::acquire(&dir, &thread, request.owner, &events)
        })
        .await
    }

    /// Appends like [`append_events`](Self::append_events), and only while
    /// `lease` is this store's lease of `thread_id`, still held by this
    /// process (not released, not dropped).
    async fn append_events_leased(
        &self,
        lease: &dyn WriterLease,
        thread_id: &str,
        events: &[EventEnvelope],
    ) -> anyhow::Result<()> {
        let lock_path = self.thread_dir(thread_id)?.join(writer_lock::LOCK_FILE);
        writer_lock::check_held(&lock_path, lease, thread_id)?;
        self.append_events(thread_id, events).await
    }
}

#[async_trait::async_trait]
impl ThreadStoreFactory for JsonlThreadStoreFactory {
    fn id(&self) -> String {
        FACTORY_ID.to_string()
    }

    /// Creates `base_path` if missing. The trait's `open` is synchronous, so
    /// this one `mkdir -p` blocks; it runs once, when a runtime starts.
    fn open(&self) -> anyhow::Result<Arc<dyn ThreadStore>> {
        std::fs::create_dir_all(&self.base_path).map_err(|error| {
            crate::disk::explain(
                error,
                &self.base_path,
                "cannot create the thread store directory",
            )
        })?;
        Ok(Arc::new(JsonlThreadStore {
            base_path: self.base_path.clone(),
        }))
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
