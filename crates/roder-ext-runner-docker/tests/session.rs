//! Every session operation against the real Docker daemon.

mod support;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerFileReadRequest, RunnerFileWriteRequest,
    RunnerPortRequest, RunnerSessionState,
};
use roder_ext_runner_docker::{DockerRunnerProvider, PROVIDER_ID, labels};
use serde_json::json;
use support::*;

async fn read(session: &dyn RemoteRunnerSession, path: &str) -> anyhow::Result<String> {
    let result = session
        .read_file(RunnerFileReadRequest {
            path: PathBuf::from(path),
        })
        .await?;
    Ok(String::from_utf8(result.contents)?)
}

async fn write(session: &dyn RemoteRunnerSession, path: &str, text: &str) -> anyhow::Result<()> {
    session
        .write_file(RunnerFileWriteRequest {
            path: PathBuf::from(path),
            contents: text.as_bytes().to_vec(),
        })
        .await
}

/// Processes in the container whose command line contains `needle`.
async fn processes_matching(session: &dyn RemoteRunnerSession, needle: &str) -> Vec<String> {
    let listing = run(session, "ps -o args").await.stdout;
    listing
        .lines()
        .filter(|line| line.contains(needle) && !line.contains("ps -o"))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn create_labels_the_container_and_close_removes_it() {
    let Some(provider) = provider("create_labels_the_container_and_close_removes_it").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-create", label.config(json!({}))).await;
    let state = session.state();
    assert_eq!(state.provider_id, PROVIDER_ID);
    assert_eq!(state.destination_id, "thread-t-create");
    assert_eq!(state.metadata["image"], IMAGE);
    assert_eq!(state.metadata["workdir"], "/workspace");
    assert_eq!(state.metadata["container_id"], state.session_id);
    assert_eq!(
        state.session_id.len(),
        64,
        "the session id is the full container id"
    );

    let docker = provider.docker().await.unwrap();
    let inspect = docker
        .inspect_container(&state.session_id, None)
        .await
        .unwrap();
    let container_labels = inspect.config.unwrap().labels.unwrap();
    assert_eq!(container_labels[labels::MANAGED], "true");
    assert_eq!(container_labels[labels::DESTINATION], "thread-t-create");
    assert_eq!(container_labels[labels::THREAD], "t-create");
    assert_eq!(container_labels[labels::CLEANUP], "delete-on-close");
    assert!(inspect.name.unwrap().starts_with("/roder-t.t-create."));
    assert_eq!(
        inspect.host_config.unwrap().network_mode.as_deref(),
        Some("none"),
        "containers get no network unless the config asks"
    );
    assert_eq!(label.containers().await, vec![state.session_id.clone()]);

    session.close().await.unwrap();
    assert!(
        label.containers().await.is_empty(),
        "close removes the container"
    );
    session.close().await.unwrap();
    let error = session.run_command(sh("true")).await.unwrap_err();
    assert!(error.to_string().contains("closed"), "{error}");
}

#[tokio::test]
async fn commands_honour_cwd_env_and_exit_codes() {
    let Some(provider) = provider("commands_honour_cwd_env_and_exit_codes").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(
        &provider,
        "thread-t-commands",
        label.config(json!({"env": {"FROM_CONFIG": "cfg"}})),
    )
    .await;

    let result = run(
        session.as_ref(),
        "pwd; echo \"$FROM_CONFIG\"; echo oops >&2; exit 3",
    )
    .await;
    assert_eq!(result.stdout, "/workspace\ncfg\n");
    assert_eq!(result.stderr, "oops\n");
    assert_eq!(result.exit_code, Some(3));

    let mut request = sh("pwd; echo \"$A\"");
    request.cwd = Some(PathBuf::from("/tmp"));
    request.env = vec![("A".to_string(), "from request".to_string())];
    let result = session.run_command(request).await.unwrap();
    assert_eq!(result.stdout, "/tmp\nfrom request\n");
    assert_eq!(result.exit_code, Some(0));

    run(session.as_ref(), "mkdir -p sub").await;
    let mut request = sh("pwd");
    request.cwd = Some(PathBuf::from("sub"));
    assert_eq!(
        session.run_command(request).await.unwrap().stdout,
        "/workspace/sub\n",
        "a relative cwd resolves under the workdir"
    );

    // Programs run without a shell wrapper: argv arrives as given.
    let result = session
        .run_command(roder_api::remote_runner::RunnerCommandRequest {
            command_id: "argv".to_string(),
            program: "echo".to_string(),
            args: vec!["a  b".to_string(), "$HOME".to_string()],
            cwd: None,
            env: Vec::new(),
            timeout_ms: None,
        })
        .await
        .unwrap();
    assert_eq!(result.stdout, "a  b $HOME\n");

    let mut request = sh("true");
    request.cwd = Some(PathBuf::from("/no/such/dir"));
    let error = session.run_command(request).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("failed to start `sh` in `/no/such/dir`"),
        "{error}"
    );
    let error = session
        .run_command(roder_api::remote_runner::RunnerCommandRequest {
            command_id: "missing".to_string(),
            program: "no-such-program".to_string(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            timeout_ms: None,
        })
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("failed to start `no-such-program`"),
        "{error}"
    );
    assert!(error.to_string().contains("not found"), "{error}");
    // A command's own 127 stays a result.
    assert_eq!(run(session.as_ref(), "exit 127").await.exit_code, Some(127));
    session.close().await.unwrap();
}

