//! `threads`: N threads each running a scripted turn concurrently (a fake
//! engine that asks for one `write_file` and then answers; local workspace
//! per thread; JSONL store). Reports wall time for 100 and 1,000 threads and
//! the memory each thread costs.

use std::sync::Arc;
use std::time::Instant;

use roder_api::events::RoderEvent;
use roder_api::extension::ExtensionRegistryBuilder;
use roder_core::{Runtime, RuntimeConfig, StartTurnRequest};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::ToolLoopEngine;
use serde_json::json;

use crate::figure::{print, sized};

/// A field of /proc/self/status in KiB.
fn status_kib(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|value| value.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no {field} in /proc/self/status"))
}

pub async fn run() -> anyhow::Result<()> {
    let (small, large) = sized((100usize, 1_000), (10, 20));
    for count in [small, large] {
        // Each size in a fresh process, so its peak RSS is its own.
        let output = tokio::process::Command::new(std::env::current_exe()?)
            .args([CHILD_ARG, &count.to_string()])
            .output()
            .await?;
        anyhow::ensure!(
            output.status.success(),
            "the {count}-thread run failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let measured: serde_json::Value = serde_json::from_slice(&output.stdout)?;
        let number = |key: &str| measured[key].as_f64().unwrap_or(f64::NAN);
        print(
            "threads",
            &format!("wall_s_{count}"),
            number("wall_s"),
            "s",
            json!({ "threads": count }),
        );
        if count == large {
            let (baseline, peak) = (number("baseline_kib"), number("peak_kib"));
            print(
                "threads",
                &format!("rss_per_thread_mib_{count}"),
                (peak - baseline) / 1024.0 / count as f64,
                "MiB",
                json!({ "threads": count, "baseline_rss_mib": baseline / 1024.0,
                        "peak_rss_mib": peak / 1024.0 }),
            );
        }
    }
    Ok(())
}

/// The hidden argument that runs one measurement in a child process.
pub const CHILD_ARG: &str = "__threads-child";

/// The child: runs `count` threads and prints its measurements as JSON.
pub async fn child(count: &str) -> anyhow::Result<()> {
    let count: usize = count.parse()?;
    let baseline_kib = status_kib("VmRSS:")?;
    let wall_s = run_threads(count).await?;
    let peak_kib = status_kib("VmHWM:")?;
    println!(
        "{}",
        json!({ "wall_s": wall_s, "baseline_kib": baseline_kib, "peak_kib": peak_kib })
    );
    Ok(())
}

/// Runs `count` one-turn threads at once; returns the wall time in seconds.
async fn run_threads(count: usize) -> anyhow::Result<f64> {
    let root = tempfile::tempdir()?;
    let store = root.path().join("store");
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(Arc::new(ToolLoopEngine::new(
        "write_file",
        r#"{"path":"out.txt","content":"written by a benchmark thread\n"}"#,
        1,
        "done",
    )));
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory { base_path: store }));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(root.path())?);
    let runtime = Arc::new(Runtime::new(builder.build()?, RuntimeConfig::default())?);
    let mut threads = Vec::with_capacity(count);
    for index in 0..count {
        let workspace = root.path().join(format!("ws-{index}"));
        tokio::fs::create_dir(&workspace).await?;
        let thread = runtime
            .create_thread(Some(workspace.display().to_string()))
            .await?;
        threads.push(thread.thread_id);
    }
    let mut events = runtime.subscribe_events();
    let started = Instant::now();
    for thread_id in &threads {
        runtime
            .start_turn(StartTurnRequest::new(thread_id, "write your file"))
            .await?;
    }
    let mut finished = std::collections::HashSet::new();
    while finished.len() < count {
        match events.recv().await {
            Ok(envelope) => match envelope.event {
                RoderEvent::TurnCompleted(done) => {
                    finished.insert(done.thread_id);
                }
                RoderEvent::TurnFailed(failed) => {
                    anyhow::bail!("a turn failed: {}", failed.error)
                }
                _ => {}
            },
            // Fell behind the bus (it buffers a bounded number of events):
            // ask the runtime which turns are over instead.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                for thread_id in &threads {
                    if !finished.contains(thread_id)
                        && runtime.running_turn(thread_id).await?.is_none()
                    {
                        finished.insert(thread_id.clone());
                    }
                }
            }
            Err(error) => return Err(error.into()),
        }
    }
    let wall = started.elapsed().as_secs_f64();
    for index in 0..count {
        let written = root.path().join(format!("ws-{index}")).join("out.txt");
        anyhow::ensure!(
            tokio::fs::try_exists(&written).await?,
            "{} missing",
            written.display()
        );
    }
    Ok(wall)
}
