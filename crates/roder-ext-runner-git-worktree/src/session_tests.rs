//! The runner provider and its sessions against real worktrees and real
//! processes.

use std::path::PathBuf;
use std::sync::Arc;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerDestination, RunnerFileReadRequest,
    RunnerFileWriteRequest, RunnerManifest, RunnerPortRequest, RunnerSessionState,
};
use roder_api::workdir::WorkdirMaterializer;
use serde_json::{Value, json};

use roder_ext_runner_unix_local::test_support::{
    WAIT_LIMIT, read_pid, sh, start_announced, wait_dead,
};

use crate::test_support::{TestRepo, git, materialize, materializer};
use crate::{GitWorktreeMaterializer, GitWorktreeRunnerProvider};

fn destination(config: Value) -> RunnerDestination {
    RunnerDestination {
        id: "thread-t1".to_string(),
        provider_id: "git-worktree".to_string(),
        config,
        default_manifest: RunnerManifest::default(),
    }
}

fn provider_for(materializer: &GitWorktreeMaterializer) -> GitWorktreeRunnerProvider {
    GitWorktreeRunnerProvider::new(materializer.root().to_path_buf())
}

/// A repository, a worktree `wt-1` of it, and a session in `relative_cwd`.
struct Fixture {
    _repo: TestRepo,
    _root: tempfile::TempDir,
    materializer: GitWorktreeMaterializer,
    provider: GitWorktreeRunnerProvider,
    checkout: PathBuf,
    session: Arc<dyn RemoteRunnerSession>,
}

async fn fixture(relative_cwd: Option<&str>) -> Fixture {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    let provider = provider_for(&materializer);
    let session = provider
        .create_session(destination(json!({
            "worktree_id": "wt-1",
            "relative_cwd": relative_cwd,
            "repository": repo.path().display().to_string(),
            "selector": "HEAD",
        })))
        .await
        .unwrap();
    Fixture {
        _repo: repo,
        _root: root,
        materializer,
        provider,
        checkout: made.cwd,
        session,
    }
}

#[test]
fn identity_and_capabilities() {
    let provider = GitWorktreeRunnerProvider::new(PathBuf::from("/tmp/roots"));
    assert_eq!(provider.id(), "git-worktree");
    let capabilities = provider.capabilities();
    assert!(capabilities.command_exec && capabilities.file_read && capabilities.file_write);
    assert!(capabilities.cancellation);
    assert!(!capabilities.port_preview && !capabilities.snapshots);
    assert!(!capabilities.artifact_export && !capabilities.pausable && !capabilities.detachable);
    assert_eq!(provider.default_workspace(), None);
}

#[tokio::test]
async fn commands_run_in_the_working_directory_inside_the_checkout() {
    let fixture = fixture(Some("src")).await;
    let session = &fixture.session;
    let state = session.state();
    assert_eq!(state.provider_id, "git-worktree");
    assert_eq!(state.destination_id, "thread-t1");
    assert_eq!(
        state.metadata,
        json!({"worktree_id": "wt-1", "relative_cwd": "src"})
    );

    let result = session.run_command(sh("c1", "pwd; ls")).await.unwrap();
    assert_eq!(result.exit_code, Some(0));
    let src = fixture.checkout.join("src");
    assert_eq!(result.stdout, format!("{}\nlib.rs\n", src.display()));

    // An absolute cwd (what the runtime sends) inside the checkout works.
    let mut at_top = sh(
        "c2",
        "pwd && git status --porcelain && git rev-parse --show-toplevel",
    );
    at_top.cwd = Some(fixture.checkout.clone());
    let result = session.run_command(at_top).await.unwrap();
    let top = fixture.checkout.display();
    assert_eq!(
        result.stdout,
        format!("{top}\n{top}\n"),
        "{}",
        result.stderr
    );

    let mut outside = sh("c3", "pwd");
    outside.cwd = Some(PathBuf::from("/tmp"));
    let error = session.run_command(outside).await.unwrap_err();
    assert!(
        format!("{error:#}").contains("outside the worktree"),
        "{error:#}"
    );
    let mut climbing = sh("c4", "pwd");
    climbing.cwd = Some(PathBuf::from("../.."));
    assert!(session.run_command(climbing).await.is_err());
}

