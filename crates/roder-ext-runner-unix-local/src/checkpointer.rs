//! [`DirectoryCheckpointer`]: per-turn checkpoints of `unix-local` threads
//! as copies of the session root (`cp -a --reflink=auto`: a reflink where
//! the filesystem has them, e.g. btrfs or XFS, a full copy elsewhere), with
//! rollback (the root's contents replaced by the copy) and fork (a new root
//! holding the copy).
//!
//! Layout under the checkpointer's directory:
//!
//! ```text
//! <dir>/<thread_id>/<turn_id>/   a copy of the session root before that turn
//! <dir>/forks/<fork_id>/         the root of a fork
//! ```
//!
//! A copy costs the root's size on filesystems without reflinks, so this
//! suits the small workspaces unix-local is for; `roder gc` removes copies
//! past the retention and of deleted threads.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, RemovedCheckpoint,
    WorkspaceCheckpoint, WorkspaceCheckpointer,
};
use roder_api::runner_workspace::WORKSPACE_CONFIG_KEY;
use serde_json::Value;

use crate::PROVIDER_ID;
use crate::config::UnixLocalConfig;

/// The id recorded in every checkpoint this checkpointer takes.
pub const CHECKPOINTER_ID: &str = "unix-local-copy";

const FORKS: &str = "forks";

/// Directory-copy checkpoints of `unix-local` sessions, kept under `dir`.
#[derive(Debug, Clone)]
pub struct DirectoryCheckpointer {
    dir: PathBuf,
}

impl DirectoryCheckpointer {
    /// `dir` holds the copies; it is created on first use.
    pub fn new(dir: PathBuf) -> Self {
        Self {
            dir: std::path::absolute(&dir).unwrap_or(dir),
        }
    }

    /// Removes (or with `dry_run` lists) the copies of threads not in
    /// `live`: `<dir>/<thread_id>/` of a thread deleted without its
    /// checkpoints. The directory is this home's, so nothing there belongs
    /// to another home. Forks are the roots of live threads: kept.
    pub async fn remove_orphans(
        &self,
        live: &std::collections::HashSet<String>,
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        let dir = self.dir.clone();
        let live = live.clone();
        tokio::task::spawn_blocking(move || {
            let entries = match std::fs::read_dir(&dir) {
                Ok(entries) => entries,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(Vec::new());
                }
                Err(error) => {
                    return Err(error).with_context(|| format!("cannot list `{}`", dir.display()));
                }
            };
            let mut removed = Vec::new();
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == FORKS || live.contains(&name) || !entry.path().is_dir() {
                    continue;
                }
                let bytes = tree_bytes(&entry.path());
                if !dry_run {
                    std::fs::remove_dir_all(entry.path())
                        .with_context(|| format!("cannot remove `{}`", entry.path().display()))?;
                }
                removed.push(RemovedCheckpoint {
                    checkpointer: CHECKPOINTER_ID.to_string(),
                    id: entry.path().display().to_string(),
                    bytes: Some(bytes),
                });
            }
            Ok(removed)
        })
        .await
        .context("checkpoint removal task failed")?
    }

    fn config(workspace: &CheckpointWorkspace) -> anyhow::Result<UnixLocalConfig> {
        match workspace {
            CheckpointWorkspace::Runner { binding, .. }
                if binding.destination.provider_id == PROVIDER_ID =>
            {
                UnixLocalConfig::from_json(&binding.destination.config, "thread binding config")
            }
            _ => bail!("the \"{CHECKPOINTER_ID}\" checkpointer only handles unix-local threads"),
        }
    }

    /// The copy a checkpoint names, refusing one outside this
    /// checkpointer's directory (a log edited by hand, say).
    fn copy_of(&self, checkpoint: &WorkspaceCheckpoint) -> anyhow::Result<PathBuf> {
        if checkpoint.checkpointer != CHECKPOINTER_ID {
            bail!(
                "checkpoint {} was taken by the \"{}\" checkpointer, not \"{CHECKPOINTER_ID}\"",
                checkpoint.id,
                checkpoint.checkpointer
            );
        }
        let copy = PathBuf::from(&checkpoint.id);
        if !copy.starts_with(&self.dir) || copy.components().any(|c| c.as_os_str() == "..") {
            bail!(
                "checkpoint {} is not under this checkpointer's directory `{}`",
                checkpoint.id,
                self.dir.display()
            );
        }
        Ok(copy)
    }
}

/// A path component from an id (thread and turn ids are UUIDs; anything
/// else is refused rather than joined).
fn component(id: &str) -> anyhow::Result<&str> {
    let safe = !id.is_empty()
        && !id.starts_with('.')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !safe {
        bail!("id `{id}` cannot name a checkpoint directory");
    }
    Ok(id)
}

