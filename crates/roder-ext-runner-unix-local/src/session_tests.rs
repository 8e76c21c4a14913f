//! Session behaviour against real processes and a real temporary directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandRequest, RunnerDestination,
    RunnerFileReadRequest, RunnerFileWriteRequest, RunnerManifest, RunnerPortRequest,
    RunnerSessionState,
};
use serde_json::json;

use crate::test_support::{WAIT_LIMIT, process_is_dead, read_pid, sh, start_announced, wait_dead};
use crate::{SessionOptions, UnixLocalRunnerProvider, UnixLocalSession};

async fn session(root: &Path, env: serde_json::Value) -> Arc<dyn RemoteRunnerSession> {
    let mut config = json!({ "root": root.display().to_string() });
    if !env.is_null() {
        config["env"] = env;
    }
    UnixLocalRunnerProvider::default()
        .create_session(RunnerDestination {
            id: "local".to_string(),
            provider_id: "unix-local".to_string(),
            config,
            default_manifest: RunnerManifest::default(),
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn captures_output_and_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let result = session
        .run_command(sh("c1", "echo out; echo err >&2; exit 3"))
        .await
        .unwrap();
    assert_eq!(result.command_id, "c1");
    assert_eq!(result.exit_code, Some(3));
    assert_eq!(result.stdout, "out\n");
    assert_eq!(result.stderr, "err\n");

    let ok = session.run_command(sh("c2", "true")).await.unwrap();
    assert_eq!(ok.exit_code, Some(0));

    let signalled = session.run_command(sh("c3", "kill -9 $$")).await.unwrap();
    assert_eq!(signalled.exit_code, None);
}

#[tokio::test]
async fn missing_program_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let mut request = sh("c1", "");
    request.program = "definitely-not-a-program-xyz".to_string();
    let error = session.run_command(request).await.unwrap_err();
    assert!(format!("{error:#}").contains("definitely-not-a-program-xyz"));
}

#[tokio::test]
async fn runs_in_the_root_or_the_requested_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let canonical = tokio::fs::canonicalize(dir.path()).await.unwrap();
    tokio::fs::create_dir(dir.path().join("sub")).await.unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;

    let at_root = session.run_command(sh("c1", "pwd -P")).await.unwrap();
    assert_eq!(at_root.stdout.trim(), canonical.display().to_string());

    let mut relative = sh("c2", "pwd -P");
    relative.cwd = Some(PathBuf::from("sub"));
    let in_sub = session.run_command(relative).await.unwrap();
    assert_eq!(
        in_sub.stdout.trim(),
        canonical.join("sub").display().to_string()
    );

    let mut absolute = sh("c3", "pwd -P");
    absolute.cwd = Some(dir.path().join("sub"));
    let in_sub = session.run_command(absolute).await.unwrap();
    assert_eq!(
        in_sub.stdout.trim(),
        canonical.join("sub").display().to_string()
    );

    for cwd in ["..", "/tmp", "missing"] {
        let mut outside = sh("c4", "pwd");
        outside.cwd = Some(PathBuf::from(cwd));
        let error = session.run_command(outside).await.unwrap_err();
        assert!(error.to_string().contains(cwd), "{cwd}: {error}");
    }
}

#[tokio::test]
async fn request_env_overrides_config_env() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), json!({"FROM_CONFIG": "c", "BOTH": "config"})).await;
    let mut request = sh("c1", "echo $FROM_CONFIG $FROM_REQUEST $BOTH");
    request.env = vec![
        ("FROM_REQUEST".to_string(), "r".to_string()),
        ("BOTH".to_string(), "request".to_string()),
    ];
    let result = session.run_command(request).await.unwrap();
    assert_eq!(result.stdout, "c r request\n");
    assert_eq!(
        session.state().metadata["env"]["FROM_CONFIG"],
        json!("c"),
        "env travels in the state so a resumed session keeps it"
    );
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let mut request = sh("c1", "sleep 30 & echo $! > bg.pid; echo started; wait");
    request.timeout_ms = Some(1000);
    let started = std::time::Instant::now();
    let result = session.run_command(request).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(result.exit_code, None);
    assert_eq!(result.stdout, "started\n");
    assert!(
        result.stderr.contains("command timed out after 1000 ms"),
        "{}",
        result.stderr
    );
    let pid = read_pid(&dir.path().join("bg.pid")).await;
    assert!(
        wait_dead(pid).await,
        "background sleep {pid} survived the timeout"
    );
}

