//! A server written with the `mcp` SDK over stdio: how each kind of result
//! reaches the model (images noted, structured content kept, `isError`),
//! that its stderr and Roder's environment never reach the model, and that
//! a server that cannot start is an error result, not an error.

mod support;

use std::path::Path;
use std::time::Duration;

use roder_ext_mcp::{McpServerConfig, McpToolSource, McpTransport, ServerStatus};

fn toy() -> McpServerConfig {
    let script = support::toy_server();
    McpServerConfig::stdio("toy", "python3", &[script.to_str().unwrap(), "stdio"])
}

#[tokio::test]
async fn each_kind_of_result_maps_to_a_tool_result() {
    if !support::have_sdk() {
        return;
    }
    let source = McpToolSource::start(vec![toy()], Path::new("."))
        .await
        .unwrap();
    assert!(
        matches!(source.statuses()[0].1, ServerStatus::Ready { tools: 8 }),
        "{:?}",
        source.statuses()
    );

    let echo = support::call(&source, "mcp__toy__echo", serde_json::json!({"text": "hi"})).await;
    assert!(!echo.is_error, "{}", echo.text);
    assert_eq!(echo.text, "echo: hi");

    let picture = support::call(&source, "mcp__toy__picture", serde_json::json!({})).await;
    assert!(!picture.is_error, "{}", picture.text);
    assert!(picture.text.contains("a red pixel"), "{}", picture.text);
    assert!(
        picture.text.contains("[image: image/png"),
        "{}",
        picture.text
    );
    assert!(!picture.text.contains("iVBOR"), "{}", picture.text);
    assert_eq!(picture.data["media"][0]["mime_type"], "image/png");

    let measured = support::call(
        &source,
        "mcp__toy__measure",
        serde_json::json!({"text": "one two three"}),
    )
    .await;
    assert!(!measured.is_error, "{}", measured.text);
    assert_eq!(measured.data["structured_content"]["words"], 3);
    assert_eq!(measured.data["structured_content"]["length"], 13);

    let failed = support::call(
        &source,
        "mcp__toy__fail",
        serde_json::json!({"message": "the disk is on fire"}),
    )
    .await;
    assert!(failed.is_error);
    assert!(
        failed.text.contains("the disk is on fire"),
        "{}",
        failed.text
    );

    let bad_arguments = support::call(&source, "mcp__toy__echo", serde_json::json!([1, 2])).await;
    assert!(bad_arguments.is_error);
    assert!(
        bad_arguments.text.contains("JSON object"),
        "{}",
        bad_arguments.text
    );

    let missing_argument = support::call(&source, "mcp__toy__echo", serde_json::json!({})).await;
    assert!(missing_argument.is_error, "{}", missing_argument.text);
}

#[tokio::test]
async fn stderr_and_roder_s_environment_stay_with_roder() {
    if !support::have_sdk() {
        return;
    }
    // Cargo sets these for the test process; the server must not see them
    // unless its configuration passes them.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    let mut config = toy();
    if let McpTransport::Stdio(server) = &mut config.transport {
        server
            .env
            .insert("TOY_SETTING".into(), "from-config".into());
        server.env_vars.push("CARGO_PKG_VERSION".into());
    }
    let source = McpToolSource::start(vec![config], Path::new("."))
        .await
        .unwrap();
    let env = async |name: &str| {
        support::call(&source, "mcp__toy__env", serde_json::json!({"name": name}))
            .await
            .text
    };
    assert_eq!(env("CARGO_PKG_NAME").await, "<unset>");
    assert_eq!(env("TOY_SETTING").await, "from-config");
    assert_eq!(env("CARGO_PKG_VERSION").await, env!("CARGO_PKG_VERSION"));
    assert_ne!(env("PATH").await, "<unset>");

    let shouted = support::call(
        &source,
        "mcp__toy__shout_to_stderr",
        serde_json::json!({"text": "STDERR-ONLY-MARKER"}),
    )
    .await;
    assert!(!shouted.is_error, "{}", shouted.text);
    assert!(
        !shouted.text.contains("STDERR-ONLY-MARKER"),
        "{}",
        shouted.text
    );
    assert!(!shouted.data.to_string().contains("STDERR-ONLY-MARKER"));
    // A line far longer than the log's 8 KiB pieces, twice: the pipe keeps
    // draining and the server keeps answering.
    for _ in 0..2 {
        let long = support::call(
            &source,
            "mcp__toy__shout_to_stderr",
            serde_json::json!({"text": "y".repeat(200_000)}),
        )
        .await;
        assert!(!long.is_error, "{}", long.text);
    }
}

