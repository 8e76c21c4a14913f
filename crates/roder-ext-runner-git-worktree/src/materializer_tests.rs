//! The materializer's rules against real git repositories.

use std::path::{Path, PathBuf};

use roder_api::workdir::{
    Cleanliness, WorkdirClaim, WorkdirMaterializer, WorkdirRequest, WorkdirStatus,
};

use crate::GitWorktreeMaterializer;
use crate::test_support::{TestRepo, entries, git, git_ok, materialize, materializer, request};

fn claim(id: &str, relative_cwd: Option<&str>) -> WorkdirClaim {
    WorkdirClaim {
        id: id.to_string(),
        relative_cwd: relative_cwd.map(PathBuf::from),
    }
}

#[tokio::test]
async fn materializes_a_detached_checkout_with_its_record() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    assert_eq!(materializer.provider_id(), "git-worktree");
    let made = materialize(&materializer, &repo, "wt-1").await;

    let root = std::fs::canonicalize(root.path()).unwrap();
    let checkout = root.join("wt-1/checkout");
    assert!(made.created);
    assert_eq!(made.cwd, checkout);
    assert_eq!(made.info.checkout, checkout);
    assert_eq!(
        tokio::fs::read_to_string(checkout.join("README.md"))
            .await
            .unwrap(),
        "clean\n"
    );
    let head = repo.head().await;
    let tree = git(&repo.path(), &["rev-parse", "HEAD^{tree}"]).await;
    let info = &made.info;
    assert_eq!(info.status, WorkdirStatus::Active);
    assert_eq!(info.cleanliness, Some(Cleanliness::Clean));
    assert_eq!(info.repository, repo.path());
    assert_eq!(info.selector, "HEAD");
    assert_eq!(info.base_commit, head);
    assert_eq!(info.base_tree, tree.trim());
    assert_eq!(info.head_commit.as_deref(), Some(head.as_str()));
    assert_eq!(info.branch, None, "the checkout is detached");
    assert_eq!(info.primary_thread_id, None);

    let record: serde_json::Value = serde_json::from_str(
        &tokio::fs::read_to_string(root.join("wt-1/materialization.json"))
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(record["repository"], repo.path().display().to_string());
    assert_eq!(record["selector"], "HEAD");
    assert_eq!(record["base_commit"], head);
    assert_eq!(record["base_tree"], tree.trim());
    assert_eq!(record["state"], "active");
    assert_eq!(
        entries(&root.join("wt-1")),
        ["checkout", "materialization.json"]
    );
    assert!(
        repo.worktrees()
            .await
            .contains(&checkout.display().to_string())
    );
    // The source is untouched: still on main, still clean.
    assert_eq!(git(&repo.path(), &["status", "--porcelain"]).await, "");
    assert_eq!(materializer.get("wt-1").await.unwrap(), made.info);
}

#[tokio::test]
async fn generated_ids_are_path_safe_and_distinct() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let a = materializer
        .materialize(request(&repo, None, None))
        .await
        .unwrap();
    let b = materializer
        .materialize(request(&repo, None, None))
        .await
        .unwrap();
    assert_ne!(a.info.id, b.info.id);
    crate::id::validate(&a.info.id).unwrap();
    assert!(a.info.id.starts_with("wt-"));
}

#[tokio::test]
async fn default_head_refuses_a_dirty_source_and_leaves_nothing() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    tokio::fs::write(repo.path().join("README.md"), "edited\n")
        .await
        .unwrap();
    let error = materializer
        .materialize(request(&repo, None, Some("wt-1")))
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("uncommitted changes"),
        "{error:#}"
    );
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(repo.worktrees().await.len(), 1);

    // An untracked file makes it dirty too; so does naming HEAD explicitly.
    git(&repo.path(), &["checkout", "--", "README.md"]).await;
    tokio::fs::write(repo.path().join("new.txt"), "x")
        .await
        .unwrap();
    let error = materializer
        .materialize(request(&repo, Some("HEAD"), Some("wt-1")))
        .await
        .unwrap_err();
    assert!(format!("{error:#}").contains("uncommitted changes"));
    assert_eq!(entries(root.path()), Vec::<String>::new());
}

