//! `roder exec` with `[mcp_servers.*]` in config.toml: a fake Chat
//! Completions model calls the tools of the PyPI reference servers
//! `mcp-server-time` and `mcp-server-git` over stdio, and the results reach
//! the model's next request. A server that cannot start leaves the turn
//! working and answers its calls with an error result.

use std::path::Path;
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::installed;

mod support;

fn git(dir: &Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(dir)
        .status()
        .unwrap();
    assert!(status.success());
}

async fn exec(home: &Path, workspace: &Path, prompt: &str) -> std::process::Output {
    tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
            .args(["exec", prompt])
            .current_dir(workspace)
            .env("RODER_HOME", home)
            .env("FAKE_MODEL_KEY", "test-key")
            .env_remove("RODER_MODEL")
            .output(),
    )
    .await
    .expect("roder should finish within 120 s")
    .unwrap()
}

fn config(server: &FakeModelServer, mcp: &str) -> String {
    format!(
        "model = \"fake/test-model\"\n\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\napi_key_env = \"FAKE_MODEL_KEY\"\n\n{mcp}",
        server.openai_base_url()
    )
}

#[tokio::test]
async fn the_model_calls_the_time_and_git_servers_through_roder_exec() {
    let pip = "pip install mcp-server-time mcp-server-git";
    if !installed("mcp-server-time", &["--help"], pip)
        || !installed("mcp-server-git", &["--help"], pip)
    {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    git(workspace.path(), &["init", "-q", "-b", "mcp-branch"]);
    git(
        workspace.path(),
        &["commit", "-q", "--allow-empty", "-m", "init"],
    );
    std::fs::write(workspace.path().join("untracked-file.txt"), "x").unwrap();
    let repo = workspace.path().to_str().unwrap();

    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    std::fs::write(
        home.path().join("config.toml"),
        config(
            &server,
            &format!(
                "[mcp_servers.time]\ncommand = \"mcp-server-time\"\nstartup_timeout_sec = 90\nargs = [\"--local-timezone\", \"UTC\"]\n\n[mcp_servers.git]\ncommand = \"mcp-server-git\"\nstartup_timeout_sec = 90\nargs = [\"--repository\", \"{repo}\"]\nenabled_tools = [\"git_status\", \"git_log\"]\n"
            ),
        ),
    )
    .unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-time",
        "mcp__time__convert_time",
        r#"{"source_timezone":"UTC","time":"09:30","target_timezone":"Asia/Kolkata"}"#,
    )]));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-git",
        "mcp__git__git_status",
        &format!(r#"{{"repo_path":"{repo}"}}"#),
    )]));
    server.push(ChatStream::text_reply(
        "It is 15:00 in Kolkata; one file is untracked.",
    ));

    let run = exec(
        home.path(),
        workspace.path(),
        "what time is it, and what changed?",
    )
    .await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "stderr:\n{stderr}");
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "It is 15:00 in Kolkata; one file is untracked.\n"
    );

    let requests = server.model_requests();
    assert_eq!(requests.len(), 3, "{stderr}");
    // The tools are offered under their mcp__ names with their schemas; the
    // git tools are only those enabled.
    let offered = requests[0].body["tools"].to_string();
    assert!(offered.contains("mcp__time__get_current_time"), "{offered}");
    assert!(offered.contains("source_timezone"), "{offered}");
    assert!(offered.contains("mcp__git__git_log"), "{offered}");
    assert!(!offered.contains("mcp__git__git_commit"), "{offered}");
    assert!(
        offered.contains("\"exec_command\""),
        "builtins stay: {offered}"
    );
    let second = requests[1].body.to_string();
    assert!(
        second.contains("15:00"),
        "the converted time reaches the model: {second}"
    );
    let third = requests[2].body.to_string();
    assert!(
        third.contains("mcp-branch"),
        "git status reaches the model: {third}"
    );
    assert!(third.contains("untracked-file.txt"), "{third}");
}

#[tokio::test]
async fn a_server_that_cannot_start_is_an_error_result_not_a_failed_turn() {
    let home = tempfile::tempdir().unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        config(
            &server,
            "[mcp_servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo HIDDEN-STDERR >&2; exit 7\"]\nenabled_tools = [\"probe\"]\n",
        ),
    )
    .unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-1",
        "mcp__broken__probe",
        "{}",
    )]));
    server.push(ChatStream::text_reply("The probe server is down."));

    let run = exec(home.path(), workspace.path(), "probe").await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("MCP server \"broken\""), "{stderr}");
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    let second = requests[1].body.to_string();
    assert!(second.contains("failed to start"), "{second}");
    assert!(!second.contains("HIDDEN-STDERR"), "{second}");
}

#[tokio::test]
async fn placement_runner_of_a_url_server_is_refused_by_name() {
    let home = tempfile::tempdir().unwrap();
    let server = FakeModelServer::start().await.unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        config(
            &server,
            "[mcp_servers.boxed]\nurl = \"http://127.0.0.1:1/mcp\"\nplacement = \"runner\"\n",
        ),
    )
    .unwrap();
    let run = exec(home.path(), home.path(), "hi").await;
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("[mcp_servers.boxed]: placement = \"runner\" is for command servers"),
        "{stderr}"
    );
    assert!(server.model_requests().is_empty());
}
