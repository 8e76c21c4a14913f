//! The sandbox executor in docker sessions, against the real daemon: calls
//! go through the helper (its pid is the commands' parent), concurrent
//! calls run at once, binary files round-trip, and an image the helper
//! cannot run in (another architecture), or a destination that turns it
//! off, falls back to plain execs that work the same.

mod support;

use std::io::Read;
use std::time::Duration;

use bollard::query_parameters::{ImportImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures::{StreamExt, TryStreamExt};
use roder_api::remote_runner::{
    RemoteRunnerSession, RunnerFileReadRequest, RunnerFileWriteRequest,
};
use serde_json::{Value, json};
use support::*;

/// The program that started the command: the helper, or (for a plain
/// exec, whose parent is outside the container's pid namespace) nothing.
async fn parent_of_commands(session: &dyn RemoteRunnerSession) -> String {
    let result = run(
        session,
        "if [ \"$PPID\" = 0 ]; then echo none; else tr '\\0' ' ' < /proc/$PPID/cmdline; fi",
    )
    .await;
    assert_eq!(result.exit_code, Some(0), "{result:?}");
    result.stdout.trim().to_string()
}

#[tokio::test]
async fn calls_go_through_the_helper_at_once_and_files_round_trip() {
    let Some(provider) = provider("calls_go_through_the_helper").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-executor", label.config(json!({}))).await;
    let parent = parent_of_commands(session.as_ref()).await;
    assert!(
        parent.contains(".roder-executor-"),
        "commands' parent: {parent}"
    );

    // Each waits for the other's file: serialised, both would time out.
    let mut a = sh("touch a; while [ ! -e b ]; do sleep 0.01; done; echo a");
    a.timeout_ms = Some(20_000);
    let mut b = sh("touch b; while [ ! -e a ]; do sleep 0.01; done; echo b");
    b.timeout_ms = Some(20_000);
    let (a, b) = tokio::join!(session.run_command(a), session.run_command(b));
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!((a.exit_code, a.stdout.as_str()), (Some(0), "a\n"), "{a:?}");
    assert_eq!((b.exit_code, b.stdout.as_str()), (Some(0), "b\n"), "{b:?}");

    let binary: Vec<u8> = (0..=255u8).cycle().take(1 << 20).collect();
    session
        .write_file(RunnerFileWriteRequest {
            path: "data/blob.bin".into(),
            contents: binary.clone(),
        })
        .await
        .unwrap();
    let read = session
        .read_file(RunnerFileReadRequest {
            path: "data/blob.bin".into(),
        })
        .await
        .unwrap();
    assert!(read.contents == binary, "the file came back changed");
    let sum = run(session.as_ref(), "wc -c < data/blob.bin").await;
    assert_eq!(sum.stdout.trim(), (1 << 20).to_string());

    // Large output arrives whole.
    let big = run(
        session.as_ref(),
        "cat data/blob.bin data/blob.bin | wc -c; head -c 3000000 /dev/zero | tr '\\0' x",
    )
    .await;
    assert!(
        big.stdout.starts_with(&format!("{}\n", 2 << 20)),
        "{}",
        &big.stdout[..20]
    );
    assert_eq!(big.stdout.len(), format!("{}\n", 2 << 20).len() + 3_000_000);
    session.close().await.unwrap();
    assert!(label.containers().await.is_empty());
}

#[tokio::test]
async fn a_destination_can_turn_the_helper_off() {
    let Some(provider) = provider("a_destination_can_turn_the_helper_off").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(
        &provider,
        "thread-t-executor-off",
        label.config(json!({"executor": "off"})),
    )
    .await;
    assert_eq!(parent_of_commands(session.as_ref()).await, "none");
    assert_eq!(session.state().metadata["executor"], "off");
    session.close().await.unwrap();
}

/// Loads a copy of the sandbox image whose config says `arm64`: the
/// helper, built for this host, must not be started in it.
async fn foreign_architecture_image(docker: &bollard::Docker, tag: &str) {
    let saved: Vec<u8> = docker
        .export_image(IMAGE)
        .map_ok(|chunk| chunk.to_vec())
        .try_concat()
        .await
        .unwrap();
    let mut entries = Vec::new();
    let mut archive = tar::Archive::new(saved.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let header = entry.header().clone();
        let mut contents = Vec::new();
        entry.read_to_end(&mut contents).unwrap();
        entries.push((path, header, contents));
    }
    let manifest_at = entries
        .iter()
        .position(|(path, ..)| path == "manifest.json")
        .unwrap();
    let mut manifest: Value = serde_json::from_slice(&entries[manifest_at].2).unwrap();
    manifest[0]["RepoTags"] = json!([tag]);
    let config_name = manifest[0]["Config"].as_str().unwrap().to_string();
    entries[manifest_at].2 = serde_json::to_vec(&manifest).unwrap();
    let config_at = entries
        .iter()
        .position(|(path, ..)| *path == config_name)
        .unwrap();
    let mut config: Value = serde_json::from_slice(&entries[config_at].2).unwrap();
    config["architecture"] = json!("arm64");
    entries[config_at].2 = serde_json::to_vec(&config).unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    for (path, mut header, contents) in entries {
        header.set_size(contents.len() as u64);
        header.set_cksum();
        builder
            .append_data(&mut header, path, contents.as_slice())
            .unwrap();
    }
    let tar = builder.into_inner().unwrap();
    let mut loading = docker.import_image(
        ImportImageOptionsBuilder::default().quiet(true).build(),
        bollard::body_full(tar.into()),
        None,
    );
    while let Some(progress) = loading.next().await {
        progress.unwrap();
    }
    let inspect = docker.inspect_image(tag).await.unwrap();
    assert_eq!(inspect.architecture.as_deref(), Some("arm64"));
}

#[tokio::test]
async fn an_image_of_another_architecture_falls_back_to_plain_execs() {
    let Some(provider) = provider("an_image_of_another_architecture_falls_back").await else {
        return;
    };
    let docker = provider.docker().await.unwrap();
    let tag = format!("roder-test-arm64:{}", uuid::Uuid::new_v4().simple());
    foreign_architecture_image(&docker, &tag).await;
    let label = TestLabel::new(&provider).await;
    let session = session(
        &provider,
        "thread-t-executor-arch",
        label.config(json!({"image": tag})),
    )
    .await;
    // The commands still run, as plain execs.
    assert_eq!(parent_of_commands(session.as_ref()).await, "none");
    session
        .write_file(RunnerFileWriteRequest {
            path: "f.txt".into(),
            contents: b"through the archive API\n".to_vec(),
        })
        .await
        .unwrap();
    let read = session
        .read_file(RunnerFileReadRequest {
            path: "f.txt".into(),
        })
        .await
        .unwrap();
    assert_eq!(read.contents, b"through the archive API\n");
    let mut timed = sh("sleep 30");
    timed.timeout_ms = Some(300);
    let result = tokio::time::timeout(Duration::from_secs(30), session.run_command(timed))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    session.close().await.unwrap();
    docker
        .remove_image(
            &tag,
            Some(RemoveImageOptionsBuilder::default().force(true).build()),
            None,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_interactive_process_talks_over_the_helper_and_dies_with_its_handle() {
    use roder_api::remote_runner::{RunnerProcessEvent, RunnerProcessRequest};
    let Some(provider) = provider("an_interactive_process_talks_over_the_helper").await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let session = session(&provider, "thread-t-process", label.config(json!({}))).await;
    let request = |program: &str, args: &[&str]| RunnerProcessRequest {
        program: program.to_string(),
        args: args.iter().map(|arg| arg.to_string()).collect(),
        cwd: None,
        env: vec![("GREETING".to_string(), "hi".to_string())],
    };
    let mut echo = session
        .spawn_process(request("sh", &["-c", "echo $GREETING; cat"]))
        .await
        .unwrap();
    let mut seen = Vec::new();
    echo.write_stdin(b"ping\n").unwrap();
    while seen != b"hi\nping\n" {
        match echo.next_event().await.unwrap() {
            RunnerProcessEvent::Stdout(data) => seen.extend(data),
            other => panic!("unexpected {other:?} after {seen:?}"),
        }
    }
    echo.close_stdin().unwrap();
    loop {
        if let RunnerProcessEvent::Exited { exit_code } = echo.next_event().await.unwrap() {
            assert_eq!(exit_code, Some(0));
            break;
        }
    }

    let sleeper = session
        .spawn_process(request(
            "sh",
            &["-c", "echo $$ > /tmp/sleeper.pid; exec sleep 300"],
        ))
        .await
        .unwrap();
    eventually(Duration::from_secs(10), "the sleeper started", || async {
        run(session.as_ref(), "cat /tmp/sleeper.pid")
            .await
            .exit_code
            == Some(0)
    })
    .await;
    drop(sleeper);
    eventually(
        Duration::from_secs(10),
        "the dropped process is killed",
        || async {
            run(
                session.as_ref(),
                "kill -0 $(cat /tmp/sleeper.pid) 2>/dev/null",
            )
            .await
            .exit_code
                != Some(0)
        },
    )
    .await;

    let off = session_with_executor_off(&provider, &label).await;
    let error = off.spawn_process(request("cat", &[])).await.err().unwrap();
    assert!(
        format!("{error:#}").contains("sandbox executor"),
        "{error:#}"
    );
    off.close().await.unwrap();
    session.close().await.unwrap();
}

async fn session_with_executor_off(
    provider: &roder_ext_runner_docker::DockerRunnerProvider,
    label: &TestLabel,
) -> std::sync::Arc<dyn RemoteRunnerSession> {
    session(
        provider,
        "thread-t-process-off",
        label.config(json!({"executor": "off"})),
    )
    .await
}