#[tokio::test]
async fn branch_and_commit_selectors_allow_a_dirty_source() {
    let repo = TestRepo::new().await;
    let first = repo.head().await;
    let second = repo.commit_file("README.md", "second\n").await;
    tokio::fs::write(repo.path().join("README.md"), "uncommitted\n")
        .await
        .unwrap();
    let (_root, materializer) = materializer();

    let on_branch = materializer
        .materialize(request(&repo, Some("main"), Some("on-branch")))
        .await
        .unwrap();
    assert_eq!(on_branch.info.selector, "main");
    assert_eq!(on_branch.info.base_commit, second);
    assert_eq!(
        tokio::fs::read_to_string(on_branch.cwd.join("README.md"))
            .await
            .unwrap(),
        "second\n",
        "the checkout has the committed content, not the source's dirt"
    );
    assert_eq!(on_branch.info.branch, None, "detached even from a branch");

    let at_commit = materializer
        .materialize(request(&repo, Some(&first), Some("at-commit")))
        .await
        .unwrap();
    assert_eq!(at_commit.info.base_commit, first);
    assert_eq!(
        tokio::fs::read_to_string(at_commit.cwd.join("README.md"))
            .await
            .unwrap(),
        "clean\n"
    );
    // The source's uncommitted change is still there.
    assert_eq!(
        tokio::fs::read_to_string(repo.path().join("README.md"))
            .await
            .unwrap(),
        "uncommitted\n"
    );
}

#[tokio::test]
async fn remote_urls_and_non_repositories_are_refused() {
    let (root, materializer) = materializer();
    for (repository, expected) in [
        ("https://github.com/o/r.git", "remote URL"),
        ("git@github.com:o/r.git", "remote URL"),
        ("file:///srv/repo", "remote URL"),
        ("relative/repo", "absolute path"),
        ("/definitely/not/here", "does not exist"),
    ] {
        let error = materializer
            .materialize(WorkdirRequest {
                repository: repository.into(),
                selector: None,
                id: Some("wt-1".to_string()),
            })
            .await
            .unwrap_err();
        assert!(
            format!("{error:#}").contains(expected),
            "{repository}: {error:#}"
        );
    }
    let plain = tempfile::tempdir().unwrap();
    let error = materializer
        .materialize(WorkdirRequest {
            repository: plain.path().to_path_buf(),
            selector: None,
            id: Some("wt-1".to_string()),
        })
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("not a git repository"),
        "{error:#}"
    );
    assert_eq!(entries(root.path()), Vec::<String>::new());
}

#[tokio::test]
async fn bad_ids_selectors_and_duplicates_are_refused() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    for id in ["", "-x", ".x", "..", "a/b", "../escape", "a b"] {
        let error = materializer
            .materialize(request(&repo, None, Some(id)))
            .await
            .unwrap_err();
        assert!(error.to_string().contains("worktree id"), "{id:?}: {error}");
        assert!(materializer.get(id).await.is_err(), "get {id:?}");
        assert!(
            materializer.claim(claim(id, None)).await.is_err(),
            "claim {id:?}"
        );
        assert!(materializer.cleanup(id).await.is_err(), "cleanup {id:?}");
    }
    for selector in ["no-such-branch", "--output=/tmp/x"] {
        let error = materializer
            .materialize(request(&repo, Some(selector), Some("wt-1")))
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains("selector"),
            "{selector}: {error}"
        );
    }
    assert_eq!(entries(root.path()), Vec::<String>::new());

    materialize(&materializer, &repo, "a.b_c-1").await;
    let error = materializer
        .materialize(request(&repo, None, Some("a.b_c-1")))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    assert_eq!(entries(root.path()), ["a.b_c-1"]);
    assert_eq!(repo.worktrees().await.len(), 2);
}

#[tokio::test]
async fn status_follows_the_checkout() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    let checkout = made.cwd.clone();

    tokio::fs::write(checkout.join("new.txt"), "new\n")
        .await
        .unwrap();
    let info = materializer.get("wt-1").await.unwrap();
    assert_eq!(info.cleanliness, Some(Cleanliness::Dirty));

    git(&checkout, &["switch", "-q", "-c", "feature"]).await;
    git(&checkout, &["add", "-A"]).await;
    git(&checkout, &["commit", "-q", "-m", "work"]).await;
    let head = git(&checkout, &["rev-parse", "HEAD"]).await;
    let info = materializer.get("wt-1").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::Active);
    assert_eq!(info.cleanliness, Some(Cleanliness::Clean));
    assert_eq!(info.branch.as_deref(), Some("feature"));
    assert_eq!(info.head_commit.as_deref(), Some(head.trim()));
    assert_ne!(info.head_commit.as_deref(), Some(info.base_commit.as_str()));
    assert_eq!(
        info.base_commit, made.info.base_commit,
        "the base never moves"
    );
}