#[tokio::test]
async fn timeout_kills_the_command_and_its_background_children() {
    let Some(provider) = provider("timeout_kills_the_command_and_its_background_children").await
    else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-timeout", label.config(json!({}))).await;

    let mut request = sh("sleep 3001 & sleep 3002; echo never");
    request.timeout_ms = Some(500);
    let started = Instant::now();
    let result = session.run_command(request).await.unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(result.exit_code, None, "a killed command has no exit code");
    assert!(
        result.stderr.contains("command timed out after 500 ms"),
        "{result:?}"
    );
    assert!(!result.stdout.contains("never"));
    assert_eq!(
        processes_matching(session.as_ref(), "sleep 300").await,
        Vec::<String>::new(),
        "the command and its background child are gone"
    );

    // A daemonised grandchild in its own session is found by its marker too.
    let mut request = sh("setsid sleep 3003 & sleep 3004");
    request.timeout_ms = Some(300);
    let result = session.run_command(request).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert_eq!(
        processes_matching(session.as_ref(), "sleep 300").await,
        Vec::<String>::new()
    );
    session.close().await.unwrap();
}

#[tokio::test]
async fn cancel_command_kills_a_running_command() {
    let Some(provider) = provider("cancel_command_kills_a_running_command").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-cancel", label.config(json!({}))).await;

    let mut request = sh("sleep 3005 & sleep 3006");
    request.command_id = "long".to_string();
    request.timeout_ms = None;
    let running = tokio::spawn({
        let session = session.clone();
        async move { session.run_command(request).await }
    });
    eventually(Duration::from_secs(10), "the command starting", || {
        let session = session.clone();
        async move {
            processes_matching(session.as_ref(), "sleep 3006")
                .await
                .len()
                == 1
        }
    })
    .await;
    let mut duplicate = sh("true");
    duplicate.command_id = "long".to_string();
    assert!(
        session.run_command(duplicate).await.is_err(),
        "ids are unique while running"
    );

    assert!(session.cancel_command(&"long".to_string()).await.unwrap());
    let result = tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .expect("cancel ends the command")
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    assert!(result.stderr.contains("command cancelled"), "{result:?}");
    assert!(
        processes_matching(session.as_ref(), "sleep 300")
            .await
            .is_empty()
    );
    assert!(!session.cancel_command(&"long".to_string()).await.unwrap());
    assert!(
        !session
            .cancel_command(&"never-ran".to_string())
            .await
            .unwrap()
    );
    session.close().await.unwrap();
}

