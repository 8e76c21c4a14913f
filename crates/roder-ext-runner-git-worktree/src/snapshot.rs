//! A checkout's whole state as git objects, and putting a checkout back to
//! one: what checkpoints are made of.
//!
//! A snapshot is shaped like `git stash`'s: a commit whose tree is the
//! working tree (tracked changes, new and deleted files; ignored files left
//! out), whose first parent is `HEAD` and whose last parent is a commit of
//! the index's tree, so a restore puts back the files, the index and (for a
//! detached `HEAD`) the commit. It is written through a temporary index
//! (`GIT_INDEX_FILE`, a copy of the real one, so `git add -A` only rehashes
//! what changed) and kept reachable by a ref outside any branch. The real
//! index, `HEAD` and branches are never touched by taking one.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::git::Git;

/// The identity checkpoint commits carry: Roder's, never the user's.
const NAME: &str = "Roder";
const EMAIL: &str = "roder@localhost.invalid";

/// How many paths go into one `git checkout-index` command line.
const PATHS_PER_COMMAND: usize = 256;

/// A snapshot of one checkout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// The commit whose tree is the working tree.
    pub(crate) commit: String,
    /// `HEAD` when it was taken (`None` before the first commit).
    pub(crate) head: Option<String>,
    /// The commit whose tree is the index (`None` when the index had
    /// unmerged entries and could not be written as a tree).
    pub(crate) index: Option<String>,
}

/// The top level of the work tree holding `dir`, `None` outside any (or in
/// a bare repository).
pub(crate) async fn toplevel(dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let output = Git::new(dir)
        .args(["rev-parse", "--show-toplevel"])
        .output()
        .await?;
    if !output.success {
        return Ok(None);
    }
    let text = String::from_utf8_lossy(&output.stdout).trim().to_string();
    Ok((!text.is_empty()).then(|| PathBuf::from(text)))
}

/// `HEAD`'s commit, `None` before the first commit.
pub(crate) async fn head(checkout: &Path) -> anyhow::Result<Option<String>> {
    let output = Git::new(checkout)
        .args(["rev-parse", "--verify", "--quiet", "HEAD^{commit}"])
        .output()
        .await?;
    Ok(output
        .success
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string()))
}

/// Snapshots `checkout` and points `reference` at it.
pub(crate) async fn take(
    checkout: &Path,
    reference: &str,
    message: &str,
) -> anyhow::Result<Snapshot> {
    let head = head(checkout).await?;
    let index = TempIndex::copy_of_real(checkout).await?;
    let result = async {
        // The index first: `add -A` below changes the temporary copy.
        let index_tree = index.git(checkout).arg("write-tree").output().await?;
        index.git(checkout).args(["add", "-A"]).run().await?;
        let work_tree = index.git(checkout).arg("write-tree").text().await?;
        let index_commit = match index_tree.success {
            true => {
                let tree = String::from_utf8_lossy(&index_tree.stdout)
                    .trim()
                    .to_string();
                Some(commit_tree(checkout, &tree, head.iter(), "roder checkpoint: index").await?)
            }
            false => None,
        };
        let parents = head.iter().chain(index_commit.iter());
        let commit = commit_tree(checkout, &work_tree, parents, message).await?;
        Git::new(checkout)
            .args(["update-ref", "-m", "roder: checkpoint", reference, &commit])
            .run()
            .await?;
        anyhow::Ok(Snapshot {
            commit,
            head: head.clone(),
            index: index_commit,
        })
    }
    .await;
    index.remove().await;
    result
}

/// Puts `checkout` back to `snapshot`: files created since are removed
/// (empty directories they leave too), edited and deleted ones are written
/// back, the index is the snapshot's, and a detached `HEAD` returns to the
/// snapshot's commit. Ignored files are not part of a snapshot and are left
/// alone; so is a branch that `HEAD` is on (it is never moved).
pub(crate) async fn restore(checkout: &Path, snapshot: &Snapshot) -> anyhow::Result<()> {
    let target = format!("{}^{{tree}}", snapshot.commit);
    let current = {
        let index = TempIndex::copy_of_real(checkout).await?;
        let tree = async {
            index.git(checkout).args(["add", "-A"]).run().await?;
            index.git(checkout).arg("write-tree").text().await
        }
        .await;
        index.remove().await;
        tree?
    };
    let changes = Git::new(checkout)
        .args(["diff-tree", "-r", "-z", "--no-renames", "--name-status"])
        .arg(&current)
        .arg(&target)
        .run()
        .await?;
    let (gone, written) = parse_name_status(&changes);
    for path in &gone {
        remove_file_and_empty_parents(checkout, path).await?;
    }
    if !written.is_empty() {
        let index = TempIndex::empty(checkout).await?;
        let result = async {
            index
                .git(checkout)
                .args(["read-tree", &target])
                .run()
                .await?;
            for chunk in written.chunks(PATHS_PER_COMMAND) {
                index
                    .git(checkout)
                    .args(["checkout-index", "--force", "--"])
                    .args(chunk)
                    .run()
                    .await?;
            }
            anyhow::Ok(())
        }
        .await;
        index.remove().await;
        result?;
    }
    if let Some(index_commit) = &snapshot.index {
        Git::new(checkout)
            .args(["read-tree", index_commit])
            .run()
            .await?;
        // Fresh stat data, so `git status` need not rehash every file; it
        // exits 1 when files differ from the index, which is no failure.
        Git::new(checkout)
            .args(["update-index", "-q", "--refresh"])
            .output()
            .await?;
    }
    if let Some(head) = &snapshot.head {
        let on_branch = Git::new(checkout)
            .args(["symbolic-ref", "-q", "HEAD"])
            .output()
            .await?
            .success;
        if !on_branch {
            Git::new(checkout)
                .args([
                    "update-ref",
                    "--no-deref",
                    "-m",
                    "roder: rollback",
                    "HEAD",
                    head,
                ])
                .run()
                .await?;
        }
    }
    Ok(())
}

