//! The provider against `roder_testkit::fake_sprites`: real HTTP on
//! 127.0.0.1, real processes standing in for the sprite.
//!
//! The token and base URL are passed through `SpritesProviderOptions`; no
//! test touches the process environment (tests run in parallel threads).

use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandRequest, RunnerDestination,
    RunnerFileReadRequest, RunnerFileWriteRequest, RunnerManifest, RunnerPortRequest,
};
use roder_ext_runner_sprites::{
    HostEnv, PROVIDER_ID, RetryPolicy, SpritesError, SpritesProviderOptions, SpritesRunnerProvider,
    TOKEN_ENV, TokenSource,
};
use roder_testkit::fake_sprites::{FakeRoute, FakeSpritesServer};
use serde_json::{Value, json};

const WORKSPACE: &str = "/home/sprite/workspace";

/// Retries without waiting, so retry tests stay fast.
fn instant_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        not_ready_retries: 8,
        initial_backoff: Duration::ZERO,
        max_backoff: Duration::ZERO,
        max_retry_after: Duration::from_secs(30),
    }
}

fn provider_with_token(fake: &FakeSpritesServer, token: &str) -> SpritesRunnerProvider {
    SpritesRunnerProvider::new(SpritesProviderOptions {
        token: TokenSource::Static(token.to_string()),
        base_url: Some(fake.base_url()),
        retry: instant_retry(),
        host_env: HostEnv::Static(Vec::new()),
        credential_vars: Vec::new(),
    })
}

fn provider(fake: &FakeSpritesServer) -> SpritesRunnerProvider {
    provider_with_token(fake, fake.token())
}

fn destination(config: Value) -> RunnerDestination {
    RunnerDestination {
        id: "dest-1".to_string(),
        provider_id: PROVIDER_ID.to_string(),
        config,
        default_manifest: RunnerManifest::default(),
    }
}

fn command(id: &str, program: &str, args: &[&str]) -> RunnerCommandRequest {
    RunnerCommandRequest {
        command_id: id.to_string(),
        program: program.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: None,
        env: Vec::new(),
        timeout_ms: None,
    }
}

async fn write(session: &Arc<dyn RemoteRunnerSession>, path: &str, contents: &[u8]) {
    session
        .write_file(RunnerFileWriteRequest {
            path: path.into(),
            contents: contents.to_vec(),
        })
        .await
        .unwrap();
}

async fn read(session: &Arc<dyn RemoteRunnerSession>, path: &str) -> anyhow::Result<Vec<u8>> {
    session
        .read_file(RunnerFileReadRequest { path: path.into() })
        .await
        .map(|r| r.contents)
}

fn sprites_error(err: &anyhow::Error) -> &SpritesError {
    err.downcast_ref::<SpritesError>()
        .unwrap_or_else(|| panic!("not a SpritesError: {err:#}"))
}

