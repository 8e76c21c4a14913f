//! Escape attempts through the builtin `exec_command` and `shell` tools, on
//! a local workspace (policy from the call's `ToolExecutionContext`) and
//! through a real `unix-local` runner session (policy from the destination
//! config's `sandbox`, as the runtime writes it). Real processes, a real
//! TCP listener; every refused attempt is an error result the model reads,
//! and the host is checked unchanged.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Harness;
use roder_api::remote_runner::{RemoteRunnerProvider, RunnerDestination, RunnerManifest};
use roder_api::sandbox_policy::{HostMechanism, NetworkAccess, SandboxPolicy};
use roder_api::tools::{ToolExecutionContext, ToolResult};
use roder_ext_runner_unix_local::UnixLocalRunnerProvider;
use serde_json::json;

#[derive(Debug, Clone, Copy)]
enum Backend {
    Local,
    UnixLocal,
}

const BACKENDS: [Backend; 2] = [Backend::Local, Backend::UnixLocal];

/// A harness whose commands are confined by `policy`, and the context to
/// call its tools with.
async fn confined(backend: Backend, policy: &SandboxPolicy) -> (Harness, ToolExecutionContext) {
    let harness = match backend {
        Backend::Local => Harness::local(),
        Backend::UnixLocal => {
            let dir = tempfile::tempdir().unwrap();
            let root = std::fs::canonicalize(dir.path()).unwrap();
            let session = UnixLocalRunnerProvider::default()
                .create_session(RunnerDestination {
                    id: "confinement-test".to_string(),
                    provider_id: "unix-local".to_string(),
                    config: json!({
                        "root": root.display().to_string(),
                        "sandbox": serde_json::to_value(policy).unwrap(),
                    }),
                    default_manifest: RunnerManifest::default(),
                })
                .await
                .unwrap();
            Harness::with_session(dir, session)
        }
    };
    let mut ctx = harness.ctx();
    ctx.sandbox = policy.clone();
    (harness, ctx)
}

async fn exec(h: &Harness, ctx: &ToolExecutionContext, cmd: &str) -> ToolResult {
    h.call_with(ctx.clone(), "exec_command", json!({ "cmd": cmd }))
        .await
}

/// A name no other test or run uses.
fn unique(name: &str) -> String {
    use std::hash::{BuildHasher as _, RandomState};
    let salt = RandomState::new().hash_one(std::time::SystemTime::now());
    format!("roder-escape-{name}-{}-{salt}", std::process::id())
}

fn home() -> PathBuf {
    PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".to_string()))
}

/// A failed command: `exec_command` makes it an error result, `shell`
/// reports the non-zero exit code (both are what the model reads).
#[track_caller]
fn refused(result: &ToolResult, what: &str) {
    assert!(
        result.is_error || !result.text.starts_with("Exit code: 0"),
        "{what}: expected a failure, got {}",
        result.text
    );
    assert!(
        result.text.starts_with("Exit code: ") || result.is_error,
        "{}",
        result.text
    );
}

/// The writes that must fail, on `backend` under `policy`.
async fn writes_are_confined(backend: Backend, policy: &SandboxPolicy) {
    let (h, ctx) = confined(backend, policy).await;
    let inside = exec(&h, &ctx, "touch inside.txt && echo made").await;
    assert!(
        !inside.is_error && inside.text.contains("made"),
        "{backend:?}: {}",
        inside.text
    );
    assert!(h.exists("inside.txt"));

    let parent = h.root().parent().unwrap().to_path_buf();
    let outside_name = unique("parent");
    let up = exec(&h, &ctx, &format!("cd .. && touch {outside_name}")).await;
    refused(&up, "cd .. && touch");
    assert!(
        up.text.contains("Permission denied") || up.text.contains("Read-only"),
        "{}",
        up.text
    );
    assert!(!parent.join(&outside_name).exists());

    let in_tmp = Path::new("/tmp").join(unique("tmp"));
    let tmp = exec(&h, &ctx, &format!("echo x > {}", in_tmp.display())).await;
    refused(&tmp, "write to /tmp");
    assert!(!in_tmp.exists());

    let in_home = unique("home");
    let at_home = exec(&h, &ctx, &format!("touch \"$HOME/{in_home}\"")).await;
    refused(&at_home, "write to $HOME");
    assert!(!home().join(&in_home).exists());

    std::os::unix::fs::symlink(h.outside.path(), h.path("link")).unwrap();
    let through = h
        .call_with(
            ctx.clone(),
            "shell",
            json!({ "command": "echo x > link/through-link.txt" }),
        )
        .await;
    refused(&through, "write through a symlink");
    assert!(!h.outside.path().join("through-link.txt").exists());

    let tmpdir = exec(
        &h,
        &ctx,
        "echo x > \"$TMPDIR/scratch\" && echo \"tmp=$TMPDIR\"",
    )
    .await;
    assert!(!tmpdir.is_error, "{}", tmpdir.text);
    assert!(tmpdir.text.contains("roder-sandbox-"), "{}", tmpdir.text);
}

