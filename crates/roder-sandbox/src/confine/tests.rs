//! Escape attempts against confined commands, with real processes and a
//! real TCP listener. Each asserts the refusal the command sees and that
//! the host is unchanged.

use std::path::{Path, PathBuf};
use std::time::Duration;

use roder_api::sandbox_policy::{HostMechanism, NetworkAccess, SandboxMode, SandboxPolicy};
use tokio_util::sync::CancellationToken;

use super::Confinement;
use crate::{CommandSpec, Ending, OutputMode, run};

/// Runs `script` under `sh -c` in `workspace`, confined by `confinement`;
/// returns the exit code and the combined output.
async fn confined(script: &str, confinement: &Confinement) -> (Option<i32>, String) {
    let spec = CommandSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: confinement.workspace.clone(),
        env_remove: Vec::new(),
        env: Vec::new(),
        timeout: Some(Duration::from_secs(30)),
        output: OutputMode::Combined,
        confinement: Some(confinement.clone()),
    };
    let mut output = Vec::new();
    let finished = run(&spec, &CancellationToken::new(), &mut |_, bytes: &[u8]| {
        output.extend_from_slice(bytes)
    })
    .await
    .unwrap_or_else(|error| panic!("{script}: {error}"));
    let Ending::Exited { code, .. } = finished.ending else {
        panic!("{script} ended {:?}", finished.ending)
    };
    (code, String::from_utf8_lossy(&output).into_owned())
}

fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    (dir, ws)
}

fn policy(mechanism: HostMechanism, network: NetworkAccess) -> SandboxPolicy {
    SandboxPolicy {
        mechanism,
        network,
        ..SandboxPolicy::default()
    }
}

/// A name no other test or run uses.
fn unique(name: &str) -> String {
    format!(
        "roder-escape-{name}-{}-{}",
        std::process::id(),
        rand_suffix()
    )
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher as _, RandomState};
    RandomState::new().hash_one(std::time::SystemTime::now())
}

fn have_bwrap() -> bool {
    if super::bwrap::find().is_some() {
        return true;
    }
    println!("note: bwrap is not installed; the bubblewrap test is skipped (CI installs it)");
    false
}

/// The writes every mechanism must refuse, each checked on the host after.
async fn assert_writes_are_confined(confinement: &Confinement, outside: &Path) {
    let ws = &confinement.workspace;
    let (code, output) = confined("touch inside.txt && echo made", confinement).await;
    assert_eq!((code, output.trim()), (Some(0), "made"));
    assert!(ws.join("inside.txt").exists());

    let (code, output) = confined("cd .. && touch outside.txt", confinement).await;
    assert_ne!(code, Some(0), "{output}");
    assert!(output.contains("outside.txt"), "{output}");
    assert!(!outside.join("outside.txt").exists());

    let in_tmp = Path::new("/tmp").join(unique("tmp"));
    let (code, output) = confined(&format!("echo x > {}", in_tmp.display()), confinement).await;
    assert_ne!(code, Some(0), "{output}");
    assert!(!in_tmp.exists());

    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let in_home = home.join(unique("home"));
    let (code, output) = confined(
        &format!(
            "touch \"$HOME/{}\"",
            in_home.file_name().unwrap().to_string_lossy()
        ),
        confinement,
    )
    .await;
    assert_ne!(code, Some(0), "{output}");
    assert!(!in_home.exists());

    std::os::unix::fs::symlink(outside, ws.join("link")).unwrap();
    let (code, output) = confined("echo x > link/through-link.txt", confinement).await;
    assert_ne!(code, Some(0), "{output}");
    assert!(!outside.join("through-link.txt").exists());

    // Its private TMPDIR is writable, and is not /tmp itself.
    let (code, output) = confined("echo x > \"$TMPDIR/t\" && echo \"$TMPDIR\"", confinement).await;
    assert_eq!(code, Some(0), "{output}");
    assert!(output.contains("roder-sandbox-"), "{output}");
    let (code, output) = confined("echo x > /dev/null && echo ok", confinement).await;
    assert_eq!((code, output.trim()), (Some(0), "ok"));
}

#[tokio::test]
async fn landlock_refuses_writes_outside_the_writable_roots() {
    let (dir, ws) = workspace();
    let confinement = Confinement::new(SandboxPolicy::default(), ws);
    assert_writes_are_confined(&confinement, dir.path()).await;
}

