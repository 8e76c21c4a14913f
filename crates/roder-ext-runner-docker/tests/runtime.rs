//! The docker runner under the real runtime: threads bound to it write,
//! edit, grep and run commands inside a container, never on the host.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use roder_api::events::{EventEnvelope, RoderEvent, RunnerLifecycleAction};
use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerFileReadRequest, RunnerFileWriteRequest,
    RunnerSessionState,
};
use roder_core::{CreateThreadRequest, Runtime, StartTurnRequest, ThreadRunnerSelection};
use roder_ext_runner_docker::{DockerRunnerProvider, labels};
use roder_testkit::{ScriptedEngine, final_round, tool_round};
use serde_json::{Value, json};
use support::runtime::*;
use support::*;

/// A thread bound to the docker runner with `config`, using `engine`.
async fn docker_thread(
    runtime: &Runtime,
    workspace: &Path,
    config: Value,
    engine: Option<&str>,
) -> String {
    bind_docker_thread(runtime, workspace, config, engine, "/workspace")
        .await
        .unwrap()
}

/// Creates a thread bound to the docker runner at `bound` (the runner
/// workspace) with `config`.
async fn bind_docker_thread(
    runtime: &Runtime,
    workspace: &Path,
    config: Value,
    engine: Option<&str>,
    bound: &str,
) -> anyhow::Result<String> {
    let mut request = CreateThreadRequest::in_workspace(workspace.display().to_string());
    request.provider = engine.map(str::to_string);
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".to_string(),
        config,
        workspace: bound.to_string(),
        read_roots: Vec::new(),
    });
    Ok(runtime.create_thread_with(request).await?.thread_id)
}

fn assert_completed(events: &[EventEnvelope]) {
    assert!(
        matches!(
            events.last().map(|envelope| &envelope.event),
            Some(RoderEvent::TurnCompleted(_))
        ),
        "{:#?}",
        events.last()
    );
}

async fn runner_state(runtime: &Runtime, thread_id: &str) -> RunnerSessionState {
    runtime
        .load_thread(thread_id)
        .await
        .unwrap()
        .unwrap()
        .metadata
        .unwrap()
        .runner_state
        .expect("the runner state is persisted")
}

/// A handle on the thread's container from outside the runtime (another
/// provider, so closing it is up to the test).
async fn outside_view(state: &RunnerSessionState) -> Arc<dyn RemoteRunnerSession> {
    DockerRunnerProvider::connect()
        .unwrap()
        .rejoin_session(state.clone())
        .await
        .unwrap()
}

async fn read_in_container(session: &dyn RemoteRunnerSession, path: &str) -> String {
    let result = session
        .read_file(RunnerFileReadRequest { path: path.into() })
        .await
        .unwrap();
    String::from_utf8(result.contents).unwrap()
}

fn is_empty_dir(path: &Path) -> bool {
    std::fs::read_dir(path).unwrap().next().is_none()
}

