//! `roder runners gc` with two Roder homes on one Docker daemon, through the
//! real `roder` binary: each home runs a docker-bound thread whose container
//! is kept after the process exits; gc of one home never removes the other
//! home's container, and removes its own once that thread is deleted.
//!
//! Needs the Docker daemon and `roder-sandbox:latest`
//! (`scripts/build-sandbox-image.sh`). Skips loudly without a daemon socket;
//! a missing image fails. Every container carries a `roder-test` label unique
//! to the run, and a guard removes them all however the test ends. `runners
//! list` and `runners gc` with their stdout's reader gone stop as SIGPIPE
//! would (the other commands: `broken_pipe_e2e.rs`).

mod docker_support;
mod support;

use std::path::Path;

use docker_support::{docker_or_skip, home_with_docker_runner};
use roder_ext_runner_docker::labels;
use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::{assert_stopped_like_sigpipe, roder, roder_into_closed_pipe, thread_id_from};

/// Runs one docker-bound turn in `home` (a command in the container) and
/// returns the new thread's id.
async fn docker_thread(server: &FakeModelServer, home: &Path, workspace: &Path) -> String {
    server.push(ChatStream::tool_calls_reply(&[(
        "call-exec",
        "exec_command",
        r#"{"cmd":"echo in-the-box > made.txt && cat made.txt"}"#,
    )]));
    server.push(ChatStream::text_reply("Made it."));
    let run = roder(home, workspace, &["exec", "--runner", "box", "make a file"]).await;
    assert_eq!(run.code, Some(0), "stderr:\n{}", run.stderr);
    assert_eq!(run.stdout, "Made it.\n");
    thread_id_from(&run.stderr)
}

fn home_id(home: &Path) -> String {
    std::fs::read_to_string(home.join("home-id"))
        .unwrap()
        .trim()
        .to_string()
}

/// The stdout line gc printed about `container`.
fn line_about<'a>(stdout: &'a str, container: &str) -> &'a str {
    stdout
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some(container))
        .unwrap_or_else(|| panic!("gc said nothing about {container}:\n{stdout}"))
}

#[tokio::test]
async fn gc_of_one_home_never_touches_another_homes_sandbox() {
    let Some(containers) =
        docker_or_skip("gc_of_one_home_never_touches_another_homes_sandbox").await
    else {
        return;
    };
    let server = FakeModelServer::start().await.unwrap();
    server.require_api_key("test-key");
    let workspace = tempfile::tempdir().unwrap();
    let kept = r#"cleanup = "keep""#;
    let home_a = home_with_docker_runner(&server.openai_base_url(), &containers, kept);
    let home_b = home_with_docker_runner(&server.openai_base_url(), &containers, kept);

    let thread_a = docker_thread(&server, home_a.path(), workspace.path()).await;
    let thread_b = docker_thread(&server, home_b.path(), workspace.path()).await;
    let (id_of_a, id_of_b) = (home_id(home_a.path()), home_id(home_b.path()));
    assert_ne!(id_of_a, id_of_b, "each home has its own id");

    let made = containers.list().await;
    assert_eq!(made.len(), 2, "one kept container per thread: {made:#?}");
    let container_of = |thread: &str, home: &str| -> String {
        made.iter()
            .find(|(_, labels_of)| {
                labels_of.get(labels::THREAD).map(String::as_str) == Some(thread)
            })
            .map(|(id, labels_of)| {
                assert_eq!(
                    labels_of.get(labels::HOME).map(String::as_str),
                    Some(home),
                    "the container carries its home's id"
                );
                id.clone()
            })
            .unwrap_or_else(|| panic!("no container for thread {thread}: {made:#?}"))
    };
    let box_a = container_of(&thread_a, &id_of_a);
    let box_b = container_of(&thread_b, &id_of_b);

    // A's thread goes away; its container stays until A collects it.
    let deleted = roder(
        home_a.path(),
        workspace.path(),
        &["threads", "delete", &thread_a],
    )
    .await;
    assert_eq!(deleted.code, Some(0), "{}", deleted.stderr);

    let from_b = roder(home_b.path(), workspace.path(), &["runners", "gc"]).await;
    assert_eq!(from_b.code, Some(0), "{}", from_b.stderr);
    let about_a = line_about(&from_b.stdout, &box_a);
    assert!(about_a.starts_with("kept "), "{about_a}");
    assert!(
        about_a.contains(&format!("home={id_of_a}")) && about_a.contains("another Roder home"),
        "{about_a}"
    );
    let about_b = line_about(&from_b.stdout, &box_b);
    assert!(
        about_b.starts_with("kept ") && about_b.contains("its thread exists"),
        "{about_b}"
    );
    let after_b: Vec<String> = containers.list().await.into_keys().collect();
    assert!(
        after_b.contains(&box_a) && after_b.contains(&box_b),
        "B's gc kept both: {after_b:?}"
    );

    // Both print a line per container: with their reader gone they stop
    // as SIGPIPE would (B's gc keeps both containers again).
    for args in [&["runners", "list"][..], &["runners", "gc"]] {
        let run = roder_into_closed_pipe(home_b.path(), workspace.path(), args, "").await;
        assert_stopped_like_sigpipe(&run, args);
    }

    let from_a = roder(home_a.path(), workspace.path(), &["runners", "gc"]).await;
    assert_eq!(from_a.code, Some(0), "{}", from_a.stderr);
    let about_a = line_about(&from_a.stdout, &box_a);
    assert!(
        about_a.starts_with("removed ") && about_a.contains("no longer exists"),
        "{about_a}"
    );
    let about_b = line_about(&from_a.stdout, &box_b);
    assert!(
        about_b.starts_with("kept ") && about_b.contains(&format!("home={id_of_b}")),
        "{about_b}"
    );
    let after_a: Vec<String> = containers.list().await.into_keys().collect();
    assert_eq!(after_a, vec![box_b.clone()], "only A's orphan was removed");
    assert!(
        from_a.stderr.contains("removed 1 container(s)"),
        "{}",
        from_a.stderr
    );
}
