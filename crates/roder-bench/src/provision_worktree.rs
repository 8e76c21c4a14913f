//! `provision`, figure `worktree_p50_ms`: how long materializing a git
//! worktree takes for a repository of 1,000 small files, i.e. what a thread
//! waits before its agent can work in its own checkout.
//!
//! The baseline, measured in the same run on the same repository, is a bare
//! `git worktree add --detach`: the difference is this crate's own work
//! (validation, the clean check, the record, the status probe).

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use roder_api::workdir::{WorkdirMaterializer, WorkdirRequest};
use roder_ext_runner_git_worktree::GitWorktreeMaterializer;
use serde_json::json;

use crate::figure::{median, print, sized};

/// Files in the repository (the checkpoint bench deletes files 500..720
/// of it, so smoke mode keeps them all).
const FILES: usize = 1_000;

fn sample_count() -> usize {
    sized(15, 2)
}

pub async fn worktree() -> anyhow::Result<()> {
    let scratch = tempfile::tempdir()?;
    let repository = scratch.path().join("repo");
    build_repository(&repository).await?;

    // Warm the page cache and git's first run, unmeasured.
    git(
        &repository,
        &["worktree", "add", "--detach", "--quiet"],
        Some(&scratch.path().join("warm")),
    )
    .await?;

    let mut raw = Vec::with_capacity(sample_count());
    for n in 0..sample_count() {
        let target = scratch.path().join(format!("raw-{n}"));
        let started = Instant::now();
        git(
            &repository,
            &["worktree", "add", "--detach", "--quiet"],
            Some(&target),
        )
        .await?;
        raw.push(started.elapsed().as_secs_f64() * 1000.0);
    }

    // The materialized ones stay alive together, as parallel agents' would.
    let materializer = GitWorktreeMaterializer::new(scratch.path().join("worktrees"));
    let mut samples = Vec::with_capacity(sample_count());
    for n in 0..sample_count() {
        let started = Instant::now();
        materializer
            .materialize(WorkdirRequest {
                repository: repository.clone(),
                selector: None,
                id: Some(format!("bench-{n}")),
            })
            .await
            .context("materializing a worktree")?;
        samples.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    for n in 0..sample_count() {
        materializer.cleanup(&format!("bench-{n}")).await?;
    }

    let raw_p50 = median(&mut raw);
    let p50 = median(&mut samples);
    print(
        "provision",
        "worktree_p50_ms",
        p50,
        "ms",
        json!({
            "files": FILES,
            "samples": sample_count(),
            // `median` sorted the samples, so the last is the slowest.
            "max_ms": samples.last().copied().unwrap_or_default(),
            "raw_git_worktree_add_p50_ms": raw_p50,
            "ratio_to_raw_git": if raw_p50 > 0.0 { p50 / raw_p50 } else { 0.0 },
        }),
    );
    Ok(())
}

/// A repository of `FILES` small files in 20 directories, one commit.
pub(crate) async fn build_repository(repository: &Path) -> anyhow::Result<()> {
    for n in 0..FILES {
        let dir = repository.join(format!("dir-{:02}", n % 20));
        tokio::fs::create_dir_all(&dir).await?;
        tokio::fs::write(
            dir.join(format!("file-{n:04}.txt")),
            format!("file {n}\nsome small content\n"),
        )
        .await?;
    }
    git(repository, &["init", "-q"], None).await?;
    git(repository, &["add", "-A"], None).await?;
    git(repository, &["commit", "-q", "-m", "bench"], None).await?;
    Ok(())
}

pub(crate) async fn git(dir: &Path, args: &[&str], path: Option<&Path>) -> anyhow::Result<()> {
    let mut command = tokio::process::Command::new("git");
    command
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=Roder Bench",
            "-c",
            "user.email=bench@example.invalid",
        ])
        .args(["-c", "commit.gpgsign=false"])
        .args(args);
    if let Some(path) = path {
        command.arg(path);
    }
    let output = command.env_remove("GIT_DIR").output().await?;
    anyhow::ensure!(
        output.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}