#[tokio::test]
async fn unknown_ids_are_not_found() {
    let (_root, materializer) = materializer();
    let info = materializer.get("nobody").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::NotFound);
    assert_eq!(info.id, "nobody");
    assert_eq!(info.cleanliness, None);
    assert!(materializer.list().await.unwrap().is_empty());
    let error = materializer.claim(claim("nobody", None)).await.unwrap_err();
    assert!(
        error.to_string().contains("no worktree `nobody`"),
        "{error}"
    );
    assert!(materializer.cleanup("nobody").await.is_err());
    assert!(materializer.bind("nobody", "t1").await.is_err());
    materializer.unbind("nobody", "t1").await.unwrap();
    materializer.rollback("nobody").await.unwrap();
}

#[tokio::test]
async fn a_deleted_checkout_or_source_is_corrupted() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let gone_checkout = materialize(&materializer, &repo, "gone-checkout").await;
    materialize(&materializer, &repo, "gone-source").await;
    materialize(&materializer, &repo, "broken-link").await;

    tokio::fs::remove_dir_all(&gone_checkout.cwd).await.unwrap();
    let info = materializer.get("gone-checkout").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::Corrupted);
    assert_eq!(info.cleanliness, None);
    assert_eq!(info.head_commit, None);

    let link = materializer
        .get("broken-link")
        .await
        .unwrap()
        .checkout
        .join(".git");
    tokio::fs::write(&link, "gitdir: /nowhere\n").await.unwrap();
    assert_eq!(
        materializer.get("broken-link").await.unwrap().status,
        WorkdirStatus::Corrupted
    );
    let error = materializer
        .claim(claim("broken-link", None))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is corrupted"), "{error}");
    assert!(materializer.export_patch("broken-link").await.is_err());

    assert_eq!(
        materializer.get("gone-source").await.unwrap().status,
        WorkdirStatus::Active
    );
    let source = repo.path();
    drop(repo);
    assert!(!source.exists());
    assert_eq!(
        materializer.get("gone-source").await.unwrap().status,
        WorkdirStatus::Corrupted
    );
    let statuses: Vec<_> = materializer
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|info| (info.id, info.status))
        .collect();
    assert_eq!(statuses.len(), 3);
    assert!(
        statuses
            .iter()
            .all(|(_, status)| *status == WorkdirStatus::Corrupted)
    );

    // Corrupted worktrees can still be cleaned up.
    for id in ["gone-checkout", "gone-source", "broken-link"] {
        let info = materializer.cleanup(id).await.unwrap();
        assert_eq!(info.status, WorkdirStatus::NotFound, "{id}");
    }
    assert!(materializer.list().await.unwrap().is_empty());
}

#[tokio::test]
async fn cleanup_is_refused_while_bound_and_removes_everything_after_unbind() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    tokio::fs::write(made.cwd.join("scratch.txt"), "uncommitted work")
        .await
        .unwrap();

    materializer.bind("wt-1", "thread-a").await.unwrap();
    materializer.bind("wt-1", "thread-a").await.unwrap();
    let error = materializer.bind("wt-1", "thread-b").await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("already bound to thread `thread-a`")
    );
    let info = materializer.get("wt-1").await.unwrap();
    assert_eq!(info.primary_thread_id.as_deref(), Some("thread-a"));

    let error = materializer.cleanup("wt-1").await.unwrap_err();
    assert!(
        error.to_string().contains("bound to thread `thread-a`"),
        "{error}"
    );
    assert!(made.cwd.join("scratch.txt").exists());

    materializer.unbind("wt-1", "thread-b").await.unwrap();
    assert_eq!(
        materializer
            .get("wt-1")
            .await
            .unwrap()
            .primary_thread_id
            .as_deref(),
        Some("thread-a"),
        "unbinding another thread changes nothing"
    );
    materializer.unbind("wt-1", "thread-a").await.unwrap();
    assert_eq!(
        materializer.get("wt-1").await.unwrap().primary_thread_id,
        None
    );

    let info = materializer.cleanup("wt-1").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::NotFound);
    assert_eq!(info.id, "wt-1");
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(
        repo.worktrees().await,
        vec![repo.path().display().to_string()]
    );
    assert_eq!(
        materializer.get("wt-1").await.unwrap().status,
        WorkdirStatus::NotFound
    );
}

