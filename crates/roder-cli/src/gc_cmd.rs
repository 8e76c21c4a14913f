//! `roder gc`: remove what this home left behind that no live thread
//! needs: checkpoints past `[checkpoints] keep_turns` (git refs, directory
//! copies, docker images, through their checkpointers), directory copies of
//! deleted threads, and this home's docker containers whose thread is gone
//! (`roder runners gc`'s rule), git worktrees under this home's
//! `worktrees/` that no live thread is bound to (a deleted thread's, kept
//! by `threads delete` for its patch), and cached profile archives that no
//! live thread's profile names. `--dry-run` lists the same and removes
//! nothing. Never anything of another home: checkpoints are found from this
//! home's own thread logs, copies, worktrees and archives under its own
//! directories, containers by its home label.

use std::collections::HashSet;
use std::process::ExitCode;

use roder_api::checkpoint::RemovedCheckpoint;
use roder_api::thread::ThreadStore;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;
use roder_ext_runner_docker::{DockerRunnerProvider, GcOptions};
use roder_ext_runner_unix_local::DirectoryCheckpointer;

use crate::cli::CollectArgs;
use crate::config::Settings;
use crate::wiring;

pub async fn run(settings: &Settings, args: &CollectArgs) -> anyhow::Result<ExitCode> {
    crate::config::store::require_jsonl(settings, "roder gc")?;
    let keep = args.keep_turns.unwrap_or(settings.checkpoint_keep_turns);
    let verb = if args.dry_run {
        "would remove"
    } else {
        "removed"
    };
    let store = JsonlThreadStore {
        base_path: settings.threads_dir(),
    };
    let threads = store.list_threads().await?;
    let live: HashSet<String> = threads.iter().map(|t| t.thread_id.clone()).collect();

    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let mut removed: Vec<(Option<String>, RemovedCheckpoint)> = Vec::new();
    let mut failures = 0_usize;
    for thread in &threads {
        match wired
            .runtime
            .collect_checkpoints(&thread.thread_id, keep, args.dry_run)
            .await
        {
            Ok(done) => removed.extend(
                done.into_iter()
                    .map(|r| (Some(thread.thread_id.clone()), r)),
            ),
            Err(error) => {
                failures += 1;
                eprintln!(
                    "roder: checkpoints of thread {} kept: {error:#}",
                    thread.thread_id
                );
            }
        }
    }
    wired.shutdown().await;
    let copies = DirectoryCheckpointer::new(settings.home.join("checkpoints"));
    match copies.remove_orphans(&live, args.dry_run).await {
        Ok(done) => removed.extend(done.into_iter().map(|r| (None, r))),
        Err(error) => {
            failures += 1;
            eprintln!("roder: copies of deleted threads kept: {error:#}");
        }
    }
    for (thread, entry) in &removed {
        crate::outln!(
            "{verb} checkpoint {} {} thread={} bytes={}",
            entry.checkpointer,
            entry.id,
            thread.as_deref().unwrap_or("(deleted)"),
            entry
                .bytes
                .map_or("unknown".to_string(), |bytes| bytes.to_string())
        )?;
    }
    let containers = containers(settings, &live, args.dry_run).await;
    let (worktrees, worktree_bytes) = match worktrees(settings, &live, args.dry_run).await {
        Ok(done) => done,
        Err(error) => {
            failures += 1;
            eprintln!("roder: worktrees kept: {error:#}");
            (0, 0)
        }
    };
    let (archives, archive_bytes) = match archives(settings, &threads, args.dry_run).await {
        Ok(done) => done,
        Err(error) => {
            failures += 1;
            eprintln!("roder: cached profile archives kept: {error:#}");
            (0, 0)
        }
    };
    let bytes: u64 = removed.iter().filter_map(|(_, entry)| entry.bytes).sum();
    eprintln!(
        "roder: {verb} {} checkpoint(s) ({bytes} bytes, plus git objects that git's own gc frees), {} container(s), {worktrees} worktree(s) ({worktree_bytes} bytes) and {archives} cached profile archive(s) ({archive_bytes} bytes); kept each thread's last {keep} turn(s); home {} has {} thread(s)",
        removed.len(),
        containers,
        settings.home_id,
        live.len()
    );
    Ok(if failures == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// This home's containers whose thread is gone: removed (or listed).
/// Without a reachable Docker daemon there are none to remove: said once.
async fn containers(settings: &Settings, live: &HashSet<String>, dry_run: bool) -> usize {
    let provider = match DockerRunnerProvider::default().with_home_id(&settings.home_id) {
        Ok(provider) => provider,
        Err(error) => {
            eprintln!("roder: containers not checked: {error:#}");
            return 0;
        }
    };
    if dry_run {
        return match provider.sandboxes().await {
            Ok(sandboxes) => {
                let gone: Vec<_> = sandboxes
                    .iter()
                    .filter(|sandbox| sandbox.thread.as_ref().is_some_and(|t| !live.contains(t)))
                    .collect();
                for sandbox in &gone {
                    let _ = crate::outln!(
                        "would remove container {} {} thread={}",
                        sandbox.id,
                        sandbox.name,
                        sandbox.thread.as_deref().unwrap_or("-")
                    );
                }
                gone.len()
            }
            Err(error) => {
                eprintln!("roder: containers not checked (is Docker running?): {error:#}");
                0
            }
        };
    }
    match provider
        .gc(
            live,
            GcOptions {
                include_unlabelled: false,
            },
        )
        .await
    {
        Ok(report) => {
            for entry in &report.removed {
                let _ = crate::outln!(
                    "removed container {} {} thread={}",
                    entry.id,
                    entry.name,
                    entry.thread.as_deref().unwrap_or("-")
                );
            }
            report.removed.len()
        }
        Err(error) => {
            eprintln!("roder: containers not checked (is Docker running?): {error:#}");
            0
        }
    }
}

/// This home's worktrees that no live thread is bound to: removed (their
/// checkout, git's entry for it, their record) or listed. Returns how many
/// and their bytes.
async fn worktrees(
    settings: &Settings,
    live: &HashSet<String>,
    dry_run: bool,
) -> anyhow::Result<(usize, u64)> {
    use roder_api::workdir::WorkdirMaterializer;
    let materializer =
        roder_ext_runner_git_worktree::GitWorktreeMaterializer::new(settings.worktrees_dir());
    let verb = if dry_run { "would remove" } else { "removed" };
    let (mut count, mut total) = (0, 0);
    for info in materializer.list().await? {
        if info
            .primary_thread_id
            .as_ref()
            .is_some_and(|thread| live.contains(thread))
        {
            continue;
        }
        let checkout = info.checkout.clone();
        let bytes =
            tokio::task::spawn_blocking(move || roder_ext_runner_unix_local::tree_bytes(&checkout))
                .await?;
        if !dry_run {
            if let Some(thread) = &info.primary_thread_id {
                materializer.unbind(&info.id, thread).await?;
            }
            materializer.cleanup(&info.id).await?;
        }
        crate::outln!(
            "{verb} worktree {} {} thread={} bytes={bytes}",
            info.id,
            info.checkout.display(),
            info.primary_thread_id.as_deref().unwrap_or("(none)")
        )?;
        count += 1;
        total += bytes;
    }
    Ok((count, total))
}

/// Cached profile archives that no live thread's profile names: removed or
/// listed. Returns how many and their bytes.
async fn archives(
    settings: &Settings,
    threads: &[roder_api::thread::ThreadMetadata],
    dry_run: bool,
) -> anyhow::Result<(usize, u64)> {
    let keep: HashSet<String> = threads
        .iter()
        .filter_map(|thread| match &thread.profile.as_ref()?.source {
            roder_api::profile::ProfileSource::Archive { digest, .. } => Some(digest.clone()),
            _ => None,
        })
        .collect();
    let resolver = crate::profiles_cmd::resolver(settings, None);
    let Some(cache) = resolver.cache().cloned() else {
        return Ok((0, 0));
    };
    let collected = tokio::task::spawn_blocking(move || cache.collect(&keep, dry_run)).await??;
    let verb = if dry_run { "would remove" } else { "removed" };
    for entry in &collected {
        crate::outln!(
            "{verb} profile archive {} bytes={}",
            entry.digest,
            entry.bytes
        )?;
    }
    Ok((
        collected.len(),
        collected.iter().map(|entry| entry.bytes).sum(),
    ))
}
