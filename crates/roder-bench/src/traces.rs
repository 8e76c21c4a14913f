//! `traces`: what tracing costs a step of the `exec-loop` scenario (the
//! `roder` binary, a fake model scripting N `exec_command true` calls,
//! minus the same with none, per call).
//!
//! * `overhead_ratio`: with every span exported over OTLP/HTTP to a
//!   receiver in this process, against export off, same run.
//! * `off_ratio`: with a `[telemetry]` table that exports nothing (no
//!   endpoint), against no `[telemetry]` table at all, same run.
//!
//! The cost is CPU time (the `roder` process and its commands, the export
//! thread included): on a shared 2-core machine wall time of identical runs
//! varies more than the effect measured. Wall times are in the context.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::routing::post;
use roder_testkit::fake_models::FakeModelServer;
use serde_json::json;

use crate::exec_loop::{Sample, exec};
use crate::figure::{median, print, sized};

fn steps() -> usize {
    sized(50, 2)
}

fn repeats() -> usize {
    sized(7, 1)
}

pub async fn run() -> anyhow::Result<()> {
    let roder = crate::roder_process::binary()?;
    let server = FakeModelServer::start().await?;
    let exports = Arc::new(AtomicU64::new(0));
    let counted = exports.clone();
    let receiver = axum::Router::new().route(
        "/v1/traces",
        post(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::Relaxed);
                Vec::<u8>::new()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let receiving = tokio::spawn(async move { axum::serve(listener, receiver).await });

    let config = format!(
        "model = \"fake/bench\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
        server.openai_base_url()
    );
    let plain = home(&config)?;
    let off = home(&format!("{config}\n[telemetry]\ncapture_content = false\n"))?;
    let exported = home(&format!(
        "{config}\n[telemetry]\notlp_endpoint = \"{endpoint}\"\n"
    ))?;
    let workspace = tempfile::tempdir()?;
    let per_step = |samples: &[(Sample, Sample)], pick: fn(&Sample) -> f64| {
        let mut empty: Vec<f64> = samples.iter().map(|(empty, _)| pick(empty)).collect();
        let mut full: Vec<f64> = samples.iter().map(|(_, full)| pick(full)).collect();
        (median(&mut full) - median(&mut empty)) / steps() as f64
    };
    let (mut plain_ms, mut off_ms, mut exported_ms) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so drift on a shared machine hits all three alike.
    for _ in 0..repeats() {
        for (home, samples) in [
            (&plain, &mut plain_ms),
            (&off, &mut off_ms),
            (&exported, &mut exported_ms),
        ] {
            let empty = exec(&roder, &server, home.path(), workspace.path(), 0).await?;
            let full = exec(&roder, &server, home.path(), workspace.path(), steps()).await?;
            samples.push((empty, full));
        }
    }
    receiving.abort();
    let exports = exports.load(Ordering::Relaxed);
    anyhow::ensure!(exports > 0, "no span reached the receiver");
    let cpu = |cost: &Sample| cost.cpu_ms;
    let wall = |cost: &Sample| cost.wall_ms;
    let (plain, off, exported) = (
        per_step(&plain_ms, cpu),
        per_step(&off_ms, cpu),
        per_step(&exported_ms, cpu),
    );
    let context = json!({"steps": steps(), "repeats": repeats(), "command": "true",
        "plain_cpu_ms_per_step": plain, "off_cpu_ms_per_step": off,
        "exported_cpu_ms_per_step": exported,
        "plain_wall_ms_per_step": per_step(&plain_ms, wall),
        "off_wall_ms_per_step": per_step(&off_ms, wall),
        "exported_wall_ms_per_step": per_step(&exported_ms, wall),
        "exports_received": exports, "transport": "OTLP/HTTP protobuf, 127.0.0.1"});
    print(
        "traces",
        "overhead_ratio",
        exported / plain,
        "ratio",
        context.clone(),
    );
    print("traces", "off_ratio", off / plain, "ratio", context);
    Ok(())
}

fn home(config: &str) -> anyhow::Result<tempfile::TempDir> {
    let home = tempfile::tempdir()?;
    std::fs::write(home.path().join("config.toml"), config)?;
    Ok(home)
}