/// Copies the contents of `from` into `to` (created), keeping modes, times
/// and symlinks, reflinking where the filesystem can.
async fn copy_tree(from: &Path, to: &Path) -> anyhow::Result<()> {
    tokio::fs::create_dir_all(to)
        .await
        .with_context(|| format!("cannot create `{}`", to.display()))?;
    let mut source = from.as_os_str().to_owned();
    source.push("/.");
    let output = tokio::process::Command::new("cp")
        .args(["-a", "--reflink=auto"])
        .arg(&source)
        .arg(to)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .context("cannot run `cp` (GNU coreutils is needed for directory checkpoints)")?;
    if !output.status.success() {
        bail!(
            "copying `{}` to `{}` failed: {}",
            from.display(),
            to.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Removes everything inside `dir`, keeping `dir` itself.
async fn empty_dir(dir: &Path) -> anyhow::Result<()> {
    let mut entries = tokio::fs::read_dir(dir)
        .await
        .with_context(|| format!("cannot read `{}`", dir.display()))?;
    while let Some(entry) = entries.next_entry().await? {
        let path = entry.path();
        let removed = match entry.file_type().await?.is_dir() {
            true => tokio::fs::remove_dir_all(&path).await,
            false => tokio::fs::remove_file(&path).await,
        };
        removed.with_context(|| format!("cannot remove `{}`", path.display()))?;
    }
    Ok(())
}

#[async_trait::async_trait]
impl WorkspaceCheckpointer for DirectoryCheckpointer {
    fn id(&self) -> String {
        CHECKPOINTER_ID.to_string()
    }

    fn handles(&self, workspace: &CheckpointWorkspace) -> bool {
        workspace.provider_id() == Some(PROVIDER_ID)
    }

    async fn checkpoint(
        &self,
        request: CheckpointRequest<'_>,
    ) -> anyhow::Result<Option<WorkspaceCheckpoint>> {
        let config = Self::config(request.workspace)?;
        // Before the first command the root may not exist yet: it is then
        // empty, and so is its checkpoint.
        let copy = self
            .dir
            .join(component(request.thread_id)?)
            .join(component(request.turn_id)?);
        match tokio::fs::metadata(&config.root).await {
            Ok(meta) if meta.is_dir() => copy_tree(&config.root, &copy).await?,
            Ok(_) => bail!("runner root `{}` is not a directory", config.root.display()),
            Err(_) => tokio::fs::create_dir_all(&copy)
                .await
                .with_context(|| format!("cannot create `{}`", copy.display()))?,
        }
        Ok(Some(WorkspaceCheckpoint {
            checkpointer: CHECKPOINTER_ID.to_string(),
            id: copy.display().to_string(),
            reference: None,
            metadata: Value::Null,
        }))
    }

    async fn restore(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<()> {
        let copy = self.copy_of(checkpoint)?;
        let config = Self::config(workspace)?;
        if !tokio::fs::metadata(&copy)
            .await
            .is_ok_and(|meta| meta.is_dir())
        {
            bail!("checkpoint copy `{}` is gone", copy.display());
        }
        tokio::fs::create_dir_all(&config.root)
            .await
            .with_context(|| format!("cannot create `{}`", config.root.display()))?;
        empty_dir(&config.root).await?;
        copy_tree(&copy, &config.root).await
    }

    async fn fork(
        &self,
        workspace: &CheckpointWorkspace,
        checkpoint: &WorkspaceCheckpoint,
    ) -> anyhow::Result<ForkedWorkspace> {
        let copy = self.copy_of(checkpoint)?;
        let CheckpointWorkspace::Runner { binding, .. } = workspace else {
            bail!("the \"{CHECKPOINTER_ID}\" checkpointer only forks unix-local threads");
        };
        let config = Self::config(workspace)?;
        let root = self.dir.join(FORKS).join(uuid::Uuid::new_v4().to_string());
        copy_tree(&copy, &root).await?;
        let relative = binding
            .workspace
            .strip_prefix(&config.root)
            .unwrap_or(Path::new(""));
        let fork_workspace = root.join(relative);
        let mut fork_config = binding.destination.config.clone();
        if let Some(object) = fork_config.as_object_mut() {
            object.insert("root".into(), Value::String(root.display().to_string()));
            object.insert(
                WORKSPACE_CONFIG_KEY.into(),
                Value::String(fork_workspace.display().to_string()),
            );
        }
        Ok(ForkedWorkspace::Runner {
            provider_id: PROVIDER_ID.to_string(),
            config: fork_config,
            workspace: fork_workspace,
            read_roots: binding.read_roots.clone(),
        })
    }

    async fn discard(&self, forked: &ForkedWorkspace) -> anyhow::Result<()> {
        let ForkedWorkspace::Runner { config, .. } = forked else {
            return Ok(());
        };
        let Some(root) = config.get("root").and_then(Value::as_str) else {
            return Ok(());
        };
        let root = PathBuf::from(root);
        if root.starts_with(self.dir.join(FORKS)) {
            let _ = tokio::fs::remove_dir_all(&root).await;
        }
        Ok(())
    }

    /// Removes the copies (each checked to lie under this checkpointer's
    /// directory); their bytes are what the copies held.
    async fn remove_checkpoints(
        &self,
        _workspace: &CheckpointWorkspace,
        checkpoints: &[WorkspaceCheckpoint],
        dry_run: bool,
    ) -> anyhow::Result<Vec<RemovedCheckpoint>> {
        let copies = checkpoints
            .iter()
            .map(|checkpoint| self.copy_of(checkpoint))
            .collect::<anyhow::Result<Vec<_>>>()?;
        tokio::task::spawn_blocking(move || {
            let mut removed = Vec::new();
            for copy in copies {
                if std::fs::symlink_metadata(&copy).is_err() {
                    continue;
                }
                let bytes = tree_bytes(&copy);
                if !dry_run {
                    std::fs::remove_dir_all(&copy).with_context(|| {
                        format!("cannot remove checkpoint `{}`", copy.display())
                    })?;
                    // The thread's directory goes with its last copy.
                    if let Some(parent) = copy.parent() {
                        let _ = std::fs::remove_dir(parent);
                    }
                }
                removed.push(RemovedCheckpoint {
                    checkpointer: CHECKPOINTER_ID.to_string(),
                    id: copy.display().to_string(),
                    bytes: Some(bytes),
                });
            }
            Ok(removed)
        })
        .await
        .context("checkpoint removal task failed")?
    }
}

/// The bytes of the files under `dir` (symlinks not followed), as far as
/// they can be read.
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let meta = std::fs::symlink_metadata(entry.path()).ok()?;
            Some(if meta.is_dir() {
                tree_bytes(&entry.path())
            } else {
                meta.len()
            })
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::remote_runner::{RunnerDestination, RunnerManifest, ThreadRunnerBinding};
    use serde_json::json;

    fn workspace(root: &Path) -> CheckpointWorkspace {
        CheckpointWorkspace::Runner {
            binding: Box::new(ThreadRunnerBinding {
                destination: RunnerDestination {
                    id: "thread-t".into(),
                    provider_id: PROVIDER_ID.into(),
                    config: json!({ "root": root, "workspace": root.join("app") }),
                    default_manifest: RunnerManifest::default(),
                },
                workspace: root.join("app"),
                read_roots: vec![],
            }),
            state: None,
        }
    }

    #[tokio::test]
    async fn a_copy_restores_created_edited_and_deleted_files_and_forks_into_a_new_root() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir_all(root.join("app")).unwrap();
        std::fs::write(root.join("app/edited.txt"), "before\n").unwrap();
        std::fs::write(root.join("app/deleted.txt"), "keep\n").unwrap();
        let checkpointer = DirectoryCheckpointer::new(dir.path().join("checkpoints"));
        let workspace = workspace(&root);
        assert!(checkpointer.handles(&workspace));
        let local = CheckpointWorkspace::Local { path: root.clone() };
        assert!(!checkpointer.handles(&local));
        let checkpoint = checkpointer
            .checkpoint(CheckpointRequest {
                thread_id: "t",
                turn_id: "u1",
                workspace: &workspace,
            })
            .await
            .unwrap()
            .unwrap();

        std::fs::write(root.join("app/edited.txt"), "after\n").unwrap();
        std::fs::remove_file(root.join("app/deleted.txt")).unwrap();
        std::fs::create_dir_all(root.join("app/new")).unwrap();
        std::fs::write(root.join("app/new/created.txt"), "new\n").unwrap();

        let forked = checkpointer.fork(&workspace, &checkpoint).await.unwrap();
        let ForkedWorkspace::Runner {
            config,
            workspace: fork_dir,
            ..
        } = &forked
        else {
            panic!("{forked:?}");
        };
        assert_eq!(
            std::fs::read_to_string(fork_dir.join("edited.txt")).unwrap(),
            "before\n"
        );
        assert!(fork_dir.ends_with("app"));
        assert_eq!(config["workspace"], json!(fork_dir));
        UnixLocalConfig::from_json(config, "fork").unwrap();

        checkpointer.restore(&workspace, &checkpoint).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(root.join("app/edited.txt")).unwrap(),
            "before\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("app/deleted.txt")).unwrap(),
            "keep\n"
        );
        assert!(!root.join("app/new").exists());

        checkpointer.discard(&forked).await.unwrap();
        assert!(!fork_dir.exists());
        let mut foreign = checkpoint.clone();
        foreign.id = "/etc".into();
        let error = checkpointer
            .restore(&workspace, &foreign)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("not under"), "{error}");
    }
}
