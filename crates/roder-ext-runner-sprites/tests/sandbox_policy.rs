//! The sandbox policy on a sprite, against `roder_testkit::fake_sprites`:
//! the network policy call (its wire format, when it is made, and that a
//! failed call refuses the session), the environment each exec sends, and
//! the output bound.
//!
//! The fake runs commands as host processes, so it cannot enforce a network
//! policy: these tests check that the sprite was *told* (the fake stores
//! and exposes what it received, inside the sprite too), not that a
//! connection is refused. The host environment is passed through
//! `HostEnv::Static`; no test touches the process environment.

use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandRequest, RunnerDestination,
    RunnerManifest,
};
use roder_ext_runner_sprites::{
    HostEnv, PROVIDER_ID, RetryPolicy, SpritesProviderOptions, SpritesRunnerProvider, TokenSource,
};
use roder_testkit::fake_sprites::{FakeRoute, FakeSpritesServer};
use serde_json::{Value, json};

const DENY_ALL: &str = r#"{"rules":[{"action":"deny","domain":"*"}]}"#;

fn deny_all() -> Value {
    serde_json::from_str(DENY_ALL).unwrap()
}

fn options(fake: &FakeSpritesServer, host_env: Vec<(&str, &str)>) -> SpritesProviderOptions {
    SpritesProviderOptions {
        token: TokenSource::Static(fake.token().to_string()),
        base_url: Some(fake.base_url()),
        retry: RetryPolicy {
            max_retries: 3,
            not_ready_retries: 8,
            initial_backoff: Duration::ZERO,
            max_backoff: Duration::ZERO,
            max_retry_after: Duration::from_secs(30),
        },
        host_env: HostEnv::Static(
            host_env
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        credential_vars: Vec::new(),
    }
}

fn provider(fake: &FakeSpritesServer) -> SpritesRunnerProvider {
    SpritesRunnerProvider::new(options(fake, Vec::new()))
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

/// What a command in the sprite reads at `/.sprite/policy/network.json`
/// (reached from the workspace, `/home/sprite/workspace`, so the same
/// relative path works live and in the fake).
async fn policy_seen_inside(session: &Arc<dyn RemoteRunnerSession>) -> Value {
    let cat = session
        .run_command(command(
            "cat-policy",
            "cat",
            &["../../../.sprite/policy/network.json"],
        ))
        .await
        .unwrap();
    assert_eq!(cat.exit_code, Some(0), "{}", cat.stderr);
    serde_json::from_str(&cat.stdout).unwrap()
}

#[tokio::test]
async fn network_off_by_default_denies_all_egress_before_any_command_runs() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    let name = session.state().session_id;
    assert_eq!(fake.network_policy(&name), Some(deny_all()));
    assert_eq!(fake.network_policy_sets(&name), 1);
    assert_eq!(policy_seen_inside(&session).await, deny_all());

    // Set through the documented call, before the first exec (the mkdir -p).
    let requests = fake.requests();
    let set = requests
        .iter()
        .position(|r| r.route == FakeRoute::SetNetworkPolicy)
        .unwrap();
    let first_exec = requests
        .iter()
        .position(|r| r.route == FakeRoute::Exec)
        .unwrap();
    assert!(set < first_exec, "{requests:?}");
    assert_eq!(requests[set].method, "POST");
    assert_eq!(
        requests[set].path,
        format!("/v1/sprites/{name}/policy/network")
    );
    // The persisted state carries the policy, so a resume sets it again.
    assert_eq!(session.state().metadata["sandbox"]["network"], "off");
}

#[tokio::test]
async fn network_on_lifts_the_restriction_and_mode_none_leaves_the_sprite_alone() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let on = provider
        .create_session(destination(json!({ "sandbox": { "network": "on" } })))
        .await
        .unwrap();
    let name = on.state().session_id;
    assert_eq!(fake.network_policy(&name), Some(json!({ "rules": [] })));
    assert_eq!(policy_seen_inside(&on).await, json!({ "rules": [] }));

    let none = provider
        .create_session(destination(json!({ "sandbox": { "mode": "none" } })))
        .await
        .unwrap();
    let name = none.state().session_id;
    assert_eq!(fake.network_policy_sets(&name), 0);
    assert_eq!(
        fake.network_policy(&name),
        Some(json!({ "rules": [{ "include": "defaults" }] })),
        "the sprite keeps the policy it had"
    );
}

#[tokio::test]
async fn resume_and_rejoin_set_the_persisted_policy_again() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let provider = provider(&fake);
    let session = provider
        .create_session(destination(json!({
            "cleanup": "keep",
            "sandbox": { "network": "on" },
        })))
        .await
        .unwrap();
    let name = session.state().session_id;
    let state = session.detach().await.unwrap();
    assert_eq!(fake.network_policy_sets(&name), 1);

    let rejoined = provider.rejoin_session(state.clone()).await.unwrap();
    assert_eq!(fake.network_policy_sets(&name), 2);
    assert_eq!(fake.network_policy(&name), Some(json!({ "rules": [] })));
    rejoined.close().await.unwrap();

    // A state written before the policy existed resumes with the default: off.
    let mut old = state;
    if let Value::Object(metadata) = &mut old.metadata {
        metadata.remove("sandbox");
    }
    provider.resume_session(old).await.unwrap();
    assert_eq!(fake.network_policy_sets(&name), 3);
    assert_eq!(fake.network_policy(&name), Some(deny_all()));
}