#[tokio::test]
async fn files_move_through_the_archive_api() {
    let Some(provider) = provider("files_move_through_the_archive_api").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-files", label.config(json!({}))).await;
    let session = session.as_ref();

    write(session, "deep/new/dir/f.txt", "hello\n")
        .await
        .unwrap();
    assert_eq!(
        read(session, "deep/new/dir/f.txt").await.unwrap(),
        "hello\n"
    );
    assert_eq!(
        read(session, "/workspace/deep/new/dir/f.txt")
            .await
            .unwrap(),
        "hello\n"
    );
    assert_eq!(
        run(session, "cat deep/new/dir/f.txt").await.stdout,
        "hello\n"
    );

    write(session, "/tmp/abs.txt", "absolute").await.unwrap();
    assert_eq!(run(session, "cat /tmp/abs.txt").await.stdout, "absolute");
    assert_eq!(
        run(session, "stat -c %a /tmp").await.stdout,
        "1777\n",
        "writing under an existing directory leaves its mode alone"
    );

    run(
        session,
        "printf '#!/bin/sh\\necho v1\\n' > tool.sh && chmod 755 tool.sh",
    )
    .await;
    write(session, "tool.sh", "#!/bin/sh\necho v2\n")
        .await
        .unwrap();
    let result = run(session, "stat -c %a tool.sh && ./tool.sh").await;
    assert_eq!(
        result.stdout, "755\nv2\n",
        "an overwrite keeps the file's mode"
    );

    run(session, "ln -s deep/new/dir/f.txt link.txt").await;
    assert_eq!(read(session, "link.txt").await.unwrap(), "hello\n");
    write(session, "link.txt", "through the link\n")
        .await
        .unwrap();
    assert_eq!(
        read(session, "deep/new/dir/f.txt").await.unwrap(),
        "through the link\n",
        "writes follow symbolic links"
    );

    let binary: Vec<u8> = (0..=255).collect();
    session
        .write_file(RunnerFileWriteRequest {
            path: PathBuf::from("bin.dat"),
            contents: binary.clone(),
        })
        .await
        .unwrap();
    let back = session
        .read_file(RunnerFileReadRequest {
            path: PathBuf::from("bin.dat"),
        })
        .await
        .unwrap();
    assert_eq!(back.contents, binary);
    assert_eq!(back.path, PathBuf::from("bin.dat"));

    let missing = read(session, "nope/missing.txt").await.unwrap_err();
    assert!(
        missing.to_string().contains("/workspace/nope/missing.txt"),
        "{missing}"
    );
    let directory = read(session, "deep").await.unwrap_err();
    assert!(directory.to_string().contains("directory"), "{directory}");
    let over_directory = write(session, "deep", "x").await.unwrap_err();
    assert!(
        over_directory.to_string().contains("directory"),
        "{over_directory}"
    );
    assert_eq!(
        run(session, "ls deep").await.stdout,
        "new\n",
        "a refused write leaves the directory alone"
    );
    let escape = write(session, "../outside.txt", "x").await.unwrap_err();
    assert!(escape.to_string().contains("climbs out"), "{escape}");
}

#[tokio::test]
async fn expose_port_returns_the_published_host_url() {
    let Some(provider) = provider("expose_port_returns_the_published_host_url").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(
        &provider,
        "thread-t-ports",
        label.config(json!({"network": "bridge", "ports": [8080], "sandbox": {"network": "on"}})),
    )
    .await;
    write(
        session.as_ref(),
        "www/index.html",
        "served from the container\n",
    )
    .await
    .unwrap();
    let started = run(session.as_ref(), "httpd -p 8080 -h /workspace/www").await;
    assert_eq!(started.exit_code, Some(0), "{started:?}");

    let exposed = session
        .expose_port(RunnerPortRequest {
            port: 8080,
            label: Some("web".to_string()),
        })
        .await
        .unwrap();
    assert_eq!(exposed.port, 8080);
    let url = exposed.url.unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let address = url.trim_start_matches("http://").to_string();

    let body = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    eventually(Duration::from_secs(10), "the server answering", || {
        let address = address.clone();
        let body = body.clone();
        async move {
            match http_get(&address).await {
                Ok(response) => {
                    *body.lock().unwrap() = response;
                    true
                }
                Err(_) => false,
            }
        }
    })
    .await;
    let body = body.lock().unwrap().clone();
    assert!(
        body.starts_with("HTTP/1.") && body.contains("served from the container"),
        "{body}"
    );

    let error = session
        .expose_port(RunnerPortRequest {
            port: 9090,
            label: None,
        })
        .await
        .unwrap_err();
    assert!(error.to_string().contains("not published"), "{error}");
    assert!(error.to_string().contains("8080/tcp"), "{error}");
    session.close().await.unwrap();
}

