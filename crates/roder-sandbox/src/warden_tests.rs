//! The warden's promise: when the supervising process dies by SIGKILL, the
//! running command and the rest of its process group die within a second.
//! The supervising process is this test binary re-executed to run
//! [`supervising_helper`] alone (and its warden is that binary again).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::run_tests::{eventually, process_is_gone, read_pid, shell};
use crate::{OutputMode, Stream};

const HELPER_DIR: &str = "RODER_SANDBOX_HELPER_DIR";

/// Not a test of its own: the process the real test kills. It starts a tree
/// (the shell, a background child, an orphan reparented away from the shell,
/// a foreground child, all in the command's group) and waits for ever.
#[test]
#[ignore = "run by roder_dies_by_sigkill_and_the_tree_dies_with_it"]
fn supervising_helper() {
    let Some(dir) = std::env::var_os(HELPER_DIR) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let spec = shell(
            "sleep 100 & echo $! > background; (sleep 100 & echo $! > orphan); \
             echo $$ > shell; sleep 100",
            &dir,
            OutputMode::Separate,
        );
        let mut sink = |_: Stream, _: &[u8]| {};
        let _ = crate::run(&spec, &CancellationToken::new(), &mut sink).await;
    });
}

#[test]
fn roder_dies_by_sigkill_and_the_tree_dies_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "warden_tests::supervising_helper",
            "--ignored",
            "--nocapture",
        ])
        .env(HELPER_DIR, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pids: Vec<(&str, i32)> = ["background", "orphan", "shell"]
        .into_iter()
        .map(|name| (name, read_pid(&dir.path().join(name))))
        .collect();
    for (name, pid) in &pids {
        assert!(!process_is_gone(*pid), "{name} {pid} is not running yet");
    }

    helper.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    helper.wait().unwrap();
    for (name, pid) in pids {
        let remaining = Duration::from_secs(1).saturating_sub(killed.elapsed());
        assert!(
            eventually(remaining, || process_is_gone(pid)),
            "{name} {pid} still runs a second after its supervisor was SIGKILLed"
        );
    }
}

/// The cost of supervision per spawn, against a plain process-group spawn,
/// and what a `pre_exec` hook (a fork) would cost instead.
/// Run with `cargo test --release -p roder-sandbox spawn_cost -- --ignored
/// --nocapture`; the README records a result.
#[test]
#[ignore = "a measurement, not a check"]
fn spawn_cost() {
    const ROUNDS: u32 = 300;
    // A parent with a realistic heap: fork copies page tables per mapped page.
    let megabytes: usize = std::env::var("SPAWN_COST_HEAP_MB")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(0);
    let heap = vec![1_u8; megabytes << 20];
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        // The warden starts once per process; not part of a spawn's cost.
        let mut warm = crate::spawn(tokio::process::Command::new("true"))
            .await
            .unwrap();
        warm.wait().await.unwrap();
        let mut plain = Duration::ZERO;
        let mut forked = Duration::ZERO;
        let mut supervised = Duration::ZERO;
        for _ in 0..ROUNDS {
            // What any pre_exec hook costs: std forks instead of posix_spawn.
            let started = Instant::now();
            let mut command = tokio::process::Command::new("true");
            command.process_group(0);
            // SAFETY: an empty hook.
            unsafe {
                command.pre_exec(|| Ok(()));
            }
            command.spawn().unwrap().wait().await.unwrap();
            forked += started.elapsed();

            let started = Instant::now();
            let mut command = tokio::process::Command::new("true");
            command.process_group(0);
            command.spawn().unwrap().wait().await.unwrap();
            plain += started.elapsed();

            let started = Instant::now();
            let mut child = crate::spawn(tokio::process::Command::new("true"))
                .await
                .unwrap();
            child.wait().await.unwrap();
            supervised += started.elapsed();
        }
        println!(
            "spawn+wait of `true` with a {megabytes} MB heap: plain {:?}, fork+exec {:?}, supervised {:?}, supervision adds {:?} per spawn",
            plain / ROUNDS,
            forked / ROUNDS,
            supervised / ROUNDS,
            supervised.saturating_sub(plain) / ROUNDS
        );
    });
    drop(heap);
}
