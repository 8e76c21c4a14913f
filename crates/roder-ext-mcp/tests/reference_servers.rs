//! The PyPI reference servers `mcp-server-time` and `mcp-server-git` over
//! stdio, through the tool source: their tools' names and schemas, real
//! calls, their error results, and a server killed mid-session coming back on
//! the next call.

mod support;

use std::path::Path;
use std::time::Duration;

use roder_ext_mcp::{McpServerConfig, McpToolSource, ServerStatus};

#[tokio::test]
async fn time_server_tools_are_offered_with_their_schemas_and_answer() {
    if !support::have_time_server() {
        return;
    }
    let source = McpToolSource::start(
        vec![McpServerConfig::stdio(
            "time",
            "mcp-server-time",
            &["--local-timezone", "UTC"],
        )],
        Path::new("."),
    )
    .await
    .unwrap();
    assert!(
        matches!(source.statuses()[0].1, ServerStatus::Ready { tools } if tools >= 2),
        "{:?}",
        source.statuses()
    );
    let specs = source.specs();
    let current = specs
        .iter()
        .find(|spec| spec.name == "mcp__time__get_current_time")
        .unwrap_or_else(|| panic!("{specs:?}"));
    assert_eq!(current.parameters["type"], "object");
    assert!(
        current.parameters["properties"]["timezone"].is_object(),
        "{}",
        current.parameters
    );
    assert!(current.description.contains("MCP server \"time\""));

    let now = support::call(
        &source,
        "mcp__time__get_current_time",
        serde_json::json!({"timezone": "Europe/Paris"}),
    )
    .await;
    assert!(!now.is_error, "{}", now.text);
    assert!(now.text.contains("Europe/Paris"), "{}", now.text);
    assert_eq!(now.data["mcp_server"], "time");

    let converted = support::call(
        &source,
        "mcp__time__convert_time",
        serde_json::json!({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}),
    )
    .await;
    assert!(!converted.is_error, "{}", converted.text);
    assert!(converted.text.contains("21:00"), "{}", converted.text);

    let bad = support::call(
        &source,
        "mcp__time__get_current_time",
        serde_json::json!({"timezone": "Not/AZone"}),
    )
    .await;
    assert!(bad.is_error, "{}", bad.text);
    assert!(bad.text.contains("Not/AZone"), "{}", bad.text);
}

#[tokio::test]
async fn git_server_reads_a_real_repository() {
    if !support::have_git_server() {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    for args in [
        vec!["init", "-q", "-b", "trunk"],
        vec![
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "first commit here",
        ],
    ] {
        assert!(
            std::process::Command::new("git")
                .args(&args)
                .current_dir(repo.path())
                .status()
                .unwrap()
                .success()
        );
    }
    std::fs::write(repo.path().join("new.txt"), "x").unwrap();
    let repo_path = repo.path().to_str().unwrap();
    let mut git = McpServerConfig::stdio("git", "mcp-server-git", &["--repository", repo_path]);
    git.tools.disabled = vec!["git_reset".into()];
    let source = McpToolSource::start(vec![git], repo.path()).await.unwrap();
    let names: Vec<String> = source.specs().into_iter().map(|spec| spec.name).collect();
    assert!(
        names.contains(&"mcp__git__git_status".to_string()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"mcp__git__git_reset".to_string()),
        "{names:?}"
    );

    let status = support::call(
        &source,
        "mcp__git__git_status",
        serde_json::json!({"repo_path": repo_path}),
    )
    .await;
    assert!(!status.is_error, "{}", status.text);
    assert!(status.text.contains("trunk"), "{}", status.text);
    assert!(status.text.contains("new.txt"), "{}", status.text);

    let log = support::call(
        &source,
        "mcp__git__git_log",
        serde_json::json!({"repo_path": repo_path}),
    )
    .await;
    assert!(!log.is_error, "{}", log.text);
    assert!(log.text.contains("first commit here"), "{}", log.text);
}

#[tokio::test]
async fn a_killed_server_is_started_again_on_the_next_call() {
    if !support::have_time_server() {
        return;
    }
    let source = McpToolSource::start(
        vec![McpServerConfig::stdio("time", "mcp-server-time", &[])],
        Path::new("."),
    )
    .await
    .unwrap();
    let connection = source.tools()[0].connection().clone();
    let first_pid = connection.process_id().await.expect("a running server");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &first_pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    tokio::time::timeout(Duration::from_secs(10), connection.exited())
        .await
        .expect("the connection sees its server die");
    assert!(!connection.is_up().await);

    let again = support::call(
        &source,
        "mcp__time__get_current_time",
        serde_json::json!({"timezone": "UTC"}),
    )
    .await;
    assert!(!again.is_error, "{}", again.text);
    let second_pid = connection.process_id().await.expect("restarted");
    assert_ne!(first_pid, second_pid);
}
