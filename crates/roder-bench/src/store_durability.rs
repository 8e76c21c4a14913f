//! `store` (durability): what `[store] sync` and checkpoint collection cost.
//!
//! * `sync_turn_ratio`: a scripted turn of N `exec_command true` calls
//!   through the runtime on a JSONL store with `sync = "turn"` (the log
//!   forced to the disk before each call runs and at the turn's end)
//!   against the same turn with `sync = "none"`, per step, interleaved in
//!   the same run, median of the repeats.
//! * `gc_10k_checkpoints_s`: `Runtime::collect_checkpoints` of a thread
//!   whose log holds 10,000 git checkpoints (refs in a real repository),
//!   keeping none: reading the log, one `for-each-ref`, one `update-ref
//!   --stdin` transaction.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use roder_api::checkpoint::{WorkspaceCheckpoint, WorkspaceCheckpointed};
use roder_api::events::{EventEnvelope, RoderEvent};
use roder_api::thread::ThreadStore;
use roder_core::{RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::SyncMode;
use roder_ext_jsonl_thread_store::store::JsonlThreadStore;
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;
use time::OffsetDateTime;

use crate::coding_runtime;
use crate::figure::{median, print, sized};

fn steps() -> usize {
    sized(100, 3)
}

fn repeats() -> usize {
    sized(5, 1)
}

fn checkpoints() -> usize {
    sized(10_000, 20)
}

pub async fn run() -> anyhow::Result<()> {
    let mut none = Vec::new();
    let mut turn = Vec::new();
    for _ in 0..repeats() {
        none.push(turn_of_steps(SyncMode::None).await?.as_secs_f64());
        turn.push(turn_of_steps(SyncMode::Turn).await?.as_secs_f64());
    }
    let per_step_ms = |seconds: f64| seconds * 1000.0 / steps() as f64;
    let (none, turn) = (median(&mut none), median(&mut turn));
    print(
        "store",
        "sync_turn_ratio",
        turn / none,
        "ratio",
        json!({ "steps": steps(), "repeats": repeats(), "command": "true",
            "none_ms_per_step": per_step_ms(none),
            "turn_ms_per_step": per_step_ms(turn),
            "sync_ms_per_step": per_step_ms(turn - none) }),
    );
    let (seconds, removed) = collect_checkpoints().await?;
    print(
        "store",
        "gc_10k_checkpoints_s",
        seconds,
        "s",
        json!({ "checkpoints": checkpoints(), "removed": removed, "kind": "git refs" }),
    );
    Ok(())
}

/// One scripted turn of [`steps()`] tool calls on a store with `mode`.
async fn turn_of_steps(mode: SyncMode) -> anyhow::Result<Duration> {
    let workspace = tempfile::tempdir_in(env_tmp())?;
    let store = tempfile::tempdir_in(env_tmp())?;
    roder_ext_jsonl_thread_store::sync::set_mode(store.path(), mode);
    let mut rounds: Vec<ScriptedRound> = (0..steps())
        .map(|index| {
            let id = format!("call-{index}");
            tool_round(&[(id.as_str(), "exec_command", r#"{"cmd":"true"}"#)])
        })
        .collect();
    rounds.push(final_round("done"));
    let builder =
        coding_runtime::builder(ScriptedEngine::new(rounds), store.path(), workspace.path())?;
    let runtime = coding_runtime::runtime(builder, workspace.path(), RuntimeConfig::default())?;
    let thread_id = runtime.create_thread(None).await?.thread_id;
    let log = store.path().join(&thread_id).join("events.jsonl");
    let syncs_before = roder_ext_jsonl_thread_store::sync::syncs_of(&log);
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "run true many times"))
        .await?;
    loop {
        match events.recv().await?.event {
            RoderEvent::TurnCompleted(_) => break,
            RoderEvent::TurnFailed(failed) => anyhow::bail!("turn failed: {}", failed.error),
            _ => {}
        }
    }
    let elapsed = started.elapsed();
    let syncs = roder_ext_jsonl_thread_store::sync::syncs_of(&log) - syncs_before;
    match mode {
        SyncMode::Turn => anyhow::ensure!(
            syncs as usize > steps(),
            "sync = \"turn\" synced {syncs} times for {} tool calls",
            steps()
        ),
        _ => anyhow::ensure!(syncs == 0, "sync = \"none\" synced {syncs} times"),
    }
    Ok(elapsed)
}

/// Where the bench's directories go: `$TMPDIR`, which on this machine is
/// the same disk as the stores Roder uses by default.
fn env_tmp() -> std::path::PathBuf {
    std::env::temp_dir()
}

fn git(dir: &Path, args: &[&str], input: Option<&str>) -> anyhow::Result<String> {
    use std::io::Write as _;
    let mut child = std::process::Command::new("git")
        .args(["-c", "user.name=bench", "-c", "user.email=bench@localhost"])
        .args(args)
        .current_dir(dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
        stdin.write_all(text.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    anyhow::ensure!(output.status.success(), "git {args:?} failed");
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// A repository with [`checkpoints()`] checkpoint refs, a thread whose log
/// names them, and the time the runtime takes to collect them all.
async fn collect_checkpoints() -> anyhow::Result<(f64, usize)> {
    let dir = tempfile::tempdir_in(env_tmp())?;
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo)?;
    git(&repo, &["init", "-q", "-b", "main"], None)?;
    std::fs::write(repo.join("README.md"), "bench\n")?;
    git(&repo, &["add", "-A"], None)?;
    git(&repo, &["commit", "-q", "-m", "init"], None)?;
    let commit = git(&repo, &["rev-parse", "HEAD"], None)?;
    let thread_id = "gc-bench";
    let mut refs = String::new();
    for turn in 0..checkpoints() {
        refs.push_str(&format!(
            "create refs/roder/checkpoints/{thread_id}/turn-{turn} {commit}\n"
        ));
    }
    git(&repo, &["update-ref", "--stdin"], Some(&refs))?;

    let store_dir = dir.path().join("threads");
    let store = JsonlThreadStore::new(&store_dir);
    let now = OffsetDateTime::now_utc();
    let metadata: roder_api::thread::ThreadMetadata = serde_json::from_value(json!({
        "thread_id": thread_id,
        "workspace": repo.display().to_string(),
        "created_at": now.format(&time::format_description::well_known::Rfc3339)?,
        "updated_at": now.format(&time::format_description::well_known::Rfc3339)?,
    }))?;
    store.create_thread(metadata).await?;
    let events: Vec<EventEnvelope> = (0..checkpoints())
        .map(|turn| EventEnvelope {
            seq: turn as u64 + 1,
            timestamp: now,
            thread_id: thread_id.to_string(),
            turn_id: Some(format!("turn-{turn}")),
            event: RoderEvent::WorkspaceCheckpointed(WorkspaceCheckpointed {
                thread_id: thread_id.to_string(),
                turn_id: format!("turn-{turn}"),
                checkpoint: WorkspaceCheckpoint {
                    checkpointer: roder_ext_runner_git_worktree::CHECKPOINTER_ID.to_string(),
                    id: commit.clone(),
                    reference: Some(format!("refs/roder/checkpoints/{thread_id}/turn-{turn}")),
                    metadata: json!({ "head": commit, "index": null, "checkout": repo }),
                },
            }),
        })
        .collect();
    store.append_events(thread_id, &events).await?;

    let mut builder = coding_runtime::builder(
        ScriptedEngine::new(vec![final_round("unused")]),
        &store_dir,
        &repo,
    )?;
    builder.workspace_checkpointer(Arc::new(
        roder_ext_runner_git_worktree::GitCheckpointer::new(dir.path().join("worktrees")),
    ));
    let runtime = coding_runtime::runtime(builder, &repo, RuntimeConfig::default())?;
    let started = Instant::now();
    let removed = runtime.collect_checkpoints(thread_id, 0, false).await?;
    let seconds = started.elapsed().as_secs_f64();
    let left = git(
        &repo,
        &[
            "for-each-ref",
            "--format=%(refname)",
            "refs/roder/checkpoints/",
        ],
        None,
    )?;
    anyhow::ensure!(
        removed.len() == checkpoints() && left.is_empty(),
        "removed {} of {} refs; left: {} lines",
        removed.len(),
        checkpoints(),
        left.lines().count()
    );
    Ok((seconds, removed.len()))
}