#[tokio::test]
async fn a_server_that_cannot_start_gives_error_results() {
    let mut missing = McpServerConfig::stdio("missing", "/nonexistent/mcp-server", &[]);
    missing.tools.enabled = Some(vec!["probe".into()]);
    let mut dies =
        McpServerConfig::stdio("dies", "sh", &["-c", "echo SECRET-STDERR-LINE >&2; exit 3"]);
    dies.tools.enabled = Some(vec!["probe".into()]);
    let mut silent = McpServerConfig::stdio("silent", "sleep", &["30"]);
    silent.startup_timeout = Duration::from_millis(500);
    let source = McpToolSource::start(vec![missing, dies, silent], Path::new("."))
        .await
        .unwrap();
    let statuses = source.statuses();
    assert!(
        statuses
            .iter()
            .all(|(_, status)| matches!(status, ServerStatus::Failed { .. })),
        "{statuses:?}"
    );
    let ServerStatus::Failed { error, tools } = &statuses[2].1 else {
        unreachable!()
    };
    assert!(error.contains("within 0.5 s"), "{error}");
    assert_eq!(*tools, 0);

    let missing = support::call(&source, "mcp__missing__probe", serde_json::json!({})).await;
    assert!(missing.is_error);
    assert!(
        missing.text.contains("/nonexistent/mcp-server"),
        "{}",
        missing.text
    );

    let dies = support::call(&source, "mcp__dies__probe", serde_json::json!({})).await;
    assert!(dies.is_error);
    assert!(dies.text.contains("failed to start"), "{}", dies.text);
    assert!(!dies.text.contains("SECRET-STDERR-LINE"), "{}", dies.text);
}

#[tokio::test]
async fn a_server_that_keeps_failing_to_start_is_not_started_by_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let script = format!("echo start >> '{}'; exit 3", starts.display());
    let mut failing = McpServerConfig::stdio("failing", "sh", &["-c", &script]);
    failing.tools.enabled = Some(vec!["probe".into()]);
    let source = McpToolSource::start(vec![failing], Path::new("."))
        .await
        .unwrap();
    let count = || {
        std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(count(), 1, "the start at start-up");

    // Within the back-off (1 s after one failure) calls answer the last
    // error at once instead of starting it again.
    for _ in 0..5 {
        let result = support::call(&source, "mcp__failing__probe", serde_json::json!({})).await;
        assert!(result.is_error);
        assert!(result.text.contains("failed to start"), "{}", result.text);
        assert!(
            result.text.contains("the next start is tried in"),
            "{}",
            result.text
        );
    }
    assert_eq!(count(), 1);

    // Once it has run out the next call tries again, and the back-off
    // doubles (2 s after two failures).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let retried = support::call(&source, "mcp__failing__probe", serde_json::json!({})).await;
    assert!(retried.is_error);
    assert_eq!(count(), 2);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let waiting = support::call(&source, "mcp__failing__probe", serde_json::json!({})).await;
    assert!(
        waiting.text.contains("2 time(s) in a row"),
        "{}",
        waiting.text
    );
    assert_eq!(count(), 2);
}

#[tokio::test]
async fn placement_runner_of_a_url_and_bad_names_are_refused() {
    let mut runner = McpServerConfig::http("boxed", "http://127.0.0.1:1/mcp");
    runner.placement = roder_ext_mcp::Placement::Runner;
    let error = McpToolSource::start(vec![runner], Path::new("."))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("placement = \"runner\" needs a command"),
        "{error}"
    );
    let error = McpToolSource::start(
        vec![McpServerConfig::stdio("my server", "true", &[])],
        Path::new("."),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(error.contains("\"my server\""), "{error}");
    let error = McpToolSource::start(
        vec![
            McpServerConfig::stdio("a", "true", &[]),
            McpServerConfig::stdio("a", "true", &[]),
        ],
        Path::new("."),
    )
    .await
    .err()
    .unwrap()
    .to_string();
    assert!(error.contains("configured twice"), "{error}");
}

