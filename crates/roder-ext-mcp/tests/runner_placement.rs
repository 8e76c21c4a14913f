//! `placement = "runner"` against the real Docker engine: a real MCP server
//! (`roder-mcp-probe`, this crate's rmcp server, copied into a
//! `roder-sandbox-debian:latest` container) started through the thread's
//! runner session on the first call of its tools, its stdio carried over the
//! session's process stream. Its side effects stay in the container; each
//! session gets its own server; one that exits is started again on the next
//! call; its stderr never reaches the model; a provider without interactive
//! processes makes the call an error result, not a failure.
//!
//! Skips (loudly) only without a Docker daemon socket outside CI; under
//! `CI=true` a missing daemon or image fails.

use std::path::Path;
use std::sync::Arc;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RemoteWorkspace, RunnerCommandRequest,
    RunnerDestination, RunnerFileWriteRequest, RunnerManifest,
};
use roder_api::tools::{
    LocalWorkspace, ToolCall, ToolExecutionContext, ToolExecutor, ToolResult, ToolWorkspace,
};
use roder_ext_mcp::{McpServerConfig, McpTool, McpToolSource, Placement, ServerStatus};
use roder_ext_runner_docker::DockerRunnerProvider;
use serde_json::{Value, json};

const DEBIAN_IMAGE: &str = "roder-sandbox-debian:latest";
const PROBE: &str = env!("CARGO_BIN_EXE_roder-mcp-probe");
/// Where the probe is copied in each container.
const PROBE_IN_SANDBOX: &str = "/tmp/roder-mcp-probe";

fn under_ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

/// The provider, or `None` (loudly) without a daemon outside CI.
async fn provider(test: &str) -> Option<DockerRunnerProvider> {
    if !roder_ext_runner_docker::daemon_socket_present() {
        assert!(!under_ci(), "no Docker daemon under CI=true");
        eprintln!("\n!!! SKIPPING {test}: no Docker daemon socket !!!\n");
        return None;
    }
    let provider = DockerRunnerProvider::connect().expect("docker client");
    let docker = provider.docker().await.expect("the Docker daemon answers");
    if docker.inspect_image(DEBIAN_IMAGE).await.is_err() {
        assert!(
            !under_ci(),
            "the image {DEBIAN_IMAGE} is missing under CI=true: .ci/run builds it with scripts/build-debian-image.sh"
        );
        eprintln!(
            "\n!!! SKIPPING {test}: the image {DEBIAN_IMAGE} is missing; build it with scripts/build-debian-image.sh !!!\n"
        );
        return None;
    }
    Some(provider)
}

/// A docker session on the Debian image (glibc as on the host, so the
/// probe built here runs in it), labelled so a leak is findable.
async fn sandbox(provider: &DockerRunnerProvider, id: &str) -> Arc<dyn RemoteRunnerSession> {
    let destination = RunnerDestination {
        id: id.to_string(),
        provider_id: roder_ext_runner_docker::PROVIDER_ID.to_string(),
        config: json!({
            "image": DEBIAN_IMAGE,
            "labels": {"roder-test": uuid::Uuid::new_v4().simple().to_string()},
        }),
        default_manifest: RunnerManifest::default(),
    };
    let session = provider.create_session(destination).await.unwrap();
    session
        .write_file(RunnerFileWriteRequest {
            path: PROBE_IN_SANDBOX.into(),
            contents: stripped_probe(),
        })
        .await
        .unwrap();
    let chmod = sh(session.as_ref(), &format!("chmod +x {PROBE_IN_SANDBOX}")).await;
    assert_eq!(chmod.0, Some(0), "{chmod:?}");
    session
}

/// The probe without its debug info (83 MB → a few MB to copy in).
fn stripped_probe() -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("probe");
    let status = std::process::Command::new("strip")
        .arg("-o")
        .arg(&out)
        .arg(PROBE)
        .status();
    match status {
        Ok(status) if status.success() => std::fs::read(&out).unwrap(),
        _ => std::fs::read(PROBE).unwrap(),
    }
}

async fn sh(session: &dyn RemoteRunnerSession, script: &str) -> (Option<i32>, String) {
    let result = session
        .run_command(RunnerCommandRequest {
            command_id: uuid::Uuid::new_v4().to_string(),
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            cwd: None,
            env: Vec::new(),
            timeout_ms: Some(30_000),
        })
        .await
        .unwrap();
    (result.exit_code, result.stdout)
}

fn probe_config() -> McpServerConfig {
    let mut config = McpServerConfig::stdio("probe", PROBE_IN_SANDBOX, &[]);
    config.placement = Placement::Runner;
    config.tools.enabled = Some(vec!["write_file".into(), "whereami".into(), "exit".into()]);
    config.startup_timeout = std::time::Duration::from_secs(30);
    config
}

