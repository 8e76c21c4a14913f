//! Traces through the real `roder` binary and a real OTLP/HTTP receiver: a
//! turn with two tool calls on a docker runner is one trace under the
//! caller's `traceparent`, spans nest (turn → model calls and tool calls →
//! provisioning), model spans carry the GenAI attributes and token counts,
//! a command in the sandbox sees its tool span's `TRACEPARENT`, no prompt
//! text is recorded by default, and a collector that refuses connections
//! neither fails nor holds the turn.

mod docker_support;
mod support;

use std::process::Stdio;

use docker_support::{docker_or_skip, home_with_docker_runner};
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::finish;
use support::otlp::{Receiver, attribute, hex};

const CALLER_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const PROMPT: &str = "PROMPT-TEXT-NOT-FOR-TRACES";

fn exec(
    home: &std::path::Path,
    workspace: &std::path::Path,
    endpoint: &str,
) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", "--runner", "box", PROMPT])
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        .env("TRACEPARENT", format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01"))
        .env_remove("RODER_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// A model that calls `exec_command true` once and then answers, a home
/// using it, and a workspace.
async fn one_true_call() -> (FakeModelServer, tempfile::TempDir, tempfile::TempDir) {
    let server = FakeModelServer::start().await.unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-true",
        "exec_command",
        r#"{"cmd":"true"}"#,
    )]));
    server.push(ChatStream::text_reply("done."));
    let home = tempfile::tempdir().unwrap();
    support::write_config(home.path(), &server, None);
    (server, home, tempfile::tempdir().unwrap())
}

/// `roder exec PROMPT` on the host in `workspace`, with `env` added.
async fn local_exec(
    home: &std::path::Path,
    workspace: &std::path::Path,
    prompt: &str,
    env: &[(&str, &str)],
) -> support::Finished {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"))
        .args(["exec", prompt])
        .current_dir(workspace)
        .env("RODER_HOME", home)
        .env("FAKE_MODEL_KEY", "test-key")
        .envs(env.iter().copied())
        .env_remove("RODER_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    finish(child).await
}

fn script(server: &FakeModelServer) {
    server.push(ChatStream::tool_calls_reply(&[(
        "call-env",
        "exec_command",
        r#"{"cmd":"echo tp=$TRACEPARENT"}"#,
    )]));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-true",
        "exec_command",
        r#"{"cmd":"true"}"#,
    )]));
    server.push(ChatStream::text_reply("traced."));
}