/// Root can delete any directory, so the failure used here is one root hits
/// too: something that is not a directory sits where the checkout was.
/// Cleanup removes only the directory it created, never a stranger's file.
#[tokio::test]
async fn failed_removal_marks_cleanup_pending_and_a_retry_finishes() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    tokio::fs::remove_dir_all(&made.cwd).await.unwrap();
    tokio::fs::write(&made.cwd, "not a checkout").await.unwrap();

    let error = materializer.cleanup("wt-1").await.unwrap_err();
    let message = format!("{error:#}");
    assert!(message.contains("marked cleanup_pending"), "{message}");
    assert!(message.contains("is not a directory"), "{message}");
    let info = materializer.get("wt-1").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::CleanupPending);
    let error = materializer.claim(claim("wt-1", None)).await.unwrap_err();
    assert!(error.to_string().contains("cleanup_pending"), "{error}");
    assert!(materializer.bind("wt-1", "t").await.is_err());

    tokio::fs::remove_file(&made.cwd).await.unwrap();
    let info = materializer.cleanup("wt-1").await.unwrap();
    assert_eq!(info.status, WorkdirStatus::NotFound);
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(repo.worktrees().await.len(), 1, "git's entry was pruned");
}

#[tokio::test]
async fn claims_stay_inside_the_worktree() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), made.cwd.join("escape")).unwrap();
    std::os::unix::fs::symlink("src", made.cwd.join("inner")).unwrap();

    let whole = materializer.claim(claim("wt-1", None)).await.unwrap();
    assert!(!whole.created);
    assert_eq!(whole.cwd, made.cwd);
    assert_eq!(whole.info.id, "wt-1");
    let sub = materializer
        .claim(claim("wt-1", Some("src")))
        .await
        .unwrap();
    assert_eq!(sub.cwd, made.cwd.join("src"));
    let via_link = materializer
        .claim(claim("wt-1", Some("inner")))
        .await
        .unwrap();
    assert_eq!(via_link.cwd, made.cwd.join("src"));

    for (relative, expected) in [
        ("..", "outside the worktree"),
        ("src/../..", "outside the worktree"),
        ("escape", "leaves the worktree"),
        ("/tmp", "must be relative"),
        ("missing", "does not exist"),
    ] {
        let error = materializer
            .claim(claim("wt-1", Some(relative)))
            .await
            .unwrap_err();
        assert!(
            format!("{error:#}").contains(expected),
            "{relative}: {error:#}"
        );
    }
}

#[tokio::test]
async fn rollback_leaves_the_root_empty() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    tokio::fs::write(made.cwd.join("dirty.txt"), "x")
        .await
        .unwrap();
    materializer.bind("wt-1", "thread-a").await.unwrap();

    materializer.rollback("wt-1").await.unwrap();
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(repo.worktrees().await.len(), 1);
    assert_eq!(
        materializer.get("wt-1").await.unwrap().status,
        WorkdirStatus::NotFound
    );
    materializer.rollback("wt-1").await.unwrap();
}

/// Applies `patch` to a fresh clone of the source at the worktree's base.
async fn apply_to_source(repo: &TestRepo, patch: &str) {
    let patch_file = tempfile::NamedTempFile::new().unwrap();
    tokio::fs::write(patch_file.path(), patch).await.unwrap();
    let path = patch_file.path().to_str().unwrap();
    git(&repo.path(), &["apply", "--check", path]).await;
    git(&repo.path(), &["apply", path]).await;
}

#[tokio::test]
async fn exported_patch_applies_to_the_source_with_new_deleted_and_binary_files() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    let checkout = &made.cwd;
    assert_eq!(materializer.export_patch("wt-1").await.unwrap(), "");

    tokio::fs::write(checkout.join("README.md"), "changed\n")
        .await
        .unwrap();
    tokio::fs::write(checkout.join("brand-new.txt"), "hello\n")
        .await
        .unwrap();
    tokio::fs::create_dir(checkout.join("nested"))
        .await
        .unwrap();
    tokio::fs::write(checkout.join("nested/blob.bin"), [0u8, 159, 146, 150, 0, 1])
        .await
        .unwrap();
    tokio::fs::remove_file(checkout.join("src/lib.rs"))
        .await
        .unwrap();
    tokio::fs::write(checkout.join(".gitignore"), "*.log\n")
        .await
        .unwrap();
    tokio::fs::write(checkout.join("debug.log"), "ignored\n")
        .await
        .unwrap();
    let status_before = git(checkout, &["status", "--porcelain"]).await;

    let patch = materializer.export_patch("wt-1").await.unwrap();
    assert!(patch.contains("b/brand-new.txt"), "{patch}");
    assert!(patch.contains("GIT binary patch"), "{patch}");
    assert!(!patch.contains("debug.log"), "ignored files stay out");
    assert_eq!(
        git(checkout, &["status", "--porcelain"]).await,
        status_before,
        "the worktree's own index is untouched"
    );
    assert_eq!(
        entries(made.cwd.parent().unwrap()),
        ["checkout", "materialization.json"],
        "no temporary index is left behind"
    );

    apply_to_source(&repo, &patch).await;
    let source = repo.path();
    let read = |path: &str| std::fs::read(source.join(path)).unwrap();
    assert_eq!(read("README.md"), b"changed\n");
    assert_eq!(read("brand-new.txt"), b"hello\n");
    assert_eq!(read("nested/blob.bin"), [0u8, 159, 146, 150, 0, 1]);
    assert!(!source.join("src/lib.rs").exists());
}

