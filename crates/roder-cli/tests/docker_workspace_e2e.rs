//! A docker runner bound at a workspace other than `/workspace`, through the
//! real `roder` binary: the model's write_file, its shell command and its
//! read_file all work in `/srv/app`, and a config whose `workdir` disagrees
//! with the binding is refused before any container starts.
//!
//! Needs the Docker daemon and `roder-sandbox:latest`
//! (`scripts/build-sandbox-image.sh`); skips loudly without a daemon socket.

mod docker_support;
mod support;

use docker_support::{docker_or_skip, home_with_docker_runner};
use roder_ext_runner_docker::labels;
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::{roder, thread_id_from};

#[tokio::test]
async fn a_docker_thread_bound_at_srv_app_reads_writes_and_runs_there() {
    let Some(containers) =
        docker_or_skip("a_docker_thread_bound_at_srv_app_reads_writes_and_runs_there").await
    else {
        return;
    };
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    let workspace = tempfile::tempdir().unwrap();
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"working_dir = "/srv/app", cleanup = "keep""#,
    );
    server.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "write_file",
        r#"{"path":"notes/plan.txt","content":"written by write_file\n"}"#,
    )]));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-exec",
        "exec_command",
        r#"{"cmd":"pwd && cat notes/plan.txt && echo from-shell > shell.txt && ls -A /workspace; echo listed"}"#,
    )]));
    server.push(ChatStream::tool_calls_reply(&[(
        "call-read",
        "read_file",
        r#"{"path":"shell.txt"}"#,
    )]));
    server.push(ChatStream::text_reply("Done in /srv/app."));

    let run = roder(
        home.path(),
        workspace.path(),
        &["exec", "--runner", "box", "work in the app"],
    )
    .await;
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!(run.stdout, "Done in /srv/app.\n");

    let requests = server.model_requests();
    assert_eq!(requests.len(), 4);
    let after_exec = requests[2].body.to_string();
    assert!(
        after_exec.contains(r"/srv/app\nwritten by write_file\nlisted"),
        "the shell runs where write_file wrote, and /workspace stays empty: {after_exec}"
    );
    let after_read = requests[3].body.to_string();
    assert!(
        after_read.contains("from-shell"),
        "read_file reads where the shell wrote: {after_read}"
    );
    assert!(
        std::fs::read_dir(workspace.path())
            .unwrap()
            .next()
            .is_none(),
        "nothing is written on the host"
    );

    let made = containers.list().await;
    assert_eq!(made.len(), 1, "{made:#?}");
    let (container, labels_of) = made.iter().next().unwrap();
    assert!(labels_of.contains_key(labels::THREAD), "{labels_of:#?}");
    // `roder exec` is done with it: idle, the container is paused.
    assert!(containers.is_paused(container).await);
    let thread_id = thread_id_from(&run.stderr);
    let listed = roder(home.path(), workspace.path(), &["runners", "list"]).await;
    assert_eq!(listed.code, Some(0), "{}", listed.stderr);
    assert_eq!(
        listed.stdout.lines().collect::<Vec<_>>().len(),
        1,
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.starts_with(container.as_str())
            && listed
                .stdout
                .contains(&format!(" paused thread={thread_id}\n")),
        "{}",
        listed.stdout
    );

    // The thread's next run wakes the same container, files and all.
    server.push(ChatStream::tool_calls_reply(&[(
        "call-again",
        "exec_command",
        r#"{"cmd":"cat shell.txt"}"#,
    )]));
    server.push(ChatStream::text_reply("Still there."));
    let again = roder(
        home.path(),
        workspace.path(),
        &["exec", "--thread", &thread_id, "again"],
    )
    .await;
    assert_eq!(again.code, Some(0), "stderr:\n{}", again.stderr);
    let woken = server.model_requests()[5].body.to_string();
    assert!(woken.contains("from-shell"), "{woken}");
    assert_eq!(containers.list().await.len(), 1, "no new container");
    assert!(containers.is_paused(container).await, "idle again");
}

#[tokio::test]
async fn a_workdir_that_disagrees_with_the_binding_is_refused_before_any_container() {
    let Some(containers) =
        docker_or_skip("a_workdir_that_disagrees_with_the_binding_is_refused_before_any_container")
            .await
    else {
        return;
    };
    let server = FakeModelServer::start().await.unwrap();
    let workspace = tempfile::tempdir().unwrap();
    // `roder exec --runner` binds at `working_dir`; `workdir` names another
    // root, so files and commands would split.
    let home = home_with_docker_runner(
        &server.openai_base_url(),
        &containers,
        r#"working_dir = "/srv/app", workdir = "/workspace""#,
    );
    let run = roder(
        home.path(),
        workspace.path(),
        &["exec", "--runner", "box", "anything"],
    )
    .await;
    assert_ne!(run.code, Some(0), "{}", run.stderr);
    assert!(
        run.stderr.contains("\"/srv/app\"")
            && run.stderr.contains("\"/workspace\"")
            && run.stderr.contains("bound at workspace"),
        "the error names both roots: {}",
        run.stderr
    );
    assert!(
        server.model_requests().is_empty(),
        "no turn ran: the thread was refused at creation"
    );
    assert!(containers.list().await.is_empty());
}