#[tokio::test]
async fn create_exec_files_snapshot_detach_rejoin_close() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let session = provider
        .create_session(destination(json!({
            "sprite_name_prefix": "flow",
            "cleanup": "delete-on-close",
        })))
        .await
        .unwrap();

    let state = session.state();
    assert_eq!(state.provider_id, PROVIDER_ID);
    assert_eq!(state.destination_id, "dest-1");
    assert!(
        state.session_id.starts_with("flow-"),
        "{}",
        state.session_id
    );
    assert_eq!(fake.sprite_names(), vec![state.session_id.clone()]);
    assert_eq!(state.metadata["working_dir"], WORKSPACE);
    assert_eq!(state.metadata["cleanup"], "delete-on-close");
    assert_eq!(state.metadata["base_url"], fake.base_url());
    assert!(
        !state.metadata.to_string().contains(fake.token()),
        "the token must never be persisted"
    );
    let name = state.session_id.clone();
    assert!(
        fake.host_path(&name, WORKSPACE).unwrap().is_dir(),
        "working_dir is created"
    );

    // stdout, stderr and the exit code arrive separately.
    let result = session
        .run_command(command(
            "c1",
            "sh",
            &["-c", "echo out; echo err >&2; exit 3"],
        ))
        .await
        .unwrap();
    assert_eq!(result.command_id, "c1");
    assert_eq!(result.stdout, "out\n");
    assert_eq!(result.stderr, "err\n");
    assert_eq!(result.exit_code, Some(3));

    // Commands run in working_dir by default, or in a relative cwd under it.
    let pwd = session
        .run_command(command("c2", "pwd", &[]))
        .await
        .unwrap();
    assert!(pwd.stdout.trim_end().ends_with(WORKSPACE), "{}", pwd.stdout);
    write(&session, "sub/keep.txt", b"").await;
    let mut in_sub = command("c3", "pwd", &[]);
    in_sub.cwd = Some("sub".into());
    let pwd = session.run_command(in_sub).await.unwrap();
    assert!(
        pwd.stdout.trim_end().ends_with(&format!("{WORKSPACE}/sub")),
        "{}",
        pwd.stdout
    );

    // A custom environment is passed, and PATH still resolves programs.
    let mut with_env = command("c4", "sh", &["-c", "printf '%s' \"$GREETING\""]);
    with_env.env = vec![("GREETING".into(), "hello sprite".into())];
    let result = session.run_command(with_env).await.unwrap();
    assert_eq!(result.stdout, "hello sprite");
    assert_eq!(result.exit_code, Some(0));

    // Relative paths resolve against working_dir; absolute ones are kept.
    write(&session, "notes/a.txt", b"alpha\n").await;
    assert_eq!(read(&session, "notes/a.txt").await.unwrap(), b"alpha\n");
    assert_eq!(
        read(&session, &format!("{WORKSPACE}/notes/a.txt"))
            .await
            .unwrap(),
        b"alpha\n"
    );
    let binary: Vec<u8> = (0u8..=255).collect();
    write(&session, "/tmp/data.bin", &binary).await;
    assert_eq!(read(&session, "/tmp/data.bin").await.unwrap(), binary);
    assert!(fake.host_path(&name, "/tmp/data.bin").unwrap().is_file());
    // Exec and the fs API see the same files.
    let cat = session
        .run_command(command("c5", "cat", &["notes/a.txt"]))
        .await
        .unwrap();
    assert_eq!(cat.stdout, "alpha\n");
    let missing = read(&session, "nope.txt").await.unwrap_err();
    assert!(
        matches!(sprites_error(&missing), SpritesError::NoSuchFile { .. }),
        "{missing:#}"
    );
    assert!(missing.to_string().contains("no such file"), "{missing:#}");

    // A snapshot is a checkpoint, remembered in the state.
    let snapshot = session.snapshot().await.unwrap().unwrap();
    assert_eq!(snapshot.provider_id, PROVIDER_ID);
    assert_eq!(snapshot.snapshot_id, "v1");
    assert_eq!(fake.checkpoints(&name), vec!["v1"]);
    assert_eq!(session.state().snapshot, Some(snapshot.clone()));

    // Detach keeps the sprite; the old handle refuses work; rejoin finds it by name.
    let detached = session.detach().await.unwrap();
    assert!(
        session
            .run_command(command("c6", "true", &[]))
            .await
            .is_err()
    );
    session.close().await.unwrap();
    assert_eq!(
        fake.deletes(),
        0,
        "closing a detached handle deletes nothing"
    );
    let rejoined = provider.rejoin_session(detached.clone()).await.unwrap();
    assert_eq!(rejoined.state(), detached);
    assert_eq!(read(&rejoined, "notes/a.txt").await.unwrap(), b"alpha\n");

    // Close deletes the sprite; resuming it afterwards fails.
    rejoined.close().await.unwrap();
    rejoined.close().await.unwrap();
    assert_eq!(fake.deletes(), 1);
    assert!(fake.sprite_names().is_empty());
    let err = provider.resume_session(detached).await.err().unwrap();
    assert!(
        matches!(sprites_error(&err), SpritesError::SpriteNotFound { .. }),
        "{err:#}"
    );
    assert!(err.to_string().contains(&name), "{err:#}");
}

#[tokio::test]
async fn keep_cleanup_leaves_the_sprite_for_a_later_resume() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let session = provider
        .create_session(destination(json!({
            "cleanup": "keep",
            "working_dir": "/home/sprite/proj",
        })))
        .await
        .unwrap();
    let state = session.state();
    assert!(state.session_id.starts_with("roder-"), "default prefix");
    write(&session, "f.txt", b"kept").await;
    session.close().await.unwrap();
    assert_eq!(fake.deletes(), 0);
    assert_eq!(fake.sprite_names(), vec![state.session_id.clone()]);

    let resumed = provider.resume_session(state).await.unwrap();
    assert_eq!(
        read(&resumed, "/home/sprite/proj/f.txt").await.unwrap(),
        b"kept"
    );
}