#[tokio::test]
async fn exported_patch_includes_commits_made_in_the_worktree() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    tokio::fs::write(made.cwd.join("committed.txt"), "c\n")
        .await
        .unwrap();
    git(&made.cwd, &["add", "-A"]).await;
    git(&made.cwd, &["commit", "-q", "-m", "agent commit"]).await;
    tokio::fs::write(made.cwd.join("loose.txt"), "l\n")
        .await
        .unwrap();

    let patch = materializer.export_patch("wt-1").await.unwrap();
    assert!(patch.contains("b/committed.txt") && patch.contains("b/loose.txt"));
    apply_to_source(&repo, &patch).await;
}

#[tokio::test]
async fn export_branch_commits_the_work_as_roder_id_in_the_source() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    tokio::fs::write(made.cwd.join("feature.txt"), "feature\n")
        .await
        .unwrap();

    let branch = materializer.export_branch("wt-1").await.unwrap();
    assert_eq!(branch, "roder/wt-1");
    let source = repo.path();
    let parent = git(&source, &["rev-parse", "roder/wt-1^"]).await;
    assert_eq!(parent.trim(), made.info.base_commit);
    assert_eq!(
        git(&source, &["show", "roder/wt-1:feature.txt"]).await,
        "feature\n"
    );
    assert_eq!(
        git(&source, &["rev-parse", "--abbrev-ref", "HEAD"])
            .await
            .trim(),
        "main",
        "the source's checkout is not switched"
    );
    assert_eq!(git(&source, &["status", "--porcelain"]).await, "");
    // The worktree's own state is untouched: still detached, file untracked.
    assert_eq!(
        git(&made.cwd, &["status", "--porcelain"]).await,
        "?? feature.txt\n"
    );

    // Exporting the same content again is a no-op.
    let before = git(&source, &["rev-parse", "roder/wt-1"]).await;
    assert_eq!(
        materializer.export_branch("wt-1").await.unwrap(),
        "roder/wt-1"
    );
    assert_eq!(git(&source, &["rev-parse", "roder/wt-1"]).await, before);

    // Different content never moves an existing branch.
    tokio::fs::write(made.cwd.join("more.txt"), "more\n")
        .await
        .unwrap();
    let error = materializer.export_branch("wt-1").await.unwrap_err();
    assert!(error.to_string().contains("already exists"), "{error}");
    assert_eq!(git(&source, &["rev-parse", "roder/wt-1"]).await, before);
}

#[tokio::test]
async fn ids_that_cannot_be_branch_names_are_refused_by_export_branch() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    materialize(&materializer, &repo, "a..b").await;
    let error = materializer.export_branch("a..b").await.unwrap_err();
    assert!(
        error.to_string().contains("cannot be a branch name"),
        "{error}"
    );
    assert!(
        !git_ok(
            &repo.path(),
            &["rev-parse", "--verify", "refs/heads/roder/a..b"]
        )
        .await
    );
}