fn tool<'a>(source: &'a McpToolSource, name: &str) -> &'a Arc<McpTool> {
    source
        .tools()
        .iter()
        .find(|tool| tool.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(tool: &McpTool, workspace: ToolWorkspace, arguments: Value) -> ToolResult {
    let call = ToolCall {
        id: uuid::Uuid::new_v4().to_string(),
        name: tool.spec().name,
        arguments,
    };
    tool.execute(ToolExecutionContext::for_workspace(workspace), call)
        .await
        .unwrap()
}

fn remote(session: &Arc<dyn RemoteRunnerSession>) -> ToolWorkspace {
    ToolWorkspace::Remote(RemoteWorkspace {
        session: session.clone(),
        root: "/workspace".into(),
        read_roots: Vec::new(),
    })
}

/// The `pid=` of a `whereami` answer.
fn field(text: &str, key: &str) -> String {
    text.split_whitespace()
        .find_map(|part| part.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .to_string()
}

#[tokio::test]
async fn a_runner_placed_server_runs_in_each_threads_sandbox_and_its_effects_stay_there() {
    let test = "a_runner_placed_server_runs_in_each_threads_sandbox";
    let Some(provider) = provider(test).await else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let source =
        McpToolSource::start_with_cache(vec![probe_config()], host.path(), Some(cache.path()))
            .await
            .unwrap();
    assert_eq!(
        source.statuses(),
        &[("probe".to_string(), ServerStatus::InRunner { tools: 3 })]
    );
    let write = tool(&source, "mcp__probe__write_file");
    let whereami = tool(&source, "mcp__probe__whereami");
    let exit = tool(&source, "mcp__probe__exit");

    let first = sandbox(&provider, "thread-mcp-a").await;
    let second = sandbox(&provider, "thread-mcp-b").await;

    // Started on the first call, in the sandbox: the file is in the
    // container and not on the host.
    let marker = format!(
        "/tmp/roder-mcp-side-effect-{}",
        uuid::Uuid::new_v4().simple()
    );
    let wrote = call(
        write,
        remote(&first),
        json!({"path": marker, "text": "made inside"}),
    )
    .await;
    assert!(!wrote.is_error, "{}", wrote.text);
    assert!(wrote.text.contains("wrote 11 bytes"), "{}", wrote.text);
    assert!(!wrote.text.contains("PROBE-STDERR-LINE"), "{}", wrote.text);
    assert_eq!(
        sh(first.as_ref(), &format!("cat {marker}")).await,
        (Some(0), "made inside".to_string())
    );
    assert!(!Path::new(&marker).exists(), "the server wrote on the host");
    // The other sandbox does not have it either.
    assert_ne!(
        sh(second.as_ref(), &format!("cat {marker}")).await.0,
        Some(0)
    );

    // Each session has its own server, in its own container.
    let (_, first_host) = sh(first.as_ref(), "cat /etc/hostname").await;
    let (_, second_host) = sh(second.as_ref(), "cat /etc/hostname").await;
    let here = call(whereami, remote(&first), json!({})).await;
    assert!(!here.is_error, "{}", here.text);
    assert_eq!(field(&here.text, "host"), first_host.trim());
    let there = call(whereami, remote(&second), json!({})).await;
    assert!(!there.is_error, "{}", there.text);
    assert_eq!(field(&there.text, "host"), second_host.trim());
    assert_ne!(first_host, second_host);
    let first_pid = field(&here.text, "pid");
    // The same server answers the session's next call.
    let again = call(whereami, remote(&first), json!({})).await;
    assert_eq!(field(&again.text, "pid"), first_pid, "{}", again.text);

    // A server that exits: the call is an error result, the next call
    // starts it again in the same sandbox (a new process).
    let died = call(exit, remote(&first), json!({})).await;
    assert!(died.is_error, "{}", died.text);
    let restarted = call(whereami, remote(&first), json!({})).await;
    assert!(!restarted.is_error, "{}", restarted.text);
    assert_eq!(field(&restarted.text, "host"), first_host.trim());
    let (_, alive) = sh(first.as_ref(), "pgrep -c -x roder-mcp-probe || true").await;
    assert_eq!(alive.trim(), "1", "exactly one probe in the sandbox");
    assert_ne!(field(&restarted.text, "pid"), "", "{}", restarted.text);

    // A thread with no runner gets an error result.
    let local = call(
        whereami,
        ToolWorkspace::Local(LocalWorkspace {
            root: host.path().to_path_buf(),
            read_roots: Vec::new(),
        }),
        json!({}),
    )
    .await;
    assert!(local.is_error);
    assert!(
        local.text.contains("this thread has no runner"),
        "{}",
        local.text
    );

    // The first start saved the real tool list: a later process offers the
    // tools with their schemas, without naming them.
    let mut unnamed = probe_config();
    unnamed.tools.enabled = None;
    let later = McpToolSource::start_with_cache(vec![unnamed], host.path(), Some(cache.path()))
        .await
        .unwrap();
    assert_eq!(later.statuses()[0].1, ServerStatus::InRunner { tools: 3 });
    let schema = tool(&later, "mcp__probe__write_file").spec().parameters;
    assert_eq!(schema["required"], json!(["path", "text"]), "{schema}");

    // Dropping the source (its connections) kills the servers in the
    // sandboxes.
    drop(source);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, first_left) = sh(first.as_ref(), "pgrep -c -x roder-mcp-probe || true").await;
        let (_, second_left) = sh(second.as_ref(), "pgrep -c -x roder-mcp-probe || true").await;
        if first_left.trim() == "0" && second_left.trim() == "0" {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "servers still running: {first_left} {second_left}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    first.close().await.unwrap();
    second.close().await.unwrap();
}

#[tokio::test]
async fn a_provider_without_interactive_processes_gives_an_error_result() {
    let root = tempfile::tempdir().unwrap();
    let provider = roder_ext_runner_unix_local::UnixLocalRunnerProvider::default();
    let session = provider
        .create_session(RunnerDestination {
            id: "local".into(),
            provider_id: roder_ext_runner_unix_local::PROVIDER_ID.into(),
            config: json!({"root": root.path()}),
            default_manifest: RunnerManifest::default(),
        })
        .await
        .unwrap();
    let source = McpToolSource::start(vec![probe_config()], root.path())
        .await
        .unwrap();
    let whereami = tool(&source, "mcp__probe__whereami");
    for _ in 0..2 {
        let result = call(whereami, remote(&session), json!({})).await;
        assert!(result.is_error);
        assert!(
            result.text.contains("cannot start MCP server \"probe\"")
                && result.text.contains("not supported"),
            "{}",
            result.text
        );
        assert_eq!(result.data["mcp_start_failed"], json!(true));
    }
    session.close().await.unwrap();
}

/// Through the runtime: a thread bound to a docker destination calls the
/// runner-placed server's tool; the runtime passes the thread's runner
/// session to it (`ToolExecutor::runs_in_workspace`), so the file it writes
/// is in the thread's container, where the builtin `exec_command` of the
/// same thread reads it, and not on the host.
#[tokio::test]
async fn a_runner_bound_thread_calls_the_server_in_its_sandbox_through_the_runtime() {
    through_the_runtime(
        "a_runner_bound_thread_calls_the_server_in_its_sandbox_through_the_runtime",
        Declared::InConfig,
    )
    .await;
}

/// The same with the server declared for the thread by its client
/// (`Runtime::start_thread_tools`, as `thread/start {mcpServers}` does): it
/// starts in the sandbox, and a host server declared beside it never runs,
/// since the thread is bound to a runner.
#[tokio::test]
async fn a_server_declared_for_a_runner_bound_thread_runs_in_its_sandbox() {
    through_the_runtime(
        "a_server_declared_for_a_runner_bound_thread_runs_in_its_sandbox",
        Declared::ForTheThread,
    )
    .await;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Declared {
    InConfig,
    ForTheThread,
}

async fn through_the_runtime(test: &str, declared: Declared) {
    use roder_api::events::RoderEvent;
    use roder_api::extension::ExtensionRegistryBuilder;
    use roder_api::thread_tools::{MCP_SERVERS, ToolSourceState};
    use roder_core::{
        CreateThreadRequest, Runtime, RuntimeConfig, StartTurnRequest, ThreadRunnerSelection,
    };
    use roder_testkit::{ScriptedEngine, final_round, tool_round};

    let Some(provider) = provider(test).await else {
        return;
    };
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // The probe reaches the container through a read-only bind mount.
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = probe_dir.path().join("roder-mcp-probe");
    std::fs::write(&probe, stripped_probe()).unwrap();
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&probe, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let probe_command = "/opt/roder-probe/roder-mcp-probe";
    let mut config = McpServerConfig::stdio("probe", probe_command, &[]);
    config.placement = Placement::Runner;
    config.tools.enabled = Some(vec!["write_file".into()]);
    let source = McpToolSource::start(vec![config], host.path())
        .await
        .unwrap();

    let rounds = vec![
        tool_round(&[(
            "m",
            "mcp__probe__write_file",
            &json!({"path": "/workspace/from-mcp.txt", "text": "in the box"}).to_string(),
        )]),
        tool_round(&[(
            "c",
            "exec_command",
            &json!({"cmd": "cat /workspace/from-mcp.txt"}).to_string(),
        )]),
        final_round("done"),
    ];
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(ScriptedEngine::new(rounds));
    builder.thread_store_factory(Arc::new(
        roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory {
            base_path: store.path().to_path_buf(),
        },
    ));
    builder.tool_contributor(roder_tools::builtin_coding_tools_contributor(host.path()).unwrap());
    match declared {
        Declared::InConfig => {
            builder.tool_contributor(Arc::new(source));
        }
        Declared::ForTheThread => {
            builder.thread_tool_factory(Arc::new(roder_ext_mcp::McpThreadTools::new(None)));
        }
    }
    builder.remote_runner_provider(Arc::new(provider));
    let runtime = Arc::new(
        Runtime::new(
            builder.build().unwrap(),
            RuntimeConfig {
                workspace: Some(host.path().display().to_string()),
                ..RuntimeConfig::default()
            },
        )
        .unwrap(),
    );
    let mut events = runtime.subscribe_events();
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    let label = uuid::Uuid::new_v4().simple().to_string();
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".to_string(),
        config: json!({
            "image": DEBIAN_IMAGE,
            "labels": {"roder-test": label},
            "mounts": [{"source": probe_dir.path(), "target": "/opt/roder-probe", "read_only": true}],
        }),
        workspace: "/workspace".to_string(),
        read_roots: Vec::new(),
    });
    let thread = runtime.create_thread_with(request).await.unwrap().thread_id;
    let marker = host.path().join("host-server-ran");
    if declared == Declared::ForTheThread {
        let started = runtime
            .start_thread_tools(
                &thread,
                MCP_SERVERS,
                json!({
                    "probe": {"command": probe_command, "placement": "runner", "enabledTools": ["write_file"]},
                    "here": {"command": "touch", "args": [marker.to_str().unwrap()]},
                }),
            )
            .await
            .unwrap();
        let state = |name: &str| {
            started
                .sources
                .iter()
                .find(|source| source.name == name)
                .unwrap_or_else(|| panic!("no {name} in {started:?}"))
                .clone()
        };
        assert_eq!(state("probe").state, ToolSourceState::InRunner);
        assert_eq!(
            state("probe").tools,
            vec!["mcp__probe__write_file".to_string()]
        );
        let here = state("here");
        assert_eq!(here.state, ToolSourceState::Failed);
        assert!(
            here.error
                .as_deref()
                .unwrap()
                .contains("never touches this host"),
            "{here:?}"
        );
    }
    runtime
        .start_turn(StartTurnRequest::new(
            &thread,
            "write it from the MCP server",
        ))
        .await
        .unwrap();
    let mut outputs = Vec::new();
    loop {
        let envelope = tokio::time::timeout(std::time::Duration::from_secs(120), events.recv())
            .await
            .expect("an event within 120 s")
            .expect("no lag");
        if envelope.thread_id != thread {
            continue;
        }
        match envelope.event {
            RoderEvent::ToolCallCompleted(call) => outputs.push((
                call.tool_name.clone().unwrap_or_default(),
                call.output.clone().unwrap_or_default(),
                call.is_error,
            )),
            RoderEvent::TurnCompleted(_) => break,
            other if other.is_terminal() => panic!("the turn ended with {other:?}"),
            _ => {}
        }
    }
    assert_eq!(outputs.len(), 2, "{outputs:?}");
    assert!(!outputs[0].2, "{outputs:?}");
    assert!(
        outputs[0]
            .1
            .contains("wrote 10 bytes to /workspace/from-mcp.txt"),
        "{outputs:?}"
    );
    assert!(!outputs[0].1.contains("PROBE-STDERR-LINE"), "{outputs:?}");
    assert!(!outputs[1].2, "{outputs:?}");
    assert!(outputs[1].1.contains("in the box"), "{outputs:?}");
    assert!(!host.path().join("from-mcp.txt").exists());
    assert!(!Path::new("/workspace/from-mcp.txt").exists());
    assert!(!marker.exists(), "the host server never ran");
    remove_labelled(&label).await;
}

/// Removes the containers a test labelled (the runtime keeps its sessions).
async fn remove_labelled(label: &str) {
    use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
    let docker = bollard::Docker::connect_with_defaults().unwrap();
    let filters = std::collections::HashMap::from([("label", vec![format!("roder-test={label}")])]);
    let options = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let containers = docker.list_containers(Some(options)).await.unwrap();
    assert!(!containers.is_empty(), "the thread's container is labelled");
    for id in containers.into_iter().filter_map(|summary| summary.id) {
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        docker.remove_container(&id, Some(options)).await.unwrap();
    }
}