#[tokio::test]
async fn a_docker_turn_is_one_trace_under_the_callers_context() {
    let Some(containers) =
        docker_or_skip("a_docker_turn_is_one_trace_under_the_callers_context").await
    else {
        return;
    };
    let receiver = Receiver::start().await;
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"cleanup = "delete-on-close""#,
    );
    script(&server);
    let run = finish(exec(home.path(), workspace.path(), &receiver.endpoint)).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);

    let spans = receiver.spans();
    let named = |name: &str| -> Vec<_> { spans.iter().filter(|span| span.name == name).collect() };
    // One trace: the caller's.
    assert!(!spans.is_empty(), "spans were exported");
    for span in &spans {
        assert_eq!(hex(&span.trace_id), CALLER_TRACE, "{}", span.name);
    }
    let turns = named("turn");
    assert_eq!(turns.len(), 1);
    let turn = turns[0];
    assert_eq!(
        hex(&turn.parent_span_id),
        CALLER_SPAN,
        "the caller's span is the turn's parent"
    );
    let turn_id = hex(&turn.span_id);
    // Model calls, with the GenAI conventions.
    let chats = named("chat test-model");
    assert_eq!(
        chats.len(),
        3,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for chat in &chats {
        assert_eq!(hex(&chat.parent_span_id), turn_id);
        assert_eq!(attribute(chat, "gen_ai.system").as_deref(), Some("fake"));
        assert_eq!(
            attribute(chat, "gen_ai.request.model").as_deref(),
            Some("test-model")
        );
        assert_eq!(
            attribute(chat, "gen_ai.usage.input_tokens").as_deref(),
            Some("10")
        );
        assert_eq!(
            attribute(chat, "gen_ai.usage.output_tokens").as_deref(),
            Some("5")
        );
        assert!(
            attribute(chat, "gen_ai.response.finish_reasons").is_some(),
            "{chat:?}"
        );
        assert!(
            attribute(chat, "roder.time_to_first_token_ms").is_some(),
            "{chat:?}"
        );
    }
    // Tool calls, in the container.
    let tools = named("execute_tool exec_command");
    assert_eq!(tools.len(), 2);
    for tool in &tools {
        assert_eq!(hex(&tool.parent_span_id), turn_id);
        assert_eq!(attribute(tool, "roder.runs_on").as_deref(), Some("runner"));
        assert_eq!(
            attribute(tool, "roder.runner.provider").as_deref(),
            Some("docker")
        );
        assert_eq!(
            attribute(tool, "roder.tool.effects").as_deref(),
            Some("execute")
        );
        assert_eq!(
            attribute(tool, "roder.tool.exit_code").as_deref(),
            Some("0")
        );
        assert!(attribute(tool, "roder.runner.session_id").is_some_and(|id| !id.is_empty()));
    }
    let first_tool = tools
        .iter()
        .find(|tool| attribute(tool, "gen_ai.tool.call.id").as_deref() == Some("call-env"))
        .unwrap();
    // Provisioning happens under the first call that needed the sandbox.
    let provisions = named("runner.provision");
    assert_eq!(provisions.len(), 1);
    assert_eq!(provisions[0].parent_span_id, first_tool.span_id);
    // Each command ran through the in-container executor, in a span of
    // its own under its tool span.
    let execs = named("executor exec");
    assert_eq!(
        execs.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    for exec in &execs {
        assert!(
            tools.iter().any(|tool| tool.span_id == exec.parent_span_id),
            "{exec:?}"
        );
        assert_eq!(attribute(exec, "process.exit.code").as_deref(), Some("0"));
        assert_eq!(
            attribute(exec, "process.executable.name").as_deref(),
            Some("sh")
        );
    }
    // The command saw its own tool span's context.
    let requests = server.model_requests();
    let seen = requests[1].body.to_string();
    let expected = format!("tp=00-{CALLER_TRACE}-{}-01", hex(&first_tool.span_id));
    assert!(seen.contains(&expected), "{expected} in {seen}");
    // No prompt text anywhere by default.
    for span in &spans {
        let text = format!("{:?}", span.attributes);
        assert!(
            !text.contains(PROMPT),
            "{} carries the prompt: {text}",
            span.name
        );
    }
}

#[tokio::test]
async fn a_collector_that_refuses_connections_neither_fails_nor_holds_the_turn() {
    let Some(containers) =
        docker_or_skip("a_collector_that_refuses_connections_neither_fails_nor_holds_the_turn")
            .await
    else {
        return;
    };
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"cleanup = "delete-on-close""#,
    );
    script(&server);
    let run = finish(exec(home.path(), workspace.path(), &endpoint)).await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    assert_eq!(run.stdout, "traced.\n");
    let warnings = run.stderr.matches("could not export").count();
    assert_eq!(warnings, 1, "said once: {}", run.stderr);
}