#[tokio::test]
async fn a_configured_writable_root_is_writable() {
    let (dir, ws) = workspace();
    let extra = dir.path().join("cache");
    std::fs::create_dir(&extra).unwrap();
    let policy = SandboxPolicy {
        writable_roots: vec![extra.clone(), dir.path().join("missing")],
        ..SandboxPolicy::default()
    };
    let confinement = Confinement::new(policy, ws);
    let (code, output) = confined(
        &format!("touch {}/ok && touch ../other", extra.display()),
        &confinement,
    )
    .await;
    assert_ne!(code, Some(0), "{output}");
    assert!(extra.join("ok").exists());
    assert!(!dir.path().join("other").exists());
}

/// Connects to a listener on 127.0.0.1 from a confined command; returns
/// whether the listener saw the connection, and the command's result.
async fn tcp_attempt(confinement: &Confinement) -> (bool, Option<i32>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'");
    let (code, output) = confined(&script, confinement).await;
    // A connection the command made is in the accept queue by the time its
    // connect returned, so once the command is over there is no race.
    let accepted = tokio::time::timeout(Duration::from_millis(1), listener.accept())
        .await
        .is_ok();
    (accepted, code, output)
}

#[tokio::test]
async fn network_off_refuses_tcp_and_on_allows_it() {
    for mechanism in [HostMechanism::Landlock, HostMechanism::Bubblewrap] {
        if mechanism == HostMechanism::Bubblewrap && !have_bwrap() {
            continue;
        }
        let (_dir, ws) = workspace();
        let off = Confinement::new(policy(mechanism, NetworkAccess::Off), ws.clone());
        let (accepted, code, output) = tcp_attempt(&off).await;
        assert!(!accepted, "{mechanism:?}: {output}");
        assert_ne!(code, Some(0), "{mechanism:?}: {output}");
        assert!(!output.contains("connected"), "{output}");

        let on = Confinement::new(policy(mechanism, NetworkAccess::On), ws);
        let (accepted, code, output) = tcp_attempt(&on).await;
        assert!(accepted, "{mechanism:?}: {output}");
        assert_eq!(code, Some(0), "{mechanism:?}: {output}");
    }
}

#[tokio::test]
async fn the_environment_holds_no_credential_even_when_passed() {
    let (_dir, ws) = workspace();
    let mut policy = SandboxPolicy::default();
    policy.env.pass = vec![
        "OPENAI_API_KEY".into(),
        "MY_PROVIDER_KEY".into(),
        "KEPT".into(),
    ];
    policy
        .env
        .set
        .insert("ANTHROPIC_API_KEY".into(), "sk-set".into());
    for mode in [SandboxMode::Enforce, SandboxMode::None] {
        policy.mode = mode;
        let mut confinement = Confinement::new(policy.clone(), ws.clone());
        confinement.credential_vars.push("MY_PROVIDER_KEY".into());
        confinement.host_env = Some(
            [
                ("PATH", std::env::var("PATH").unwrap_or_default().as_str()),
                ("OPENAI_API_KEY", "sk-openai"),
                ("MY_PROVIDER_KEY", "sk-mine"),
                ("KEPT", "kept-value"),
                ("UNLISTED", "unlisted-value"),
            ]
            .map(|(key, value)| (key.to_string(), value.to_string()))
            .to_vec(),
        );
        let (code, output) = confined("env", &confinement).await;
        assert_eq!(code, Some(0), "{output}");
        assert!(output.contains("KEPT=kept-value"), "{output}");
        for absent in [
            "sk-",
            "OPENAI_API_KEY",
            "MY_PROVIDER_KEY",
            "ANTHROPIC",
            "UNLISTED",
        ] {
            assert!(!output.contains(absent), "{mode:?}: {absent} in {output}");
        }
    }
}

#[tokio::test]
async fn mode_none_runs_unconfined_on_purpose() {
    let (dir, ws) = workspace();
    let none = SandboxPolicy {
        mode: SandboxMode::None,
        ..SandboxPolicy::default()
    };
    let (code, output) = confined(
        "touch ../written-by-mode-none && echo ok",
        &Confinement::new(none, ws),
    )
    .await;
    assert_eq!((code, output.trim()), (Some(0), "ok"));
    assert!(dir.path().join("written-by-mode-none").exists());
}

