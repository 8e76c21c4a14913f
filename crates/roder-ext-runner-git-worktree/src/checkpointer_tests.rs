//! The git checkpointer against real repositories and worktrees: a fork
//! holds the source's uncommitted state and leaves the source alone; a
//! local directory outside git has no checkpoints; a foreign checkpoint is
//! refused.

use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, WorkspaceCheckpointer,
};
use roder_api::remote_runner::{RunnerDestination, RunnerManifest, ThreadRunnerBinding};
use roder_api::workdir::{WorkdirMaterializer, WorkdirStatus};
use serde_json::json;

use crate::snapshot::listed_files;
use crate::test_support::{TestRepo, git, materialize, materializer};
use crate::{GitCheckpointer, PROVIDER_ID};

fn bound(worktree_id: &str, workspace: &std::path::Path) -> CheckpointWorkspace {
    CheckpointWorkspace::Runner {
        binding: Box::new(ThreadRunnerBinding {
            destination: RunnerDestination {
                id: "thread-t".into(),
                provider_id: PROVIDER_ID.into(),
                config: json!({ "worktree_id": worktree_id, "workspace": workspace }),
                default_manifest: RunnerManifest::default(),
            },
            workspace: workspace.to_path_buf(),
            read_roots: vec![],
        }),
        state: None,
    }
}

#[tokio::test]
async fn a_fork_of_a_worktree_starts_from_its_uncommitted_state_and_the_source_stays() {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let source = materialize(&materializer, &repo, "wt-source").await;
    let checkout = source.info.checkout.clone();
    std::fs::write(checkout.join("new.txt"), "untracked\n").unwrap();
    std::fs::write(checkout.join("README.md"), "edited\n").unwrap();
    let checkpointer = GitCheckpointer::new(root.path().to_path_buf());
    let workspace = bound("wt-source", &checkout);
    assert!(checkpointer.handles(&workspace));
    let checkpoint = checkpointer
        .checkpoint(CheckpointRequest {
            thread_id: "t",
            turn_id: "u1",
            workspace: &workspace,
        })
        .await
        .unwrap()
        .unwrap();
    // Work after the checkpoint stays in the source only.
    std::fs::write(checkout.join("later.txt"), "later\n").unwrap();

    let forked = checkpointer.fork(&workspace, &checkpoint).await.unwrap();
    let ForkedWorkspace::Runner {
        provider_id,
        config,
        workspace: fork_dir,
        ..
    } = &forked
    else {
        panic!("a worktree forks into a worktree: {forked:?}");
    };
    assert_eq!(provider_id, PROVIDER_ID);
    assert_ne!(fork_dir, &checkout);
    assert_eq!(
        std::fs::read_to_string(fork_dir.join("new.txt")).unwrap(),
        "untracked\n"
    );
    assert_eq!(
        std::fs::read_to_string(fork_dir.join("README.md")).unwrap(),
        "edited\n"
    );
    assert!(!fork_dir.join("later.txt").exists());
    // Untracked in the source is untracked in the fork: same HEAD, same index.
    let status = git(fork_dir, &["status", "--porcelain"]).await;
    assert_eq!(status, " M README.md\n?? new.txt\n");
    assert!(listed_files(&checkout).await.contains("later.txt"));

    let id = config["worktree_id"].as_str().unwrap().to_string();
    checkpointer.adopt(&forked, "fork-thread").await.unwrap();
    let info = materializer.get(&id).await.unwrap();
    assert_eq!(info.primary_thread_id.as_deref(), Some("fork-thread"));
    checkpointer.discard(&forked).await.unwrap();
    assert_eq!(
        materializer.get(&id).await.unwrap().status,
        WorkdirStatus::NotFound
    );
    assert!(!fork_dir.exists());
}

#[tokio::test]
async fn a_local_directory_outside_git_has_no_checkpoints_and_says_why_it_cannot_roll_back() {
    let plain = tempfile::tempdir().unwrap();
    let (root, _materializer) = materializer();
    let checkpointer = GitCheckpointer::new(root.path().to_path_buf());
    let workspace = CheckpointWorkspace::Local {
        path: plain.path().to_path_buf(),
    };
    assert!(checkpointer.handles(&workspace));
    let taken = checkpointer
        .checkpoint(CheckpointRequest {
            thread_id: "t",
            turn_id: "u",
            workspace: &workspace,
        })
        .await
        .unwrap();
    assert_eq!(taken, None);

    let repo = TestRepo::new().await;
    let local = CheckpointWorkspace::Local { path: repo.path() };
    let mut checkpoint = checkpointer
        .checkpoint(CheckpointRequest {
            thread_id: "t",
            turn_id: "u",
            workspace: &local,
        })
        .await
        .unwrap()
        .unwrap();
    let error = checkpointer
        .restore(&workspace, &checkpoint)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("not supported") && error.contains("not inside a git"),
        "{error}"
    );
    checkpoint.checkpointer = "docker".into();
    let error = checkpointer
        .restore(&local, &checkpoint)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("\"docker\" checkpointer"), "{error}");
}