#[tokio::test]
async fn a_named_sprite_is_adopted_when_it_exists_and_created_when_not() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.insert_sprite("existing").await.unwrap();
    let provider = provider(&fake);

    let adopted = provider
        .create_session(destination(json!({ "sprite_name": "existing" })))
        .await
        .unwrap();
    assert_eq!(adopted.state().session_id, "existing");
    assert_eq!(fake.creates(), 0);
    adopted.close().await.unwrap();
    assert_eq!(
        fake.sprite_names(),
        vec!["existing"],
        "named sprites are kept by default"
    );

    let fresh = provider
        .create_session(destination(json!({ "sprite_name": "fresh-one" })))
        .await
        .unwrap();
    assert_eq!(fresh.state().session_id, "fresh-one");
    assert_eq!(fake.creates(), 1);
}

#[tokio::test]
async fn a_missing_token_names_the_variable_before_any_request() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider_with_token(&fake, "");
    assert!(provider.setup_hint().unwrap().contains(TOKEN_ENV));
    let err = provider
        .create_session(destination(json!({})))
        .await
        .err()
        .unwrap();
    assert!(matches!(sprites_error(&err), SpritesError::MissingToken));
    assert!(err.to_string().contains(TOKEN_ENV), "{err:#}");
    let err = provider
        .validate_destination(&destination(json!({})))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(TOKEN_ENV), "{err:#}");
    assert_eq!(fake.count(FakeRoute::Any), 0);
}

#[tokio::test]
async fn a_wrong_token_reports_failed_authentication() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let err = provider_with_token(&fake, "not-the-token")
        .create_session(destination(json!({})))
        .await
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(
        message.starts_with("Sprites authentication failed (HTTP 401)"),
        "{message}"
    );
    assert!(message.contains(TOKEN_ENV), "{message}");
    assert!(!message.contains("not-the-token"), "{message}");
    assert!(fake.requests().iter().all(|r| !r.authorized));
}

#[tokio::test]
async fn bad_config_fails_before_any_request() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let err = provider
        .create_session(destination(json!({ "clean_up": "keep" })))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("unknown key \"clean_up\""),
        "{err:#}"
    );
    let err = provider
        .validate_destination(&destination(json!({ "working_dir": "relative" })))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("absolute"), "{err:#}");
    assert_eq!(fake.count(FakeRoute::Any), 0);
}

#[tokio::test]
async fn idempotent_gets_are_retried_on_5xx_and_429() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let session = provider
        .create_session(destination(json!({ "cleanup": "keep" })))
        .await
        .unwrap();
    let state = session.state();

    fake.fail_next(FakeRoute::GetSprite, 2, 500, None);
    provider.resume_session(state.clone()).await.unwrap();
    assert_eq!(fake.count(FakeRoute::GetSprite), 3);

    write(&session, "r.txt", b"ok").await;
    fake.fail_next(FakeRoute::FsRead, 1, 429, Some(0));
    assert_eq!(read(&session, "r.txt").await.unwrap(), b"ok");
    assert_eq!(fake.count(FakeRoute::FsRead), 2);

    // The retries are bounded: 1 attempt + 3 retries, then the error.
    fake.fail_next(FakeRoute::GetSprite, 10, 503, None);
    let before = fake.count(FakeRoute::GetSprite);
    let err = provider.resume_session(state).await.err().unwrap();
    assert!(err.to_string().contains("HTTP 503"), "{err:#}");
    assert_eq!(fake.count(FakeRoute::GetSprite) - before, 4);
}

#[tokio::test]
async fn a_long_retry_after_is_reported_not_waited_out() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.fail_next(FakeRoute::CreateSprite, 1, 429, Some(120));
    let err = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(message.contains("rate limit"), "{message}");
    assert!(message.contains("retry after 120 s"), "{message}");
    assert_eq!(
        fake.count(FakeRoute::CreateSprite),
        1,
        "creation is never retried"
    );
    assert!(fake.sprite_names().is_empty());
}

