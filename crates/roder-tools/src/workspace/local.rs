//! A workspace that is a directory on this host.
//!
//! On top of the lexical rules, a local path is checked against the real file
//! system by [`roder_sandbox::paths::check_real`]: the deepest existing
//! ancestor is canonicalised and must stay under the canonical root (or a
//! read root, for reads). That refuses a symlinked directory pointing out of
//! the workspace, a symlinked file pointing out, new files under a symlinked
//! parent, and dangling links. All blocking file-system work runs in
//! `spawn_blocking`, one hop per operation.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkBuilder;
use roder_api::sandbox_policy::SandboxPolicy;
use roder_sandbox::Confinement;

use super::{GrepHit, GrepOutcome, GrepQuery, MAX_FILE_BYTES, Walk, WalkEntry, WalkOptions};
use roder_sandbox::paths::{Confined, check_real};

use crate::paths::{self, Access, ResolvedPath};
use crate::text::truncate_line;
use crate::tool::ToolError;

/// Longest line `grep` shows.
const MAX_GREP_LINE_CHARS: usize = 500;

#[derive(Debug, Clone)]
pub(crate) struct LocalFs {
    root: PathBuf,
    read_roots: Vec<PathBuf>,
    allow_vcs_metadata: bool,
    /// How its commands are confined (`roder-sandbox`): the call's policy
    /// over this root.
    confinement: Confinement,
}

impl LocalFs {
    pub fn new(root: PathBuf, read_roots: Vec<PathBuf>, allow_vcs_metadata: bool) -> Self {
        let confinement = Confinement::new(SandboxPolicy::default(), root.clone());
        Self {
            root,
            read_roots,
            allow_vcs_metadata,
            confinement,
        }
    }

    /// Confines its commands by `policy`, never passing `credential_vars`.
    pub fn with_sandbox(mut self, policy: SandboxPolicy, credential_vars: Vec<String>) -> Self {
        self.confinement.policy = policy;
        self.confinement.credential_vars = credential_vars;
        self
    }

    /// How its commands are confined.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    pub async fn resolve(
        &self,
        requested: &str,
        access: Access,
    ) -> Result<ResolvedPath, ToolError> {
        let resolved = paths::resolve(
            &self.root,
            &self.read_roots,
            requested,
            access,
            self.allow_vcs_metadata,
        )?;
        let root = self.root.clone();
        let read_roots = self.read_roots.clone();
        let allow_vcs_metadata = self.allow_vcs_metadata;
        blocking(move || {
            let confinement = paths::confinement(&root, &read_roots, allow_vcs_metadata);
            let confined = Confined {
                absolute: resolved.absolute.clone(),
                location: resolved.location.clone(),
            };
            check_real(
                &confinement,
                &confined,
                Path::new(&resolved.requested),
                access,
            )
            .map_err(paths::tool_error)?;
            Ok(resolved)
        })
        .await
    }

    pub async fn command_cwd(&self, workdir: Option<&str>) -> Result<PathBuf, ToolError> {
        let Some(workdir) = workdir else {
            // The hot path of every command: no file-system round trip.
            return Ok(self.root.clone());
        };
        let resolved = self.resolve(workdir, Access::Workdir).await?;
        let absolute = resolved.absolute.clone();
        blocking(move || match std::fs::metadata(&absolute) {
            Ok(metadata) if metadata.is_dir() => Ok(absolute),
            Ok(_) => Err(ToolError::new(format!(
                "workdir {:?} is not a directory",
                resolved.requested
            ))),
            Err(_) => Err(ToolError::new(format!(
                "workdir {:?} does not exist",
                resolved.requested
            ))),
        })
        .await
    }

    pub async fn read(&self, path: &ResolvedPath) -> Result<Vec<u8>, ToolError> {
        match self.read_if_exists(path).await? {
            Some(contents) => Ok(contents),
            None => Err(ToolError::new(format!(
                "file not found: {}",
                path.display()
            ))),
        }
    }

    pub async fn read_if_exists(&self, path: &ResolvedPath) -> Result<Option<Vec<u8>>, ToolError> {
        let absolute = path.absolute.clone();
        let display = path.display();
        blocking(move || {
            let metadata = match std::fs::metadata(&absolute) {
                Ok(metadata) => metadata,
                Err(error) if error.kind() == ErrorKind::NotFound => return Ok(None),
                Err(error) => return Err(io_error("read", &display, &error)),
            };
            if metadata.is_dir() {
                return Err(ToolError::new(format!(
                    "{display} is a directory, not a file; use list_files to see its contents"
                )));
            }
            if metadata.len() > MAX_FILE_BYTES {
                return Err(ToolError::new(format!(
                    "{display} is {} bytes, larger than the {MAX_FILE_BYTES}-byte limit of the file tools; use grep or a command to inspect it",
                    metadata.len()
                )));
            }
            std::fs::read(&absolute)
                .map(Some)
                .map_err(|error| io_error("read", &display, &error))
        })
        .await
    }

    pub async fn write(&self, path: &ResolvedPath, contents: Vec<u8>) -> Result<(), ToolError> {
        let absolute = path.absolute.clone();
        let display = path.display();
        blocking(move || {
            if let Some(parent) = absolute.parent() {
                std::fs::create_dir_all(parent).map_err(|error| {
                    io_error("create the parent directories of", &display, &error)
                })?;
            }
            if absolute.is_dir() {
                return Err(ToolError::new(format!(
                    "{display} is a directory, not a file"
                )));
            }
            std::fs::write(&absolute, contents).map_err(|error| io_error("write", &display, &error))
        })
        .await
    }

    pub async fn remove(&self, path: &ResolvedPath) -> Result<(), ToolError> {
        let absolute = path.absolute.clone();
        let display = path.display();
        blocking(move || {
            std::fs::remove_file(&absolute).map_err(|error| io_error("delete", &display, &error))
        })
        .await
    }

    pub async fn walk(&self, dir: &ResolvedPath, options: WalkOptions) -> Result<Walk, ToolError> {
        let dir = dir.clone();
        let root = paths::normalize(&self.root);
        blocking(move || walk_blocking(&root, &dir, &options)).await
    }

    pub async fn grep(&self, query: GrepQuery) -> Result<GrepOutcome, ToolError> {
        let root = paths::normalize(&self.root);
        blocking(move || grep_blocking(&root, &query)).await
    }
}

