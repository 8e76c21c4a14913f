//! `web`: the page `roder-app-server` serves, in a headless Chromium
//! (Selenium), against a server in this process on 127.0.0.1.
//!
//! Figures, measured in the browser:
//! * `first_paint_10k_ms`: opening `/threads/ID` of a 10,001-event thread
//!   until its last events are on screen (`performance.now()` from the
//!   navigation, in the frame after the last page is rendered; median of 5
//!   loads). Baseline of the same run: the same for a 17-event thread
//!   (`first_paint_small_ms`); `first_paint_10k_ratio` is their quotient.
//! * `live_latency_p95_ms`: an event's timestamp (set by the runtime when
//!   it emits it) until the page has put it in its DOM (`Date.now()` after
//!   the insertion), over every event of a 60-tool-call turn. Baseline: a
//!   Rust WebSocket client's receive latency of the same events
//!   (`ws_client_latency_p95_ms`); `live_latency_ratio` is their quotient.

use std::sync::Arc;
use std::time::Duration;

use roder_app_server::{WsServerConfig, bind_ws};
use roder_core::RuntimeConfig;
use roder_ext_jsonl_thread_store::JsonlThreadStore;
use roder_testkit::ToolLoopEngine;
use roder_testkit::long_thread::write_long_thread;
use serde_json::{Value, json};

use crate::app_server::RpcClient;
use crate::browser::Browser;
use crate::coding_runtime;
use crate::figure::{median, percentile, print, sized};

const LONG: &str = "0b0e5e11-0000-4000-8000-0000000b0001";
const SHORT: &str = "0b0e5e11-0000-4000-8000-0000000b0002";
fn loads() -> usize {
    sized(5, 1)
}

fn live_tool_calls() -> usize {
    sized(60, 3)
}

const BOUND: Duration = Duration::from_secs(300);

pub async fn run() -> anyhow::Result<()> {
    tokio::time::timeout(BOUND, measure())
        .await
        .map_err(|_| anyhow::anyhow!("web bench did not finish within {BOUND:?}"))?
}

async fn measure() -> anyhow::Result<()> {
    let workspace = tempfile::tempdir()?;
    let store = tempfile::tempdir()?;
    tokio::fs::write(workspace.path().join("README.md"), "bench\n").await?;
    let workspace_text = workspace.path().to_string_lossy().into_owned();
    let jsonl = JsonlThreadStore::new(store.path());
    let long_turns = sized(1250, 5);
    let long_last = write_long_thread(&jsonl, LONG, &workspace_text, long_turns).await?;
    let short_last = write_long_thread(&jsonl, SHORT, &workspace_text, 2).await?;
    let engine = Arc::new(ToolLoopEngine::new(
        "read_file",
        r#"{"path":"README.md"}"#,
        live_tool_calls(),
        "read it",
    ));
    let builder = coding_runtime::builder(engine, store.path(), workspace.path())?;
    let runtime = coding_runtime::runtime(builder, workspace.path(), RuntimeConfig::default())?;
    let server = bind_ws(runtime, WsServerConfig::default()).await?;
    let addr = server.local_addr();
    anyhow::ensure!(addr.ip().is_loopback(), "the bench must stay on loopback");
    let server = tokio::spawn(server.serve());
    let mut browser = Browser::start().await?;

    let mut small = Vec::new();
    let mut long = Vec::new();
    for _ in 0..loads() {
        for (thread_id, turns, samples) in [(SHORT, 2, &mut small), (LONG, long_turns, &mut long)] {
            browser
                .get(&format!("http://{addr}/threads/{thread_id}"))
                .await?;
            let painted = browser
                .wait_js(&format!(
                    "const m = window.roderMetrics; \
                     const last = Array.from(document.querySelectorAll('.assistant')).some((e) => e.textContent === 'answer {turns}'); \
                     return m && m.firstPaintMs !== null && last ? m.firstPaintMs : null;"
                ))
                .await?;
            samples.push(as_f64(&painted)?);
        }
    }

    // Live: the page follows a thread while a turn runs; a Rust client
    // follows the same thread as the baseline.
    let mut client = RpcClient::connect(addr).await?;
    client.request("initialize", json!({})).await?;
    let started = client.request("thread/start", json!({})).await?;
    let thread_id = started["thread"]["threadId"]
        .as_str()
        .ok_or_else(|| anyhow::anyhow!("thread/start returned no thread id"))?
        .to_string();
    browser
        .get(&format!("http://{addr}/threads/{thread_id}"))
        .await?;
    browser
        .wait_js(&format!(
            "return window.roderMetrics.subscribed === '{thread_id}';"
        ))
        .await?;
    client.latencies_ms.clear();
    client
        .request(
            "turn/start",
            json!({"threadId": thread_id, "message": "read the readme many times"}),
        )
        .await?;
    client.until_turn_ends().await?;
    let page_latencies = browser
        .wait_js("return document.querySelector('.turn-end.completed') ? window.roderMetrics.latencies : null;")
        .await?;
    let mut page: Vec<f64> = page_latencies
        .as_array()
        .ok_or_else(|| anyhow::anyhow!("no latencies from the page"))?
        .iter()
        .map(as_f64)
        .collect::<anyhow::Result<_>>()?;
    let mut baseline = std::mem::take(&mut client.latencies_ms);
    browser.quit().await;
    server.abort();

    let small_ms = median(&mut small);
    let long_ms = median(&mut long);
    let paint_context = json!({
        "events": long_last, "baseline_events": short_last, "loads": loads(),
        "samples_10k_ms": long, "samples_small_ms": small,
        "browser": "chromium headless (selenium)", "transport": "websocket 127.0.0.1",
    });
    print(
        "web",
        "first_paint_10k_ms",
        long_ms,
        "ms",
        paint_context.clone(),
    );
    print(
        "web",
        "first_paint_small_ms",
        small_ms,
        "ms",
        paint_context.clone(),
    );
    print(
        "web",
        "first_paint_10k_ratio",
        long_ms / small_ms.max(1.0),
        "ratio",
        paint_context,
    );
    let events = page.len();
    let page_p95 = percentile(&mut page, 0.95);
    let page_p50 = median(&mut page);
    let client_p95 = percentile(&mut baseline, 0.95);
    let live_context = json!({
        "events": events, "tool_calls": live_tool_calls(), "page_p50_ms": page_p50,
        "ws_client_events": baseline.len(),
    });
    print(
        "web",
        "live_latency_p95_ms",
        page_p95,
        "ms",
        live_context.clone(),
    );
    print(
        "web",
        "ws_client_latency_p95_ms",
        client_p95,
        "ms",
        live_context.clone(),
    );
    print(
        "web",
        "live_latency_ratio",
        page_p95 / client_p95.max(1.0),
        "ratio",
        live_context,
    );
    Ok(())
}

fn as_f64(value: &Value) -> anyhow::Result<f64> {
    value
        .as_f64()
        .ok_or_else(|| anyhow::anyhow!("the page reported {value}, not a number"))
}
