//! The static `roder` (scripts/build-static.sh, passed as
//! `RODER_STATIC_BINARY`; `.ci/run` builds it) in the busybox-only sandbox
//! image `roder-sandbox:latest`, which has no libc at all: it prints its
//! version, then runs a scripted `roder exec` whose command writes a file,
//! against a fake model server on the host's loopback (the container shares
//! the host's network namespace). A dynamically linked `roder` fails both.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use roder_testkit::fake_models::{ChatStream, FakeModelServer};
use support::installed;

const IMAGE: &str = "roder-sandbox:latest";

/// The static binary, or `None` (skip) outside CI when it was not built.
fn static_binary() -> Option<PathBuf> {
    match std::env::var_os("RODER_STATIC_BINARY") {
        Some(path) => Some(PathBuf::from(path)),
        None if std::env::var("CI").is_ok_and(|value| value == "true") => {
            panic!("RODER_STATIC_BINARY is not set; .ci/run builds it with scripts/build-static.sh")
        }
        None => {
            eprintln!("skipping: RODER_STATIC_BINARY is not set (scripts/build-static.sh)");
            None
        }
    }
}

/// `docker run --rm --network host` of the busybox image with the binary at
/// /roder and `dir` at /data; the container is removed however it ends.
async fn in_busybox(binary: &Path, dir: &Path, args: &[&str]) -> std::process::Output {
    let name = format!("roder-static-test-{}", std::process::id());
    let mut command = tokio::process::Command::new("docker");
    command
        .args(["run", "--rm", "--network", "host", "--name", &name])
        .arg("-v")
        .arg(format!("{}:/roder:ro", binary.display()))
        .arg("-v")
        .arg(format!("{}:/data", dir.display()))
        .args(["-e", "RODER_HOME=/data/home", "-w", "/data/work", IMAGE])
        .args(args)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(120), command.output()).await;
    let _ = std::process::Command::new("docker")
        .args(["rm", "-f", &name])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    output
        .expect("the container should finish within 120 s")
        .unwrap()
}

#[tokio::test]
async fn the_static_binary_runs_a_scripted_exec_in_the_busybox_image() {
    let Some(binary) = static_binary() else {
        return;
    };
    if !installed(
        "docker",
        &["image", "inspect", IMAGE],
        "scripts/build-sandbox-image.sh",
    ) {
        return;
    }
    let binary = std::fs::canonicalize(&binary).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("home")).unwrap();
    std::fs::create_dir_all(dir.path().join("work")).unwrap();

    let version = in_busybox(&binary, dir.path(), &["/roder", "--version"]).await;
    let stdout = String::from_utf8_lossy(&version.stdout);
    assert!(
        version.status.success() && stdout.starts_with("roder "),
        "{stdout}{}",
        String::from_utf8_lossy(&version.stderr)
    );

    let server = FakeModelServer::start().await.unwrap();
    // The container is the sandbox (busybox has no Landlock helpers to
    // spare, and docker's seccomp profile may refuse Landlock).
    std::fs::write(
        dir.path().join("home/config.toml"),
        format!(
            "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"{}\"\n[sandbox]\nmode = \"none\"\n",
            server.openai_base_url()
        ),
    )
    .unwrap();
    server.push(ChatStream::tool_calls_reply(&[(
        "call-write",
        "exec_command",
        r#"{"cmd":"echo written by static roder > hello.txt && uname -s"}"#,
    )]));
    server.push(ChatStream::text_reply("Wrote hello.txt."));
    let exec = in_busybox(&binary, dir.path(), &["/roder", "exec", "write hello.txt"]).await;
    let stderr = String::from_utf8_lossy(&exec.stderr);
    assert_eq!(exec.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&exec.stdout), "Wrote hello.txt.\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("work/hello.txt")).unwrap(),
        "written by static roder\n"
    );
    let requests = server.model_requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].body.to_string().contains("Linux"),
        "the command's output reached the model: {}",
        requests[1].body
    );
}
