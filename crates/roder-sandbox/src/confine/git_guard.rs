//! Git metadata that runs code later, held under Landlock by restoring it.
//!
//! A hook planted in `.git/hooks` (or a `core.hooksPath`/alias in
//! `.git/config`) runs outside any sandbox the next time the person runs
//! git. Landlock cannot carve a read-only hole out of a writable tree (the
//! workspace), so under `mechanism = "landlock"` these are compared before
//! and after each command and put back as they were, and the attempt is
//! reported (to the model in the command's output, and in the log).
//! Bubblewrap mounts them read-only instead and needs none of this.
//!
//! Cheap by design: a command pays a `readdir` and an `lstat` per guarded
//! entry. Contents are read only when the workspace is idle and the
//! fingerprints changed (the person edited a hook between commands), and
//! written only when a command changed something. Fingerprints include the
//! inode change time, which no unprivileged process can set, so a write
//! that restores the size and the modification time is still seen.
//!
//! The baseline is taken when no guarded command is running in the
//! repository, so a command running beside another cannot make the first
//! one's plant the baseline.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

/// More entries than this under `hooks` and the guard stops copying
/// contents (a hooks directory holds a dozen small scripts).
const MAX_ENTRIES: usize = 512;
/// More bytes than this under `hooks` plus `config`, likewise.
const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// What identifies one state of a file system entry without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    mode: u32,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// A directory's times and size change with its entries, which are
    /// stamped themselves: only its identity and mode count.
    fn of(metadata: &std::fs::Metadata) -> Self {
        if metadata.is_dir() {
            return Self {
                dev: metadata.dev(),
                ino: metadata.ino(),
                mode: metadata.mode(),
                size: 0,
                mtime: (0, 0),
                ctime: (0, 0),
            };
        }
        Self {
            dev: metadata.dev(),
            ino: metadata.ino(),
            mode: metadata.mode(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }
}

/// The content of one entry, enough to put it back.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Content {
    File { bytes: Vec<u8>, mode: u32 },
    Symlink(PathBuf),
    Dir { mode: u32 },
}

/// One entry as it was: its stamp and its content.
#[derive(Debug, Clone)]
struct Entry {
    stamp: Stamp,
    content: Content,
}

/// The guarded state of one git directory: every entry under `hooks`
/// (relative paths, the directory itself as the empty path) and `config`.
/// `None` values are entries that did not exist.
#[derive(Debug, Clone, Default)]
struct Snapshot {
    hooks: Option<BTreeMap<PathBuf, Entry>>,
    config: Option<Entry>,
}

/// Stamps only: what a command's end is compared with.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamps {
    hooks: Option<BTreeMap<PathBuf, Stamp>>,
    config: Option<Stamp>,
}

impl Snapshot {
    fn stamps(&self) -> Stamps {
        Stamps {
            hooks: self.hooks.as_ref().map(|entries| {
                entries
                    .iter()
                    .map(|(path, entry)| (path.clone(), entry.stamp))
                    .collect()
            }),
            config: self.config.as_ref().map(|entry| entry.stamp),
        }
    }
}

/// One guarded git directory, shared by every command working on it.
#[derive(Debug, Default)]
struct Repository {
    /// Guarded commands running now.
    running: usize,
    /// As it was when the last command started on an idle repository;
    /// `None` until then, or when it was too large to copy.
    baseline: Option<Snapshot>,
    /// Why there is no baseline (too large), said once per command.
    unguarded: Option<String>,
}

fn repositories() -> &'static Mutex<HashMap<PathBuf, Arc<Mutex<Repository>>>> {
    static REPOSITORIES: OnceLock<Mutex<HashMap<PathBuf, Arc<Mutex<Repository>>>>> =
        OnceLock::new();
    REPOSITORIES.get_or_init(Mutex::default)
}

