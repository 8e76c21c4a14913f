//! Exporting the work done in a worktree: as a patch against the commit it
//! started from, or as a branch `roder/<id>` in the source repository.
//!
//! Both start from a snapshot tree of the checkout taken through a
//! temporary index (`GIT_INDEX_FILE`), so untracked files are included and
//! the worktree's own index, which the agent may be using, is never touched.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::git::Git;
use crate::keyed_lock::REPOSITORIES;
use crate::layout::Layout;
use crate::lifecycle::require_active;
use crate::record::Record;

/// Branches are created under this prefix in the source repository.
pub(crate) const BRANCH_PREFIX: &str = "roder/";

/// Identity for the export commit when the repository has none configured.
const FALLBACK_NAME: &str = "Roder";
const FALLBACK_EMAIL: &str = "roder@localhost.invalid";

pub(crate) async fn export_patch(layout: &Layout, id: &str) -> anyhow::Result<String> {
    let (record, _) = require_active(layout, id).await?;
    let tree = snapshot_tree(layout, &record).await?;
    let patch = Git::new(&record.checkout)
        .args([
            "diff",
            "--binary",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-renames",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
        ])
        .arg(&record.base_commit)
        .arg(&tree)
        .run()
        .await?;
    String::from_utf8(patch).map_err(|_| {
        anyhow::anyhow!(
            "the patch of worktree `{id}` is not valid UTF-8 (a text file in another encoding); \
             export it as a branch instead"
        )
    })
}

/// Commits the snapshot on top of the base commit and points
/// `refs/heads/roder/<id>` at it. Exporting the same content again is a
/// no-op; a branch of that name with other content is never overwritten.
pub(crate) async fn export_branch(layout: &Layout, id: &str) -> anyhow::Result<String> {
    let (record, _) = require_active(layout, id).await?;
    let branch = format!("{BRANCH_PREFIX}{id}");
    let reference = format!("refs/heads/{branch}");
    let valid = Git::new(&record.repository)
        .args(["check-ref-format", &reference])
        .output()
        .await?;
    if !valid.success {
        bail!("worktree id `{id}` cannot be a branch name (`{branch}` is not a valid ref)");
    }
    let tree = snapshot_tree(layout, &record).await?;

    let _repository = REPOSITORIES.lock(&record.common_dir).await;
    let existing = Git::new(&record.repository)
        .args(["rev-parse", "--verify", "--quiet", "--end-of-options"])
        .arg(format!("{reference}^{{commit}}"))
        .output()
        .await?;
    if existing.success {
        let commit = String::from_utf8_lossy(&existing.stdout).trim().to_string();
        if is_export_of(&record, &commit, &tree).await? {
            return Ok(branch);
        }
        bail!(
            "branch `{branch}` already exists in `{}` at {commit} with other content; \
             delete it (`git branch -D {branch}`) to export again, or export a patch",
            record.repository.display()
        );
    }

    let message = format!(
        "roder: work from worktree {id}\n\nStarted from {} ({}).\n",
        record.base_commit, record.selector
    );
    let mut commit_tree = Git::new(&record.repository).args([
        "commit-tree",
        &tree,
        "-p",
        &record.base_commit,
        "-m",
        &message,
    ]);
    if !has_identity(&record.repository).await {
        commit_tree = commit_tree
            .env("GIT_AUTHOR_NAME", FALLBACK_NAME)
            .env("GIT_AUTHOR_EMAIL", FALLBACK_EMAIL)
            .env("GIT_COMMITTER_NAME", FALLBACK_NAME)
            .env("GIT_COMMITTER_EMAIL", FALLBACK_EMAIL);
    }
    let commit = commit_tree.text().await?;
    // The empty old value makes git refuse if the branch appeared meanwhile.
    Git::new(&record.repository)
        .args(["update-ref", "-m", &format!("roder: export worktree {id}")])
        .args([reference.as_str(), commit.as_str(), ""])
        .run()
        .await?;
    Ok(branch)
}

/// Whether `commit` is an earlier export of the same content: the same tree
/// on top of the same base.
async fn is_export_of(record: &Record, commit: &str, tree: &str) -> anyhow::Result<bool> {
    let output = Git::new(&record.repository)
        .args(["show", "-s", "--format=%T %P", commit])
        .text()
        .await?;
    Ok(output == format!("{tree} {}", record.base_commit))
}

/// Whether git can name an author and committer in this repository.
async fn has_identity(repository: &Path) -> bool {
    for variable in ["GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT"] {
        let known = Git::new(repository).args(["var", variable]).output().await;
        if !known.is_ok_and(|output| output.success) {
            return false;
        }
    }
    true
}

/// The tree of everything in the checkout now (tracked changes, new and
/// deleted files; ignored files excluded), written to the object store.
async fn snapshot_tree(layout: &Layout, record: &Record) -> anyhow::Result<String> {
    let index = TempIndex::new(layout, record).await?;
    let result = async {
        Git::new(&record.checkout)
            .args(["add", "-A"])
            .env("GIT_INDEX_FILE", &index.path)
            .run()
            .await?;
        Git::new(&record.checkout)
            .arg("write-tree")
            .env("GIT_INDEX_FILE", &index.path)
            .text()
            .await
    }
    .await;
    index.remove().await;
    result
}

/// A copy of the worktree's index in `<root>/<id>`, so `git add -A` only
/// rehashes what changed while the real index stays untouched.
struct TempIndex {
    path: PathBuf,
    removed: bool,
}

impl TempIndex {
    async fn new(layout: &Layout, record: &Record) -> anyhow::Result<Self> {
        let path = layout
            .dir(&record.id)
            .join(format!(".export-index-{}", uuid::Uuid::new_v4()));
        let real = Git::new(&record.checkout)
            .args(["rev-parse", "--path-format=absolute", "--git-path", "index"])
            .text()
            .await?;
        match tokio::fs::copy(&real, &path).await {
            Ok(_) => {}
            // No index yet: git starts from an empty one.
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => {
                let _ = tokio::fs::remove_file(&path).await;
                return Err(error)
                    .with_context(|| format!("cannot copy the worktree index `{real}`"));
            }
        }
        Ok(Self {
            path,
            removed: false,
        })
    }

    async fn remove(mut self) {
        remove_index_files(self.path.clone()).await;
        self.removed = true;
    }
}

impl Drop for TempIndex {
    /// An export cancelled mid-way still removes its temporary index (on
    /// the runtime, never blocking the dropping thread).
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(remove_index_files(self.path.clone()));
        }
    }
}

/// Removes an index file and the lock git may have left beside it.
async fn remove_index_files(path: PathBuf) {
    let mut lock = path.clone().into_os_string();
    lock.push(".lock");
    let _ = tokio::fs::remove_file(&path).await;
    let _ = tokio::fs::remove_file(&lock).await;
}