#[tokio::test]
async fn file_operations_resolve_against_the_cwd_and_never_leave_the_checkout() {
    let fixture = fixture(Some("src")).await;
    let session = &fixture.session;
    session
        .write_file(RunnerFileWriteRequest {
            path: "new/mod.rs".into(),
            contents: b"pub mod x;\n".to_vec(),
        })
        .await
        .unwrap();
    assert_eq!(
        tokio::fs::read(fixture.checkout.join("src/new/mod.rs"))
            .await
            .unwrap(),
        b"pub mod x;\n"
    );
    let read = session
        .read_file(RunnerFileReadRequest {
            path: "lib.rs".into(),
        })
        .await
        .unwrap();
    assert_eq!(read.contents, b"pub fn f() {}\n");
    assert_eq!(read.path, PathBuf::from("lib.rs"));
    // Up from the cwd but still inside the checkout is fine.
    let readme = session
        .read_file(RunnerFileReadRequest {
            path: "../README.md".into(),
        })
        .await
        .unwrap();
    assert_eq!(readme.contents, b"clean\n");
    let absolute = session
        .read_file(RunnerFileReadRequest {
            path: fixture.checkout.join("README.md"),
        })
        .await
        .unwrap();
    assert_eq!(absolute.contents, b"clean\n");

    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), fixture.checkout.join("src/escape")).unwrap();
    for path in ["../../outside.txt", "/etc/hostname", "escape/planted.txt"] {
        let error = session
            .write_file(RunnerFileWriteRequest {
                path: path.into(),
                contents: b"x".to_vec(),
            })
            .await
            .unwrap_err();
        assert!(error.to_string().contains(path), "{path}: {error}");
        assert!(
            session
                .read_file(RunnerFileReadRequest { path: path.into() })
                .await
                .is_err(),
            "{path}"
        );
    }
    assert!(!outside.path().join("planted.txt").exists());
    assert!(
        !fixture
            .checkout
            .parent()
            .unwrap()
            .join("outside.txt")
            .exists()
    );
}

#[tokio::test]
async fn edits_through_sessions_land_only_in_their_own_worktree() {
    let repo = TestRepo::new().await;
    let (_root, materializer) = materializer();
    let provider = provider_for(&materializer);
    let mut sessions = Vec::new();
    for id in ["a", "b", "c"] {
        materialize(&materializer, &repo, id).await;
        sessions.push(
            provider
                .create_session(destination(json!({"worktree_id": id})))
                .await
                .unwrap(),
        );
    }
    let runs = sessions.iter().zip(["a", "b", "c"]).map(|(session, id)| {
        session.run_command(sh(
            id,
            &format!("echo {id} > README.md && echo {id} > {id}.txt"),
        ))
    });
    for result in futures_all(runs).await {
        let result = result.unwrap();
        assert_eq!(result.exit_code, Some(0), "{}", result.stderr);
    }
    for id in ["a", "b", "c"] {
        let info = materializer.get(id).await.unwrap();
        let entries = crate::test_support::entries(&info.checkout);
        let own: Vec<_> = entries
            .iter()
            .filter(|name| name.ends_with(".txt"))
            .collect();
        assert_eq!(own, [&format!("{id}.txt")]);
        assert_eq!(
            tokio::fs::read_to_string(info.checkout.join("README.md"))
                .await
                .unwrap(),
            format!("{id}\n")
        );
    }
    assert_eq!(git(&repo.path(), &["status", "--porcelain"]).await, "");
}

/// Polls futures concurrently in one task (they borrow the sessions).
async fn futures_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futures.map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in pinned.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => *output = Some(value),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let fixture = fixture(None).await;
    let mut request = sh("slow", "sleep 30 & echo $! > bg.pid; wait");
    request.timeout_ms = Some(300);
    let result = fixture.session.run_command(request).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert!(
        result.stderr.contains("timed out after 300 ms"),
        "{}",
        result.stderr
    );
    let pid = read_pid(&fixture.checkout.join("bg.pid")).await;
    assert!(
        wait_dead(pid).await,
        "background child {pid} survived the timeout"
    );
}