#[tokio::test]
async fn exec_is_never_retried() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let before = fake.count(FakeRoute::Exec);
    fake.fail_next(FakeRoute::Exec, 1, 500, None);
    let err = session
        .run_command(command("once", "true", &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 500"), "{err:#}");
    assert_eq!(fake.count(FakeRoute::Exec) - before, 1);
}

#[tokio::test]
async fn a_timeout_returns_no_exit_code_and_aborting_kills_the_process_group() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    // `sleep` is a child of `sh`: only a group kill ends both.
    let mut slow = command("slow", "sh", &["-c", "echo started; sleep 60; echo never"]);
    slow.timeout_ms = Some(2_000);
    let result = session.run_command(slow).await.unwrap();
    assert_eq!(result.exit_code, None);
    assert_eq!(
        result.stdout, "started\n",
        "output before the deadline is kept"
    );
    assert!(
        result.stderr.contains("timed out after 2000 ms"),
        "{}",
        result.stderr
    );
    assert!(
        result
            .stderr
            .contains("the exec request was aborted, and the Sprites server SIGKILLs the command's process group"),
        "{}",
        result.stderr
    );
    assert!(
        !result.stderr.contains("may still be running"),
        "{}",
        result.stderr
    );
    fake.wait_for_no_active_exec(&name, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(fake.count(FakeRoute::ExecSessions), 0, "nothing to look up");
    assert_eq!(fake.count(FakeRoute::KillExec), 0, "nothing to kill by id");
}

#[tokio::test]
async fn cancel_command_aborts_the_request_and_the_process_group_dies() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    assert!(
        !session
            .cancel_command(&"nothing".to_string())
            .await
            .unwrap()
    );

    let running = {
        let session = Arc::clone(&session);
        tokio::spawn(async move {
            session
                .run_command(command("long", "sh", &["-c", "sleep 60; echo never"]))
                .await
        })
    };
    fake.wait_for_active_exec(&name, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(session.cancel_command(&"long".to_string()).await.unwrap());
    let result = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("run_command returns after cancel")
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    assert!(
        result
            .stderr
            .contains("command cancelled; the exec request was aborted"),
        "{}",
        result.stderr
    );
    assert!(
        !result.stderr.contains("may still be running"),
        "{}",
        result.stderr
    );
    fake.wait_for_no_active_exec(&name, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(fake.count(FakeRoute::KillExec), 0);
}

#[tokio::test]
async fn detach_aborts_commands_in_flight() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({ "cleanup": "keep" })))
        .await
        .unwrap();
    let name = session.state().session_id;
    let running = {
        let session = Arc::clone(&session);
        tokio::spawn(async move { session.run_command(command("d", "sleep", &["60"])).await })
    };
    fake.wait_for_active_exec(&name, Duration::from_secs(10))
        .await
        .unwrap();
    session.detach().await.unwrap();
    let result = tokio::time::timeout(Duration::from_secs(20), running)
        .await
        .expect("run_command returns after detach")
        .unwrap()
        .unwrap();
    assert_eq!(result.exit_code, None);
    fake.wait_for_no_active_exec(&name, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(fake.sprite_names(), vec![name], "the sprite lives on");
}

#[tokio::test]
async fn json_exec_bodies_are_understood() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.set_exec_json(true);
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let result = session
        .run_command(command("j", "sh", &["-c", "echo json; echo e >&2; exit 4"]))
        .await
        .unwrap();
    assert_eq!(
        (result.stdout.as_str(), result.stderr.as_str()),
        ("json\n", "e\n")
    );
    assert_eq!(result.exit_code, Some(4));
}

#[tokio::test]
async fn an_in_band_checkpoint_error_fails_the_snapshot() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    fake.fail_next_checkpoint_in_band("disk quota exceeded");
    let err = session.snapshot().await.unwrap_err();
    assert!(matches!(
        sprites_error(&err),
        SpritesError::Checkpoint { .. }
    ));
    assert!(err.to_string().contains("disk quota exceeded"), "{err:#}");
    assert_eq!(session.state().snapshot, None);
    let second = session.snapshot().await.unwrap().unwrap();
    assert_eq!(second.snapshot_id, "v1");
}

#[tokio::test]
async fn expose_port_returns_the_sprite_url() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    let port = session
        .expose_port(RunnerPortRequest {
            port: 8080,
            label: None,
        })
        .await
        .unwrap();
    assert_eq!(port.port, 8080);
    assert_eq!(
        port.url.as_deref(),
        Some(format!("https://{name}-fakeorg.sprites.app").as_str())
    );
}

#[tokio::test]
async fn exec_sends_argv_cwd_and_env_as_query_parameters() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let mut request = command("q", "printf", &["%s", "a b&c=d"]);
    request.env = vec![("K".into(), "v=1".into())];
    let result = session.run_command(request).await.unwrap();
    assert_eq!(result.stdout, "a b&c=d");
    let exec = fake
        .requests()
        .into_iter()
        .rfind(|r| r.route == FakeRoute::Exec)
        .unwrap();
    assert_eq!(exec.query_values("cmd"), vec!["printf", "%s", "a b&c=d"]);
    assert_eq!(exec.query_values("path"), vec!["printf"]);
    assert_eq!(exec.query_values("dir"), vec![WORKSPACE]);
    let env = exec.query_values("env");
    assert!(env.contains(&"K=v=1".to_string()), "{env:?}");
    assert!(env.iter().any(|e| e.starts_with("PATH=")), "{env:?}");
}