#[tokio::test]
async fn landlock_confines_writes_on_every_host_backend() {
    for backend in BACKENDS {
        writes_are_confined(backend, &SandboxPolicy::default()).await;
    }
}

fn have_bwrap() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file()));
    if !found {
        println!("note: bwrap is not installed; bubblewrap cases skipped (CI installs it)");
    }
    found
}

fn bubblewrap(network: NetworkAccess) -> SandboxPolicy {
    SandboxPolicy {
        mechanism: HostMechanism::Bubblewrap,
        network,
        ..SandboxPolicy::default()
    }
}

#[tokio::test]
async fn bubblewrap_confines_writes_and_keeps_git_hooks_read_only() {
    if !have_bwrap() {
        return;
    }
    for backend in BACKENDS {
        let policy = bubblewrap(NetworkAccess::Off);
        writes_are_confined(backend, &policy).await;
        let (h, ctx) = confined(backend, &policy).await;
        let init = exec(&h, &ctx, "git init -q . && echo inited").await;
        assert!(!init.is_error, "{}", init.text);
        let hook = exec(
            &h,
            &ctx,
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout",
        )
        .await;
        refused(&hook, "write .git/hooks");
        assert!(hook.text.contains("Read-only"), "{}", hook.text);
        assert!(!h.exists(".git/hooks/post-checkout"));
        let config = exec(&h, &ctx, "git config core.hooksPath /tmp").await;
        refused(&config, "write .git/config");
        assert!(!h.read(".git/config").contains("hooksPath"));
    }
}

/// The default policy (Landlock) cannot make `.git/hooks` and `.git/config`
/// read-only; the sandbox puts them back after the command and says so in
/// the result the model reads.
#[tokio::test]
async fn the_default_policy_leaves_git_hooks_and_config_unchanged() {
    for backend in BACKENDS {
        let policy = SandboxPolicy::default();
        let (h, ctx) = confined(backend, &policy).await;
        let init = exec(&h, &ctx, "git init -q . && echo inited").await;
        assert!(!init.is_error, "{}", init.text);
        let config_before = h.read(".git/config");
        let hooks_before = hook_names(&h);
        let planted = exec(
            &h,
            &ctx,
            "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/post-checkout && chmod +x .git/hooks/post-checkout && printf '[core]\\n\\thooksPath = /tmp\\n' >> .git/config && echo planted",
        )
        .await;
        // The command itself succeeded (Landlock let it write) ...
        assert!(
            planted.text.contains("planted"),
            "{backend:?}: {}",
            planted.text
        );
        // ... and neither change survived it; the model is told.
        assert!(!h.exists(".git/hooks/post-checkout"), "{backend:?}");
        assert_eq!(h.read(".git/config"), config_before, "{backend:?}");
        assert_eq!(hook_names(&h), hooks_before, "{backend:?}");
        assert!(
            planted.text.contains("[roder sandbox]")
                && planted.text.contains("post-checkout")
                && planted.text.contains("config"),
            "{backend:?}: {}",
            planted.text
        );
        // git keeps working, and a command that leaves them alone is
        // reported nothing.
        let commit = exec(
            &h,
            &ctx,
            "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git log --oneline | wc -l",
        )
        .await;
        assert!(!commit.is_error, "{}", commit.text);
        assert!(!commit.text.contains("[roder sandbox]"), "{}", commit.text);
    }
}

