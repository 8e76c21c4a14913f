//! `tool-loop`: a scripted turn of N `exec_command` calls through the runtime
//! (local workspace, JSONL store, every event persisted) against N direct
//! spawns of the same command (`sh -c true`). The difference per call is the
//! harness overhead.
//!
//! `confinement_overhead_ms`: the same turn with the default sandbox policy
//! (Landlock, network off: every command goes through a confined spawner
//! thread) minus the same turn with `mode = "none"` (environment filtered,
//! no confinement), per call, in the same run; its context gives the ratio
//! of that added cost to one unconfined raw spawn, and bubblewrap's cost per
//! call when `bwrap` is installed.

use std::time::{Duration, Instant};

use roder_api::events::RoderEvent;
use roder_api::sandbox_policy::{HostMechanism, SandboxMode, SandboxPolicy};
use roder_core::{RuntimeConfig, StartTurnRequest};
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;

use crate::coding_runtime;
use crate::figure::{median, print, sized};

fn calls() -> usize {
    sized(200, 3)
}

fn repeats() -> usize {
    sized(5, 1)
}

pub async fn run() -> anyhow::Result<()> {
    let confined_policy = SandboxPolicy::default();
    let unconfined_policy = SandboxPolicy {
        mode: SandboxMode::None,
        ..SandboxPolicy::default()
    };
    let bubblewrap_policy = SandboxPolicy {
        mechanism: HostMechanism::Bubblewrap,
        ..SandboxPolicy::default()
    };
    let with_bwrap = bwrap_installed();
    let mut raw = Vec::new();
    let mut harness = Vec::new();
    let mut unconfined = Vec::new();
    let mut bubblewrap = Vec::new();
    // Interleave them so drift on a shared machine hits all alike.
    for _ in 0..repeats() {
        raw.push(raw_spawns(calls()).await?.as_secs_f64());
        harness.push(
            through_runtime(calls(), &confined_policy)
                .await?
                .as_secs_f64(),
        );
        unconfined.push(
            through_runtime(calls(), &unconfined_policy)
                .await?
                .as_secs_f64(),
        );
        if with_bwrap {
            bubblewrap.push(
                through_runtime(calls(), &bubblewrap_policy)
                    .await?
                    .as_secs_f64(),
            );
        }
    }
    let per_call_ms = |seconds: f64| seconds * 1000.0 / calls() as f64;
    let raw = median(&mut raw);
    let harness = median(&mut harness);
    let unconfined = median(&mut unconfined);
    let context = json!({ "calls": calls(), "repeats": repeats(), "command": "sh -c true",
        "raw_ms_per_call": per_call_ms(raw),
        "runtime_ms_per_call": per_call_ms(harness) });
    print(
        "tool-loop",
        "overhead_per_call_ms",
        per_call_ms(harness - raw),
        "ms",
        context.clone(),
    );
    print(
        "tool-loop",
        "ratio_to_raw_spawn",
        harness / raw,
        "ratio",
        context,
    );
    let overhead = per_call_ms(harness - unconfined);
    let bubblewrap_ms = (!bubblewrap.is_empty()).then(|| per_call_ms(median(&mut bubblewrap)));
    print(
        "tool-loop",
        "confinement_overhead_ms",
        overhead,
        "ms",
        json!({ "calls": calls(), "repeats": repeats(), "command": "true",
            "confined": "landlock, network off (the default policy)",
            "confined_ms_per_call": per_call_ms(harness),
            "unconfined_ms_per_call": per_call_ms(unconfined),
            "raw_unconfined_spawn_ms": per_call_ms(raw),
            "ratio_to_unconfined_spawn": overhead / per_call_ms(raw),
            "bubblewrap_ms_per_call": bubblewrap_ms,
            "bubblewrap_overhead_ms": bubblewrap_ms.map(|ms| ms - per_call_ms(unconfined)) }),
    );
    print(
        "tool-loop",
        "confinement_ratio_to_unconfined_spawn",
        overhead / per_call_ms(raw),
        "ratio",
        json!({ "calls": calls(), "repeats": repeats(),
            "confinement_overhead_ms": overhead,
            "raw_unconfined_spawn_ms": per_call_ms(raw) }),
    );
    Ok(())
}

/// Whether `bwrap` is on PATH (the bubblewrap figure is left out if not).
fn bwrap_installed() -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file()))
}

async fn raw_spawns(calls: usize) -> anyhow::Result<Duration> {
    let dir = tempfile::tempdir()?;
    let started = Instant::now();
    for _ in 0..calls {
        let output = tokio::process::Command::new("sh")
            .args(["-c", "true"])
            .current_dir(dir.path())
            .output()
            .await?;
        anyhow::ensure!(output.status.success(), "sh -c true failed");
    }
    Ok(started.elapsed())
}

async fn through_runtime(calls: usize, sandbox: &SandboxPolicy) -> anyhow::Result<Duration> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    let mut rounds: Vec<ScriptedRound> = (0..calls)
        .map(|index| {
            let id = format!("call-{index}");
            tool_round(&[(id.as_str(), "exec_command", r#"{"cmd":"true"}"#)])
        })
        .collect();
    rounds.push(final_round("done"));
    let builder =
        coding_runtime::builder(ScriptedEngine::new(rounds), store.path(), workspace.path())?;
    let runtime = coding_runtime::runtime(
        builder,
        workspace.path(),
        RuntimeConfig {
            sandbox: sandbox.clone(),
            ..RuntimeConfig::default()
        },
    )?;
    let thread_id = runtime.create_thread(None).await?.thread_id;
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    runtime
        .start_turn(StartTurnRequest::new(&thread_id, "run true many times"))
        .await?;
    let mut errors = 0;
    loop {
        let envelope = events.recv().await?;
        match envelope.event {
            RoderEvent::ToolCallCompleted(call) if call.is_error => errors += 1,
            RoderEvent::TurnCompleted(_) => break,
            RoderEvent::TurnFailed(failed) => anyhow::bail!("turn failed: {}", failed.error),
            _ => {}
        }
    }
    let elapsed = started.elapsed();
    anyhow::ensure!(errors == 0, "{errors} exec_command calls failed");
    Ok(elapsed)
}
