//! `roder app-server` stopped by SIGTERM or SIGHUP, through the real
//! binary: the running turn is interrupted (its tool's process tree killed,
//! its log closed with `turn_interrupted`) and the server exits 0.

mod support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::{Value, json};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{ChildStdin, ChildStdout};

struct Rpc {
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl Rpc {
    /// Sends a request and returns its result, skipping notifications.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.stdin
            .write_all(format!("{request}\n").as_bytes())
            .await
            .unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(30), self.lines.next_line())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method} within 30 s"))
                .unwrap()
                .unwrap_or_else(|| panic!("the server closed stdout before answering {method}"));
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                assert!(message["error"].is_null(), "{method} failed: {message}");
                return message["result"].clone();
            }
        }
    }
}

async fn stop_signal_interrupts_running_turns(signal: i32) {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    write_config(home.path(), &server, None);
    let arguments = json!({ "cmd": sleeping_tree(&root) }).to_string();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &arguments,
    )]));

    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["app-server", "-C", root.to_str().unwrap()])
        .env("RODER_HOME", home.path())
        .env_remove("RODER_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut rpc = Rpc {
        stdin: child.stdin.take().unwrap(),
        lines: BufReader::new(child.stdout.take().unwrap()).lines(),
        next_id: 0,
    };
    rpc.call("initialize", json!({})).await;
    let thread_id = rpc.call("thread/start", json!({})).await["thread"]["threadId"]
        .as_str()
        .unwrap()
        .to_string();
    rpc.call(
        "turn/start",
        json!({"threadId": thread_id, "message": "sleep a while"}),
    )
    .await;
    let pids = tree_pids(&root).await;
    // Keep reading stdout so the server never blocks writing notifications.
    let Rpc {
        stdin, mut lines, ..
    } = rpc;
    let drain = tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });

    send_signal(&child, signal);
    let signalled = Instant::now();
    let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the app server should exit within 30 s of the signal")
        .unwrap();
    assert_eq!(status.code(), Some(0), "a clean shutdown");
    assert_all_gone(&pids, signalled, Duration::from_secs(1)).await;
    let events = std::fs::read_to_string(events_path(home.path(), &thread_id)).unwrap();
    assert!(
        events.lines().last().unwrap().contains("turn_interrupted"),
        "the turn was interrupted and its log closed:\n{events}"
    );
    drop(stdin);
    drain.await.unwrap();
}

#[tokio::test]
async fn sigterm_interrupts_running_turns_and_exits_0() {
    stop_signal_interrupts_running_turns(libc::SIGTERM).await;
}

#[tokio::test]
async fn sighup_interrupts_running_turns_and_exits_0() {
    stop_signal_interrupts_running_turns(libc::SIGHUP).await;
}
