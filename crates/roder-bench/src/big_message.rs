//! `big-message`: what one large model answer costs, end to end. The real
//! `roder exec` binary runs one turn against a fake Chat Completions server
//! (in this process) whose answer is a single text message of 2 MB or
//! 20 MB, streamed the way a model streams it: many deltas of 4 KiB each.
//! The same answer sent as one huge delta is measured too.
//!
//! Cost should be linear in the answer's size: `ratio_20mb_to_2mb` (the CPU
//! of the 20 MB turn over that of the 2 MB turn) is at most 10 when it is,
//! and grows with the size when something copies or rescans the text per
//! delta. Both turns include the fixed cost of a turn (process start,
//! config, thread creation), which pulls that ratio below 10; so the same
//! turn with a 16-byte answer is measured as `cpu_s_baseline`, and
//! `marginal_ratio_20mb_to_2mb` compares the two costs above it (10 when
//! linear, noisier: the 2 MB cost above the baseline is small). Storage
//! should hold the answer once: `stored_copies_20mb` is the thread's
//! `events.jsonl` size after the turn over 20 MB.
//!
//! CPU is the user+system time of `roder` (and GNU time around it, when
//! installed), from the kernel's accounting of this process's waited-for
//! children; peak RSS is `roder`'s own, from GNU time (see `exec_loop.rs` for
//! why not the kernel's per-child maximum). Needs the release binary:
//! `cargo build --release -p roder-cli` (next to this executable, or
//! `$RODER_BIN`).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use roder_testkit::fake_models::{ChatStream, FakeModelServer, FakeStream};
use serde_json::json;

use crate::figure::{median, print, sized};

const MIB: usize = 1024 * 1024;
/// The answer of the baseline turn: a turn's fixed cost.
const TINY: usize = 16;
fn small_bytes() -> usize {
    sized(2 * MIB, 64 * 1024)
}

fn large_bytes() -> usize {
    sized(20 * MIB, 256 * 1024)
}

/// The size of one streamed delta.
const DELTA_BYTES: usize = 4096;
/// Runs per size; the median is reported.
fn repeats() -> usize {
    sized(5, 1)
}

/// A turn that takes longer than this is reported as a failure, not waited
/// for (a quadratic path at 20 MB can take many minutes).
const TURN_TIMEOUT: Duration = Duration::from_secs(600);
const GNU_TIME: &str = "/usr/bin/time";

/// How the answer is cut into deltas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Delivery {
    /// `DELTA_BYTES` per delta: how models stream.
    Streamed,
    /// The whole answer in one delta.
    OneDelta,
}

impl Delivery {
    fn suffix(self) -> &'static str {
        match self {
            Delivery::Streamed => "",
            Delivery::OneDelta => "_one_delta",
        }
    }
}

/// One turn's measurements.
struct Sample {
    cpu_s: f64,
    wall_s: f64,
    /// `roder`'s peak RSS in KiB, when GNU time is installed.
    peak_kib: Option<u64>,
    /// Bytes of every `events.jsonl` the turn left.
    stored_bytes: u64,
}

pub async fn run() -> anyhow::Result<()> {
    let roder = crate::roder_process::binary()?;
    let server = FakeModelServer::start().await?;
    for delivery in [Delivery::Streamed, Delivery::OneDelta] {
        let mut tiny = Vec::new();
        let mut small = Vec::new();
        let mut large = Vec::new();
        for _ in 0..repeats() {
            tiny.push(turn(&roder, &server, TINY, delivery).await?);
            small.push(turn(&roder, &server, small_bytes(), delivery).await?);
            large.push(turn(&roder, &server, large_bytes(), delivery).await?);
        }
        report(delivery, &mut tiny, &mut small, &mut large);
    }
    Ok(())
}

