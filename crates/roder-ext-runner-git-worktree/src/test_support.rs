//! Real git repositories in temporary directories, for the tests.

use std::path::{Path, PathBuf};

use roder_api::workdir::{MaterializedWorkdir, WorkdirMaterializer, WorkdirRequest};

use crate::GitWorktreeMaterializer;

/// Runs git in `dir` with a fixed identity and no user hooks or signing;
/// panics with git's message on failure.
pub(crate) async fn git(dir: &Path, args: &[&str]) -> String {
    let output = tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Roder Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .env("LC_ALL", "C")
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?} in {} failed: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Whether `git args` succeeds in `dir`.
pub(crate) async fn git_ok(dir: &Path, args: &[&str]) -> bool {
    tokio::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .await
        .unwrap()
        .status
        .success()
}

/// A repository with one commit on `main`: `README.md` and `src/lib.rs`.
pub(crate) struct TestRepo {
    pub(crate) dir: tempfile::TempDir,
}

impl TestRepo {
    pub(crate) async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]).await;
        tokio::fs::write(dir.path().join("README.md"), "clean\n")
            .await
            .unwrap();
        tokio::fs::create_dir(dir.path().join("src")).await.unwrap();
        tokio::fs::write(dir.path().join("src/lib.rs"), "pub fn f() {}\n")
            .await
            .unwrap();
        git(dir.path(), &["add", "-A"]).await;
        git(dir.path(), &["commit", "-q", "-m", "init"]).await;
        Self { dir }
    }

    pub(crate) fn path(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    pub(crate) async fn head(&self) -> String {
        git(self.dir.path(), &["rev-parse", "HEAD"])
            .await
            .trim()
            .to_string()
    }

    /// Commits `contents` to `file` and returns the new commit.
    pub(crate) async fn commit_file(&self, file: &str, contents: &str) -> String {
        tokio::fs::write(self.dir.path().join(file), contents)
            .await
            .unwrap();
        git(self.dir.path(), &["add", "-A"]).await;
        git(self.dir.path(), &["commit", "-q", "-m", file]).await;
        self.head().await
    }

    /// The worktrees git lists for this repository (the main one included).
    pub(crate) async fn worktrees(&self) -> Vec<String> {
        git(self.dir.path(), &["worktree", "list", "--porcelain"])
            .await
            .lines()
            .filter_map(|line| line.strip_prefix("worktree ").map(str::to_string))
            .collect()
    }
}

/// A materializer over a fresh temporary root (kept alive by the returned
/// directory).
pub(crate) fn materializer() -> (tempfile::TempDir, GitWorktreeMaterializer) {
    let root = tempfile::tempdir().unwrap();
    let materializer = GitWorktreeMaterializer::new(root.path().to_path_buf());
    (root, materializer)
}

pub(crate) fn request(repo: &TestRepo, selector: Option<&str>, id: Option<&str>) -> WorkdirRequest {
    WorkdirRequest {
        repository: repo.path(),
        selector: selector.map(str::to_string),
        id: id.map(str::to_string),
    }
}

pub(crate) async fn materialize(
    materializer: &GitWorktreeMaterializer,
    repo: &TestRepo,
    id: &str,
) -> MaterializedWorkdir {
    materializer
        .materialize(request(repo, None, Some(id)))
        .await
        .unwrap()
}

/// Names of the entries directly under `dir`.
pub(crate) fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}