#[tokio::test]
async fn a_slow_call_times_out_and_is_cancelled_with_the_turn() {
    if !support::have_sdk() {
        return;
    }
    let mut config = toy();
    config.call_timeout = Duration::from_millis(300);
    let source = McpToolSource::start(vec![config], Path::new("."))
        .await
        .unwrap();
    let slow = support::call(
        &source,
        "mcp__toy__sleep",
        serde_json::json!({"seconds": 30}),
    )
    .await;
    assert!(slow.is_error);
    assert!(
        slow.text.contains("no answer within 0.3 s"),
        "{}",
        slow.text
    );
    // The server is still the same and still answers.
    let fast = support::call(
        &source,
        "mcp__toy__sleep",
        serde_json::json!({"seconds": 0}),
    )
    .await;
    assert!(!fast.is_error, "{}", fast.text);

    use roder_api::tools::{ToolCall, ToolExecutionContext, ToolExecutor as _, ToolWorkspace};
    let tool = source
        .tools()
        .iter()
        .find(|tool| tool.server_tool_name() == "sleep")
        .unwrap()
        .clone();
    let context = ToolExecutionContext::for_workspace(ToolWorkspace::None);
    let cancel = context.cancellation.clone();
    let call = ToolCall {
        id: "c".into(),
        name: "mcp__toy__sleep".into(),
        arguments: serde_json::json!({"seconds": 0.25}),
    };
    let running = tokio::spawn(async move { tool.execute(context, call).await.unwrap() });
    cancel.cancel();
    let cancelled = tokio::time::timeout(Duration::from_secs(5), running)
        .await
        .unwrap()
        .unwrap();
    assert!(cancelled.is_error);
    assert!(cancelled.text.contains("cancelled"), "{}", cancelled.text);
}

#[tokio::test]
async fn concurrent_calls_share_one_server() {
    if !support::have_sdk() {
        return;
    }
    let source = McpToolSource::start(vec![toy()], Path::new("."))
        .await
        .unwrap();
    let pid = support::call(&source, "mcp__toy__pid", serde_json::json!({}))
        .await
        .text;
    let calls = (0..8).map(|index| {
        let source = &source;
        async move {
            let text = format!("call {index}");
            let result = support::call(
                source,
                "mcp__toy__sleep",
                serde_json::json!({"seconds": 0.2}),
            )
            .await;
            assert!(!result.is_error, "{}", result.text);
            let echo =
                support::call(source, "mcp__toy__echo", serde_json::json!({"text": text})).await;
            assert_eq!(echo.text, format!("echo: call {index}"));
        }
    });
    let started = std::time::Instant::now();
    futures::future::join_all(calls).await;
    // Eight 0.2 s sleeps in parallel, not one after another.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let again = support::call(&source, "mcp__toy__pid", serde_json::json!({}))
        .await
        .text;
    assert_eq!(pid, again, "one server process for all of them");
}

#[tokio::test]
async fn a_server_that_stops_starting_still_offers_its_last_tools() {
    if !support::have_sdk() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    let listed = McpToolSource::start_with_cache(vec![toy()], Path::new("."), Some(cache.path()))
        .await
        .unwrap();
    assert!(matches!(
        listed.statuses()[0].1,
        ServerStatus::Ready { tools: 8 }
    ));
    assert!(cache.path().join("toy.json").exists());
    let echo_spec = listed
        .specs()
        .into_iter()
        .find(|spec| spec.name == "mcp__toy__echo")
        .unwrap();

    // The same program, now unable to start (its directory is gone).
    let mut broken = toy();
    if let McpTransport::Stdio(server) = &mut broken.transport {
        server.cwd = Some("/nonexistent/dir".into());
    }
    let source = McpToolSource::start_with_cache(vec![broken], Path::new("."), Some(cache.path()))
        .await
        .unwrap();
    assert!(
        matches!(
            source.statuses()[0].1,
            ServerStatus::Failed { tools: 8, .. }
        ),
        "{:?}",
        source.statuses()
    );
    let cached_spec = source
        .specs()
        .into_iter()
        .find(|spec| spec.name == "mcp__toy__echo")
        .unwrap();
    assert_eq!(cached_spec.parameters, echo_spec.parameters);
    let call = support::call(&source, "mcp__toy__echo", serde_json::json!({"text": "x"})).await;
    assert!(call.is_error);
    assert!(call.text.contains("/nonexistent/dir"), "{}", call.text);

    // Another program under the same name does not get this list.
    let mut other = McpServerConfig::stdio("toy", "/nonexistent/other-server", &[]);
    other.startup_timeout = Duration::from_secs(5);
    let source = McpToolSource::start_with_cache(vec![other], Path::new("."), Some(cache.path()))
        .await
        .unwrap();
    assert!(source.tools().is_empty());
}