#[tokio::test]
async fn cancel_kills_a_running_command() {
    let fixture = fixture(None).await;
    let (running, pid) = start_announced(
        fixture.session.clone(),
        "long",
        "echo $$ > started.tmp && mv started.tmp started && sleep 30",
        &fixture.checkout.join("started"),
    )
    .await;
    assert!(
        fixture
            .session
            .cancel_command(&"long".to_string())
            .await
            .unwrap()
    );
    let result = tokio::time::timeout(WAIT_LIMIT, running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    assert!(
        result.stderr.contains("command cancelled"),
        "{}",
        result.stderr
    );
    assert!(wait_dead(pid).await);
    assert!(
        !fixture
            .session
            .cancel_command(&"long".to_string())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn sessions_need_an_active_worktree_and_a_valid_config() {
    let fixture = fixture(None).await;
    let provider = &fixture.provider;
    for (config, expected) in [
        (json!({}), "`worktree_id` is required"),
        (json!({"worktree_id": "nope"}), "no worktree `nope`"),
        (
            json!({"worktree_id": "wt-1", "relative_cwd": ".."}),
            "outside the worktree",
        ),
        (
            json!({"worktree_id": "wt-1", "extra": 1}),
            "unknown field `extra`",
        ),
    ] {
        let error = provider
            .create_session(destination(config.clone()))
            .await
            .err()
            .unwrap();
        assert!(
            format!("{error:#}").contains(expected),
            "{config}: {error:#}"
        );
    }
    let mut foreign = destination(json!({"worktree_id": "wt-1"}));
    foreign.provider_id = "unix-local".to_string();
    assert!(provider.validate_destination(&foreign).await.is_err());
    provider
        .validate_destination(&destination(json!({"worktree_id": "wt-1"})))
        .await
        .unwrap();
    let error = fixture
        .session
        .expose_port(RunnerPortRequest {
            port: 3000,
            label: None,
        })
        .await
        .unwrap_err();
    assert!(error.to_string().contains("does not preview ports"));
    assert_eq!(fixture.session.snapshot().await.unwrap(), None);
}

#[tokio::test]
async fn a_binding_must_be_the_worktrees_working_directory() {
    let fixture = fixture(None).await;
    let provider = &fixture.provider;
    std::fs::create_dir_all(fixture.checkout.join("sub")).unwrap();
    let checkout = fixture.checkout.display().to_string();
    let sub = fixture.checkout.join("sub").display().to_string();
    let bound = |relative_cwd: Option<&str>, workspace: &str| {
        destination(
            json!({"worktree_id": "wt-1", "relative_cwd": relative_cwd, "workspace": workspace}),
        )
    };
    provider
        .validate_destination(&bound(None, &checkout))
        .await
        .unwrap();
    provider
        .validate_destination(&bound(Some("sub"), &sub))
        .await
        .unwrap();
    for (relative_cwd, workspace, works_in) in [
        (None, sub.as_str(), checkout.as_str()),
        (Some("sub"), checkout.as_str(), sub.as_str()),
        (None, "/srv/app", checkout.as_str()),
    ] {
        let error = provider
            .validate_destination(&bound(relative_cwd, workspace))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(&format!("bound at workspace `{workspace}`")),
            "{error}"
        );
        assert!(error.contains(&format!("works in `{works_in}`")), "{error}");
        assert!(
            provider
                .create_session(bound(relative_cwd, workspace))
                .await
                .is_err()
        );
    }

    let session = provider
        .create_session(bound(Some("sub"), &sub))
        .await
        .unwrap();
    session
        .write_file(RunnerFileWriteRequest {
            path: "here.txt".into(),
            contents: b"in sub\n".to_vec(),
        })
        .await
        .unwrap();
    let result = session
        .run_command(sh("c", "pwd && cat here.txt"))
        .await
        .unwrap();
    assert_eq!(result.stdout, format!("{sub}\nin sub\n"));
}

#[tokio::test]
async fn resume_works_while_active_and_fails_after_cleanup() {
    let fixture = fixture(Some("src")).await;
    let state = fixture.session.state();
    fixture.session.close().await.unwrap();
    assert!(
        fixture.checkout.join("README.md").exists(),
        "close keeps the worktree"
    );

    let resumed = fixture
        .provider
        .resume_session(state.clone())
        .await
        .unwrap();
    assert_eq!(resumed.state(), state);
    let result = resumed.run_command(sh("pwd", "pwd")).await.unwrap();
    assert_eq!(
        result.stdout,
        format!("{}\n", fixture.checkout.join("src").display())
    );

    let foreign = RunnerSessionState {
        provider_id: "docker".to_string(),
        ..state.clone()
    };
    assert!(fixture.provider.resume_session(foreign).await.is_err());

    fixture.materializer.cleanup("wt-1").await.unwrap();
    let error = fixture.provider.resume_session(state).await.err().unwrap();
    assert!(
        format!("{error:#}").contains("no worktree `wt-1`"),
        "{error:#}"
    );
}

#[tokio::test]
async fn resume_fails_when_the_worktree_is_corrupted() {
    let fixture = fixture(None).await;
    let state = fixture.session.state();
    tokio::fs::remove_dir_all(&fixture.checkout).await.unwrap();
    let error = fixture.provider.resume_session(state).await.err().unwrap();
    assert!(format!("{error:#}").contains("is corrupted"), "{error:#}");
}

#[tokio::test]
async fn dropping_a_running_command_kills_its_processes() {
    let fixture = fixture(None).await;
    let (running, pid) = start_announced(
        fixture.session.clone(),
        "dropped",
        "echo $$ > started.tmp && mv started.tmp started && sleep 30",
        &fixture.checkout.join("started"),
    )
    .await;
    running.abort();
    assert!(running.await.unwrap_err().is_cancelled());
    assert!(
        wait_dead(pid).await,
        "process {pid} outlived its dropped command"
    );
}