async fn http_get(address: &str) -> std::io::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(b"GET /index.html HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    if response.is_empty() {
        return Err(std::io::Error::other("empty response"));
    }
    Ok(response)
}

#[tokio::test]
async fn snapshot_commits_an_image_new_sessions_start_from() {
    let Some(provider) = provider("snapshot_commits_an_image_new_sessions_start_from").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let docker = provider.docker().await.unwrap();
    let original = session(&provider, "thread-t-snap", label.config(json!({}))).await;
    write(original.as_ref(), "state.txt", "before snapshot\n")
        .await
        .unwrap();

    let snapshot = original
        .snapshot()
        .await
        .unwrap()
        .expect("docker snapshots");
    assert_eq!(snapshot.provider_id, PROVIDER_ID);
    assert!(
        snapshot.snapshot_id.starts_with("roder-snapshot:"),
        "{snapshot:?}"
    );
    assert_eq!(original.state().snapshot.as_ref(), Some(&snapshot));
    let image = docker.inspect_image(&snapshot.snapshot_id).await.unwrap();
    let image_labels = image.config.unwrap().labels.unwrap_or_default();
    assert_eq!(
        image_labels.get(labels::SNAPSHOT_OF),
        Some(&original.state().session_id)
    );
    assert_eq!(
        image_labels.get(labels::MANAGED).map(String::as_str),
        Some(""),
        "a snapshot does not pass Roder's container labels on"
    );

    write(original.as_ref(), "state.txt", "after snapshot\n")
        .await
        .unwrap();
    let restored = session(
        &provider,
        "thread-t-restored",
        label.config(json!({"image": snapshot.snapshot_id})),
    )
    .await;
    assert_eq!(
        read(restored.as_ref(), "state.txt").await.unwrap(),
        "before snapshot\n"
    );
    let restored_labels = docker
        .inspect_container(&restored.state().session_id, None)
        .await
        .unwrap()
        .config
        .unwrap()
        .labels
        .unwrap();
    assert_eq!(restored_labels[labels::THREAD], "t-restored");
    assert_eq!(restored_labels[labels::MANAGED], "true");

    restored.close().await.unwrap();
    original.close().await.unwrap();
    let options = bollard::query_parameters::RemoveImageOptionsBuilder::default()
        .force(true)
        .build();
    docker
        .remove_image(&snapshot.snapshot_id, Some(options), None)
        .await
        .unwrap();
}

#[tokio::test]
async fn pause_freezes_the_container_and_resume_thaws_it() {
    let Some(provider) = provider("pause_freezes_the_container_and_resume_thaws_it").await else {
        return;
    };
    assert!(provider.capabilities().pausable);
    let label = TestLabel::new(&provider).await;
    let docker = provider.docker().await.unwrap();
    let session = session(&provider, "thread-t-pause", label.config(json!({}))).await;
    let id = session.state().session_id;
    run(session.as_ref(), "echo 1 > counter").await;

    let paused = session.pause().await.unwrap();
    assert_eq!(paused.metadata["paused"], true);
    let state = docker
        .inspect_container(&id, None)
        .await
        .unwrap()
        .state
        .unwrap();
    assert_eq!(state.paused, Some(true));
    assert!(session.pause().await.is_ok(), "pausing twice is harmless");
    let error = session.run_command(sh("true")).await.unwrap_err();
    assert!(error.to_string().contains("paused"), "{error}");

    let resumed = session.resume().await.unwrap();
    assert_eq!(resumed.metadata["paused"], false);
    let state = docker
        .inspect_container(&id, None)
        .await
        .unwrap()
        .state
        .unwrap();
    assert_eq!((state.paused, state.running), (Some(false), Some(true)));
    assert_eq!(run(session.as_ref(), "cat counter").await.stdout, "1\n");
    assert!(
        session.resume().await.is_ok(),
        "resuming a running container is harmless"
    );
    session.close().await.unwrap();
}

