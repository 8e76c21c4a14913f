//! Approvals through the real `roder app-server`, answered by real
//! WebSocket clients: every decision, `allow_always` honoured by a new
//! process, two approvers racing, a client that reconnects to a pending
//! ask, the timeout, `kill -9` with an ask pending, and an untrusted MCP
//! server's tool.

mod support;

use std::path::Path;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use serde_json::{Value, json};
use support::ws::{ListeningServer, WsClient};
use support::{installed, roder, write_config};

fn home_with(model: &FakeModelServer, extra: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    write_config(home.path(), model, None);
    let path = home.path().join("config.toml");
    let mut config = std::fs::read_to_string(&path).unwrap();
    config.push_str(extra);
    std::fs::write(path, config).unwrap();
    home
}

fn touch(call_id: &str, file: &str) -> roder_testkit::fake_models::FakeStream {
    ChatStream::tool_calls_reply(&[(
        call_id,
        "exec_command",
        &json!({ "cmd": format!("touch {file}") }).to_string(),
    )])
}

async fn start_thread(client: &mut WsClient, workspace: &Path, extra: Value) -> String {
    let mut params = json!({"workspace": workspace.to_str().unwrap(), "policyMode": "default"});
    for (key, value) in extra.as_object().unwrap() {
        params[key] = value.clone();
    }
    let started = client.call("thread/start", params).await.unwrap();
    started["thread"]["threadId"].as_str().unwrap().to_string()
}

async fn start_turn(client: &mut WsClient, thread_id: &str) {
    client
        .call(
            "turn/start",
            json!({"threadId": thread_id, "message": "go"}),
        )
        .await
        .unwrap();
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap().to_string())
        .collect()
}

fn started_by(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|event| event["type"] == "tool_call_started")
        .map(|event| event["approved_by"].clone())
        .collect()
}

/// Each decision answered by a WebSocket client; then a new process
/// honours the `allow_always` and `reject_always` rules written to
/// config.toml without asking.
#[tokio::test]
async fn every_decision_over_a_websocket_and_always_rules_outlive_the_process() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "tester", true).await;
    let thread_id = start_thread(&mut client, workspace.path(), json!({})).await;
    let cases = [
        ("allow_once", true, "turn_completed"),
        ("reject", false, "turn_completed"),
        ("allow_thread", true, "turn_completed"),
        ("allow_always", true, "turn_completed"),
        ("reject_always", false, "turn_completed"),
        ("reject_and_stop", false, "turn_interrupted"),
    ];
    for (decision, runs, ending) in cases {
        let file = format!("{decision}.txt");
        model.push(touch(&format!("call-{decision}"), &file));
        if decision != "reject_and_stop" {
            model.push(ChatStream::text_reply("ok"));
        }
        start_turn(&mut client, &thread_id).await;
        let request = client.approval_request().await;
        let params = &request["params"];
        assert_eq!(params["threadId"], thread_id.as_str());
        assert_eq!(params["toolName"], "exec_command");
        assert_eq!(params["effects"], json!(["execute"]));
        assert_eq!(params["kind"], "execute");
        assert_eq!(
            params["preview"]["command"]["command"],
            format!("touch {file}")
        );
        assert_eq!(params["preview"]["command"]["runsOn"]["kind"], "host");
        assert_eq!(params["rules"], json!([format!("exec:touch {file}")]));
        assert!(
            !workspace.path().join(&file).exists(),
            "asked before it ran"
        );
        client
            .answer(
                &request,
                json!({"decision": decision, "message": "because"}),
            )
            .await;
        let resolved = client.approval_resolved().await;
        assert_eq!(resolved["approvalId"], params["approvalId"]);
        assert_eq!(resolved["decision"], decision);
        assert_eq!(resolved["by"]["kind"], "client");
        assert_eq!(resolved["by"]["clientId"], client.client_id.as_str());
        let events = client.events_until(&thread_id, ending).await;
        assert_eq!(workspace.path().join(&file).exists(), runs, "{decision}");
        if !runs {
            let completed = events
                .iter()
                .find(|event| event["type"] == "tool_call_completed")
                .unwrap();
            let output = completed["output"].as_str().unwrap();
            assert!(output.contains("the user rejected this call"), "{output}");
            assert!(output.contains("because"), "{output}");
        }
    }
    let thread = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await
        .unwrap();
    assert_eq!(
        thread["thread"]["approvals"]["rules"]["allow"],
        json!(["exec:touch allow_thread.txt"])
    );
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(
        config.contains("\"exec:touch allow_always.txt\""),
        "{config}"
    );
    assert!(
        config.contains("\"exec:touch reject_always.txt\""),
        "{config}"
    );
    server.kill().await;

    // A new process reads the rules back: neither call asks.
    std::fs::remove_file(workspace.path().join("allow_always.txt")).unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "second", true).await;
    let thread_id = start_thread(&mut client, workspace.path(), json!({})).await;
    model.push(ChatStream::tool_calls_reply(&[
        (
            "again",
            "exec_command",
            r#"{"cmd":"touch allow_always.txt"}"#,
        ),
        (
            "refused",
            "exec_command",
            r#"{"cmd":"touch reject_always.txt"}"#,
        ),
    ]));
    model.push(ChatStream::text_reply("ok"));
    start_turn(&mut client, &thread_id).await;
    let events = client.events_until(&thread_id, "turn_completed").await;
    assert!(!kinds(&events).contains(&"approval_requested".to_string()));
    assert!(workspace.path().join("allow_always.txt").exists());
    assert!(!workspace.path().join("reject_always.txt").exists());
    assert_eq!(
        started_by(&events),
        vec![json!({"kind": "rule", "rule": "exec:touch allow_always.txt"})]
    );
    server.kill().await;
}