#[tokio::test]
async fn concurrent_worktrees_of_one_repository_stay_separate() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let ids = ["agent-1", "agent-2", "agent-3"];
    let made = futures_join(ids.map(|id| {
        let materializer = materializer.clone();
        let request = request(&repo, None, Some(id));
        tokio::spawn(async move { materializer.materialize(request).await })
    }))
    .await;
    assert_eq!(entries(root.path()), ids);
    assert_eq!(repo.worktrees().await.len(), 4);

    // Each agent edits the same file in its own checkout, concurrently.
    let edits = futures_join(made.iter().zip(ids).map(|(made, id)| {
        let file = made.cwd.join("README.md");
        tokio::spawn(async move { tokio::fs::write(file, format!("edited by {id}\n")).await })
    }))
    .await;
    assert_eq!(edits.len(), 3);
    for (made, id) in made.iter().zip(ids) {
        assert_eq!(
            tokio::fs::read_to_string(made.cwd.join("README.md"))
                .await
                .unwrap(),
            format!("edited by {id}\n")
        );
        let patch = materializer.export_patch(id).await.unwrap();
        assert!(patch.contains(&format!("+edited by {id}")), "{patch}");
        for other in ids.iter().filter(|other| **other != id) {
            assert!(!patch.contains(&format!("+edited by {other}")));
        }
    }
    assert_eq!(git(&repo.path(), &["status", "--porcelain"]).await, "");

    // Cleaning up concurrently is serialized per repository too.
    let cleaned = futures_join(ids.map(|id| {
        let materializer = materializer.clone();
        tokio::spawn(async move { materializer.cleanup(id).await })
    }))
    .await;
    assert!(
        cleaned
            .iter()
            .all(|info| info.status == WorkdirStatus::NotFound)
    );
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(repo.worktrees().await.len(), 1);
}

/// Awaits spawned tasks in order, unwrapping panics and errors.
async fn futures_join<T, E: std::fmt::Debug>(
    tasks: impl IntoIterator<Item = tokio::task::JoinHandle<Result<T, E>>>,
) -> Vec<T> {
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.unwrap().unwrap());
    }
    results
}

#[tokio::test]
async fn list_reports_every_worktree_oldest_first() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    materialize(&materializer, &repo, "first").await;
    materialize(&materializer, &repo, "second").await;
    // Stray entries under the root are not worktrees.
    tokio::fs::create_dir(root.path().join("no-record"))
        .await
        .unwrap();
    tokio::fs::write(root.path().join(".hidden"), "")
        .await
        .unwrap();
    let ids: Vec<String> = materializer
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|info| info.id)
        .collect();
    assert_eq!(ids, ["first", "second"]);
}

#[tokio::test]
async fn a_bare_source_repository_works() {
    let repo = TestRepo::new().await;
    let bare = tempfile::tempdir().unwrap();
    let bare_path: &Path = bare.path();
    git(
        &repo.path(),
        &["clone", "-q", "--bare", ".", bare_path.to_str().unwrap()],
    )
    .await;
    let (_root, materializer) = materializer();
    let made = materializer
        .materialize(WorkdirRequest {
            repository: bare_path.to_path_buf(),
            selector: None,
            id: Some("from-bare".to_string()),
        })
        .await
        .unwrap();
    assert!(made.cwd.join("README.md").exists());
    assert_eq!(made.info.status, WorkdirStatus::Active);
    materializer.cleanup("from-bare").await.unwrap();
}

/// Git itself can fail concurrent `worktree add`s of one repository ("failed
/// to read .git/worktrees/checkout5/commondir"), so they are serialized per
/// repository. That race is timing-dependent, so this cannot prove the lock;
/// it checks that many at once, through two instances, all succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_concurrent_materializations_and_cleanups_all_succeed() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let second = GitWorktreeMaterializer::new(root.path().to_path_buf());
    let ids: Vec<String> = (0..16).map(|n| format!("par-{n:02}")).collect();
    let made = futures_join(ids.iter().enumerate().map(|(n, id)| {
        let materializer = if n % 2 == 0 {
            materializer.clone()
        } else {
            second.clone()
        };
        let request = request(&repo, None, Some(id));
        tokio::spawn(async move { materializer.materialize(request).await })
    }))
    .await;
    assert_eq!(made.len(), 16);
    assert_eq!(entries(root.path()), ids);
    assert_eq!(repo.worktrees().await.len(), 17);
    for made in &made {
        assert_eq!(made.info.status, WorkdirStatus::Active, "{}", made.info.id);
    }
    let cleaned = futures_join(ids.iter().enumerate().map(|(n, id)| {
        let materializer = if n % 2 == 0 {
            materializer.clone()
        } else {
            second.clone()
        };
        let id = id.clone();
        tokio::spawn(async move { materializer.cleanup(&id).await })
    }))
    .await;
    assert_eq!(cleaned.len(), 16);
    assert_eq!(entries(root.path()), Vec::<String>::new());
    assert_eq!(repo.worktrees().await.len(), 1);
}