#[tokio::test]
async fn a_turn_exported_over_grpc_reaches_a_grpc_collector_in_the_callers_trace() {
    let receiver = support::otlp::GrpcReceiver::start().await;
    let (_server, home, workspace) = one_true_call().await;
    let traceparent = format!("00-{CALLER_TRACE}-{CALLER_SPAN}-01");
    let run = local_exec(
        home.path(),
        workspace.path(),
        "run true",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("TRACEPARENT", &traceparent),
        ],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    let turn = spans
        .iter()
        .find(|span| span.name == "turn")
        .unwrap_or_else(|| panic!("no turn span over gRPC: {names:?}"));
    assert_eq!(hex(&turn.trace_id), CALLER_TRACE);
    assert_eq!(hex(&turn.parent_span_id), CALLER_SPAN);
    assert!(
        spans
            .iter()
            .any(|span| attribute(span, "gen_ai.tool.name").as_deref() == Some("exec_command")),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_turns_metrics_reach_the_receiver_at_exit() {
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    let receiver = Receiver::start().await;
    let (_server, home, workspace) = one_true_call().await;
    let run = local_exec(
        home.path(),
        workspace.path(),
        "run true",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let metrics = receiver.metrics();
    let named = |name: &str| {
        metrics
            .iter()
            .filter(|metric| metric.name == name)
            .filter_map(|metric| metric.data.clone())
            .collect::<Vec<_>>()
    };
    let histogram_count = |name: &str| -> u64 {
        named(name)
            .iter()
            .map(|data| match data {
                Data::Histogram(histogram) => {
                    histogram.data_points.iter().map(|point| point.count).sum()
                }
                other => panic!("{name} is not a histogram: {other:?}"),
            })
            .max()
            .unwrap_or(0)
    };
    let names: Vec<&str> = metrics.iter().map(|metric| metric.name.as_str()).collect();
    assert_eq!(histogram_count("roder.turn.duration"), 1, "{names:?}");
    assert_eq!(histogram_count("roder.tool.duration"), 1, "{names:?}");
    let tokens: i64 = named("gen_ai.client.token.usage")
        .iter()
        .map(|data| match data {
            Data::Sum(sum) => sum
                .data_points
                .iter()
                .map(|point| match point.value {
                    Some(
                        opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n),
                    ) => n,
                    _ => 0,
                })
                .sum(),
            other => panic!("token usage is not a sum: {other:?}"),
        })
        .max()
        .unwrap_or(0);
    assert!(tokens > 0, "token usage exported: {names:?}");
    // The running-turns gauge went up and back down: 0 at exit.
    let running: Vec<i64> = named("roder.turns.running")
        .iter()
        .map(|data| match data {
            Data::Sum(sum) => {
                assert!(!sum.is_monotonic, "an up-down counter");
                sum.data_points
                    .iter()
                    .map(|point| match point.value {
                        Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(n)) => n,
                        _ => i64::MIN,
                    })
                    .sum()
            }
            other => panic!("turns running is not a sum: {other:?}"),
        })
        .collect();
    assert_eq!(running.last(), Some(&0), "{names:?}");
}

#[tokio::test]
async fn an_mcp_call_has_its_own_span_under_its_tool_span() {
    if !support::installed(
        "mcp-server-time",
        &["--help"],
        "pip install mcp-server-time",
    ) {
        return;
    }
    let receiver = Receiver::start().await;
    let server = FakeModelServer::start().await.unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-time",
        "mcp__time__get_current_time",
        r#"{"timezone":"UTC"}"#,
    )]));
    server.push(ChatStream::text_reply("it is late."));
    let home = tempfile::tempdir().unwrap();
    support::write_config(home.path(), &server, None);
    let config = home.path().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("{text}\n[mcp_servers.time]\ncommand = \"mcp-server-time\"\n"),
    )
    .unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let run = local_exec(
        home.path(),
        workspace.path(),
        "what time is it",
        &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)],
    )
    .await;
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    let tool = spans
        .iter()
        .find(|span| span.name == "execute_tool mcp__time__get_current_time")
        .unwrap_or_else(|| panic!("no tool span: {names:?}"));
    let call = spans
        .iter()
        .find(|span| span.name == "tools/call get_current_time")
        .unwrap_or_else(|| panic!("no MCP call span: {names:?}"));
    assert_eq!(call.trace_id, tool.trace_id);
    assert_eq!(hex(&call.parent_span_id), hex(&tool.span_id), "{names:?}");
    assert_eq!(
        attribute(call, "mcp.method.name").as_deref(),
        Some("tools/call")
    );
    assert_eq!(
        attribute(call, "network.transport").as_deref(),
        Some("pipe")
    );
    assert_eq!(attribute(call, "roder.mcp.server").as_deref(), Some("time"));
    assert!(call.start_time_unix_nano >= tool.start_time_unix_nano);
    assert!(call.end_time_unix_nano <= tool.end_time_unix_nano);
}