/// The git directories under `roots` whose hooks and config run code: a
/// checkout's `.git` (a directory), or a root that is itself a git
/// directory (a worktree's common dir).
fn git_dirs(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = roots
        .iter()
        .filter_map(|root| {
            let dot_git = root.join(".git");
            if std::fs::symlink_metadata(&dot_git).is_ok_and(|meta| meta.is_dir()) {
                Some(dot_git)
            } else if root.join("HEAD").is_file() && root.join("objects").is_dir() {
                Some(root.clone())
            } else {
                None
            }
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    dirs
}

/// The guard over one command: made before it starts, finished after it
/// ends. Dropping it unfinished (the command's future dropped) checks and
/// restores on a blocking thread, reporting only to the log.
#[derive(Debug)]
pub(crate) struct Watch {
    watched: Vec<(PathBuf, Arc<Mutex<Repository>>)>,
    /// When the command was about to start, as a change time.
    entered: (i64, i64),
    finished: bool,
}

/// Starts guarding the git directories under `roots` for one command.
/// Blocking (a few `lstat`s; reads when the person changed a hook): call
/// it off the async threads.
pub(crate) fn enter(roots: &[PathBuf]) -> Watch {
    let mut watched = Vec::new();
    for git_dir in git_dirs(roots) {
        let repository = {
            let mut all = repositories()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            Arc::clone(all.entry(git_dir.clone()).or_default())
        };
        {
            let mut state = repository
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if state.running == 0 {
                refresh(&git_dir, &mut state);
            }
            state.running += 1;
        }
        watched.push((git_dir, repository));
    }
    Watch {
        watched,
        entered: now(),
        finished: false,
    }
}

/// Takes the idle repository's state as the new baseline, re-reading
/// contents only where the stamps moved.
fn refresh(git_dir: &Path, state: &mut Repository) {
    let current = match stamps(git_dir) {
        Ok(current) => current,
        Err(error) => {
            state.baseline = None;
            state.unguarded = Some(format!("cannot read {}: {error}", git_dir.display()));
            return;
        }
    };
    if state
        .baseline
        .as_ref()
        .is_some_and(|baseline| baseline.stamps() == current)
    {
        return;
    }
    match snapshot(git_dir) {
        Ok(snapshot) => {
            state.baseline = Some(snapshot);
            state.unguarded = None;
        }
        Err(error) => {
            state.baseline = None;
            state.unguarded = Some(error);
        }
    }
}

impl Watch {
    /// Whether any git directory is guarded for this command.
    pub(crate) fn is_empty(&self) -> bool {
        self.watched.is_empty()
    }

    /// Compares each guarded directory with its baseline and puts back
    /// what the command changed. Returns one line per change undone (or
    /// that could not be), for the model and the log. Blocking.
    pub(crate) fn finish(mut self) -> Vec<String> {
        self.finished = true;
        let watched = std::mem::take(&mut self.watched);
        check_all(watched, self.entered)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.finished || self.watched.is_empty() {
            return;
        }
        let watched = std::mem::take(&mut self.watched);
        let entered = self.entered;
        let check = move || {
            for report in check_all(watched, entered) {
                tracing::warn!(target: "roder_sandbox::git_guard", "{report}");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(check);
            }
            Err(_) => check(),
        }
    }
}

/// The time now as `(seconds, nanoseconds)` since the epoch, the shape of
/// a change time.
fn now() -> (i64, i64) {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (
        i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        i64::from(since.subsec_nanos()),
    )
}

/// The kernel stamps change times from a coarse clock (a few ms): a file
/// changed just before the command started and again by the command may
/// keep its change time. Entries changed this recently before the command
/// are compared by content too.
const COARSE_CLOCK_S: i64 = 1;

fn check_all(watched: Vec<(PathBuf, Arc<Mutex<Repository>>)>, entered: (i64, i64)) -> Vec<String> {
    let mut reports = Vec::new();
    for (git_dir, repository) in watched {
        let mut state = repository
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        state.running = state.running.saturating_sub(1);
        match &mut state.baseline {
            Some(baseline) => {
                let restored = restore(&git_dir, baseline, entered);
                if !restored.is_empty() {
                    restamp(&git_dir, baseline);
                }
                reports.extend(restored);
            }
            None => {
                if let Some(why) = &state.unguarded {
                    reports.push(format!(
                        "{} was not guarded during this command: {why}",
                        git_dir.display()
                    ));
                }
            }
        }
    }
    for report in &reports {
        tracing::warn!(target: "roder_sandbox::git_guard", "{report}");
    }
    reports
}

/// The stamps of `git_dir`'s hooks and config now.
fn stamps(git_dir: &Path) -> io::Result<Stamps> {
    let hooks_dir = git_dir.join("hooks");
    let hooks = match std::fs::symlink_metadata(&hooks_dir) {
        Ok(meta) => {
            let mut entries = BTreeMap::new();
            entries.insert(PathBuf::new(), Stamp::of(&meta));
            if meta.is_dir() {
                walk(&hooks_dir, Path::new(""), &mut |relative, meta| {
                    entries.insert(relative.to_path_buf(), Stamp::of(meta));
                    Ok(())
                })?;
            }
            Some(entries)
        }
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    let config = match std::fs::symlink_metadata(git_dir.join("config")) {
        Ok(meta) => Some(Stamp::of(&meta)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => None,
        Err(error) => return Err(error),
    };
    Ok(Stamps { hooks, config })
}

/// Calls `visit` for every entry beneath `dir` (not `dir` itself), depth
/// first, parents before children, without following symlinks.
fn walk(
    dir: &Path,
    relative: &Path,
    visit: &mut dyn FnMut(&Path, &std::fs::Metadata) -> io::Result<()>,
) -> io::Result<()> {
    for entry in std::fs::read_dir(dir.join(relative))? {
        let entry = entry?;
        let meta = std::fs::symlink_metadata(entry.path())?;
        let child = relative.join(entry.file_name());
        visit(&child, &meta)?;
        if meta.is_dir() {
            walk(dir, &child, visit)?;
        }
    }
    Ok(())
}

/// Reads an entry's content for the baseline.
fn content(path: &Path, meta: &std::fs::Metadata) -> io::Result<Content> {
    let mode = meta.permissions().mode() & 0o7777;
    if meta.file_type().is_symlink() {
        Ok(Content::Symlink(std::fs::read_link(path)?))
    } else if meta.is_dir() {
        Ok(Content::Dir { mode })
    } else if meta.is_file() {
        Ok(Content::File {
            bytes: std::fs::read(path)?,
            mode,
        })
    } else {
        Err(io::Error::other(format!(
            "{} is neither a file, a directory nor a symbolic link",
            path.display()
        )))
    }
}

/// The baseline of `git_dir`: every stamp and content. `Err` says why it
/// cannot be guarded (too large, unreadable).
fn snapshot(git_dir: &Path) -> Result<Snapshot, String> {
    let hooks_dir = git_dir.join("hooks");
    let mut bytes = 0_u64;
    let mut budget = |meta: &std::fs::Metadata| -> io::Result<()> {
        bytes += meta.len();
        if bytes > MAX_BYTES {
            return Err(io::Error::other(format!(
                "its hooks and config exceed {MAX_BYTES} bytes"
            )));
        }
        Ok(())
    };
    let read =
        |budget: &mut dyn FnMut(&std::fs::Metadata) -> io::Result<()>| -> io::Result<Snapshot> {
            let hooks = match std::fs::symlink_metadata(&hooks_dir) {
                Ok(meta) => {
                    let mut entries = BTreeMap::new();
                    entries.insert(
                        PathBuf::new(),
                        Entry {
                            stamp: Stamp::of(&meta),
                            content: content(&hooks_dir, &meta)?,
                        },
                    );
                    if meta.is_dir() {
                        walk(&hooks_dir, Path::new(""), &mut |relative, meta| {
                            if entries.len() >= MAX_ENTRIES {
                                return Err(io::Error::other(format!(
                                    "its hooks directory has more than {MAX_ENTRIES} entries"
                                )));
                            }
                            if meta.is_file() {
                                budget(meta)?;
                            }
                            entries.insert(
                                relative.to_path_buf(),
                                Entry {
                                    stamp: Stamp::of(meta),
                                    content: content(&hooks_dir.join(relative), meta)?,
                                },
                            );
                            Ok(())
                        })?;
                    }
                    Some(entries)
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => None,
                Err(error) => return Err(error),
            };
            let config_path = git_dir.join("config");
            let config = match std::fs::symlink_metadata(&config_path) {
                Ok(meta) => {
                    budget(&meta)?;
                    Some(Entry {
                        stamp: Stamp::of(&meta),
                        content: content(&config_path, &meta)?,
                    })
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => None,
                Err(error) => return Err(error),
            };
            Ok(Snapshot { hooks, config })
        };
    read(&mut budget).map_err(|error| error.to_string())
}

/// Puts `git_dir`'s hooks and config back as in `baseline` wherever their
/// stamps differ. One line per path changed back, or per failure.
fn restore(git_dir: &Path, baseline: &Snapshot, entered: (i64, i64)) -> Vec<String> {
    let now = match stamps(git_dir) {
        Ok(now) => now,
        Err(error) => {
            return vec![format!(
                "could not check {} after the command: {error}",
                git_dir.display()
            )];
        }
    };
    if now == baseline.stamps() && !recently_rewritten(git_dir, baseline, entered) {
        return Vec::new();
    }
    let recent = |stamp: &Stamp| stamp.ctime.0 >= entered.0 - COARSE_CLOCK_S;
    let same = |path: &Path, entry: &Entry, now: Option<&Stamp>| {
        now == Some(&entry.stamp)
            && !(recent(&entry.stamp)
                && std::fs::symlink_metadata(path)
                    .and_then(|meta| content(path, &meta))
                    .is_ok_and(|content| content != entry.content))
    };
    let mut reports = Vec::new();
    let mut note = |what: &Path, result: io::Result<&str>| {
        match result {
        Ok(done) => reports.push(format!(
            "the command changed {}; the sandbox {done} (git hooks and config run outside the sandbox, so commands may not change them)",
            what.display()
        )),
        Err(error) => reports.push(format!(
            "the command changed {} and the sandbox could not restore it: {error}; inspect it before running git",
            what.display()
        )),
    }
    };
    let config_path = git_dir.join("config");
    let config_same = match &baseline.config {
        Some(entry) => same(&config_path, entry, now.config.as_ref()),
        None => now.config.is_none(),
    };
    if !config_same {
        note(
            &config_path,
            put_back(&config_path, baseline.config.as_ref().map(|e| &e.content)),
        );
    }
    let hooks_dir = git_dir.join("hooks");
    let base_hooks = baseline.hooks.as_ref();
    let now_hooks = now.hooks.as_ref();
    let hooks_same = match (now_hooks, base_hooks) {
        (Some(now_entries), Some(base_entries)) => {
            now_entries.len() == base_entries.len()
                && base_entries
                    .iter()
                    .all(|(path, entry)| same(&hooks_dir.join(path), entry, now_entries.get(path)))
        }
        (None, None) => true,
        _ => false,
    };
    if !hooks_same {
        // The directory itself first: replaced by a file or a link, or
        // created where there was none.
        let root_now = now_hooks.and_then(|entries| entries.get(Path::new("")));
        let root_base = base_hooks.and_then(|entries| entries.get(Path::new("")));
        let root_replaced = match (root_now, root_base) {
            (Some(now), Some(base)) => now.ino != base.stamp.ino || now.dev != base.stamp.dev,
            (None, None) => false,
            _ => true,
        };
        if root_replaced {
            note(&hooks_dir, replace_tree(&hooks_dir, base_hooks));
        } else if let (Some(now_entries), Some(base_entries)) = (now_hooks, base_hooks) {
            // Entries added: removed, deepest first.
            for path in now_entries.keys().rev() {
                if !path.as_os_str().is_empty() && !base_entries.contains_key(path) {
                    let full = hooks_dir.join(path);
                    note(&full, remove(&full).map(|()| "removed it"));
                }
            }
            // Entries changed or removed: written back, parents first.
            for (path, entry) in base_entries {
                if !same(&hooks_dir.join(path), entry, now_entries.get(path)) {
                    let full = if path.as_os_str().is_empty() {
                        hooks_dir.clone()
                    } else {
                        hooks_dir.join(path)
                    };
                    note(&full, put_back(&full, Some(&entry.content)));
                }
            }
        }
    }
    reports
}

/// Whether an entry whose stamp did not move was changed recently enough
/// before the command that the coarse clock could hide a change by it.
fn recently_rewritten(git_dir: &Path, baseline: &Snapshot, entered: (i64, i64)) -> bool {
    let changed = |path: &Path, entry: &Entry| {
        entry.stamp.ctime.0 >= entered.0 - COARSE_CLOCK_S
            && std::fs::symlink_metadata(path)
                .and_then(|meta| content(path, &meta))
                .is_ok_and(|content| content != entry.content)
    };
    let hooks_dir = git_dir.join("hooks");
    baseline
        .config
        .as_ref()
        .is_some_and(|entry| changed(&git_dir.join("config"), entry))
        || baseline
            .hooks
            .iter()
            .flatten()
            .any(|(path, entry)| changed(&hooks_dir.join(path), entry))
}

/// After a restore the entries written back have new stamps: takes them
/// into the baseline where the content on disk is the baseline's, so a
/// command still running beside is not blamed for the restore.
fn restamp(git_dir: &Path, baseline: &mut Snapshot) {
    let update = |path: &Path, entry: &mut Entry| {
        if let Ok(meta) = std::fs::symlink_metadata(path)
            && content(path, &meta).is_ok_and(|now| now == entry.content)
        {
            entry.stamp = Stamp::of(&meta);
        }
    };
    if let Some(config) = &mut baseline.config {
        update(&git_dir.join("config"), config);
    }
    let hooks_dir = git_dir.join("hooks");
    for (path, entry) in baseline.hooks.iter_mut().flatten() {
        if path.as_os_str().is_empty() {
            update(&hooks_dir, entry);
        } else {
            update(&hooks_dir.join(path), entry);
        }
    }
}

/// Replaces whatever is at `hooks_dir` with the baseline's tree.
fn replace_tree(
    hooks_dir: &Path,
    base: Option<&BTreeMap<PathBuf, Entry>>,
) -> io::Result<&'static str> {
    remove(hooks_dir)?;
    let Some(entries) = base else {
        return Ok("removed it");
    };
    for (path, entry) in entries {
        let full = if path.as_os_str().is_empty() {
            hooks_dir.to_path_buf()
        } else {
            hooks_dir.join(path)
        };
        put_back(&full, Some(&entry.content))?;
    }
    Ok("put the directory back as it was")
}

/// Removes `path` whatever it is, without following a symlink; missing
/// is fine.
fn remove(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// Writes `content` at `path` (or removes `path` for `None`), replacing
/// what is there without writing through a link: files are written beside
/// it and renamed over it.
fn put_back(path: &Path, content: Option<&Content>) -> io::Result<&'static str> {
    match content {
        None => {
            remove(path)?;
            Ok("removed it")
        }
        Some(Content::Dir { mode }) => {
            match std::fs::symlink_metadata(path) {
                Ok(meta) if meta.is_dir() => {}
                Ok(_) => {
                    remove(path)?;
                    std::fs::create_dir(path)?;
                }
                Err(error) if error.kind() == io::ErrorKind::NotFound => std::fs::create_dir(path)?,
                Err(error) => return Err(error),
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(*mode))?;
            Ok("put it back as it was")
        }
        Some(Content::Symlink(target)) => {
            let aside = aside(path);
            std::os::unix::fs::symlink(target, &aside)?;
            rename_over(&aside, path)?;
            Ok("put it back as it was")
        }
        Some(Content::File { bytes, mode }) => {
            let aside = aside(path);
            let written = (|| {
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&aside)?;
                file.write_all(bytes)?;
                file.set_permissions(std::fs::Permissions::from_mode(*mode))?;
                Ok::<(), io::Error>(())
            })();
            if let Err(error) = written {
                let _ = std::fs::remove_file(&aside);
                return Err(error);
            }
            rename_over(&aside, path)?;
            Ok("put it back as it was")
        }
    }
}

/// Renames `from` over `to`; a directory at `to` is removed first (rename
/// cannot replace a non-empty one).
fn rename_over(from: &Path, to: &Path) -> io::Result<()> {
    if std::fs::symlink_metadata(to).is_ok_and(|meta| meta.is_dir()) {
        std::fs::remove_dir_all(to)?;
    }
    std::fs::rename(from, to).inspect_err(|_| {
        let _ = std::fs::remove_file(from);
    })
}

/// A name beside `path` for writing its replacement.
fn aside(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name: OsString = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".roder-restore-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    path.with_file_name(name)
}

#[cfg(test)]
#[path = "git_guard_tests.rs"]
mod tests;
