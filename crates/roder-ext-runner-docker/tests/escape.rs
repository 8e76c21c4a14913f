//! Escape tests: a docker-bound thread under the sandbox policy, driven
//! through the real runtime and its tools, tries to get out, and every
//! attempt ends in a result the model can read while the host (and the
//! container outside its writable mounts) stays unchanged.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use roder_api::events::RoderEvent;
use roder_api::remote_runner::{RemoteRunnerProvider, RemoteRunnerSession, RunnerSessionState};
use roder_api::sandbox_policy::{NetworkAccess, SandboxPolicy};
use roder_core::{CreateThreadRequest, StartTurnRequest, ThreadRunnerSelection};
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_testkit::{ScriptedEngine, final_round, tool_round};
use serde_json::{Value, json};
use support::runtime::*;
use support::*;

/// One tool call's result as the model sees it.
#[derive(Debug)]
struct Output {
    tool: String,
    text: String,
    is_error: bool,
}

/// Runs one turn of `calls` (tool name, arguments) on a thread bound to
/// the docker runner with `config` and the thread policy `policy`; returns
/// the tool results and the runner state.
async fn turn(
    provider: DockerRunnerProvider,
    config: Value,
    policy: Option<SandboxPolicy>,
    calls: &[(&str, String)],
) -> (Vec<Output>, RunnerSessionState, tempfile::TempDir) {
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let ids: Vec<String> = (0..calls.len()).map(|index| format!("c{index}")).collect();
    let mut rounds: Vec<_> = calls
        .iter()
        .zip(&ids)
        .map(|((tool, arguments), id)| tool_round(&[(id.as_str(), tool, arguments.as_str())]))
        .collect();
    rounds.push(final_round("done"));
    let engine = ScriptedEngine::new(rounds);
    let runtime = runtime(
        std::slice::from_ref(&engine),
        store.path(),
        host.path(),
        Arc::new(provider),
    );
    let mut events = runtime.subscribe_events();
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".to_string(),
        config,
        workspace: "/workspace".to_string(),
        read_roots: Vec::new(),
    });
    let thread = runtime
        .create_thread_with_sandbox(request, policy)
        .await
        .unwrap()
        .thread_id;
    runtime
        .start_turn(StartTurnRequest::new(&thread, "try to get out"))
        .await
        .unwrap();
    let seen = until_turn_ends(&mut events, &thread).await;
    assert!(
        matches!(
            seen.last().map(|envelope| &envelope.event),
            Some(RoderEvent::TurnCompleted(_))
        ),
        "every escape attempt ends in a tool result, not a failed turn: {:#?}",
        seen.last()
    );
    let outputs: Vec<Output> = seen
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ToolCallCompleted(call) => Some(Output {
                tool: call.tool_name.clone().unwrap_or_default(),
                text: call.output.clone().unwrap_or_default(),
                is_error: call.is_error,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(outputs.len(), calls.len(), "{outputs:#?}");
    let state = runtime
        .load_thread(&thread)
        .await
        .unwrap()
        .unwrap()
        .metadata
        .unwrap()
        .runner_state
        .expect("the runner state is persisted");
    assert!(
        std::fs::read_dir(host.path()).unwrap().next().is_none(),
        "nothing is written in the host workspace"
    );
    (outputs, state, host)
}

fn exec(cmd: &str) -> (&'static str, String) {
    ("exec_command", json!({ "cmd": cmd }).to_string())
}

/// The container of `state`, from outside the runtime.
async fn outside(state: &RunnerSessionState) -> Arc<dyn RemoteRunnerSession> {
    DockerRunnerProvider::connect()
        .unwrap()
        .rejoin_session(state.clone())
        .await
        .unwrap()
}

fn small_disk() -> SandboxPolicy {
    let mut policy = SandboxPolicy::default();
    policy.limits.disk_mib = Some(16);
    policy
}

#[tokio::test]
async fn writes_outside_the_writable_mounts_fail_and_nothing_escapes() {
    let Some(provider) = provider("writes_outside_the_writable_mounts_fail").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let mark = uuid::Uuid::new_v4().simple().to_string();
    let calls = [
        exec(&format!("touch /etc/{mark}; echo rc=$?")),
        exec(&format!("cd .. && touch {mark}.outside; echo rc=$?")),
        exec(&format!("echo x > \"$HOME/{mark}\"; echo rc=$? home=$HOME")),
        exec(&format!(
            "ln -s /etc etc-link && echo x > etc-link/{mark}; echo rc=$?"
        )),
        exec("dd if=/dev/zero of=big bs=1M count=64 2>&1; echo rc=$?; rm -f big"),
        exec("dd if=/dev/zero of=/tmp/big bs=1M count=64 2>&1; echo rc=$?; rm -f /tmp/big"),
        exec(&format!(
            "echo ok > /tmp/{mark} && cat /tmp/{mark} && echo ok > inside.txt"
        )),
        (
            "write_file",
            json!({"path": format!("etc-link/{mark}-tool"), "content": "x"}).to_string(),
        ),
    ];
    let (outputs, state, _host) = turn(
        provider,
        label.config(json!({})),
        Some(small_disk()),
        &calls,
    )
    .await;
    for (index, output) in outputs.iter().take(4).enumerate() {
        assert!(!output.is_error, "{index}: {output:?}");
        assert!(
            output.text.contains("Read-only file system") && output.text.contains("rc=1"),
            "attempt {index} is refused, readably: {output:?}"
        );
    }
    assert!(outputs[2].text.contains("home=/root"), "{:?}", outputs[2]);
    for output in &outputs[4..6] {
        assert!(
            output.text.contains("No space left on device") && output.text.contains("rc=1"),
            "writing past the disk bound fails: {output:?}"
        );
    }
    assert!(
        outputs[6].text.contains("ok") && !outputs[6].is_error,
        "/tmp and the workspace stay writable: {:?}",
        outputs[6]
    );
    assert!(
        outputs[7].is_error,
        "write_file through a link out of the workspace fails: {:?}",
        outputs[7]
    );
    assert_eq!(outputs[7].tool, "write_file");

    let view = outside(&state).await;
    let check = run(
        view.as_ref(),
        &format!(
            "ls /etc/{mark} /etc/{mark}-tool /{mark}.outside /root/{mark} 2>&1; ls inside.txt"
        ),
    )
    .await;
    assert_eq!(
        check.stdout.matches("No such file").count(),
        4,
        "nothing was written outside the writable mounts: {check:?}"
    );
    assert!(check.stdout.contains("inside.txt"), "{check:?}");
    for host_path in [
        format!("/etc/{mark}"),
        format!("/tmp/{mark}"),
        format!("/{mark}.outside"),
    ] {
        assert!(
            !Path::new(&host_path).exists(),
            "{host_path} appeared on the host"
        );
    }
    view.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn the_runner_refuses_file_writes_outside_its_writable_mounts_itself() {
    let Some(provider) = provider("the_runner_refuses_file_writes_outside").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-escape-files", label.config(json!({}))).await;
    let write = |path: &str| {
        session.write_file(roder_api::remote_runner::RunnerFileWriteRequest {
            path: path.into(),
            contents: b"escaped\n".to_vec(),
        })
    };
    let error = format!("{:#}", write("/etc/escaped").await.unwrap_err());
    assert!(
        error.contains("read-only under the sandbox policy"),
        "{error}"
    );
    assert!(
        error.contains("/workspace") && error.contains("/tmp"),
        "{error}"
    );
    run(
        session.as_ref(),
        "ln -s /etc out && ln -s ../../etc deep && mkdir d",
    )
    .await;
    for path in ["out/escaped", "deep/escaped", "d/../out/escaped"] {
        let error = format!("{:#}", write(path).await.unwrap_err());
        assert!(error.contains("leads to `/etc/escaped`"), "{path}: {error}");
    }
    write("d/new/inside.txt").await.unwrap();
    write("/tmp/scratch.txt").await.unwrap();
    let listing = run(
        session.as_ref(),
        "ls /etc/escaped 2>&1; cat d/new/inside.txt /tmp/scratch.txt",
    )
    .await;
    assert!(listing.stdout.contains("No such file"), "{listing:?}");
    assert_eq!(
        listing.stdout.matches("escaped\n").count(),
        2,
        "{listing:?}"
    );
    // A rejoined session reads the rules back from the container.
    let rejoined = outside(&session.detach().await.unwrap()).await;
    let error = rejoined
        .write_file(roder_api::remote_runner::RunnerFileWriteRequest {
            path: "out/escaped".into(),
            contents: b"escaped\n".to_vec(),
        })
        .await
        .unwrap_err();
    assert!(
        format!("{error:#}").contains("leads to `/etc/escaped`"),
        "{error:#}"
    );
    rejoined
        .write_file(roder_api::remote_runner::RunnerFileWriteRequest {
            path: "d/again.txt".into(),
            contents: b"fine\n".to_vec(),
        })
        .await
        .unwrap();
    rejoined.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn a_fork_bomb_stops_at_the_pids_limit_and_privileges_are_dropped() {
    let Some(provider) = provider("a_fork_bomb_stops_at_the_pids_limit").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let docker = provider.docker().await.unwrap();
    let mut policy = SandboxPolicy::default();
    policy.limits.max_processes = Some(64);
    // Builtins only once the bomb went off: nothing else can fork.
    let bomb = "(for i in $(seq 2000); do sleep 20 >/dev/null 2>&1 & echo $i; done) >/tmp/count 2>/tmp/err; \
                last=0; while read n; do last=$n; done </tmp/count; echo started=$last; \
                while read l; do echo \"err: $l\"; done </tmp/err";
    let calls = [
        exec("grep -E '^(NoNewPrivs|CapEff)' /proc/self/status; id -u"),
        exec(bomb),
    ];
    let (outputs, state, _host) =
        turn(provider, label.config(json!({})), Some(policy), &calls).await;
    let status = &outputs[0].text;
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(
        status.contains("CapEff:\t00000000000000fb"),
        "only CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, SETGID, SETUID: {status}"
    );
    let bombed = &outputs[1].text;
    let started: u32 = bombed
        .split("started=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {bombed}"));
    assert!(
        (1..64).contains(&started),
        "the bomb stopped below the pids limit of 64 after {started}: {bombed}"
    );
    assert!(bombed.contains("can't fork"), "{bombed}");
    let host_config = docker
        .inspect_container(&state.session_id, None)
        .await
        .unwrap()
        .host_config
        .unwrap();
    assert_eq!(host_config.pids_limit, Some(64));
    assert_eq!(host_config.readonly_rootfs, Some(true));
    assert_eq!(
        host_config.security_opt,
        Some(vec!["no-new-privileges".to_string()])
    );
    assert_eq!(host_config.cap_drop, Some(vec!["ALL".to_string()]));
    assert_eq!(host_config.network_mode.as_deref(), Some("none"));
    assert!(host_config.memory.is_some_and(|bytes| bytes > 0));
    assert_eq!(host_config.memory_swap, host_config.memory);
    assert!(host_config.nano_cpus.is_some_and(|cpus| cpus > 0));
    // Removing the container ends the bomb; nothing is left.
    outside(&state).await.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn a_non_root_user_owns_the_workspace_and_has_no_capabilities() {
    let Some(provider) = provider("a_non_root_user_owns_the_workspace").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let calls = [
        (
            "write_file",
            json!({"path": "src/made-by-tool.txt", "content": "tool\n"}).to_string(),
        ),
        exec(
            "id -u; grep CapEff /proc/self/status; echo more >> src/made-by-tool.txt && touch src/by-shell && ls -ln src",
        ),
    ];
    let (outputs, state, _host) = turn(
        provider,
        label.config(json!({"user": "1000:1000"})),
        None,
        &calls,
    )
    .await;
    assert!(!outputs[0].is_error, "{:?}", outputs[0]);
    let shell = &outputs[1].text;
    assert!(shell.contains("1000\n"), "{shell}");
    assert!(shell.contains("CapEff:\t0000000000000000"), "{shell}");
    assert!(
        shell.contains("by-shell") && !shell.contains("Permission denied"),
        "the user writes what the tools wrote: {shell}"
    );
    assert_eq!(shell.matches(" 1000 ").count(), 4, "owned by 1000: {shell}");
    outside(&state).await.close().await.unwrap();
}

/// A listener on the host's loopback.
async fn listener() -> (u16, tokio::net::TcpListener) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    (listener.local_addr().unwrap().port(), listener)
}

#[tokio::test]
async fn the_network_is_off_unless_the_policy_turns_it_on() {
    let Some(provider) = provider("the_network_is_off_unless_the_policy_turns_it_on").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let (port, listener) = listener().await;
    let fetch = exec(&format!(
        "echo hello | nc 127.0.0.1 {port} 2>&1; echo rc=$?"
    ));

    let (off, state, _host) = turn(
        provider,
        label.config(json!({})),
        None,
        std::slice::from_ref(&fetch),
    )
    .await;
    assert!(
        off[0].text.contains("refused") && !off[0].text.contains("rc=0"),
        "with the network off the host listener is out of reach: {:?}",
        off[0]
    );
    assert!(
        listener.accept().now_or_never().is_none(),
        "no connection reached the host"
    );
    outside(&state).await.close().await.unwrap();

    let serve = tokio::spawn(async move {
        let (mut stream, _) = tokio::time::timeout(Duration::from_secs(60), listener.accept())
            .await
            .expect("the container connects within 60 s")
            .unwrap();
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut request = [0_u8; 1024];
        let _ = stream.read(&mut request).await;
        stream.write_all(b"from-the-host\n").await.unwrap();
    });
    let on = SandboxPolicy {
        network: NetworkAccess::On,
        ..SandboxPolicy::default()
    };
    let provider = support::provider("network on").await.unwrap();
    let (outputs, state, _host) = turn(provider, label.config(json!({})), Some(on), &[fetch]).await;
    serve.await.unwrap();
    assert!(
        outputs[0].text.contains("from-the-host") && outputs[0].text.contains("rc=0"),
        "with the network on the host listener answers: {:?}",
        outputs[0]
    );
    outside(&state).await.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}