/// `diff-tree -z --name-status` output as (paths to remove, paths to
/// write).
fn parse_name_status(output: &[u8]) -> (Vec<String>, Vec<String>) {
    let mut gone = Vec::new();
    let mut written = Vec::new();
    let mut fields = output.split(|byte| *byte == 0).filter(|f| !f.is_empty());
    while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
        let path = String::from_utf8_lossy(path).into_owned();
        match status.first() {
            Some(b'D') => gone.push(path),
            _ => written.push(path),
        }
    }
    (gone, written)
}

/// Removes `checkout/relative` and then each parent directory it leaves
/// empty, never the checkout itself. Git's paths never hold `..`.
async fn remove_file_and_empty_parents(checkout: &Path, relative: &str) -> anyhow::Result<()> {
    let path = checkout.join(relative);
    match tokio::fs::remove_file(&path).await {
        Ok(()) => {}
        Err(error) if error.kind() == ErrorKind::NotFound => {}
        Err(error) => {
            return Err(error).with_context(|| format!("cannot remove `{}`", path.display()));
        }
    }
    let mut dir = path.parent().map(Path::to_path_buf);
    while let Some(current) = dir {
        if current == checkout || !current.starts_with(checkout) {
            break;
        }
        // Fails (and stops) at the first directory that is not empty.
        if tokio::fs::remove_dir(&current).await.is_err() {
            break;
        }
        dir = current.parent().map(Path::to_path_buf);
    }
    Ok(())
}

async fn commit_tree<'a>(
    checkout: &Path,
    tree: &str,
    parents: impl Iterator<Item = &'a String>,
    message: &str,
) -> anyhow::Result<String> {
    let mut command = Git::new(checkout).args(["commit-tree", tree]);
    for parent in parents {
        command = command.arg("-p").arg(parent);
    }
    command
        .args(["-m", message])
        .env("GIT_AUTHOR_NAME", NAME)
        .env("GIT_AUTHOR_EMAIL", EMAIL)
        .env("GIT_COMMITTER_NAME", NAME)
        .env("GIT_COMMITTER_EMAIL", EMAIL)
        .text()
        .await
}

/// A temporary index file in the checkout's own git directory, removed
/// afterwards (from a task if the future is dropped).
struct TempIndex {
    path: PathBuf,
    removed: bool,
}

impl TempIndex {
    async fn empty(checkout: &Path) -> anyhow::Result<Self> {
        let git_dir = Git::new(checkout)
            .args(["rev-parse", "--path-format=absolute", "--git-dir"])
            .text()
            .await?;
        Ok(Self {
            path: PathBuf::from(git_dir)
                .join(format!("roder-checkpoint-index-{}", uuid::Uuid::new_v4())),
            removed: false,
        })
    }

    async fn copy_of_real(checkout: &Path) -> anyhow::Result<Self> {
        let index = Self::empty(checkout).await?;
        let real = Git::new(checkout)
            .args(["rev-parse", "--path-format=absolute", "--git-path", "index"])
            .text()
            .await?;
        match tokio::fs::copy(&real, &index.path).await {
            Ok(_) => Ok(index),
            // No index yet: git starts from an empty one.
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(index),
            Err(error) => {
                index.remove().await;
                Err(error).with_context(|| format!("cannot copy the index `{real}`"))
            }
        }
    }

    fn git(&self, checkout: &Path) -> Git {
        Git::new(checkout).env("GIT_INDEX_FILE", &self.path)
    }

    async fn remove(mut self) {
        remove_index_files(self.path.clone()).await;
        self.removed = true;
    }
}