#[tokio::test]
async fn an_unreachable_base_url_says_so() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    // The destination's base_url wins over the provider's default.
    let provider = SpritesRunnerProvider::new(SpritesProviderOptions {
        token: TokenSource::Static("t".into()),
        base_url: None,
        retry: instant_retry(),
        ..Default::default()
    });
    let err = provider
        .create_session(destination(
            json!({ "base_url": format!("http://{addr}/") }),
        ))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains(&format!("cannot reach the Sprites API at http://{addr}")),
        "{err:#}"
    );
}

#[tokio::test]
async fn every_exec_sends_path_and_home_because_the_server_gives_none() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    // No caller environment at all: the command still has PATH and HOME.
    let result = session
        .run_command(command(
            "e",
            "sh",
            &["-c", "printf '%s|%s' \"$HOME\" \"$PATH\""],
        ))
        .await
        .unwrap();
    assert_eq!(
        result.stdout,
        "/home/sprite|/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    );
    let listed = session
        .run_command(command("env", "env", &[]))
        .await
        .unwrap();
    let mut names: Vec<&str> = listed
        .stdout
        .lines()
        .filter_map(|line| line.split('=').next())
        .collect();
    names.sort_unstable();
    assert_eq!(names, vec!["HOME", "PATH"], "{}", listed.stdout);
    // Every exec, the create-time mkdir included, carried them.
    let execs: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.route == FakeRoute::Exec)
        .collect();
    assert!(execs.len() >= 3);
    for exec in execs {
        let env = exec.query_values("env");
        assert!(env.iter().any(|e| e.starts_with("PATH=/")), "{env:?}");
        assert!(env.contains(&"HOME=/home/sprite".to_string()), "{env:?}");
    }
}

#[tokio::test]
async fn create_session_waits_out_the_not_ready_window_of_a_new_sprite() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.set_not_ready_window(3);
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    assert_eq!(fake.count(FakeRoute::Exec), 4, "3 refused, then the mkdir");
    assert!(fake.host_path(&name, WORKSPACE).unwrap().is_dir());
    assert_eq!(fake.deletes(), 0);
    let result = session
        .run_command(command("after", "true", &[]))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
}

#[tokio::test]
async fn a_sprite_that_never_gets_ready_fails_create_session_clearly() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.set_not_ready_window(1_000);
    let err = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .err()
        .unwrap();
    let chain = format!("{err:#}");
    assert!(
        matches!(
            sprites_error_in_chain(&err),
            Some(SpritesError::NotReady { attempts: 9, .. })
        ),
        "{chain}"
    );
    assert!(chain.contains("Process not ready"), "{chain}");
    assert!(chain.contains("on all 9 attempts"), "{chain}");
    assert!(chain.contains("so it was deleted again"), "{chain}");
    assert_eq!(fake.count(FakeRoute::Exec), 9, "bounded: 1 + 8 retries");
    assert!(
        fake.sprite_names().is_empty(),
        "the half-made sprite is deleted"
    );
    assert_eq!(fake.deletes(), 1);
}

#[tokio::test]
async fn a_command_on_a_waking_sprite_is_retried_only_while_not_ready() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    write(&session, "count.txt", b"").await;
    // A 503 "Process not ready" means nothing ran: the command is sent again.
    assert!(fake.set_sprite_not_ready(&name, 2));
    let before = fake.count(FakeRoute::Exec);
    let result = session
        .run_command(command("once", "sh", &["-c", "echo x >> count.txt"]))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(fake.count(FakeRoute::Exec) - before, 3);
    assert_eq!(
        read(&session, "count.txt").await.unwrap(),
        b"x\n",
        "ran once"
    );
    // Any other 503 (or 502/504) is not: the command may have run.
    fake.fail_next(FakeRoute::Exec, 1, 503, None);
    let err = session
        .run_command(command("twice", "true", &[]))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 503"), "{err:#}");
}

