//! `provision`, figures `fork_worktree_p50_ms` and `rollback_worktree_p50_ms`:
//! what forking a git-worktree thread's workspace from a checkpoint and
//! rolling one back cost, on a repository of 1,000 small files
//! (`provision_worktree.rs` builds it).
//!
//! Both are measured at the checkpointer (`GitCheckpointer::fork` and
//! `restore`), which is the workspace part of `Runtime::fork_thread` and
//! `rollback_thread`; the runtime adds a thread's creation or one event.
//! The fork's baseline, in the same run, is a bare `git worktree add
//! --detach` of the same commit: a fork also records the worktree, puts the
//! checkpoint's uncommitted files and index into it and resolves its
//! working directory.
//!
//! The workspace forked carries uncommitted work (10 edited files, 10 new
//! ones, 10 deleted), so the fork must restore more than the commit; a
//! rollback undoes a turn that edited, created and deleted 10 files each.
//!
//! The docker figures (`fork_docker_p50_ms`, `rollback_docker_p50_ms`)
//! follow, from `provision_docker_fork.rs`.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use roder_api::checkpoint::{
    CheckpointRequest, CheckpointWorkspace, ForkedWorkspace, WorkspaceCheckpointer,
};
use roder_api::remote_runner::{RunnerDestination, RunnerManifest, ThreadRunnerBinding};
use roder_api::workdir::{WorkdirMaterializer, WorkdirRequest};
use roder_ext_runner_git_worktree::{GitCheckpointer, GitWorktreeMaterializer, PROVIDER_ID};
use serde_json::json;

use crate::figure::{median, print, sized};
use crate::provision_worktree::{build_repository, git};

fn samples() -> usize {
    sized(15, 2)
}

/// Files each kind of change touches.
const CHANGED: usize = 10;

pub async fn run() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let repository = scratch.path().join("repo");
    build_repository(&repository).await?;
    let root = scratch.path().join("worktrees");
    let materializer = GitWorktreeMaterializer::new(root.clone());
    let checkpointer = GitCheckpointer::new(root);
    let source = materializer
        .materialize(WorkdirRequest {
            repository: repository.clone(),
            selector: None,
            id: Some("source".into()),
        })
        .await
        .context("materializing the source worktree")?;
    let checkout = source.info.checkout.clone();
    let workspace = bound(&checkout);
    change_files(&checkout, "uncommitted", 500).await?;
    let checkpoint = checkpointer
        .checkpoint(CheckpointRequest {
            thread_id: "bench",
            turn_id: "turn-1",
            workspace: &workspace,
        })
        .await?
        .context("the worktree has no checkpoint")?;
    let head = source.info.base_commit.clone();

    // Warm git and the page cache, unmeasured.
    git(
        &repository,
        &["worktree", "add", "--detach", "--quiet"],
        Some(&scratch.path().join("warm")),
    )
    .await?;
    let mut raw = Vec::with_capacity(samples());
    for n in 0..samples() {
        let target = scratch.path().join(format!("raw-{n}"));
        let started = Instant::now();
        let mut command = tokio::process::Command::new("git");
        command
            .arg("-C")
            .arg(&repository)
            .args(["worktree", "add", "--detach", "--quiet"])
            .arg(&target)
            .arg(&head);
        let output = command.output().await?;
        anyhow::ensure!(
            output.status.success(),
            "git worktree add: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        raw.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let mut forks = Vec::with_capacity(samples());
    let mut made = Vec::with_capacity(samples());
    for _ in 0..samples() {
        let started = Instant::now();
        let forked = checkpointer.fork(&workspace, &checkpoint).await?;
        forks.push(started.elapsed().as_secs_f64() * 1000.0);
        made.push(forked);
    }
    check_fork(&made[0]).await?;
    for forked in &made {
        checkpointer.discard(forked).await?;
    }

    let mut rollbacks = Vec::with_capacity(samples());
    for n in 0..samples() {
        change_files(&checkout, &format!("turn {n}"), 700).await?;
        let started = Instant::now();
        checkpointer.restore(&workspace, &checkpoint).await?;
        rollbacks.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let restored = tokio::fs::read_to_string(checkout.join("dir-00/file-0000.txt")).await?;
    anyhow::ensure!(
        restored == "uncommitted\n",
        "the rollback did not restore the files"
    );

    let raw_p50 = median(&mut raw);
    let fork_p50 = median(&mut forks);
    print(
        "provision",
        "fork_worktree_p50_ms",
        fork_p50,
        "ms",
        json!({
            "files": 1000,
            "samples": samples(),
            "uncommitted_changes": CHANGED * 3,
            "raw_git_worktree_add_p50_ms": raw_p50,
            "ratio_to_raw_git": if raw_p50 > 0.0 { fork_p50 / raw_p50 } else { 0.0 },
        }),
    );
    let rollback_p50 = median(&mut rollbacks);
    print(
        "provision",
        "rollback_worktree_p50_ms",
        rollback_p50,
        "ms",
        json!({
            "files": 1000,
            "samples": samples(),
            "changes_undone": CHANGED * 3,
            "max_ms": rollbacks.last().copied().unwrap_or_default(),
        }),
    );
    crate::provision_docker_fork::run()
        .await
        .context("docker fork and rollback")
}

fn bound(checkout: &Path) -> CheckpointWorkspace {
    CheckpointWorkspace::Runner {
        binding: Box::new(ThreadRunnerBinding {
            destination: RunnerDestination {
                id: "thread-bench".into(),
                provider_id: PROVIDER_ID.into(),
                config: json!({ "worktree_id": "source" }),
                default_manifest: RunnerManifest::default(),
            },
            workspace: checkout.to_path_buf(),
            read_roots: vec![],
        }),
        state: None,
    }
}

/// Edits `CHANGED` files, creates as many and deletes as many, starting at
/// file `deleted_from` (a restore brings the deleted ones back, so every
/// round finds them again).
async fn change_files(checkout: &Path, text: &str, deleted_from: usize) -> anyhow::Result<()> {
    for n in 0..CHANGED {
        let edited = checkout.join(format!("dir-{:02}/file-{n:04}.txt", n % 20));
        tokio::fs::write(&edited, format!("{text}\n")).await?;
        let created = checkout.join(format!("new/{text}-{n}.txt").replace(' ', "-"));
        tokio::fs::create_dir_all(created.parent().unwrap_or(checkout)).await?;
        tokio::fs::write(&created, "new\n").await?;
        let file = deleted_from + n;
        let deleted = checkout.join(format!("dir-{:02}/file-{file:04}.txt", file % 20));
        tokio::fs::remove_file(&deleted).await?;
    }
    Ok(())
}

async fn check_fork(forked: &ForkedWorkspace) -> anyhow::Result<()> {
    let ForkedWorkspace::Runner { workspace, .. } = forked else {
        anyhow::bail!("a worktree forks into a worktree");
    };
    let text = tokio::fs::read_to_string(workspace.join("dir-00/file-0000.txt")).await?;
    anyhow::ensure!(
        text == "uncommitted\n",
        "the fork lacks the uncommitted work"
    );
    Ok(())
}
