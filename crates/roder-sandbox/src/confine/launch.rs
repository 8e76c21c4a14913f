//! Starting one confined command: on its spawner thread (enforced), or
//! directly with a filtered environment (`mode = "none"`).

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;

use roder_api::sandbox_policy::HostMechanism;

use super::spawner::{Job, Spawner, retire, spawner_for};
use super::{Confinement, bwrap, landlock_rules, refusal};
use crate::run::CommandSpec;
use crate::spawn::{Supervised, supervise};

/// What a spawn attempt on a spawner thread came back with.
enum Attempt {
    Spawned(io::Result<tokio::process::Child>),
    /// The spawner's directories were replaced on disk: the pipes come back
    /// for a new spawner.
    Stale(Stdio, Stdio),
}

/// Spawns `spec` confined by `confinement`, supervised, with `stdout` and
/// `stderr` as its output (stdin is `/dev/null`). `Err` when it could not
/// start or the sandbox refuses it (the error says why and how to opt out).
pub(crate) async fn spawn(
    spec: &CommandSpec,
    confinement: &Confinement,
    stdout: Stdio,
    stderr: Stdio,
) -> io::Result<Supervised> {
    if !confinement.enforced() {
        let env = confinement.command_env(&spec.env, &spec.env_remove, None);
        let search_path = env.get(OsStr::new("PATH")).cloned().unwrap_or_default();
        let mut command = tokio::process::Command::new(on_path(&spec.program, &search_path));
        command
            .args(&spec.args)
            .current_dir(&spec.cwd)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr);
        return crate::spawn::spawn(command).await;
    }
    let bubblewrap = confinement.policy.mechanism == HostMechanism::Bubblewrap;
    if !bubblewrap {
        landlock_rules::check(confinement.policy.network)?;
    }
    let key = confinement.key();
    supervise(async move {
        let mut stdio = (stdout, stderr);
        // Once more after a stale spawner; a second stale one is a refusal.
        for _ in 0..2 {
            let spawner = spawner_for(&key).await?;
            let (reply, answer) = tokio::sync::oneshot::channel();
            let job = job(spec, confinement, &spawner, stdio, reply)?;
            if !spawner.send(job) {
                retire(&key, &spawner);
                return Err(refusal("the sandbox's spawner thread is gone"));
            }
            match answer.await {
                Ok(Attempt::Spawned(child)) => return child,
                Ok(Attempt::Stale(stdout, stderr)) => {
                    retire(&key, &spawner);
                    stdio = (stdout, stderr);
                }
                Err(_) => {
                    retire(&key, &spawner);
                    return Err(refusal("the sandbox's spawner thread dropped the command"));
                }
            }
        }
        Err(refusal(
            "the workspace or the sandbox's temporary directory keeps being replaced while commands start",
        ))
    })
    .await
}

/// The spawn, as it runs on the spawner thread.
fn job(
    spec: &CommandSpec,
    confinement: &Confinement,
    spawner: &Arc<Spawner>,
    (stdout, stderr): (Stdio, Stdio),
    reply: tokio::sync::oneshot::Sender<Attempt>,
) -> io::Result<Job> {
    let env = confinement.command_env(&spec.env, &spec.env_remove, Some(&spawner.tmpdir));
    // Where the command's `bwrap` is looked up: its own PATH.
    let search_path = env
        .get(std::ffi::OsStr::new("PATH"))
        .cloned()
        .unwrap_or_default();
    let program: OsString = spec.program.clone();
    let args: Vec<OsString> = spec.args.clone();
    let cwd: PathBuf = spec.cwd.clone();
    let network = confinement.policy.network;
    let bubblewrap = confinement.policy.mechanism == HostMechanism::Bubblewrap;
    let spawner = Arc::clone(spawner);
    // The caller's runtime: the child's reaping belongs to it, whichever
    // runtime started the spawner.
    let runtime = tokio::runtime::Handle::try_current().map_err(io::Error::other)?;
    Ok(Box::new(move || {
        if !spawner.is_current() {
            let _ = reply.send(Attempt::Stale(stdout, stderr));
            return;
        }
        let _runtime = runtime.enter();
        let mut command = if bubblewrap {
            let mut command =
                tokio::process::Command::new(on_path(OsStr::new(bwrap::BWRAP), &search_path));
            command
                .args(bwrap::args(&spawner.roots, network, &cwd))
                .arg(&program);
            command
        } else {
            tokio::process::Command::new(on_path(&program, &search_path))
        };
        command
            .args(&args)
            .current_dir(&cwd)
            .env_clear()
            .envs(env)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0);
        // A missing `bwrap` is looked for here, off the async threads.
        let child = command
            .spawn()
            .map_err(|error| named(error, bubblewrap, &search_path));
        // Our copies of the pipes' write ends go now (see `spawn`).
        drop(command);
        let _ = reply.send(Attempt::Spawned(child));
    }))
}

/// `program` as a path: a bare name is looked up in `search_path` (the
/// command's own `PATH`) here, because std falls back from `posix_spawn` to
/// a fork of Roder (milliseconds with a large heap) when it must search a
/// `PATH` the command's environment replaced. A name found nowhere is left
/// as it is, so the spawn fails with "not found" as before.
fn on_path(program: &OsStr, search_path: &OsStr) -> OsString {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    if program.as_bytes().contains(&b'/') || program.is_empty() {
        return program.to_os_string();
    }
    std::env::split_paths(search_path)
        .map(|dir| dir.join(program))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
        .map_or_else(|| program.to_os_string(), PathBuf::into_os_string)
}

/// A missing `bwrap` is named as such, with the package to install. Runs on
/// the spawner thread (it searches `PATH`).
fn named(error: io::Error, bubblewrap: bool, search_path: &std::ffi::OsStr) -> io::Error {
    if bubblewrap
        && error.kind() == io::ErrorKind::NotFound
        && bwrap::find_in(search_path).is_none()
    {
        return refusal(&format!(
            "the policy's mechanism is bubblewrap and `{}` is not installed (or not on the command's PATH): install the `{}` package (e.g. `apt-get install {}`), or set `[sandbox] mechanism = \"landlock\"`",
            bwrap::BWRAP,
            bwrap::PACKAGE,
            bwrap::PACKAGE
        ));
    }
    error
}

#[cfg(test)]
mod on_path_tests {
    use super::*;

    #[test]
    fn bare_names_are_found_on_the_commands_path_and_paths_kept() {
        let found = on_path(OsStr::new("sh"), OsStr::new("/nonexistent:/bin:/usr/bin"));
        assert!(
            PathBuf::from(&found).is_absolute(),
            "sh resolves to a path: {found:?}"
        );
        assert_eq!(
            on_path(OsStr::new("./x"), OsStr::new("/bin")),
            OsString::from("./x")
        );
        assert_eq!(
            on_path(OsStr::new("no-such-program-here"), OsStr::new("/bin")),
            OsString::from("no-such-program-here")
        );
    }
}