fn report(delivery: Delivery, tiny: &mut [Sample], small: &mut [Sample], large: &mut [Sample]) {
    let suffix = delivery.suffix();
    let cpu = |samples: &mut [Sample]| {
        let mut values: Vec<f64> = samples.iter().map(|sample| sample.cpu_s).collect();
        median(&mut values)
    };
    let wall = |samples: &mut [Sample]| {
        let mut values: Vec<f64> = samples.iter().map(|sample| sample.wall_s).collect();
        median(&mut values)
    };
    let (cpu_tiny, cpu_small, cpu_large) = (cpu(tiny), cpu(small), cpu(large));
    let context = json!({
        "delivery": match delivery {
            Delivery::Streamed => format!("{DELTA_BYTES}-byte deltas"),
            Delivery::OneDelta => "one delta".to_string(),
        },
        "repeats": repeats(),
        "wall_s_2mb": round3(wall(small)),
        "wall_s_20mb": round3(wall(large)),
    });
    print(
        "big-message",
        &format!("cpu_s_20mb{suffix}"),
        cpu_large,
        "s",
        context.clone(),
    );
    print(
        "big-message",
        &format!("cpu_s_2mb{suffix}"),
        cpu_small,
        "s",
        context.clone(),
    );
    print(
        "big-message",
        &format!("ratio_20mb_to_2mb{suffix}"),
        cpu_large / cpu_small.max(f64::MIN_POSITIVE),
        "ratio",
        json!({ "target": "under 12 (linear: 10)" }),
    );
    print(
        "big-message",
        &format!("cpu_s_baseline{suffix}"),
        cpu_tiny,
        "s",
        json!({ "answer_bytes": TINY, "repeats": repeats() }),
    );
    print(
        "big-message",
        &format!("marginal_ratio_20mb_to_2mb{suffix}"),
        (cpu_large - cpu_tiny) / (cpu_small - cpu_tiny).max(1e-3),
        "ratio",
        json!({ "target": "about 10 (linear)", "over": "cpu_s_baseline" }),
    );
    match large.iter().filter_map(|sample| sample.peak_kib).max() {
        Some(kib) => print(
            "big-message",
            &format!("peak_rss_mib_20mb{suffix}"),
            kib as f64 / 1024.0,
            "MiB",
            context.clone(),
        ),
        None => eprintln!(
            "big-message: peak_rss_mib_20mb needs GNU time ({GNU_TIME}; apt-get install time)"
        ),
    }
    let stored = large
        .iter()
        .map(|sample| sample.stored_bytes)
        .max()
        .unwrap_or(0);
    print(
        "big-message",
        &format!("stored_bytes_20mb{suffix}"),
        stored as f64,
        "bytes",
        context,
    );
    print(
        "big-message",
        &format!("stored_copies_20mb{suffix}"),
        stored as f64 / large_bytes() as f64,
        "copies",
        json!({ "target": "about 1 (the answer stored once)" }),
    );
}