/// Runs blocking file-system work off the async threads.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| ToolError::new(format!("file-system task failed: {error}")))?
}

fn io_error(action: &str, display: &str, error: &std::io::Error) -> ToolError {
    match error.kind() {
        ErrorKind::NotFound => ToolError::new(format!("failed to {action} {display}: not found")),
        ErrorKind::PermissionDenied => {
            ToolError::new(format!("failed to {action} {display}: permission denied"))
        }
        _ => ToolError::new(format!("failed to {action} {display}: {error}")),
    }
}

fn display_of(root: &Path, absolute: &Path) -> String {
    paths::display_path(absolute, absolute.strip_prefix(root).ok())
}

fn walk_builder(dir: &Path, max_depth: Option<usize>) -> WalkBuilder {
    let mut builder = WalkBuilder::new(dir);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| entry.file_name() != ".git");
    builder
}

fn walk_blocking(
    root: &Path,
    dir: &ResolvedPath,
    options: &WalkOptions,
) -> Result<Walk, ToolError> {
    let metadata = std::fs::metadata(&dir.absolute)
        .map_err(|error| io_error("list", &dir.display(), &error))?;
    if !metadata.is_dir() {
        return Err(ToolError::new(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let mut walk = Walk::default();
    for entry in walk_builder(&dir.absolute, options.max_depth).build() {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let is_dir = entry.file_type().is_some_and(|kind| kind.is_dir());
        if is_dir && !options.include_dirs {
            continue;
        }
        if let Some(pattern) = &options.pattern {
            let relative = entry
                .path()
                .strip_prefix(&dir.absolute)
                .unwrap_or(entry.path());
            if !pattern.matches(relative) {
                continue;
            }
        }
        if walk.entries.len() == options.limit {
            walk.truncated = true;
            break;
        }
        walk.entries.push(WalkEntry {
            absolute: entry.path().to_path_buf(),
            display: display_of(root, entry.path()),
            is_dir,
        });
    }
    walk.entries.sort_by(|a, b| a.absolute.cmp(&b.absolute));
    Ok(walk)
}

fn grep_blocking(root: &Path, query: &GrepQuery) -> Result<GrepOutcome, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(query.case_insensitive)
        .line_terminator(Some(b'\n'))
        .build(&query.pattern)
        .map_err(|error| ToolError::new(format!("invalid regex {:?}: {error}", query.pattern)))?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let target = &query.target.absolute;
    let metadata = std::fs::metadata(target)
        .map_err(|error| io_error("search", &query.target.display(), &error))?;

    let files: Box<dyn Iterator<Item = PathBuf>> = if metadata.is_dir() {
        let glob = query.glob.clone();
        let base = target.clone();
        Box::new(
            walk_builder(target, None)
                .build()
                .filter_map(Result::ok)
                .filter(|entry| entry.file_type().is_some_and(|kind| kind.is_file()))
                .filter(move |entry| {
                    glob.as_ref().is_none_or(|glob| {
                        glob.matches(entry.path().strip_prefix(&base).unwrap_or(entry.path()))
                    })
                })
                .map(ignore::DirEntry::into_path),
        )
    } else {
        Box::new(std::iter::once(target.clone()))
    };

    let mut outcome = GrepOutcome::default();
    for file in files {
        let display = display_of(root, &file);
        let mut full = false;
        // Unreadable files are skipped, as ripgrep does.
        let _ = searcher.search_path(
            &matcher,
            &file,
            Lossy(|line_number, line| {
                if outcome.hits.len() == query.max_results {
                    full = true;
                    return Ok(false);
                }
                let line = line.trim_end_matches(['\n', '\r']);
                outcome.hits.push(GrepHit {
                    display: display.clone(),
                    line_number,
                    text: truncate_line(line, MAX_GREP_LINE_CHARS).into_owned(),
                });
                Ok(true)
            }),
        );
        if full {
            outcome.truncated = true;
            break;
        }
    }
    Ok(outcome)
}