#[tokio::test]
async fn a_policy_that_cannot_be_set_refuses_the_session_and_deletes_the_sprite() {
    let fake = FakeSpritesServer::start().await.unwrap();
    fake.fail_next(FakeRoute::SetNetworkPolicy, 1, 400, None);
    let err = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .err()
        .unwrap();
    let message = format!("{err:#}");
    assert!(
        message.contains("could not set the network policy of sprite"),
        "{message}"
    );
    assert!(
        message.contains("deny all egress (sandbox network = \"off\")"),
        "{message}"
    );
    assert!(message.contains("[sandbox] mode = \"none\""), "{message}");
    assert!(message.contains("HTTP 400"), "{message}");
    assert!(message.contains("deleted again"), "{message}");
    assert!(fake.sprite_names().is_empty());
    assert_eq!(fake.count(FakeRoute::Exec), 0, "no command ran");

    // A transient 5xx is retried: the call replaces the whole policy.
    fake.fail_next(FakeRoute::SetNetworkPolicy, 2, 503, None);
    let session = provider(&fake)
        .create_session(destination(json!({})))
        .await
        .unwrap();
    assert_eq!(
        fake.network_policy(&session.state().session_id),
        Some(deny_all())
    );
}

#[tokio::test]
async fn a_malformed_sandbox_policy_is_refused_before_any_request() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let err = provider(&fake)
        .create_session(destination(
            json!({ "sandbox": { "network": "sometimes" } }),
        ))
        .await
        .err()
        .unwrap();
    assert!(
        err.to_string().contains("sandbox is not a sandbox policy"),
        "{err:#}"
    );
    assert_eq!(fake.count(FakeRoute::Any), 0);
}

#[tokio::test]
async fn commands_get_the_policy_environment_and_never_a_credential() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let mut options = options(
        &fake,
        vec![
            ("PATH", "/host/only/bin"),
            ("HOME", "/home/host-user"),
            ("LANG", "C.UTF-8"),
            ("TERM", "xterm-256color"),
            ("CARGO_HOME", "/cargo"),
            ("SPRITES_TOKEN", "sprites-secret-value"),
            ("OPENAI_API_KEY", "sk-secret-value"),
            ("MY_PROVIDER_KEY", "provider-secret-value"),
            ("UNRELATED", "not-passed"),
        ],
    );
    options.credential_vars = vec!["MY_PROVIDER_KEY".to_string()];
    let session = SpritesRunnerProvider::new(options)
        .create_session(destination(json!({
            "sandbox": {
                "env": {
                    "pass": ["CARGO_HOME", "SPRITES_TOKEN", "MY_PROVIDER_KEY"],
                    "set": { "RUST_LOG": "debug", "GITHUB_TOKEN": "ghp-secret-value" },
                },
            },
        })))
        .await
        .unwrap();
    let mut request = command("env", "env", &[]);
    request.env = vec![
        ("FOO".to_string(), "1".to_string()),
        (
            "ANTHROPIC_API_KEY".to_string(),
            "ant-secret-value".to_string(),
        ),
    ];
    let listed = session.run_command(request).await.unwrap();
    let mut lines: Vec<&str> = listed.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec![
            "CARGO_HOME=/cargo",
            "FOO=1",
            "HOME=/home/sprite",
            "LANG=C.UTF-8",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "RUST_LOG=debug",
            "TERM=xterm-256color",
        ],
        "{}",
        listed.stdout
    );
    // No exec request, the session-start mkdir included, carried a secret.
    let execs: Vec<_> = fake
        .requests()
        .into_iter()
        .filter(|r| r.route == FakeRoute::Exec)
        .collect();
    assert!(execs.len() >= 2, "{execs:?}");
    for exec in execs {
        assert!(!exec.query.contains("secret-value"), "{}", exec.query);
        assert!(
            exec.query_values("env")
                .contains(&"HOME=/home/sprite".to_string())
        );
    }
}

#[tokio::test]
async fn output_bytes_bounds_what_is_kept_of_each_stream() {
    let fake = FakeSpritesServer::start().await.unwrap();
    let session = provider(&fake)
        .create_session(destination(json!({
            "sandbox": { "limits": { "output_bytes": 4 } },
        })))
        .await
        .unwrap();
    let result = session
        .run_command(command(
            "big",
            "sh",
            &["-c", "printf 0123456789; printf abcdef >&2"],
        ))
        .await
        .unwrap();
    assert_eq!(result.exit_code, Some(0));
    assert_eq!(result.stdout, "0123");
    assert!(result.stderr.starts_with("abcd\n"), "{}", result.stderr);
    assert!(
        result
            .stderr
            .contains("stdout truncated: 6 bytes past the 4-byte limit were dropped"),
        "{}",
        result.stderr
    );
    assert!(
        result
            .stderr
            .contains("stderr truncated: 2 bytes past the 4-byte limit were dropped"),
        "{}",
        result.stderr
    );
}

#[test]
fn protections_are_public_and_say_why() {
    let provider = SpritesRunnerProvider::default();
    let list = provider.protections(&Default::default());
    let inactive: Vec<&str> = list
        .iter()
        .filter(|p| !p.active)
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(
        inactive,
        vec![
            "filesystem writes",
            ".git/hooks",
            "processes",
            "memory",
            "cpu",
            "disk"
        ]
    );
    assert!(list.iter().all(|p| !p.detail.is_empty()));
}