fn round3(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// `size` bytes of text in lines of 80, like a long generated file.
fn answer(size: usize) -> String {
    let mut text = String::with_capacity(size + 128);
    let mut line = 0u64;
    while text.len() < size {
        text.push_str(&format!(
            "{line:08} the quick brown fox jumps over the lazy dog, again and again ...\n"
        ));
        line += 1;
    }
    // ASCII only, so any byte offset is a character boundary.
    text.truncate(size);
    text
}

/// The fake model's reply: `text` cut into deltas as `delivery` says.
fn reply(text: &str, delivery: Delivery) -> FakeStream {
    let mut stream = ChatStream::new();
    match delivery {
        Delivery::OneDelta => stream = stream.text(text),
        Delivery::Streamed => {
            let mut rest = text;
            while !rest.is_empty() {
                let (delta, tail) = rest.split_at(DELTA_BYTES.min(rest.len()));
                stream = stream.text(delta);
                rest = tail;
            }
        }
    }
    stream.finish("stop").usage(10, 5).done()
}

/// Runs one `roder exec` turn whose answer is `size` bytes, in a fresh
/// home (so its threads directory holds this turn's thread only).
async fn turn(
    roder: &Path,
    server: &FakeModelServer,
    size: usize,
    delivery: Delivery,
) -> anyhow::Result<Sample> {
    let home = tempfile::tempdir()?;
    tokio::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"fake/bench\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n",
            server.openai_base_url()
        ),
    )
    .await?;
    let workspace = tempfile::tempdir()?;
    server.push(reply(&answer(size), delivery));

    let stdout_path = home.path().join("stdout");
    let stdout = std::fs::File::create(&stdout_path)?;
    let rss_path = home.path().join("rss");
    let gnu_time = Path::new(GNU_TIME).exists();
    let mut command = if gnu_time {
        let mut command = tokio::process::Command::new(GNU_TIME);
        command.args(["-f", "%M", "-o"]).arg(&rss_path).arg(roder);
        command
    } else {
        tokio::process::Command::new(roder)
    };
    command
        .args(["exec", "write the whole file out"])
        .current_dir(workspace.path())
        .env("RODER_HOME", home.path())
        .env_remove("RODER_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::piped())
        .kill_on_drop(true);

    let cpu_before = crate::roder_process::children_cpu_s()?;
    let started = Instant::now();
    let child = command.spawn().context("cannot start roder")?;
    let output = match tokio::time::timeout(TURN_TIMEOUT, child.wait_with_output()).await {
        Ok(output) => output?,
        Err(_) => anyhow::bail!(
            "roder exec with a {} MiB answer ({delivery:?}) took over {} s; killed",
            size / MIB,
            TURN_TIMEOUT.as_secs()
        ),
    };
    let wall_s = started.elapsed().as_secs_f64();
    let cpu_s = crate::roder_process::children_cpu_s()? - cpu_before;
    anyhow::ensure!(
        output.status.success(),
        "roder exec with a {} MiB answer failed ({}): {}",
        size / MIB,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    anyhow::ensure!(
        server.remaining_replies() == 0,
        "the scripted answer was not requested"
    );
    let printed = tokio::fs::metadata(&stdout_path).await?.len();
    anyhow::ensure!(
        printed >= size as u64,
        "roder printed {printed} bytes of a {size}-byte answer"
    );
    let peak_kib = if gnu_time {
        tokio::fs::read_to_string(&rss_path)
            .await?
            .trim()
            .parse()
            .ok()
    } else {
        None
    };
    let stored_bytes = stored_event_bytes(&home.path().join("threads")).await?;
    Ok(Sample {
        cpu_s,
        wall_s,
        peak_kib,
        stored_bytes,
    })
}

/// Sum of the sizes of `<threads>/*/events.jsonl`.
async fn stored_event_bytes(threads: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut entries = tokio::fs::read_dir(threads)
        .await
        .with_context(|| format!("cannot list `{}`", threads.display()))?;
    while let Some(entry) = entries.next_entry().await? {
        if let Ok(metadata) = tokio::fs::metadata(entry.path().join("events.jsonl")).await {
            total += metadata.len();
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_have_the_exact_size() {
        for size in [0, 1, 79, 80, 81, DELTA_BYTES * 3 + 5] {
            assert_eq!(answer(size).len(), size);
        }
    }

    #[test]
    fn streamed_replies_carry_the_whole_answer_in_fixed_deltas() {
        let text = answer(DELTA_BYTES * 2 + 100);
        let streamed = reply(&text, Delivery::Streamed);
        let one = reply(&text, Delivery::OneDelta);
        // role chunk + deltas + finish + usage + [DONE]
        assert_eq!(streamed.frames.len(), 1 + 3 + 3);
        assert_eq!(one.frames.len(), 1 + 1 + 3);
        let joined: String = streamed
            .frames
            .iter()
            .filter_map(|frame| serde_json::from_str::<serde_json::Value>(&frame.data).ok())
            .filter_map(|chunk| {
                chunk["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_string)
            })
            .collect();
        assert_eq!(joined, text);
    }
}
