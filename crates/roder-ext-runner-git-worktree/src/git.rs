//! Running the `git` CLI, whose worktree porcelain is the contract this
//! crate relies on.
//!
//! Every invocation gets the same hygiene: no terminal prompts (a credential
//! helper waiting on a TTY would hang a runtime), a fixed locale (so output
//! and messages parse the same everywhere), and none of the variables that
//! point git at a repository (inherited from a hook or a user's shell, they
//! would redirect every command to the wrong repository).

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::Context;

/// Variables that select a repository, index or object store. They are
/// removed from the environment of every git command, and of every command
/// a session runs, so `git` there works on the checkout itself.
pub(crate) const REPOSITORY_ENV: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
    "GIT_QUARANTINE_PATH",
];

/// One git command, run in a directory with `git -C`.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    dir: PathBuf,
    args: Vec<OsString>,
    env: Vec<(&'static str, OsString)>,
    /// What the command reads on stdin (`/dev/null` when `None`).
    input: Option<Vec<u8>>,
}

/// What a finished git command produced.
#[derive(Debug)]
pub(crate) struct GitOutput {
    pub(crate) success: bool,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
    pub(crate) code: Option<i32>,
}

impl Git {
    pub(crate) fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            args: Vec::new(),
            env: Vec::new(),
            input: None,
        }
    }

    /// Gives the command `bytes` on stdin (`git update-ref --stdin`).
    pub(crate) fn input(mut self, bytes: Vec<u8>) -> Self {
        self.input = Some(bytes);
        self
    }

    pub(crate) fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub(crate) fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|arg| arg.as_ref().to_owned()));
        self
    }

    /// Sets a variable for this command only (applied after the hygiene, so
    /// `GIT_INDEX_FILE` can be pointed at a temporary index on purpose).
    pub(crate) fn env(mut self, key: &'static str, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key, value.as_ref().to_owned()));
        self
    }

    /// Runs the command whatever its exit status.
    pub(crate) async fn output(&self) -> anyhow::Result<GitOutput> {
        let mut command = tokio::process::Command::new("git");
        command.arg("-C").arg(&self.dir).args(&self.args);
        for key in REPOSITORY_ENV {
            command.env_remove(key);
        }
        command
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("LC_ALL", "C")
            .env("LANG", "C")
            .env_remove("LANGUAGE")
            .envs(self.env.iter().map(|(key, value)| (key, value)))
            .stdin(if self.input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot run `{}` (is git installed and on PATH?)", self))?;
        let feed = async {
            if let (Some(bytes), Some(mut stdin)) = (&self.input, child.stdin.take()) {
                use tokio::io::AsyncWriteExt as _;
                // A git that exits early closes the pipe: its status says why.
                let _ = stdin.write_all(bytes).await;
            }
        };
        feed.await;
        let output = child
            .wait_with_output()
            .await
            .with_context(|| format!("cannot run `{}`", self))?;
        Ok(GitOutput {
            success: output.status.success(),
            stdout: output.stdout,
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_string(),
            code: output.status.code(),
        })
    }

    /// Runs the command; a non-zero exit is an error carrying git's message.
    pub(crate) async fn run(&self) -> anyhow::Result<Vec<u8>> {
        let output = self.output().await?;
        if output.success {
            return Ok(output.stdout);
        }
        Err(self.failure(&output))
    }

    /// Runs the command and returns its stdout as trimmed text.
    pub(crate) async fn text(&self) -> anyhow::Result<String> {
        let stdout = self.run().await?;
        Ok(String::from_utf8_lossy(&stdout).trim().to_string())
    }

    /// The error for a failed run, naming the command, where it ran and
    /// what git said.
    pub(crate) fn failure(&self, output: &GitOutput) -> anyhow::Error {
        let status = match output.code {
            Some(code) => format!("exit status {code}"),
            None => "killed by a signal".to_string(),
        };
        let said = if output.stderr.is_empty() {
            String::new()
        } else {
            format!(": {}", output.stderr)
        };
        anyhow::anyhow!("`{self}` failed ({status}){said}")
    }
}

impl std::fmt::Display for Git {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "git -C {}", self.dir.display())?;
        for arg in &self.args {
            write!(f, " {}", arg.to_string_lossy())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failures_name_the_command_and_what_git_said() {
        let dir = tempfile::tempdir().unwrap();
        let git = Git::new(dir.path()).args(["rev-parse", "--verify", "HEAD"]);
        let error = git.run().await.unwrap_err().to_string();
        assert!(error.contains("rev-parse --verify HEAD"), "{error}");
        assert!(error.contains("exit status 128"), "{error}");
        assert!(error.contains("not a git repository"), "{error}");
    }

    #[tokio::test]
    async fn text_is_trimmed_stdout() {
        let dir = tempfile::tempdir().unwrap();
        Git::new(dir.path())
            .args(["init", "-q"])
            .run()
            .await
            .unwrap();
        let bare = Git::new(dir.path())
            .args(["rev-parse", "--is-bare-repository"])
            .text()
            .await
            .unwrap();
        assert_eq!(bare, "false");
    }
}