#[tokio::test]
async fn two_approvers_race_and_the_first_answer_wins() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut first = WsClient::connect(&server.address, "first", true).await;
    let mut second = WsClient::connect(&server.address, "second", true).await;
    let thread_id = start_thread(&mut first, workspace.path(), json!({})).await;
    second
        .call("thread/resume", json!({"threadId": thread_id}))
        .await
        .unwrap();
    model.push(touch("race", "race.txt"));
    model.push(ChatStream::text_reply("ok"));
    start_turn(&mut first, &thread_id).await;
    let asked_first = first.approval_request().await;
    let asked_second = second.approval_request().await;
    assert_eq!(
        asked_first["params"]["approvalId"],
        asked_second["params"]["approvalId"]
    );
    // Both answer, differently, at once.
    first
        .answer(&asked_first, json!({"decision": "allow_once"}))
        .await;
    second
        .answer(&asked_second, json!({"decision": "reject"}))
        .await;
    let seen_first = first.approval_resolved().await;
    let seen_second = second.approval_resolved().await;
    assert_eq!(seen_first, seen_second, "both hear the one outcome");
    let winner = seen_first["by"]["clientId"].as_str().unwrap();
    let allowed = winner == first.client_id;
    assert!(allowed || winner == second.client_id, "{seen_first}");
    assert_eq!(
        seen_first["decision"],
        if allowed { "allow_once" } else { "reject" }
    );
    let events = first.events_until(&thread_id, "turn_completed").await;
    let resolutions = events
        .iter()
        .filter(|event| event["type"] == "approval_resolved")
        .count();
    assert_eq!(resolutions, 1, "one decision is recorded");
    assert_eq!(workspace.path().join("race.txt").exists(), allowed);
    server.kill().await;
}

#[tokio::test]
async fn a_client_that_reconnects_gets_the_pending_ask() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "leaving", true).await;
    let thread_id = start_thread(&mut client, workspace.path(), json!({})).await;
    model.push(touch("back", "back.txt"));
    model.push(ChatStream::text_reply("ok"));
    start_turn(&mut client, &thread_id).await;
    let asked = client.approval_request().await;
    drop(client);

    let mut again = WsClient::connect(&server.address, "returning", true).await;
    again
        .call("thread/resume", json!({"threadId": thread_id}))
        .await
        .unwrap();
    let resent = again.approval_request().await;
    assert_eq!(
        resent["params"]["approvalId"],
        asked["params"]["approvalId"]
    );
    again
        .answer(&resent, json!({"decision": "allow_once"}))
        .await;
    let events = again.events_until(&thread_id, "turn_completed").await;
    assert!(workspace.path().join("back.txt").exists());
    assert_eq!(
        started_by(&events),
        vec![json!({"kind": "client", "client_id": again.client_id})]
    );
    // A client that does not answer approvals is never asked.
    let mut watcher = WsClient::connect(&server.address, "watcher", false).await;
    watcher
        .call("thread/resume", json!({"threadId": thread_id}))
        .await
        .unwrap();
    watcher.events_until(&thread_id, "turn_completed").await;
    assert!(!watcher.saw(|message| message["method"] == "approval/request"));
    server.kill().await;
}