#[tokio::test]
async fn a_docker_bound_thread_works_inside_its_container_only() {
    let Some(provider) = provider("a_docker_bound_thread_works_inside_its_container_only").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[(
            "w",
            "write_file",
            r#"{"path": "src/notes.txt", "content": "alpha\nbeta\n"}"#,
        )]),
        tool_round(&[(
            "e",
            "edit",
            r#"{"path": "src/notes.txt", "old_string": "beta", "new_string": "gamma"}"#,
        )]),
        tool_round(&[("g", "grep", r#"{"pattern": "gam+a"}"#)]),
        tool_round(&[(
            "x",
            "exec_command",
            r#"{"cmd": "cat src/notes.txt && pwd && hostname"}"#,
        )]),
        tool_round(&[("r", "read_file", r#"{"path": "src/notes.txt"}"#)]),
        final_round("done"),
    ]);
    let runtime = runtime(&[engine], store.path(), host.path(), Arc::new(provider));
    let mut events = runtime.subscribe_events();
    let thread = docker_thread(&runtime, host.path(), label.config(json!({})), None).await;
    runtime
        .start_turn(StartTurnRequest::new(&thread, "work in the container"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert_completed(&turn);

    let state = runner_state(&runtime, &thread).await;
    let container = state.session_id.clone();
    let outputs = tool_outputs(&turn);
    assert_eq!(outputs.len(), 5, "{outputs:#?}");
    for (tool, output, is_error) in &outputs {
        assert!(!is_error, "{tool} failed: {output}");
    }
    assert!(
        outputs[2].1.contains("src/notes.txt:2:gamma"),
        "{}",
        outputs[2].1
    );
    let exec = &outputs[3].1;
    assert!(exec.contains("Exit code: 0"), "{exec}");
    assert!(exec.contains("alpha\ngamma\n/workspace\n"), "{exec}");
    assert!(
        exec.contains(&container[..12]),
        "the command ran in the thread's container (its hostname): {exec}"
    );
    assert!(outputs[4].1.contains("gamma"), "{}", outputs[4].1);

    assert!(is_empty_dir(host.path()), "nothing is written on the host");
    assert_eq!(label.containers().await, vec![container.clone()]);
    let view = outside_view(&state).await;
    assert_eq!(
        read_in_container(view.as_ref(), "src/notes.txt").await,
        "alpha\ngamma\n"
    );
    let lifecycle: Vec<RunnerLifecycleAction> = turn
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::RunnerLifecycle(event) => Some(event.action),
            _ => None,
        })
        .collect();
    assert!(
        lifecycle.contains(&RunnerLifecycleAction::Created),
        "{lifecycle:?}"
    );
    view.close().await.unwrap();
}

#[tokio::test]
async fn a_thread_bound_outside_slash_workspace_keeps_files_and_commands_together() {
    let Some(provider) =
        provider("a_thread_bound_outside_slash_workspace_keeps_files_and_commands_together").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[(
            "w",
            "write_file",
            r#"{"path": "notes/plan.txt", "content": "bound at srv\n"}"#,
        )]),
        tool_round(&[(
            "x",
            "exec_command",
            r#"{"cmd": "pwd && cat notes/plan.txt && echo made-by-shell > shell.txt"}"#,
        )]),
        tool_round(&[("r", "read_file", r#"{"path": "shell.txt"}"#)]),
        final_round("done"),
    ]);
    let runtime = runtime(&[engine], store.path(), host.path(), Arc::new(provider));
    let mut events = runtime.subscribe_events();
    let thread = bind_docker_thread(
        &runtime,
        host.path(),
        label.config(json!({})),
        None,
        "/srv/app",
    )
    .await
    .unwrap();
    runtime
        .start_turn(StartTurnRequest::new(&thread, "work in /srv/app"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert_completed(&turn);
    let outputs = tool_outputs(&turn);
    assert_eq!(outputs.len(), 3, "{outputs:#?}");
    for (tool, output, is_error) in &outputs {
        assert!(!is_error, "{tool} failed: {output}");
    }
    assert!(
        outputs[1].1.contains("/srv/app\nbound at srv\n"),
        "the shell runs where write_file wrote: {}",
        outputs[1].1
    );
    assert!(
        outputs[2].1.contains("made-by-shell"),
        "read_file reads where the shell wrote: {}",
        outputs[2].1
    );

    let state = runner_state(&runtime, &thread).await;
    assert_eq!(state.metadata["workdir"], "/srv/app");
    let view = outside_view(&state).await;
    assert_eq!(
        read_in_container(view.as_ref(), "/srv/app/notes/plan.txt").await,
        "bound at srv\n"
    );
    let listing = run(view.as_ref(), "ls -A /workspace; echo end").await;
    assert_eq!(
        listing.stdout, "end\n",
        "nothing landed in /workspace: {listing:?}"
    );
    assert!(is_empty_dir(host.path()));
    view.close().await.unwrap();
}

#[tokio::test]
async fn a_binding_whose_workdir_disagrees_is_refused_at_thread_creation() {
    let Some(provider) =
        provider("a_binding_whose_workdir_disagrees_is_refused_at_thread_creation").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let idle = ScriptedEngine::new(Vec::new());
    let runtime = runtime(&[idle], store.path(), host.path(), Arc::new(provider));
    let error = bind_docker_thread(
        &runtime,
        host.path(),
        label.config(json!({"workdir": "/workspace"})),
        None,
        "/srv/app",
    )
    .await
    .unwrap_err();
    let message = format!("{error:#}");
    assert!(
        message.contains("\"/srv/app\"") && message.contains("\"/workspace\""),
        "the error names both roots: {message}"
    );
    assert!(
        runtime.list_threads().await.unwrap().is_empty(),
        "no thread was created"
    );
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn detach_then_rejoin_from_a_new_runtime_reuses_the_container() {
    let Some(provider) =
        provider("detach_then_rejoin_from_a_new_runtime_reuses_the_container").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();

    let first_engine = ScriptedEngine::new(vec![
        tool_round(&[(
            "w",
            "write_file",
            r#"{"path": "kept.txt", "content": "written before the detach\n"}"#,
        )]),
        final_round("done"),
    ]);
    let first = runtime(
        &[first_engine],
        store.path(),
        host.path(),
        Arc::new(provider),
    );
    let mut events = first.subscribe_events();
    let thread = docker_thread(&first, host.path(), label.config(json!({})), None).await;
    first
        .start_turn(StartTurnRequest::new(&thread, "write"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &thread).await);
    let detached = first.detach_thread_runner(&thread).await.unwrap();
    assert_eq!(label.containers().await, vec![detached.session_id.clone()]);
    drop(first);

    // A new process: new runtime, new provider, same JSONL store.
    let second_engine = ScriptedEngine::new(vec![
        tool_round(&[("r", "read_file", r#"{"path": "kept.txt"}"#)]),
        tool_round(&[("h", "exec_command", r#"{"cmd": "hostname"}"#)]),
        final_round("done"),
    ]);
    let second = runtime(
        &[second_engine],
        store.path(),
        host.path(),
        Arc::new(DockerRunnerProvider::connect().unwrap()),
    );
    let mut events = second.subscribe_events();
    let rejoined = second.rejoin_thread_runner(&thread, None).await.unwrap();
    assert_eq!(
        rejoined.session_id, detached.session_id,
        "the same container"
    );
    second
        .start_turn(StartTurnRequest::new(&thread, "read"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert_completed(&turn);
    let outputs = tool_outputs(&turn);
    assert!(
        outputs[0].1.contains("written before the detach"),
        "{outputs:#?}"
    );
    assert!(
        outputs[1].1.contains(&detached.session_id[..12]),
        "{outputs:#?}"
    );
    assert!(
        !turn.iter().any(|envelope| matches!(
            &envelope.event,
            RoderEvent::RunnerLifecycle(event) if event.action == RunnerLifecycleAction::Created
        )),
        "no session was created after the rejoin"
    );
    assert_eq!(
        label.containers().await,
        vec![detached.session_id.clone()],
        "no new container"
    );
    assert!(is_empty_dir(host.path()));
    outside_view(&rejoined).await.close().await.unwrap();
}

#[tokio::test]
async fn two_threads_sharing_a_container_serialize_their_edits() {
    let Some(provider) = provider("two_threads_sharing_a_container_serialize_their_edits").await
    else {
        return;
    };
    const ROUNDS: usize = 4;
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    // Each round edits the thread's own line of a shared file and bumps a
    // shared counter with a read-modify-write that waits in the middle:
    // interleaved executions would lose edits and increments.
    let script = |who: &str| {
        let mut rounds = Vec::new();
        for round in 0..ROUNDS {
            let edit = json!({
                "path": "shared.txt",
                "old_string": format!("{who}{round} todo"),
                "new_string": format!("{who}{round} done"),
            })
            .to_string();
            let bump = json!({
                "cmd": "n=$(cat counter); sleep 0.2; echo $((n+1)) > counter"
            })
            .to_string();
            let edit_id = format!("{who}-edit-{round}");
            let bump_id = format!("{who}-bump-{round}");
            rounds.push(tool_round(&[
                (edit_id.as_str(), "edit", edit.as_str()),
                (bump_id.as_str(), "exec_command", bump.as_str()),
            ]));
        }
        rounds.push(final_round("done"));
        rounds
    };
    let engine_a = ScriptedEngine::with_id("engine-a", script("a"));
    let engine_b = ScriptedEngine::with_id("engine-b", script("b"));
    let idle = ScriptedEngine::new(Vec::new());
    let runtime = runtime(
        &[idle, engine_a, engine_b],
        store.path(),
        host.path(),
        Arc::new(provider),
    );
    let config = label.config(json!({}));
    let thread_a = docker_thread(&runtime, host.path(), config.clone(), Some("engine-a")).await;
    let thread_b = docker_thread(&runtime, host.path(), config, Some("engine-b")).await;

    // Thread A provisions its container; thread B joins that same container.
    let state = runtime.resume_thread_runner(&thread_a).await.unwrap();
    let joined = runtime
        .rejoin_thread_runner(&thread_b, Some(state.session_id.clone()))
        .await
        .unwrap();
    assert_eq!(joined.session_id, state.session_id);
    let view = outside_view(&state).await;
    let mut lines = String::new();
    for round in 0..ROUNDS {
        lines.push_str(&format!("a{round} todo\nb{round} todo\n"));
    }
    for (path, contents) in [("shared.txt", lines.as_str()), ("counter", "0\n")] {
        view.write_file(RunnerFileWriteRequest {
            path: path.into(),
            contents: contents.as_bytes().to_vec(),
        })
        .await
        .unwrap();
    }

    let mut events = runtime.subscribe_events();
    runtime
        .start_turn(StartTurnRequest::new(&thread_a, "edit a"))
        .await
        .unwrap();
    runtime
        .start_turn(StartTurnRequest::new(&thread_b, "edit b"))
        .await
        .unwrap();
    let mut order = Vec::new();
    let mut ended = 0;
    while ended < 2 {
        let envelope = tokio::time::timeout(Duration::from_secs(60), events.recv())
            .await
            .expect("both turns end within 60 s")
            .unwrap();
        if envelope.thread_id != thread_a && envelope.thread_id != thread_b {
            continue;
        }
        if envelope.event.is_terminal() {
            assert!(
                matches!(envelope.event, RoderEvent::TurnCompleted(_)),
                "{:?}",
                envelope.event
            );
            ended += 1;
        }
        order.push(envelope);
    }

    for (tool, output, is_error) in tool_outputs(&order) {
        assert!(!is_error, "{tool} failed: {output}");
    }
    // The turns really ran at the same time: their tool calls interleave.
    let tool_positions = |thread: &str| -> Vec<usize> {
        order
            .iter()
            .enumerate()
            .filter(|(_, envelope)| {
                envelope.thread_id == thread
                    && matches!(envelope.event, RoderEvent::ToolCallCompleted(_))
            })
            .map(|(index, _)| index)
            .collect()
    };
    let (a, b) = (tool_positions(&thread_a), tool_positions(&thread_b));
    assert_eq!((a.len(), b.len()), (2 * ROUNDS, 2 * ROUNDS));
    assert!(
        a[0] < b[b.len() - 1] && b[0] < a[a.len() - 1],
        "the two turns did not overlap, so nothing was tested"
    );

    let expected: String = (0..ROUNDS)
        .map(|round| format!("a{round} done\nb{round} done\n"))
        .collect();
    assert_eq!(
        read_in_container(view.as_ref(), "shared.txt").await,
        expected
    );
    assert_eq!(
        read_in_container(view.as_ref(), "counter").await,
        format!("{}\n", 2 * ROUNDS),
        "every read-modify-write ran alone"
    );
    assert!(is_empty_dir(host.path()));
    assert_eq!(label.containers().await.len(), 1, "one shared container");
    view.close().await.unwrap();
}

#[tokio::test]
async fn a_new_thread_starts_on_a_warm_pool_container() {
    let Some(provider) = provider("a_new_thread_starts_on_a_warm_pool_container").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let provider = Arc::new(provider);
    let config = label.config(json!({"pool_size": 1}));
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("x", "exec_command", r#"{"cmd": "echo ready"}"#)]),
        final_round("done"),
    ]);
    let runtime = runtime(&[engine], store.path(), host.path(), provider.clone());
    let mut events = runtime.subscribe_events();
    // Binding the thread starts warming the pool.
    let thread = docker_thread(&runtime, host.path(), config.clone(), None).await;
    let any = destination("thread-any", config);
    eventually(Duration::from_secs(60), "the pool filling", || async {
        provider.pool_ready(&any).unwrap() == 1
    })
    .await;
    let pooled = label.containers().await;

    runtime
        .start_turn(StartTurnRequest::new(&thread, "go"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &thread).await);
    let state = runner_state(&runtime, &thread).await;
    assert_eq!(
        pooled,
        vec![state.session_id.clone()],
        "the thread got the pooled container"
    );
    let docker = provider.docker().await.unwrap();
    let name = docker
        .inspect_container(&state.session_id, None)
        .await
        .unwrap()
        .name
        .unwrap();
    assert_eq!(
        labels::thread_of_container(&Default::default(), &[name]),
        Some(thread.as_str()),
        "the claim names the thread"
    );
    provider.shutdown_pool().await.unwrap();
    outside_view(&state).await.close().await.unwrap();
}

/// Whether the daemon reports `container` paused.
async fn is_paused(provider: &DockerRunnerProvider, container: &str) -> bool {
    let docker = provider.docker().await.unwrap();
    docker
        .inspect_container(container, None)
        .await
        .unwrap()
        .state
        .and_then(|state| state.paused)
        .unwrap_or(false)
}

#[tokio::test]
async fn an_idle_sandbox_is_paused_and_the_threads_next_turn_wakes_it_from_a_new_process() {
    let Some(provider) =
        provider("an_idle_sandbox_is_paused_and_the_threads_next_turn_wakes_it_from_a_new_process")
            .await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let first_engine = ScriptedEngine::new(vec![
        tool_round(&[(
            "w",
            "write_file",
            r#"{"path": "kept.txt", "content": "written before the pause\n"}"#,
        )]),
        final_round("done"),
    ]);
    let first = runtime(
        &[first_engine],
        store.path(),
        host.path(),
        Arc::new(DockerRunnerProvider::connect().unwrap()),
    );
    let mut events = first.subscribe_events();
    let thread = docker_thread(&first, host.path(), label.config(json!({})), None).await;
    first
        .start_turn(StartTurnRequest::new(&thread, "write"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &thread).await);
    let container = runner_state(&first, &thread).await.session_id;
    assert!(!is_paused(&provider, &container).await);

    // The process is done with its sessions: on_idle's default pauses.
    let released = first.release_idle_runners().await;
    assert_eq!(released.len(), 1, "{released:?}");
    let (released_thread, outcome) = &released[0];
    assert_eq!(released_thread, &thread);
    assert!(outcome.as_ref().unwrap().paused.is_some());
    assert!(is_paused(&provider, &container).await);
    assert!(first.release_idle_runners().await.is_empty(), "forgotten");
    drop(first);

    // A new process: its first tool call wakes the same container.
    let second_engine = ScriptedEngine::new(vec![
        tool_round(&[("r", "exec_command", r#"{"cmd": "cat kept.txt"}"#)]),
        final_round("done"),
    ]);
    let second = runtime(
        std::slice::from_ref(&second_engine),
        store.path(),
        host.path(),
        Arc::new(DockerRunnerProvider::connect().unwrap()),
    );
    let mut events = second.subscribe_events();
    second
        .start_turn(StartTurnRequest::new(&thread, "read"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert_completed(&turn);
    let outputs = tool_outputs(&turn);
    assert!(
        outputs[0].1.contains("written before the pause") && !outputs[0].2,
        "{outputs:#?}"
    );
    assert!(!is_paused(&provider, &container).await);
    assert_eq!(label.containers().await, vec![container.clone()]);
    let metadata = second.thread_metadata(&thread).await.unwrap();
    assert!(!metadata.runner_idle_paused);

    // `keep` leaves it running; `stop` of a confined container, whose
    // workspace would be lost, is refused when the thread is bound.
    let kept = docker_thread(
        &second,
        host.path(),
        label.config(json!({"on_idle": "keep"})),
        None,
    )
    .await;
    second_engine.push_round(tool_round(&[("t", "exec_command", r#"{"cmd": "true"}"#)]));
    second
        .start_turn(StartTurnRequest::new(&kept, "run"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &kept).await);
    let kept_container = runner_state(&second, &kept).await.session_id;
    let refused = bind_docker_thread(
        &second,
        host.path(),
        label.config(json!({"on_idle": "stop"})),
        None,
        "/workspace",
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(refused.contains("tmpfs"), "{refused}");
    // An unconfined container can be stopped: its files are in its own
    // layer, and its next turn starts it again.
    let stopped = docker_thread(
        &second,
        host.path(),
        label.config(json!({"on_idle": "stop", "sandbox": {"mode": "none"}})),
        None,
    )
    .await;
    second_engine.push_round(tool_round(&[(
        "s",
        "exec_command",
        r#"{"cmd": "echo kept across a stop > s.txt"}"#,
    )]));
    second_engine.push_round(final_round("done"));
    second
        .start_turn(StartTurnRequest::new(&stopped, "write"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &stopped).await);
    let stopped_container = runner_state(&second, &stopped).await.session_id;
    let released = second.release_idle_runners().await;
    assert_eq!(released.len(), 3, "{released:?}");
    for (_, outcome) in released {
        outcome.unwrap();
    }
    assert!(is_paused(&provider, &container).await);
    assert!(!is_paused(&provider, &kept_container).await);
    let docker = provider.docker().await.unwrap();
    let running = |id: String| {
        let docker = docker.clone();
        async move {
            docker
                .inspect_container(&id, None)
                .await
                .unwrap()
                .state
                .and_then(|state| state.running)
                .unwrap_or(false)
        }
    };
    assert!(
        !running(stopped_container.clone()).await,
        "stopped while idle"
    );
    second_engine.push_round(tool_round(&[(
        "c",
        "exec_command",
        r#"{"cmd": "cat s.txt"}"#,
    )]));
    second_engine.push_round(final_round("done"));
    second
        .start_turn(StartTurnRequest::new(&stopped, "read"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &stopped).await;
    assert_completed(&turn);
    let outputs = tool_outputs(&turn);
    assert!(
        outputs[0].1.contains("kept across a stop") && !outputs[0].2,
        "{outputs:#?}"
    );
    assert_eq!(
        runner_state(&second, &stopped).await.session_id,
        stopped_container
    );
    assert!(running(stopped_container).await);
}

#[tokio::test]
async fn a_long_lived_process_pauses_a_quiet_threads_sandbox_and_its_next_turn_resumes_it() {
    let Some(provider) = provider("a_long_lived_process_pauses_a_quiet_threads_sandbox").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(vec![
        tool_round(&[("w", "exec_command", r#"{"cmd": "echo one > n.txt"}"#)]),
        final_round("done"),
    ]);
    let runtime = runtime(
        std::slice::from_ref(&engine),
        store.path(),
        host.path(),
        Arc::new(DockerRunnerProvider::connect().unwrap()),
    );
    let watcher = runtime.spawn_idle_release(Duration::from_millis(300));
    let mut events = runtime.subscribe_events();
    let thread = docker_thread(&runtime, host.path(), label.config(json!({})), None).await;
    runtime
        .start_turn(StartTurnRequest::new(&thread, "write"))
        .await
        .unwrap();
    assert_completed(&until_turn_ends(&mut events, &thread).await);
    let container = runner_state(&runtime, &thread).await.session_id;
    // The metadata is written after the pause, so once it says paused, the
    // container is.
    eventually(
        Duration::from_secs(20),
        "the quiet thread's sandbox is released",
        || {
            let runtime = &runtime;
            let thread = thread.clone();
            async move {
                runtime
                    .thread_metadata(&thread)
                    .await
                    .unwrap()
                    .runner_idle_paused
            }
        },
    )
    .await;
    assert!(is_paused(&provider, &container).await);

    // The same process's next turn resumes the same container.
    engine.push_round(tool_round(&[(
        "r",
        "exec_command",
        r#"{"cmd": "cat n.txt"}"#,
    )]));
    engine.push_round(final_round("done"));
    runtime
        .start_turn(StartTurnRequest::new(&thread, "read"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert_completed(&turn);
    let outputs = tool_outputs(&turn);
    assert!(
        outputs[0].1.contains("one") && !outputs[0].2,
        "{outputs:#?}"
    );
    assert_eq!(runner_state(&runtime, &thread).await.session_id, container);
    assert_eq!(label.containers().await, vec![container]);
    watcher.abort();
}
