//! Spawner threads: one OS thread per distinct confinement that restricts
//! itself once (Landlock, or `no_new_privs` alone for bubblewrap) and then
//! spawns the commands sent to it, which inherit its restrictions.
//!
//! Lifetime: a spawner and its private temporary directory live as long as
//! this process (the map below keeps them), except that a spawner whose
//! workspace or temporary directory was replaced on disk (deleted and made
//! again: its Landlock rules name the old directory) is dropped and a new
//! one started. Dropping a spawner closes its channel and its thread ends.
//! The temporary directories are not deleted when Roder exits: they are
//! left to the system's temp cleaning (they are `0700`, one per
//! confinement, named `roder-sandbox-<pid>-<n>`).

use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, mpsc};

use roder_api::sandbox_policy::NetworkAccess;

use super::{Refusal, landlock_rules, refusal};

/// What makes two confinements share a spawner thread.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SpawnerKey {
    pub(crate) bubblewrap: bool,
    pub(crate) network: NetworkAccess,
    pub(crate) workspace: PathBuf,
    /// The other writable roots, sorted, as configured.
    pub(crate) roots: Vec<PathBuf>,
}

/// Work run on the spawner thread.
pub(crate) type Job = Box<dyn FnOnce() + Send>;

/// A running spawner thread.
#[derive(Debug)]
pub(crate) struct Spawner {
    jobs: Mutex<mpsc::Sender<Job>>,
    /// The private temporary directory (`TMPDIR` of its commands).
    pub(crate) tmpdir: PathBuf,
    /// Every writable root, canonical and existing: workspace first, then
    /// the temporary directory, then the others.
    pub(crate) roots: Vec<PathBuf>,
    /// (device, inode) of the workspace and the temporary directory when the
    /// rules were made.
    identity: [(u64, u64); 2],
}

impl Spawner {
    /// Whether the directories its rules name are still the ones on disk.
    /// Runs on the spawner thread (it is two `stat`s).
    pub(crate) fn is_current(&self) -> bool {
        let now = [
            identity(self.roots.first().map(PathBuf::as_path)),
            identity(Some(&self.tmpdir)),
        ];
        now.iter()
            .zip(&self.identity)
            .all(|(now, then)| *now == Some(*then))
    }

    /// Hands `job` to the thread; `false` when the thread is gone.
    pub(crate) fn send(&self, job: Job) -> bool {
        match self.jobs.lock() {
            Ok(jobs) => jobs.send(job).is_ok(),
            Err(_) => false,
        }
    }
}

fn identity(path: Option<&Path>) -> Option<(u64, u64)> {
    let metadata = std::fs::metadata(path?).ok()?;
    Some((metadata.dev(), metadata.ino()))
}

fn spawners() -> &'static Mutex<HashMap<SpawnerKey, Arc<Spawner>>> {
    static SPAWNERS: OnceLock<Mutex<HashMap<SpawnerKey, Arc<Spawner>>>> = OnceLock::new();
    SPAWNERS.get_or_init(Mutex::default)
}

/// The spawner of `key`, started (on its own thread, so no blocking work
/// here) when there is none.
pub(crate) async fn spawner_for(key: &SpawnerKey) -> Result<Arc<Spawner>, Refusal> {
    if let Some(spawner) = spawners().lock().ok().and_then(|map| map.get(key).cloned()) {
        return Ok(spawner);
    }
    let (ready, started) = tokio::sync::oneshot::channel();
    let thread_key = key.clone();
    std::thread::Builder::new()
        .name("roder-sandbox-spawner".to_string())
        .spawn(move || thread_main(&thread_key, ready))?;
    let spawner = started
        .await
        .map_err(|_| refusal("the sandbox's spawner thread ended while starting"))??;
    let mut map = spawners()
        .lock()
        .map_err(|_| refusal("the sandbox's spawner registry is poisoned"))?;
    // Another caller may have started one meanwhile: keep the first, ours
    // ends when dropped.
    Ok(map.entry(key.clone()).or_insert(spawner).clone())
}

/// Forgets `spawner` (its directories were replaced); the next command of
/// its key starts a new one.
pub(crate) fn retire(key: &SpawnerKey, spawner: &Arc<Spawner>) {
    if let Ok(mut map) = spawners().lock()
        && map
            .get(key)
            .is_some_and(|current| Arc::ptr_eq(current, spawner))
    {
        map.remove(key);
    }
}

/// The thread: set up, restrict itself, report, then run jobs until every
/// sender is gone.
fn thread_main(
    key: &SpawnerKey,
    ready: tokio::sync::oneshot::Sender<Result<Arc<Spawner>, Refusal>>,
) {
    let (jobs, receiver) = mpsc::channel::<Job>();
    let spawner = set_up(key, jobs).map(Arc::new);
    let failed = spawner.is_err();
    if ready.send(spawner).is_err() || failed {
        return;
    }
    // The Arc sent above holds the only sender: when it is dropped (the
    // registry forgot it and no command holds it), this loop ends.
    while let Ok(job) = receiver.recv() {
        job();
    }
}

fn set_up(key: &SpawnerKey, jobs: mpsc::Sender<Job>) -> Result<Spawner, Refusal> {
    let workspace = std::fs::canonicalize(&key.workspace).map_err(|error| {
        refusal(&format!(
            "the workspace {} cannot be confined: {error}",
            key.workspace.display()
        ))
    })?;
    let tmpdir = private_tmpdir()?;
    let mut roots = vec![workspace, tmpdir.clone()];
    // A writable root that does not exist is skipped: its parent is not
    // writable, so nothing can be created there.
    roots.extend(
        key.roots
            .iter()
            .filter_map(|root| std::fs::canonicalize(root).ok()),
    );
    let identity = [
        identity(roots.first().map(PathBuf::as_path))
            .ok_or_else(|| refusal("the workspace vanished while its sandbox was set up"))?,
        identity(Some(&tmpdir))
            .ok_or_else(|| refusal("the sandbox's temporary directory vanished"))?,
    ];
    if key.bubblewrap {
        landlock_rules::no_new_privs()?;
    } else {
        landlock_rules::restrict_thread(&roots, key.network)?;
    }
    Ok(Spawner {
        jobs: Mutex::new(jobs),
        tmpdir,
        roots,
        identity,
    })
}

/// A new `0700` directory under the system's temporary directory.
fn private_tmpdir() -> Result<PathBuf, Refusal> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let base = std::fs::canonicalize(std::env::temp_dir())?;
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("roder-sandbox-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return Ok(dir),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                return Err(refusal(&format!(
                    "its private temporary directory {} cannot be made: {error}",
                    dir.display()
                )));
            }
        }
    }
}