#[tokio::test]
async fn cancel_from_another_task_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    assert!(!session.cancel_command(&"c1".to_string()).await.unwrap());

    let (running, pid) = start_announced(
        session.clone(),
        "c1",
        "sleep 30 & echo $! > bg.pid; wait",
        &dir.path().join("bg.pid"),
    )
    .await;
    assert!(session.cancel_command(&"c1".to_string()).await.unwrap());

    let result = tokio::time::timeout(WAIT_LIMIT, running)
        .await
        .expect("cancelled command did not return")
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    assert!(
        result.stderr.contains("command cancelled"),
        "{}",
        result.stderr
    );
    assert!(
        wait_dead(pid).await,
        "background sleep {pid} survived cancel"
    );
    assert!(!session.cancel_command(&"c1".to_string()).await.unwrap());
}

#[tokio::test]
async fn dropping_the_future_kills_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let (running, pid) = start_announced(
        session.clone(),
        "c1",
        "sleep 30 & echo $! > bg.pid; wait",
        &dir.path().join("bg.pid"),
    )
    .await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert!(
        wait_dead(pid).await,
        "background sleep {pid} survived the drop"
    );
    assert!(!session.cancel_command(&"c1".to_string()).await.unwrap());
}

#[tokio::test]
async fn background_process_holding_stdout_does_not_hang_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let result = tokio::time::timeout(
        WAIT_LIMIT,
        session.run_command(sh("c1", "sleep 30 & echo $! > bg.pid; echo done")),
    )
    .await
    .expect("command hung on the background process's stdout")
    .unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout, "done\n");
    assert!(result.stderr.contains("output may be incomplete"));
    // A normal exit leaves background processes alone; clean this one up.
    let pid = read_pid(&dir.path().join("bg.pid")).await;
    assert!(!process_is_dead(pid).await);
    // SAFETY: plain kill(2) of a process this test started.
    unsafe { libc::kill(i32::try_from(pid).unwrap(), libc::SIGKILL) };
}

#[tokio::test]
async fn files_round_trip_and_writes_create_parents() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    session
        .write_file(RunnerFileWriteRequest {
            path: PathBuf::from("a/b/c.txt"),
            contents: b"hello".to_vec(),
        })
        .await
        .unwrap();
    assert_eq!(
        tokio::fs::read(dir.path().join("a/b/c.txt")).await.unwrap(),
        b"hello"
    );
    let read = session
        .read_file(RunnerFileReadRequest {
            path: dir.path().join("a/b/c.txt"),
        })
        .await
        .unwrap();
    assert_eq!(read.contents, b"hello");
    assert_eq!(read.path, dir.path().join("a/b/c.txt"));

    let error = session
        .read_file(RunnerFileReadRequest {
            path: PathBuf::from("missing.txt"),
        })
        .await
        .unwrap_err();
    assert!(error.to_string().contains("missing.txt"));
}