#[tokio::test]
async fn bubblewrap_keeps_git_hooks_read_only_and_writes_confined() {
    if !have_bwrap() {
        return;
    }
    let (dir, ws) = workspace();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    assert!(git.success());
    let confinement = Confinement::new(
        policy(HostMechanism::Bubblewrap, NetworkAccess::Off),
        ws.clone(),
    );
    let (code, output) = confined(
        "echo 'touch /tmp/pwned' > .git/hooks/post-checkout",
        &confinement,
    )
    .await;
    assert_ne!(code, Some(0), "{output}");
    assert!(output.contains("Read-only"), "{output}");
    assert!(!ws.join(".git/hooks/post-checkout").exists());
    let (code, output) = confined("echo '[core]' >> .git/config", &confinement).await;
    assert_ne!(code, Some(0), "{output}");
    // The rest of .git stays writable: git works.
    let (code, output) = confined(
        "git -c user.name=t -c user.email=t@t commit -q --allow-empty -m x && git log --oneline | wc -l",
        &confinement,
    )
    .await;
    assert_eq!((code, output.trim()), (Some(0), "1"));
    assert_writes_are_confined(&confinement, dir.path()).await;
}

#[tokio::test]
async fn bubblewrap_descendants_that_setsid_die_with_the_command() {
    if !have_bwrap() {
        return;
    }
    let (_dir, ws) = workspace();
    let confinement = Confinement::new(
        policy(HostMechanism::Bubblewrap, NetworkAccess::Off),
        ws.clone(),
    );
    // The escapee would write its marker after the command has ended.
    let (code, output) = confined(
        "(setsid sh -c 'sleep 1; touch escaped' &) ; echo started",
        &confinement,
    )
    .await;
    assert_eq!((code, output.trim()), (Some(0), "started"));
    // The pid namespace died with its first process; nothing is left to
    // write the marker. Wait on the kernel's view, not a sleep: no process
    // of this test's session still has the workspace as its cwd.
    let canonical = std::fs::canonicalize(&ws).unwrap();
    let gone = tokio::task::spawn_blocking(move || {
        crate::run_tests::eventually(Duration::from_secs(5), || !cwd_in_use(&canonical))
    })
    .await
    .unwrap();
    assert!(gone, "a setsid'd descendant outlived its bubblewrap");
    assert!(!ws.join("escaped").exists());
}

/// Whether any process has `dir` as its working directory.
fn cwd_in_use(dir: &Path) -> bool {
    std::fs::read_dir("/proc").is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|entry| std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd == dir))
    })
}

#[tokio::test]
async fn a_workspace_made_again_at_the_same_path_gets_fresh_rules() {
    let (_dir, ws) = workspace();
    let confinement = Confinement::new(SandboxPolicy::default(), ws.clone());
    assert_eq!(confined("touch a", &confinement).await.0, Some(0));
    std::fs::remove_dir_all(&ws).unwrap();
    std::fs::create_dir(&ws).unwrap();
    let (code, output) = confined("touch b && echo ok", &confinement).await;
    assert_eq!((code, output.trim()), (Some(0), "ok"));
}

#[tokio::test]
async fn a_missing_bwrap_is_refused_naming_the_package() {
    let (_dir, ws) = workspace();
    let mut confinement =
        Confinement::new(policy(HostMechanism::Bubblewrap, NetworkAccess::Off), ws);
    // A PATH without bwrap: the command's PATH is where it is looked up.
    confinement.host_env = Some(vec![("PATH".to_string(), "/nonexistent".to_string())]);
    let spec = CommandSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "true".into()],
        cwd: confinement.workspace.clone(),
        env_remove: Vec::new(),
        env: Vec::new(),
        timeout: None,
        output: OutputMode::Combined,
        confinement: Some(confinement),
    };
    let error = run(&spec, &CancellationToken::new(), &mut |_, _: &[u8]| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("apt-get install bubblewrap"), "{error}");
    assert!(error.contains("mode = \"none\""), "{error}");
}

/// What confinement adds per command, measured (not an assertion):
/// `cargo test --release -p roder-sandbox confined_spawn_cost -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement"]
async fn confined_spawn_cost() {
    const RUNS: u32 = 300;
    let (_dir, ws) = workspace();
    let mut variants = vec![
        (
            "mode none",
            SandboxPolicy {
                mode: SandboxMode::None,
                ..SandboxPolicy::default()
            },
        ),
        ("landlock", SandboxPolicy::default()),
    ];
    if have_bwrap() {
        variants.push((
            "bubblewrap",
            policy(HostMechanism::Bubblewrap, NetworkAccess::Off),
        ));
    }
    let mut per_run = Vec::new();
    for (name, policy) in variants {
        let confinement = Confinement::new(policy, ws.clone());
        // The spawner's set-up is once per key: not part of the per-command cost.
        confined("true", &confinement).await;
        let started = std::time::Instant::now();
        for _ in 0..RUNS {
            assert_eq!(confined("true", &confinement).await.0, Some(0));
        }
        let each = started.elapsed() / RUNS;
        per_run.push((name, each));
    }
    for (name, each) in &per_run {
        println!("{name}: {each:?} per `sh -c true`");
    }
}
