//! Two `roder exec --thread T` at once, through the real binary: the second
//! is refused with exit code 75 and a message naming the process holding the
//! thread, and writes nothing to the thread's log.

mod support;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::*;

#[tokio::test]
async fn a_second_exec_on_a_busy_thread_exits_75_and_writes_nothing() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    let root = std::fs::canonicalize(workspace.path()).unwrap();
    write_config(home.path(), &server, None);

    server.push(ChatStream::text_reply("Ready."));
    let created = roder(home.path(), workspace.path(), &["exec", "hello"]).await;
    assert_eq!(created.code, Some(0), "{}", created.stderr);
    let thread_id = thread_id_from(&created.stderr);

    let arguments = serde_json::json!({ "cmd": sleeping_tree(&root) }).to_string();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-sleep",
        "exec_command",
        &arguments,
    )]));
    let holder = spawn_roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "sleep a while"],
    );
    let holder_pid = holder.id().unwrap();
    tree_pids(&root).await; // the holder's turn is running its tool
    let requests_before = server.model_requests().len();
    let log = events_path(home.path(), &thread_id);
    let before = std::fs::read(&log).unwrap();

    let second = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "me too"],
    )
    .await;
    assert_eq!(second.code, Some(75), "stderr:\n{}", second.stderr);
    assert!(
        second.stderr.contains(&format!("pid {holder_pid}")),
        "the refusal names the holder (pid {holder_pid}):\n{}",
        second.stderr
    );
    assert_eq!(
        std::fs::read(&log).unwrap(),
        before,
        "the refused run wrote to the thread's log"
    );
    assert_eq!(server.model_requests().len(), requests_before);

    send_signal(&holder, libc::SIGTERM);
    let stopped = finish(holder).await;
    assert_eq!(stopped.code, Some(143), "{}", stopped.stderr);
}
