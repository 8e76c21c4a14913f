//! `cargo run --release -p roder-bench -- <name>`: prints one JSON object per
//! figure (`{"bench", "figure", "value", "unit", ...context}`).
//!
//! Machine-dependent figures are reported next to a baseline measured in the
//! same run, because these machines are shared and noisy.
//!
//! `--list` prints the benches' names. `--smoke` runs each named bench (or all) at a tiny size: the figures
//! mean nothing, but a bench that no longer runs fails. CI does this
//! (`tests/smoke.rs`).
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod acp;
mod app_server;
mod approvals;
mod big_message;
mod browser;
mod coding_runtime;
mod exec_loop;
mod figure;
mod long_session;
mod mcp;
mod profiles;
mod provision;
mod provision_checkpoint;
mod provision_docker_exec;
mod provision_docker_fork;
mod provision_worktree;
mod replicas;
mod roder_process;
mod store;
mod store_durability;
mod threads;
mod tool_loop;
mod traces;
mod web;

use anyhow::Context;

const BENCHES: &[&str] = &[
    "tool-loop",
    "store",
    "threads",
    "provision",
    "app-server",
    "exec-loop",
    "big-message",
    "long-session",
    "mcp",
    "replicas",
    "approvals",
    "traces",
    "web",
    "profiles",
    "acp",
];

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(threads::CHILD_ARG) {
        let count = args.get(1).map(String::as_str).unwrap_or("1000");
        return threads::child(count).await;
    }
    if args.first().map(String::as_str) == Some("--list") {
        println!("{}", BENCHES.join("\n"));
        return Ok(());
    }
    if args.first().map(String::as_str) != Some(threads::CHILD_ARG)
        && let Some(at) = args.iter().position(|arg| arg == "--smoke")
    {
        args.remove(at);
        figure::set_smoke();
    }
    let names: Vec<&str> = if args.is_empty() || args.iter().any(|arg| arg == "all") {
        BENCHES.to_vec()
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in names {
        match name {
            "tool-loop" => tool_loop::run().await.context("tool-loop")?,
            "store" => store::run().await.context("store")?,
            "threads" => threads::run().await.context("threads")?,
            "exec-loop" => exec_loop::run().await.context("exec-loop")?,
            "big-message" => big_message::run().await.context("big-message")?,
            "long-session" => long_session::run().await.context("long-session")?,
            "mcp" => mcp::run().await.context("mcp")?,
            "app-server" => app_server::run().await.context("app-server")?,
            "provision" => provision::run().await.context("provision")?,
            // The docker session figures of `provision` alone.
            "provision-docker-exec" => provision_docker_exec::run()
                .await
                .context("provision-docker-exec")?,
            "replicas" => replicas::run().await.context("replicas")?,
            "approvals" => approvals::run().await.context("approvals")?,
            "traces" => traces::run().await.context("traces")?,
            "web" => web::run().await.context("web")?,
            "profiles" => profiles::run().await.context("profiles")?,
            "acp" => acp::run().await.context("acp")?,
            other => anyhow::bail!(
                "unknown benchmark \"{other}\" (available: {})",
                BENCHES.join(", ")
            ),
        }
    }
    Ok(())
}