#[tokio::test]
async fn detach_keeps_the_container_and_rejoin_finds_it() {
    let Some(provider) = provider("detach_keeps_the_container_and_rejoin_finds_it").await else {
        return;
    };
    assert!(provider.capabilities().detachable);
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-detach", label.config(json!({}))).await;
    write(session.as_ref(), "kept.txt", "still here\n")
        .await
        .unwrap();

    let detached = session.detach().await.unwrap();
    let error = session.run_command(sh("true")).await.unwrap_err();
    assert!(error.to_string().contains("detached"), "{error}");
    session.close().await.unwrap();
    assert_eq!(
        label.containers().await,
        vec![detached.session_id.clone()],
        "detach keeps the container, even through close"
    );

    // A different provider instance (another process) rejoins by state.
    let other = DockerRunnerProvider::connect().unwrap();
    let rejoined = other.rejoin_session(detached.clone()).await.unwrap();
    assert_eq!(rejoined.state().session_id, detached.session_id);
    assert_eq!(rejoined.state().destination_id, "thread-t-detach");
    assert_eq!(
        read(rejoined.as_ref(), "kept.txt").await.unwrap(),
        "still here\n"
    );
    assert_eq!(label.containers().await.len(), 1, "rejoin creates nothing");

    // A bare container id (no metadata) is enough to rejoin.
    let bare = RunnerSessionState {
        provider_id: PROVIDER_ID.to_string(),
        session_id: detached.session_id.clone(),
        destination_id: "thread-t-detach".to_string(),
        snapshot: None,
        metadata: serde_json::Value::Null,
    };
    let by_id = other.resume_session(bare.clone()).await.unwrap();
    assert_eq!(by_id.state().metadata["workdir"], "/workspace");
    assert_eq!(
        run(by_id.as_ref(), "cat kept.txt").await.stdout,
        "still here\n"
    );

    rejoined.close().await.unwrap();
    assert!(label.containers().await.is_empty());
    let error = other.resume_session(bare).await.err().unwrap();
    assert!(error.to_string().contains("no longer exists"), "{error}");
}

#[tokio::test]
async fn a_stopped_container_is_started_again_on_resume() {
    let Some(provider) = provider("a_stopped_container_is_started_again_on_resume").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    // Unconfined, the workspace is on the container's own filesystem and
    // survives a stop.
    let session = session(
        &provider,
        "thread-t-stopped",
        label.config(json!({"sandbox": {"mode": "none"}})),
    )
    .await;
    write(session.as_ref(), "f.txt", "survives a stop\n")
        .await
        .unwrap();
    let state = session.detach().await.unwrap();
    let docker = provider.docker().await.unwrap();
    docker
        .stop_container(&state.session_id, None)
        .await
        .unwrap();
    let resumed = provider.resume_session(state).await.unwrap();
    assert_eq!(
        run(resumed.as_ref(), "cat f.txt").await.stdout,
        "survives a stop\n"
    );
    resumed.close().await.unwrap();
}

