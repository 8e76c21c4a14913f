//! Figures of the Postgres store against a throwaway local cluster, one JSON
//! object per line: leased append throughput, load of a 10,000-event
//! thread, the first page of a 100,000-event thread, and the latency from
//! an append on one replica to a follower on another.
//!
//! `cargo run --release -p roder-ext-postgres-thread-store --features test-support --example measure`

use std::time::{Duration, Instant};

use roder_api::events::{EventEnvelope, RoderEvent, TurnInterrupted};
use roder_api::thread::ThreadStore;
use roder_api::writer_lease::{WriterIdentity, WriterLeaseOutcome, WriterLeaseRequest};
use roder_ext_postgres_thread_store::PostgresThreadStore;
use roder_ext_postgres_thread_store::test_support::TestCluster;
use time::OffsetDateTime;

fn event(thread_id: &str, seq: u64) -> EventEnvelope {
    EventEnvelope {
        seq,
        timestamp: OffsetDateTime::now_utc(),
        thread_id: thread_id.to_string(),
        turn_id: Some("turn".to_string()),
        event: RoderEvent::TurnInterrupted(TurnInterrupted {
            thread_id: thread_id.to_string(),
            turn_id: format!("turn-{seq}"),
        }),
    }
}

fn figure(figure: &str, value: f64, unit: &str) {
    println!(
        "{}",
        serde_json::json!({"bench": "postgres-store", "figure": figure, "value": value, "unit": unit})
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cluster = TestCluster::start().await?;
    let store = PostgresThreadStore::connect(&cluster.url()).await?;
    let other = PostgresThreadStore::connect(&cluster.url()).await?;

    // Leased appends, one event per call, as the runtime writes.
    store
        .append_events("appends", &[event("appends", 1)])
        .await?;
    let request = WriterLeaseRequest {
        owner: WriterIdentity::new("measure", std::process::id(), "local"),
        ttl: Duration::from_secs(60),
    };
    let WriterLeaseOutcome::Acquired(lease) =
        store.acquire_writer_lease("appends", request).await?
    else {
        anyhow::bail!("no lease");
    };
    let count = 3_000u64;
    let started = Instant::now();
    for seq in 2..=count + 1 {
        store
            .append_events_leased(lease.as_ref(), "appends", &[event("appends", seq)])
            .await?;
    }
    figure(
        "append_events_per_s",
        count as f64 / started.elapsed().as_secs_f64(),
        "events/s",
    );

    let all: Vec<_> = (1..=100_000).map(|seq| event("big", seq)).collect();
    for chunk in all.chunks(5_000) {
        store.append_events("big", chunk).await?;
    }
    let started = Instant::now();
    let loaded = store.load_events("big", 90_000).await?;
    anyhow::ensure!(loaded.len() == 10_000);
    figure(
        "load_10k_events_ms",
        started.elapsed().as_secs_f64() * 1e3,
        "ms",
    );
    let started = Instant::now();
    let page = store.load_events_page("big", 0, 200, 1 << 20).await?;
    anyhow::ensure!(page.events.len() == 200 && page.more);
    figure(
        "history_first_page_ms_100k",
        started.elapsed().as_secs_f64() * 1e3,
        "ms",
    );

    // Append on one replica, seen by a follower on another.
    let mut follower = other.follow("live", 0).await?;
    let mut latencies = Vec::new();
    for seq in 1..=500 {
        let sent = Instant::now();
        store.append_events("live", &[event("live", seq)]).await?;
        let got = follower.next().await?;
        anyhow::ensure!(got.seq == seq);
        latencies.push(sent.elapsed().as_secs_f64() * 1e3);
    }
    latencies.sort_by(f64::total_cmp);
    figure(
        "follow_latency_p50_ms",
        latencies[latencies.len() / 2],
        "ms",
    );
    figure(
        "follow_latency_p95_ms",
        latencies[latencies.len() * 95 / 100],
        "ms",
    );
    Ok(())
}