impl Drop for TempIndex {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(remove_index_files(self.path.clone()));
        }
    }
}

async fn remove_index_files(path: PathBuf) {
    let mut lock = path.clone().into_os_string();
    lock.push(".lock");
    let _ = tokio::fs::remove_file(&path).await;
    let _ = tokio::fs::remove_file(&lock).await;
}

/// The paths of every file in the checkout that is not ignored, for tests
/// and callers that compare workspaces.
#[cfg(test)]
pub(crate) async fn listed_files(checkout: &Path) -> std::collections::BTreeSet<String> {
    let output = Git::new(checkout)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .run()
        .await
        .unwrap_or_default();
    output
        .split(|byte| *byte == 0)
        .filter(|path| !path.is_empty())
        .map(|path| String::from_utf8_lossy(path).into_owned())
        .filter(|path| checkout.join(path).exists())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{TestRepo, git};

    #[test]
    fn name_status_splits_removals_from_writes() {
        let (gone, written) = parse_name_status(b"D\0old.txt\0M\0a b.txt\0A\0new/x\0T\0link\0");
        assert_eq!(gone, vec!["old.txt"]);
        assert_eq!(written, vec!["a b.txt", "new/x", "link"]);
    }

    #[tokio::test]
    async fn a_restore_undoes_created_edited_and_deleted_files_and_the_index() {
        let repo = TestRepo::new().await;
        let dir = repo.path();
        std::fs::write(dir.join("untracked.txt"), "kept\n").unwrap();
        std::fs::write(dir.join("staged.txt"), "staged\n").unwrap();
        git(&dir, &["add", "staged.txt"]).await;
        let head_before = repo.head().await;
        let snapshot = take(&dir, "refs/roder/checkpoints/t/u1", "checkpoint")
            .await
            .unwrap();
        assert_eq!(snapshot.head.as_deref(), Some(head_before.as_str()));
        // Taking it changed nothing visible.
        let status_before = git(&dir, &["status", "--porcelain"]).await;
        assert!(status_before.contains("A  staged.txt"), "{status_before}");
        assert!(
            status_before.contains("?? untracked.txt"),
            "{status_before}"
        );
        let reference = git(&dir, &["rev-parse", "refs/roder/checkpoints/t/u1"]).await;
        assert_eq!(reference.trim(), snapshot.commit);

        // The "turn": create, edit, delete, stage, commit.
        std::fs::create_dir_all(dir.join("made/deep")).unwrap();
        std::fs::write(dir.join("made/deep/new.txt"), "new\n").unwrap();
        std::fs::write(dir.join("README.md"), "edited\n").unwrap();
        std::fs::remove_file(dir.join("src/lib.rs")).unwrap();
        std::fs::remove_file(dir.join("untracked.txt")).unwrap();
        git(&dir, &["add", "-A"]).await;

        restore(&dir, &snapshot).await.unwrap();
        assert!(!dir.join("made").exists(), "created file and its dirs gone");
        assert_eq!(
            std::fs::read_to_string(dir.join("README.md")).unwrap(),
            "clean\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("src/lib.rs")).unwrap(),
            "pub fn f() {}\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("untracked.txt")).unwrap(),
            "kept\n"
        );
        assert_eq!(git(&dir, &["status", "--porcelain"]).await, status_before);
    }

    #[tokio::test]
    async fn a_detached_head_returns_and_a_branch_is_never_moved() {
        let repo = TestRepo::new().await;
        let dir = repo.path();
        let head = repo.head().await;
        git(&dir, &["checkout", "-q", "--detach"]).await;
        let snapshot = take(&dir, "refs/roder/checkpoints/t/u", "c").await.unwrap();
        std::fs::write(dir.join("x.txt"), "x\n").unwrap();
        git(&dir, &["add", "-A"]).await;
        git(&dir, &["commit", "-q", "-m", "turn"]).await;
        restore(&dir, &snapshot).await.unwrap();
        assert_eq!(repo.head().await, head);
        assert!(!dir.join("x.txt").exists());
        assert_eq!(git(&dir, &["status", "--porcelain"]).await, "");

        git(&dir, &["checkout", "-q", "main"]).await;
        let snapshot = take(&dir, "refs/roder/checkpoints/t/v", "c").await.unwrap();
        std::fs::write(dir.join("y.txt"), "y\n").unwrap();
        git(&dir, &["add", "-A"]).await;
        git(&dir, &["commit", "-q", "-m", "turn"]).await;
        let moved = repo.head().await;
        restore(&dir, &snapshot).await.unwrap();
        assert_eq!(repo.head().await, moved, "the branch stays where it is");
        assert!(!dir.join("y.txt").exists());
        assert!(listed_files(&dir).await.contains("README.md"));
    }
}