fn hook_names(h: &Harness) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(h.root().join(".git/hooks"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Connects from a command to a listener on 127.0.0.1; whether the
/// listener saw it, and the result.
async fn tcp_attempt(h: &Harness, ctx: &ToolExecutionContext) -> (bool, ToolResult) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let result = exec(
        h,
        ctx,
        &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'"),
    )
    .await;
    // A connection the command made is queued before its connect returned.
    let accepted = tokio::time::timeout(Duration::from_millis(1), listener.accept())
        .await
        .is_ok();
    (accepted, result)
}

#[tokio::test]
async fn tcp_is_refused_with_the_network_off_and_accepted_with_it_on() {
    for backend in BACKENDS {
        for mechanism in [HostMechanism::Landlock, HostMechanism::Bubblewrap] {
            if mechanism == HostMechanism::Bubblewrap && !have_bwrap() {
                continue;
            }
            let mut policy = SandboxPolicy {
                mechanism,
                ..SandboxPolicy::default()
            };
            let (h, ctx) = confined(backend, &policy).await;
            let (accepted, result) = tcp_attempt(&h, &ctx).await;
            assert!(!accepted, "{backend:?} {mechanism:?}: {}", result.text);
            refused(&result, "TCP with the network off");
            assert!(!result.text.contains("connected"), "{}", result.text);

            policy.network = NetworkAccess::On;
            let (h, ctx) = confined(backend, &policy).await;
            let (accepted, result) = tcp_attempt(&h, &ctx).await;
            assert!(accepted, "{backend:?} {mechanism:?}: {}", result.text);
            assert!(result.text.contains("connected"), "{}", result.text);
        }
    }
}

#[tokio::test]
async fn a_missing_bwrap_is_an_error_result_naming_the_package() {
    // The command's PATH is where `bwrap` is looked for: one without it.
    let mut policy = bubblewrap(NetworkAccess::Off);
    policy
        .env
        .set
        .insert("PATH".to_string(), "/nonexistent".to_string());
    for backend in BACKENDS {
        let (h, ctx) = confined(backend, &policy).await;
        let result = exec(&h, &ctx, "touch made").await;
        common::err_contains(&result, "install the `bubblewrap` package");
        common::err_contains(&result, "mode = \"none\"");
        assert!(!h.exists("made"));
    }
}

const CHILD_ENV: &str = "RODER_CONFINEMENT_ENV_CHILD";

/// Re-runs [`env_child`] in a new test process whose real environment holds
/// provider credentials: the command environment must not show them even
/// though the policy passes them. (The test process's own environment is
/// never mutated.)
#[test]
fn env_shows_no_credential_even_when_passed() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "env_child", "--ignored", "--nocapture"])
        .env(CHILD_ENV, "1")
        .env("OPENAI_API_KEY", "sk-openai-secret")
        .env("ANTHROPIC_API_KEY", "sk-ant-secret")
        .env("MY_PROVIDER_TOKEN", "sk-configured-secret")
        .env("KEPT_VAR", "kept-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("env checked on 2 backends"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by env_shows_no_credential_even_when_passed in a process with credentials set"]
async fn env_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let mut policy = SandboxPolicy::default();
    policy.env.pass = [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "MY_PROVIDER_TOKEN",
        "KEPT_VAR",
    ]
    .map(String::from)
    .to_vec();
    for backend in BACKENDS {
        let (h, mut ctx) = confined(backend, &policy).await;
        // The configured provider's key variable, as the runtime names it.
        ctx.credential_vars.push("MY_PROVIDER_TOKEN".to_string());
        let result = exec(&h, &ctx, "env").await;
        assert!(!result.is_error, "{}", result.text);
        assert!(
            result.text.contains("KEPT_VAR=kept-value"),
            "{}",
            result.text
        );
        for secret in ["sk-openai-secret", "sk-ant-secret"] {
            assert!(
                !result.text.contains(secret),
                "{backend:?}: {}",
                result.text
            );
        }
        if matches!(backend, Backend::Local) {
            // The runtime names the configured key only to local tools; a
            // runner gets the policy with that name already stripped.
            assert!(
                !result.text.contains("sk-configured-secret"),
                "{}",
                result.text
            );
        }
    }
    println!("env checked on 2 backends");
}
