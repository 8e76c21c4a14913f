//! `roder doctor`: whether each part Roder relies on works on this machine,
//! and how to fix what does not. Every verdict is probed, not assumed: the
//! config is loaded, key variables are read, the Docker daemon is asked for
//! its version, a command is really run confined by each sandbox mechanism
//! (and must fail to write outside its workspace), git is run.
//!
//! A part is *needed* when the configuration in force relies on it (the
//! default model's key, the configured sandbox mechanism, Docker when a
//! docker runner is configured); `doctor` exits 1 when a needed part does
//! not work, 0 otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use roder_api::sandbox_policy::{HostMechanism, SandboxMode, SandboxPolicy};
use roder_ext_runner_docker::{DockerConfig, DockerRunnerProvider};
use serde::Serialize;

use crate::config::Settings;

/// How long one probe may take before it counts as not working.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// One part's verdict.
#[derive(Debug, Serialize)]
struct Check {
    part: String,
    works: bool,
    needed: bool,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

impl Check {
    fn works(part: impl Into<String>, needed: bool, detail: impl Into<String>) -> Self {
        Self {
            part: part.into(),
            works: true,
            needed,
            detail: detail.into(),
            fix: None,
        }
    }

    fn fails(
        part: impl Into<String>,
        needed: bool,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            part: part.into(),
            works: false,
            needed,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// Checks every part and prints the verdicts (a table, or one JSON object).
pub async fn run(
    home: &Path,
    loaded: anyhow::Result<Settings>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let config_path = home.join("config.toml");
    let mut checks = Vec::new();
    let settings = match loaded {
        Ok(settings) => {
            let detail = if exists(config_path.clone()).await {
                format!("{} loads", config_path.display())
            } else {
                format!("no {}: built-in defaults", config_path.display())
            };
            checks.push(Check::works("config", true, detail));
            Some(settings)
        }
        Err(error) => {
            checks.push(Check::fails(
                "config",
                true,
                format!("{error:#}"),
                "fix what the message names, or start over with `roder config init --force`",
            ));
            None
        }
    };
    if let Some(settings) = &settings {
        checks.extend(model_keys(settings));
    }
    let policy = settings
        .as_ref()
        .map(|settings| settings.sandbox.clone())
        .unwrap_or_default();
    let docker_runners: Vec<(String, serde_json::Value)> = settings
        .iter()
        .flat_map(|settings| &settings.runners)
        .filter(|(_, entry)| entry.provider == roder_ext_runner_docker::PROVIDER_ID)
        .map(|(name, entry)| {
            let config = serde_json::to_value(&entry.config).unwrap_or_default();
            (name.clone(), config)
        })
        .collect();
    let (docker, landlock, bubblewrap, git) = tokio::join!(
        docker(&docker_runners),
        confinement(&policy, HostMechanism::Landlock),
        confinement(&policy, HostMechanism::Bubblewrap),
        git(),
    );
    checks.extend(docker);
    checks.extend([landlock, bubblewrap, git]);
    let ok = checks.iter().all(|check| check.works || !check.needed);
    if json {
        let report = serde_json::json!({"ok": ok, "home": home, "parts": checks});
        crate::outln!("{report}")?;
    } else {
        print_table(&checks)?;
        let failing = checks
            .iter()
            .filter(|check| check.needed && !check.works)
            .count();
        if failing == 0 {
            eprintln!("roder doctor: everything the configuration in force needs works here");
        } else {
            eprintln!("roder doctor: {failing} needed part(s) do not work here");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_table(checks: &[Check]) -> std::io::Result<()> {
    for check in checks {
        let mark = match (check.works, check.needed) {
            (true, _) => "ok",
            (false, true) => "FAIL",
            (false, false) => "off",
        };
        crate::outln!("{mark:<5} {:<20} {}", check.part, check.detail)?;
        if let Some(fix) = &check.fix {
            crate::outln!("{:<26} fix: {fix}", "")?;
        }
    }
    Ok(())
}

/// One part per provider: its key variable set, or none needed (the rule
/// `roder exec` applies before it creates a thread). The default model's
/// provider is needed.
fn model_keys(settings: &Settings) -> Vec<Check> {
    settings
        .providers
        .iter()
        .map(|(name, entry)| {
            let part = format!("provider {name}");
            let needed = *name == settings.model.provider;
            let default = if needed {
                format!(
                    " (the default model {}/{})",
                    settings.model.provider, settings.model.model
                )
            } else {
                String::new()
            };
            let fix = if needed {
                " (or choose another model: --model, RODER_MODEL or `model` in config.toml)"
            } else {
                ""
            };
            match crate::preflight::missing_key(name, entry) {
                Some(variable) => Check::fails(
                    part,
                    needed,
                    format!("{variable} is not set{default}"),
                    format!("export {variable}=<your key>{fix}"),
                ),
                None => {
                    let detail = match crate::wiring::api_key(name, entry).variable() {
                        Some(variable) => format!("{variable} is set{default}"),
                        None => format!("needs no key{default}"),
                    };
                    Check::works(part, needed, detail)
                }
            }
        })
        .collect()
}

/// The daemon answers, and each docker runner's image is on it.
async fn docker(runners: &[(String, serde_json::Value)]) -> Vec<Check> {
    let needed = !runners.is_empty();
    let address = roder_ext_runner_docker::daemon_address();
    let provider = DockerRunnerProvider::default();
    let version = tokio::time::timeout(PROBE_TIMEOUT, async {
        let docker = provider.docker().await?;
        let version = docker.version().await?;
        anyhow::Ok((docker, version.version.unwrap_or_default()))
    })
    .await;
    let fix = "start the Docker daemon or set DOCKER_HOST; only docker runners need it";
    let (client, first) = match version {
        Ok(Ok((docker, version))) => (
            Some(docker),
            Check::works(
                "docker",
                needed,
                format!("Docker Engine {version} answers at {address}"),
            ),
        ),
        Ok(Err(error)) => (
            None,
            Check::fails("docker", needed, format!("{error:#}"), fix),
        ),
        Err(_) => (
            None,
            Check::fails(
                "docker",
                needed,
                format!("the daemon at {address} did not answer within {PROBE_TIMEOUT:?}"),
                fix,
            ),
        ),
    };
    let mut checks = vec![first];
    for (name, config) in runners {
        let part = format!("runner {name}");
        let image = match DockerConfig::from_json(config, &format!("runner {name:?} config")) {
            Ok(config) => config.image,
            Err(error) => {
                checks.push(Check::fails(
                    part,
                    true,
                    format!("{error:#}"),
                    format!("fix [runners.{name}] in config.toml"),
                ));
                continue;
            }
        };
        let Some(client) = &client else {
            checks.push(Check::fails(
                part,
                true,
                format!("image {image:?}: Docker does not answer"),
                "start the Docker daemon",
            ));
            continue;
        };
        checks.push(
            match roder_ext_runner_docker::require_image(client, &image).await {
                Ok(()) => Check::works(part, true, format!("image {image:?} is present")),
                Err(error) => Check::fails(
                    part,
                    true,
                    format!("{error:#}"),
                    format!(
                        "build or load {image:?} (scripts/build-sandbox-image.sh builds roder-sandbox:latest)"
                    ),
                ),
            },
        );
    }
    checks
}

/// Runs `sh` confined by `mechanism` under `policy` (mode enforced) in a
/// scratch workspace: it must write inside the workspace and be refused
/// beside it.
async fn confinement(policy: &SandboxPolicy, mechanism: HostMechanism) -> Check {
    let (part, fix) = match mechanism {
        HostMechanism::Landlock => (
            "landlock",
            "use a kernel with Landlock enabled (Linux 6.7+ for network rules; add `landlock` to the `lsm=` boot parameter), or set `[sandbox] mechanism = \"bubblewrap\"`",
        ),
        HostMechanism::Bubblewrap => (
            "bubblewrap",
            "install Debian's `bubblewrap` package (apt-get install bubblewrap) and allow unprivileged user namespaces",
        ),
    };
    let needed = policy.mode == SandboxMode::Enforce && policy.mechanism == mechanism;
    let mut policy = policy.clone();
    policy.mode = SandboxMode::Enforce;
    policy.mechanism = mechanism;
    // The probe writes beside its workspace; no configured root may allow it.
    policy.writable_roots.clear();
    match probe(policy).await {
        Ok(detail) => Check::works(part, needed, detail),
        Err(detail) => Check::fails(part, needed, detail, fix),
    }
}

async fn probe(policy: SandboxPolicy) -> Result<String, String> {
    let scratch = tokio::task::spawn_blocking(tempfile::tempdir)
        .await
        .map_err(|error| error.to_string())?
        .map_err(|error| format!("no scratch directory: {error}"))?;
    let outcome = probe_in(scratch.path(), policy).await;
    // Removing it is file system work too: off the async threads.
    tokio::task::spawn_blocking(move || drop(scratch));
    outcome
}

async fn probe_in(scratch: &Path, policy: SandboxPolicy) -> Result<String, String> {
    let workspace = scratch.join("workspace");
    let beside = scratch.join("beside");
    for dir in [&workspace, &beside] {
        tokio::fs::create_dir(dir)
            .await
            .map_err(|error| format!("no scratch directory: {error}"))?;
    }
    let spec = roder_sandbox::CommandSpec {
        program: "sh".into(),
        args: vec![
            "-c".into(),
            "echo in > inside; echo out > ../beside/escaped".into(),
        ],
        cwd: workspace.clone(),
        env_remove: Vec::new(),
        env: Vec::new(),
        timeout: Some(PROBE_TIMEOUT),
        output: roder_sandbox::OutputMode::Combined,
        confinement: Some(roder_sandbox::Confinement::new(
            policy.clone(),
            workspace.clone(),
        )),
    };
    let mut output = Vec::new();
    let cancel = tokio_util::sync::CancellationToken::new();
    let finished = roder_sandbox::run(&spec, &cancel, &mut |_, chunk| {
        output.extend_from_slice(chunk)
    })
    .await
    .map_err(|error| error.to_string())?;
    if exists(beside.join("escaped")).await {
        return Err("a confined command wrote outside its workspace: not confined here".into());
    }
    if !exists(workspace.join("inside")).await {
        return Err(format!(
            "a confined command did not run ({:?}): {}",
            finished.ending,
            String::from_utf8_lossy(&output).trim()
        ));
    }
    let protections = tokio::task::spawn_blocking(move || roder_sandbox::host_protections(&policy))
        .await
        .unwrap_or_default();
    let writes = protections
        .into_iter()
        .find(|protection| protection.name == "filesystem writes")
        .map(|protection| protection.detail)
        .unwrap_or_default();
    Ok(format!(
        "a confined command wrote in its workspace and was refused beside it; {writes}"
    ))
}

async fn exists(path: PathBuf) -> bool {
    tokio::fs::try_exists(path).await.unwrap_or(false)
}

async fn git() -> Check {
    let used =
        "used by `exec --worktree`, the git-worktree runner and checkpoints in git repositories";
    match tokio::process::Command::new("git")
        .arg("--version")
        .output()
        .await
    {
        Ok(output) if output.status.success() => Check::works(
            "git",
            false,
            format!("{}; {used}", String::from_utf8_lossy(&output.stdout).trim()),
        ),
        Ok(output) => Check::fails(
            "git",
            false,
            format!(
                "`git --version` failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            "reinstall git",
        ),
        Err(error) => Check::fails(
            "git",
            false,
            format!("git does not run ({error}); {used}"),
            "install git (apt-get install git)",
        ),
    }
}