#[tokio::test]
async fn an_unanswered_ask_times_out() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "\n[approvals]\ntimeout_s = 1\n");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "silent", true).await;
    let thread_id = start_thread(&mut client, workspace.path(), json!({})).await;
    model.push(touch("late", "late.txt"));
    model.push(ChatStream::text_reply("ok"));
    start_turn(&mut client, &thread_id).await;
    let asked = client.approval_request().await;
    let resolved = client.approval_resolved().await;
    assert_eq!(resolved["approvalId"], asked["params"]["approvalId"]);
    assert_eq!(resolved["by"], json!({"kind": "timeout"}));
    assert_eq!(resolved["decision"], "reject");
    client.events_until(&thread_id, "turn_completed").await;
    assert!(!workspace.path().join("late.txt").exists());
    // A late answer changes nothing.
    client
        .answer(&asked, json!({"decision": "allow_once"}))
        .await;
    let thread = client
        .call("thread/read", json!({"threadId": thread_id}))
        .await
        .unwrap();
    assert!(thread["runningTurnId"].is_null(), "{thread}");
    assert!(!workspace.path().join("late.txt").exists());
    server.kill().await;
}

#[tokio::test]
async fn kill_9_with_an_ask_pending_never_runs_the_call() {
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "doomed", true).await;
    let thread_id = start_thread(&mut client, workspace.path(), json!({})).await;
    model.push(touch("pending", "never.txt"));
    start_turn(&mut client, &thread_id).await;
    client.approval_request().await;
    server.kill().await;

    // The next turn, in another process, closes the dead one first.
    model.push(ChatStream::text_reply("carrying on"));
    let next = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "carry on"],
    )
    .await;
    assert_eq!(next.code, Some(0), "{}", next.stderr);
    assert!(next.stdout.contains("carrying on"));
    assert!(!workspace.path().join("never.txt").exists());
    let log = std::fs::read_to_string(
        home.path()
            .join("threads")
            .join(&thread_id)
            .join("events.jsonl"),
    )
    .unwrap();
    let events: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap()["event"].clone())
        .collect();
    let resolved = events
        .iter()
        .find(|event| event["type"] == "approval_resolved")
        .unwrap();
    assert_eq!(resolved["by"], json!({"kind": "process_stopped"}));
    let completed = events
        .iter()
        .find(|event| event["type"] == "tool_call_completed")
        .unwrap();
    assert!(
        completed["output"].as_str().unwrap().contains("never ran"),
        "{completed}"
    );
    assert!(
        !events
            .iter()
            .any(|event| event["type"] == "tool_call_started"),
        "the call never started"
    );
    // The model's next request answers the call: well formed.
    let requests = model.model_requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(
        last.contains("\"tool_call_id\":\"pending\""),
        "the dead call has its result: {last}"
    );
}

#[tokio::test]
async fn an_untrusted_mcp_servers_tool_asks_and_a_trusted_read_only_one_does_not() {
    if !installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let model = FakeModelServer::start().await.unwrap();
    let home = home_with(&model, "\n[sandbox]\nmode = \"none\"\n");
    let workspace = tempfile::tempdir().unwrap();
    let server = ListeningServer::start(home.path(), workspace.path()).await;
    let mut client = WsClient::connect(&server.address, "mcp", true).await;
    let call = || {
        ChatStream::tool_calls_reply(&[(
            "now",
            "mcp__time__get_current_time",
            r#"{"timezone":"UTC"}"#,
        )])
    };
    for trusted in [false, true] {
        let servers = json!({"time": {
            "command": "mcp-server-time",
            "args": ["--local-timezone", "UTC"],
            "startupTimeoutSec": 90,
            "trusted": trusted,
        }});
        let thread_id = start_thread(
            &mut client,
            workspace.path(),
            json!({"mcpServers": servers}),
        )
        .await;
        model.push(call());
        model.push(ChatStream::text_reply("ok"));
        start_turn(&mut client, &thread_id).await;
        if !trusted {
            let asked = client.approval_request().await;
            assert_eq!(asked["params"]["toolName"], "mcp__time__get_current_time");
            assert_eq!(asked["params"]["effects"], json!(["write", "execute"]));
            client
                .answer(&asked, json!({"decision": "allow_once"}))
                .await;
        }
        let events = client.events_until(&thread_id, "turn_completed").await;
        let by = started_by(&events);
        if trusted {
            assert_eq!(by, vec![json!({"kind": "mode", "mode": "default"})]);
            assert!(!kinds(&events).contains(&"approval_requested".to_string()));
        } else {
            assert_eq!(by[0]["kind"], "client");
        }
        let completed = events
            .iter()
            .find(|event| event["type"] == "tool_call_completed")
            .unwrap();
        assert_eq!(completed["is_error"], false, "{completed}");
    }
    server.kill().await;
}
