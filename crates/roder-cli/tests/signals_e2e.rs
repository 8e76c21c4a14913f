//! `roder exec` stopped from outside, through the real binary: `kill -9`
//! leaves no process of the running tool call behind (grandchildren and
//! orphans in its process group included), and the next `roder exec --thread` sends the
//! model a well-formed history; SIGTERM and SIGHUP interrupt the turn like
//! Ctrl-C and exit 143 and 129.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::*;

fn sleep_call(dir: &Path) -> roder_testkit::fake_models::FakeStream {
    let arguments = serde_json::json!({ "cmd": sleeping_tree(dir) }).to_string();
    ChatStream::tool_calls_reply(&[("call-sleep", "exec_command", &arguments)])
}

/// kill -9 during the tool call, then continue the thread.
async fn kill_9_then_continue(runner: bool) {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    write_config(home.path(), &server, runner.then_some(root.as_path()));
    server.push(sleep_call(&root));

    let mut args = vec!["exec"];
    if runner {
        args.extend(["--runner", "local"]);
    }
    args.push("sleep a while");
    let mut child = spawn_roder(home.path(), workspace.path(), &args);
    let pids = tree_pids(&root).await;

    child.start_kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    let finished = finish(child).await;
    assert_eq!(finished.signal, Some(libc::SIGKILL), "{}", finished.stderr);
    assert_all_gone(&pids, killed, Duration::from_secs(1)).await;

    let thread_id = only_thread(home.path());
    server.push(ChatStream::text_reply("Continued."));
    let continued = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "continue"],
    )
    .await;
    assert_eq!(continued.code, Some(0), "stderr:\n{}", continued.stderr);
    assert_eq!(continued.stdout, "Continued.\n");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2, "one request per run");
    let answers = assert_calls_answered(&requests[1].body);
    let (_, result) = answers
        .iter()
        .find(|(id, _)| id == "call-sleep")
        .expect("the killed call has a result");
    assert!(
        result.contains("stopped before it finished"),
        "the result says the process running it stopped: {result}"
    );
}

#[tokio::test]
async fn kill_9_during_a_local_tool_leaves_no_process_and_the_thread_continues() {
    kill_9_then_continue(false).await;
}

#[tokio::test]
async fn kill_9_during_a_unix_local_runner_tool_leaves_no_process_and_the_thread_continues() {
    kill_9_then_continue(true).await;
}

/// A stop signal during the tool call: the turn is interrupted, the tree
/// killed, the thread saved, the exit code 128 + the signal.
async fn signal_interrupts(signal: i32, expected_code: i32) {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    write_config(home.path(), &server, None);
    server.push(sleep_call(&root));

    let child = spawn_roder(home.path(), workspace.path(), &["exec", "sleep a while"]);
    let pids = tree_pids(&root).await;
    send_signal(&child, signal);
    let signalled = Instant::now();
    let finished = finish(child).await;
    assert_eq!(finished.code, Some(expected_code), "{}", finished.stderr);
    assert!(
        finished.stderr.contains("the turn was interrupted"),
        "{}",
        finished.stderr
    );
    assert_all_gone(&pids, signalled, Duration::from_secs(1)).await;

    let thread_id = thread_id_from(&finished.stderr);
    let events = std::fs::read_to_string(events_path(home.path(), &thread_id)).unwrap();
    assert!(
        events.lines().last().unwrap().contains("turn_interrupted"),
        "the log ends with the interruption:\n{events}"
    );

    server.push(ChatStream::text_reply("Next."));
    let next = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "next"],
    )
    .await;
    assert_eq!(next.code, Some(0), "stderr:\n{}", next.stderr);
    assert_eq!(next.stdout, "Next.\n");
    assert_calls_answered(&server.model_requests()[1].body);
}

#[tokio::test]
async fn sigterm_interrupts_the_turn_kills_its_commands_and_exits_143() {
    signal_interrupts(libc::SIGTERM, 143).await;
}

#[tokio::test]
async fn sighup_interrupts_the_turn_and_exits_129() {
    signal_interrupts(libc::SIGHUP, 129).await;
}