#[tokio::test]
async fn a_stopped_confined_container_is_refused_on_resume_because_its_workspace_is_gone() {
    let Some(provider) = provider("a_stopped_confined_container_is_refused_on_resume").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-stopped-c", label.config(json!({}))).await;
    write(session.as_ref(), "f.txt", "on tmpfs\n")
        .await
        .unwrap();
    let state = session.detach().await.unwrap();
    let docker = provider.docker().await.unwrap();
    docker
        .stop_container(&state.session_id, None)
        .await
        .unwrap();
    let error = provider.resume_session(state).await.err().unwrap();
    let text = format!("{error:#}");
    assert!(text.contains("files are gone"), "{text}");
    assert!(text.contains("/workspace"), "{text}");
}

#[tokio::test]
async fn cleanup_keep_leaves_the_container_running() {
    let Some(provider) = provider("cleanup_keep_leaves_the_container_running").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let kept = session(
        &provider,
        "thread-t-keep",
        label.config(json!({"cleanup": "keep"})),
    )
    .await;
    let id = kept.state().session_id;
    kept.close().await.unwrap();
    let docker = provider.docker().await.unwrap();
    let inspect = docker.inspect_container(&id, None).await.unwrap();
    assert_eq!(inspect.state.unwrap().running, Some(true));
    assert_eq!(
        inspect.config.unwrap().labels.unwrap()[labels::CLEANUP],
        "keep"
    );
    // The label drives a rejoined session too.
    let rejoined = provider
        .rejoin_session(RunnerSessionState {
            provider_id: PROVIDER_ID.to_string(),
            session_id: id.clone(),
            destination_id: "thread-t-keep".to_string(),
            snapshot: None,
            metadata: serde_json::Value::Null,
        })
        .await
        .unwrap();
    rejoined.close().await.unwrap();
    assert_eq!(label.containers().await, vec![id]);
}

#[tokio::test]
async fn a_missing_image_is_a_clear_error() {
    let Some(provider) = provider("a_missing_image_is_a_clear_error").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let config = label.config(json!({"image": "roder-no-such-image:never"}));
    let error = provider
        .validate_destination(&destination("thread-t-missing", config.clone()))
        .await
        .unwrap_err();
    let text = format!("{error:#}");
    assert!(text.contains("\"roder-no-such-image:never\""), "{text}");
    assert!(text.contains("not present"), "{text}");
    assert!(text.contains("never pulls"), "{text}");
    let error = provider
        .create_session(destination("thread-t-missing", config))
        .await
        .err()
        .unwrap();
    assert!(format!("{error:#}").contains("not present"), "{error:#}");
    assert!(label.containers().await.is_empty());

    let error = provider
        .validate_destination(&destination("thread-t-missing", json!({"workdir": "/w"})))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("field `image` is required"),
        "{error}"
    );
}

#[tokio::test]
async fn limits_mounts_and_env_are_applied() {
    let Some(provider) = provider("limits_mounts_and_env_are_applied").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("given.txt"), "from the host\n").unwrap();
    let rw = tempfile::tempdir().unwrap();
    let session = session(
        &provider,
        "thread-t-limits",
        label.config(json!({
            "cpus": 0.5,
            "memory": "64m",
            "mounts": [
                {"source": host.path().display().to_string(), "target": "/data", "read_only": true},
                {"source": rw.path().display().to_string(), "target": "/out"}
            ]
        })),
    )
    .await;
    let docker = provider.docker().await.unwrap();
    let host_config = docker
        .inspect_container(&session.state().session_id, None)
        .await
        .unwrap()
        .host_config
        .unwrap();
    assert_eq!(host_config.nano_cpus, Some(500_000_000));
    assert_eq!(host_config.memory, Some(64 << 20));

    assert_eq!(
        read(session.as_ref(), "/data/given.txt").await.unwrap(),
        "from the host\n"
    );
    let result = run(session.as_ref(), "echo x > /data/new.txt").await;
    assert_ne!(
        result.exit_code,
        Some(0),
        "a read-only mount refuses writes"
    );
    assert!(!host.path().join("new.txt").exists());
    run(session.as_ref(), "echo out > /out/made.txt").await;
    assert_eq!(
        std::fs::read_to_string(rw.path().join("made.txt")).unwrap(),
        "out\n"
    );
    session.close().await.unwrap();
}