#[tokio::test]
async fn file_writes_and_reads_are_retried_on_gateway_errors_and_not_ready() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    for status in [502, 503, 504] {
        fake.fail_next(FakeRoute::FsWrite, 1, status, None);
        let before = fake.count(FakeRoute::FsWrite);
        write(&session, "w.txt", b"same").await;
        assert_eq!(fake.count(FakeRoute::FsWrite) - before, 2, "HTTP {status}");
    }
    assert!(fake.set_sprite_not_ready(&name, 2));
    write(&session, "w.txt", b"after wake").await;
    assert_eq!(read(&session, "w.txt").await.unwrap(), b"after wake");
    fake.fail_next(FakeRoute::FsWrite, 10, 502, None);
    let err = session
        .write_file(RunnerFileWriteRequest {
            path: "w.txt".into(),
            contents: b"x".to_vec(),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("HTTP 502"), "bounded: {err:#}");
}

#[tokio::test]
async fn a_name_taken_between_lookup_and_create_is_adopted() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.insert_sprite("raced").await.unwrap();
    // The lookup misses it (as if it was made just after), the create gets 409.
    fake.fail_next(FakeRoute::GetSprite, 1, 404, None);
    let session = provider(&fake)
        .create_session(destination(
            json!({ "sprite_name": "raced", "cleanup": "delete-on-close" }),
        ))
        .await
        .unwrap();
    assert_eq!(session.state().session_id, "raced");
    assert_eq!(fake.count(FakeRoute::CreateSprite), 1);
    assert_eq!(fake.creates(), 0);
}

#[tokio::test]
async fn a_taken_generated_name_is_replaced_a_bounded_number_of_times() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.fail_next(FakeRoute::CreateSprite, 2, 409, None);
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    assert_eq!(fake.count(FakeRoute::CreateSprite), 3);
    assert_eq!(fake.sprite_names(), vec![session.state().session_id]);
    let names: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.route == FakeRoute::CreateSprite)
        .map(|r| r.path.clone())
        .collect();
    assert_eq!(names.len(), 3);

    fake.fail_next(FakeRoute::CreateSprite, 3, 409, None);
    let err = provider(&fake)
        .create_session(destination(json!({ "sprite_name_prefix": "busy" })))
        .await
        .err()
        .unwrap();
    let message = err.to_string();
    assert!(message.contains("were all taken"), "{message}");
    assert!(message.contains("sprite_name_prefix"), "{message}");
}

#[tokio::test]
async fn the_bound_workspace_is_where_files_resolve_and_commands_run() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let session = provider
        .create_session(destination(json!({ "workspace": "/srv/app" })))
        .await
        .unwrap();
    let name = session.state().session_id;
    assert_eq!(session.state().metadata["working_dir"], "/srv/app");
    write(&session, "src/main.rs", b"fn main() {}").await;
    assert!(
        fake.host_path(&name, "/srv/app/src/main.rs")
            .unwrap()
            .is_file()
    );
    let pwd = session
        .run_command(command("pwd", "pwd", &[]))
        .await
        .unwrap();
    assert!(
        pwd.stdout.trim_end().ends_with("/srv/app"),
        "{}",
        pwd.stdout
    );
    let cat = session
        .run_command(command("cat", "cat", &["src/main.rs"]))
        .await
        .unwrap();
    assert_eq!(cat.stdout, "fn main() {}");

    // `..` is folded, and a relative path may not climb out of the root.
    write(&session, "src/../top.txt", b"t").await;
    assert!(fake.host_path(&name, "/srv/app/top.txt").unwrap().is_file());
    let before = fake.count(FakeRoute::Any);
    let err = read(&session, "../etc/passwd").await.unwrap_err();
    assert!(
        err.to_string()
            .contains("climbs out of the workspace /srv/app"),
        "{err:#}"
    );
    assert_eq!(
        fake.count(FakeRoute::Any),
        before,
        "refused before any request"
    );

    // A working_dir that is not the bound workspace is refused up front.
    let before = fake.count(FakeRoute::Any);
    let err = provider
        .validate_destination(&destination(
            json!({ "workspace": "/srv/app", "working_dir": "/home/sprite/workspace" }),
        ))
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("working_dir \"/home/sprite/workspace\" is not the workspace the thread is bound at (\"/srv/app\")"),
        "{message}"
    );
    assert_eq!(fake.count(FakeRoute::Any), before);
    provider
        .validate_destination(&destination(
            json!({ "workspace": "/srv/app", "working_dir": "/srv/app/" }),
        ))
        .await
        .unwrap();
}

/// The `SpritesError` anywhere in an error's chain (context may wrap it).
fn sprites_error_in_chain(err: &anyhow::Error) -> Option<&SpritesError> {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<SpritesError>())
}