#[tokio::test]
async fn path_escapes_are_refused() {
    let outside = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    tokio::fs::write(outside.path().join("secret"), b"s")
        .await
        .unwrap();
    tokio::fs::symlink(outside.path(), dir.path().join("link"))
        .await
        .unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;

    let escapes = [
        PathBuf::from("../escape.txt"),
        PathBuf::from("link/secret"),
        outside.path().join("secret"),
    ];
    for path in escapes {
        let error = session
            .read_file(RunnerFileReadRequest { path: path.clone() })
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
        let error = session
            .write_file(RunnerFileWriteRequest {
                path: path.clone(),
                contents: b"x".to_vec(),
            })
            .await
            .unwrap_err();
        assert!(
            error.to_string().contains(&path.display().to_string()),
            "{error}"
        );
    }
    assert_eq!(
        tokio::fs::read(outside.path().join("secret"))
            .await
            .unwrap(),
        b"s"
    );
    assert!(
        !tokio::fs::try_exists(dir.path().parent().unwrap().join("escape.txt"))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn port_snapshot_and_close() {
    let dir = tempfile::tempdir().unwrap();
    let session = session(dir.path(), serde_json::Value::Null).await;
    let port = session
        .expose_port(RunnerPortRequest {
            port: 8080,
            label: None,
        })
        .await
        .unwrap();
    assert_eq!(port.url.as_deref(), Some("http://127.0.0.1:8080"));
    assert!(session.snapshot().await.unwrap().is_none());
    session.close().await.unwrap();
    assert!(
        tokio::fs::try_exists(dir.path()).await.unwrap(),
        "close never deletes the root"
    );
}

/// The building block other runners wrap: a working directory inside the
/// root, and inherited variables removed before the configured ones apply.
#[tokio::test]
async fn open_honours_the_cwd_and_the_environment_options() {
    let Some((inherited, _)) = std::env::vars().find(|(key, _)| key != "PATH") else {
        return; // Nothing inherited to remove.
    };
    let dir = tempfile::tempdir().unwrap();
    let canonical = tokio::fs::canonicalize(dir.path()).await.unwrap();
    tokio::fs::create_dir(dir.path().join("sub")).await.unwrap();
    tokio::fs::write(dir.path().join("sub/f.txt"), b"in sub")
        .await
        .unwrap();
    let state = RunnerSessionState {
        provider_id: "wrapper".to_string(),
        session_id: "s1".to_string(),
        destination_id: "d1".to_string(),
        snapshot: None,
        metadata: json!({"mine": true}),
    };
    let options = SessionOptions {
        cwd: Some(PathBuf::from("sub")),
        env: vec![("ADDED".to_string(), "1".to_string())],
        env_remove: vec![inherited.clone()],
        ..SessionOptions::default()
    };
    let session = UnixLocalSession::open(state.clone(), dir.path(), options)
        .await
        .unwrap();
    assert_eq!(session.state(), state);
    assert_eq!(session.cwd(), canonical.join("sub"));
    assert_eq!(session.canonical_root(), canonical);

    let pwd = session.run_command(sh("c1", "pwd -P")).await.unwrap();
    assert_eq!(
        pwd.stdout.trim(),
        canonical.join("sub").display().to_string()
    );

    // `env` itself, not a shell, which would export variables of its own.
    let env = |id: &str, request_env: Vec<(String, String)>| RunnerCommandRequest {
        command_id: id.to_string(),
        program: "env".to_string(),
        args: Vec::new(),
        cwd: None,
        env: request_env,
        timeout_ms: None,
    };
    let result = session.run_command(env("c2", Vec::new())).await.unwrap();
    let lines: Vec<&str> = result.stdout.lines().collect();
    assert!(lines.contains(&"ADDED=1"), "{}", result.stdout);
    let removed = format!("{inherited}=");
    assert!(
        !lines.iter().any(|line| line.starts_with(&removed)),
        "{inherited} was inherited: {}",
        result.stdout
    );
    let again = vec![(inherited.clone(), "request".to_string())];
    let result = session.run_command(env("c3", again)).await.unwrap();
    let expected = format!("{inherited}=request");
    assert!(
        result.stdout.lines().any(|line| line == expected),
        "a request's env still applies: {}",
        result.stdout
    );

    let read = session
        .read_file(RunnerFileReadRequest {
            path: PathBuf::from("f.txt"),
        })
        .await
        .unwrap();
    assert_eq!(read.contents, b"in sub");

    let missing = SessionOptions {
        cwd: Some(PathBuf::from("missing")),
        ..SessionOptions::default()
    };
    let error = UnixLocalSession::open(state, dir.path(), missing)
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains(r#"working directory "missing" does not exist"#),
        "{error}"
    );
}
