//! A workspace that is a runner session: files move through the session's
//! file API, commands run through its command API.
//!
//! Confinement is lexical (the runner's file system cannot be inspected from
//! here without a round trip per path). File requests name a path inside the
//! root *relative to the root* (providers resolve relative paths against their
//! workspace) and a path under a read root by its absolute runner path.
//! Listing and searching run `find` and `grep` in the session through the
//! configured shell, with flags busybox understands, and are post-processed
//! here.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use roder_api::command_shell::CommandShell;
use roder_api::remote_runner::{
    RemoteRunnerSession, RemoteWorkspace, RunnerCommandRequest, RunnerCommandResult,
    RunnerFileReadRequest, RunnerFileWriteRequest,
};
use tokio_util::sync::CancellationToken;

use super::{
    CommandEnd, CommandOutcome, CommandRequest, GrepHit, GrepOutcome, GrepQuery, MAX_FILE_BYTES,
    Walk, WalkEntry, WalkOptions,
};
use crate::output::{CapturedOutput, cap_output};
use crate::paths::{self, Access, Location, ResolvedPath};
use crate::shell_words::quote;
use crate::text::truncate_line;
use crate::tool::ToolError;

/// Timeout asked for the helper commands (`find`, `grep`, `mkdir`, `rm`).
pub(crate) const HELPER_COMMAND_TIMEOUT_MS: u64 = 60_000;

/// How long past a command's own timeout we wait for the provider to report
/// it before giving up on it here.
const PROVIDER_TIMEOUT_GRACE: Duration = Duration::from_secs(10);

/// How long a cancellation request to the provider may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// Most paths a remote listing or search reads back before filtering.
const SCAN_LIMIT: usize = 100_000;

/// Exit code the helper scripts use for "no such directory or file".
const MISSING_EXIT_CODE: i32 = 3;

const MAX_GREP_LINE_CHARS: usize = 500;

#[derive(Clone)]
pub(crate) struct RemoteFs {
    session: Arc<dyn RemoteRunnerSession>,
    root: PathBuf,
    read_roots: Vec<PathBuf>,
    allow_vcs_metadata: bool,
    shell: CommandShell,
    cancellation: CancellationToken,
    helper_timeout_ms: Option<u64>,
}

/// How a runner command ended, as seen from here.
enum Raced {
    Finished(RunnerCommandResult),
    TimedOut,
    Interrupted,
}

/// Asks the provider to cancel a command if the tool future is dropped while
/// the command runs (the turn was interrupted from above, a lease was lost).
struct CancelOnDrop {
    session: Arc<dyn RemoteRunnerSession>,
    command_id: Option<String>,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.command_id = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(command_id) = self.command_id.take() else {
            return;
        };
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let session = self.session.clone();
            handle.spawn(async move {
                let _ =
                    tokio::time::timeout(CANCEL_TIMEOUT, session.cancel_command(&command_id)).await;
            });
        }
    }
}

impl RemoteFs {
    pub fn new(
        workspace: RemoteWorkspace,
        allow_vcs_metadata: bool,
        shell: CommandShell,
        cancellation: CancellationToken,
        helper_timeout_ms: Option<u64>,
    ) -> Self {
        Self {
            session: workspace.session,
            root: paths::normalize(&workspace.root),
            read_roots: workspace.read_roots,
            allow_vcs_metadata,
            shell,
            cancellation,
            helper_timeout_ms,
        }
    }

    pub fn resolve(&self, requested: &str, access: Access) -> Result<ResolvedPath, ToolError> {
        paths::resolve(
            &self.root,
            &self.read_roots,
            requested,
            access,
            self.allow_vcs_metadata,
        )
    }

    pub fn command_cwd(&self, workdir: Option<&str>) -> Result<PathBuf, ToolError> {
        match workdir {
            None => Ok(self.root.clone()),
            Some(workdir) => Ok(self.resolve(workdir, Access::Workdir)?.absolute),
        }
    }

    /// The path a file request carries: relative to the root inside it,
    /// absolute under a read root.
    fn request_path(path: &ResolvedPath) -> Result<PathBuf, ToolError> {
        match &path.location {
            Location::Root(relative) if relative.as_os_str().is_empty() => Err(ToolError::new(
                format!("{:?} is the workspace root, not a file", path.requested),
            )),
            Location::Root(relative) => Ok(relative.clone()),
            Location::ReadRoot => Ok(path.absolute.clone()),
        }
    }

    pub async fn read(&self, path: &ResolvedPath) -> Result<Vec<u8>, ToolError> {
        let request = RunnerFileReadRequest {
            path: Self::request_path(path)?,
        };
        let result = self.session.read_file(request).await.map_err(|error| {
            ToolError::new(format!("failed to read {}: {error:#}", path.display()))
        })?;
        if result.contents.len() as u64 > MAX_FILE_BYTES {
            return Err(ToolError::new(format!(
                "{} is {} bytes, larger than the {MAX_FILE_BYTES}-byte limit of the file tools",
                path.display(),
                result.contents.len()
            )));
        }
        Ok(result.contents)
    }

    /// A runner cannot tell "missing" from "unreadable" through this API, so
    /// any read failure counts as "no previous contents".
    pub async fn read_if_exists(&self, path: &ResolvedPath) -> Result<Option<Vec<u8>>, ToolError> {
        let request = RunnerFileReadRequest {
            path: Self::request_path(path)?,
        };
        Ok(self
            .session
            .read_file(request)
            .await
            .ok()
            .map(|result| result.contents))
    }

    /// Writes the file; if the provider refuses (typically a missing parent
    /// directory), creates the parent with `mkdir -p` and tries once more.
    pub async fn write(&self, path: &ResolvedPath, contents: Vec<u8>) -> Result<(), ToolError> {
        let request_path = Self::request_path(path)?;
        let first = self
            .session
            .write_file(RunnerFileWriteRequest {
                path: request_path.clone(),
                contents: contents.clone(),
            })
            .await;
        let Err(first_error) = first else {
            return Ok(());
        };
        let parent = path.absolute.parent().filter(|parent| *parent != self.root);
        let Some(parent) = parent else {
            return Err(ToolError::new(format!(
                "failed to write {}: {first_error:#}",
                path.display()
            )));
        };
        self.helper(&format!("mkdir -p -- {}", quote(&parent.to_string_lossy())))
            .await?;
        self.session
            .write_file(RunnerFileWriteRequest {
                path: request_path,
                contents,
            })
            .await
            .map_err(|error| {
                ToolError::new(format!("failed to write {}: {error:#}", path.display()))
            })
    }

    pub async fn remove(&self, path: &ResolvedPath) -> Result<(), ToolError> {
        Self::request_path(path)?;
        let script = format!("rm -f -- {}", quote(&path.absolute.to_string_lossy()));
        let result = self.helper(&script).await?;
        if result.exit_code != Some(0) {
            return Err(ToolError::new(format!(
                "failed to delete {}: {}",
                path.display(),
                result.stderr.trim()
            )));
        }
        Ok(())
    }

    pub async fn run(
        &self,
        request: CommandRequest,
        cancellation: &CancellationToken,
        output_cap: usize,
    ) -> Result<CommandOutcome, ToolError> {
        let started = Instant::now();
        let timeout_ms = request.timeout_ms;
        let program = request.program.clone();
        let raced = self
            .race(
                RunnerCommandRequest {
                    command_id: uuid::Uuid::new_v4().to_string(),
                    program: request.program,
                    args: request.args,
                    cwd: Some(request.cwd),
                    env: request.env,
                    timeout_ms,
                },
                cancellation,
            )
            .await
            .map_err(|error| {
                ToolError::new(format!("the runner failed to run {program}: {error}"))
            })?;
        let empty = || CapturedOutput {
            text: String::new(),
            omitted_bytes: 0,
        };
        let (end, output) = match raced {
            Raced::Interrupted => (CommandEnd::Interrupted, empty()),
            Raced::TimedOut => (CommandEnd::TimedOut, empty()),
            Raced::Finished(result) => {
                let mut combined = result.stdout.into_bytes();
                combined.extend_from_slice(result.stderr.as_bytes());
                let end = match (result.exit_code, timeout_ms) {
                    (None, Some(_)) => CommandEnd::TimedOut,
                    (code, _) => CommandEnd::Exited { code, signal: None },
                };
                (end, cap_output(&combined, output_cap))
            }
        };
        Ok(CommandOutcome {
            end,
            output,
            wall: started.elapsed(),
        })
    }

    /// Runs a runner command, racing it against cancellation and (with a
    /// grace period) its own timeout.
    async fn race(
        &self,
        request: RunnerCommandRequest,
        cancellation: &CancellationToken,
    ) -> Result<Raced, ToolError> {
        let command_id = request.command_id.clone();
        let local_limit = request
            .timeout_ms
            .map(|ms| Duration::from_millis(ms) + PROVIDER_TIMEOUT_GRACE);
        let mut guard = CancelOnDrop {
            session: self.session.clone(),
            command_id: Some(command_id.clone()),
        };
        let run = self.session.run_command(request);
        let limit = tokio::time::sleep(local_limit.unwrap_or(Duration::MAX));
        tokio::pin!(run, limit);
        let raced = tokio::select! {
            biased;
            _ = cancellation.cancelled() => {
                self.cancel(&command_id).await;
                Ok(Raced::Interrupted)
            }
            _ = &mut limit, if local_limit.is_some() => {
                self.cancel(&command_id).await;
                Ok(Raced::TimedOut)
            }
            result = &mut run => result
                .map(Raced::Finished)
                .map_err(|error| ToolError::new(format!("{error:#}"))),
        };
        guard.disarm();
        raced
    }

    async fn cancel(&self, command_id: &str) {
        let command_id = command_id.to_string();
        let _ =
            tokio::time::timeout(CANCEL_TIMEOUT, self.session.cancel_command(&command_id)).await;
    }

    /// Runs a small shell script of our own in the root.
    async fn helper(&self, script: &str) -> Result<RunnerCommandResult, ToolError> {
        let request = RunnerCommandRequest {
            command_id: uuid::Uuid::new_v4().to_string(),
            program: self.shell.program.clone(),
            args: self.shell.argv(script),
            cwd: Some(self.root.clone()),
            env: Vec::new(),
            timeout_ms: self.helper_timeout_ms,
        };
        match self.race(request, &self.cancellation).await? {
            Raced::Finished(result) => Ok(result),
            Raced::Interrupted => Err(ToolError::new("interrupted")),
            Raced::TimedOut => Err(ToolError::new(format!(
                "the runner did not finish `{script}` within its timeout"
            ))),
        }
    }

    pub async fn walk(&self, dir: &ResolvedPath, options: WalkOptions) -> Result<Walk, ToolError> {
        let target = quote(&dir.absolute.to_string_lossy());
        let depth = options
            .max_depth
            .map(|depth| format!(" -maxdepth {depth}"))
            .unwrap_or_default();
        let per_kind = if options.pattern.is_some() {
            SCAN_LIMIT
        } else {
            options.limit + 1
        };
        let find = |kind: &str, tag: &str| {
            format!(
                "find \"$d\" -mindepth 1{depth} -name .git -prune -o {kind} -print | head -n {per_kind} | sed 's|^|{tag} |'"
            )
        };
        let mut script =
            format!("d={target}; if [ ! -d \"$d\" ]; then exit {MISSING_EXIT_CODE}; fi; ");
        if options.include_dirs {
            script.push_str(&find("-type d", "d"));
            script.push_str("; ");
        }
        script.push_str(&find("! -type d", "f"));
        let result = self.helper(&script).await?;
        if result.exit_code == Some(MISSING_EXIT_CODE) {
            return Err(ToolError::new(format!(
                "{} is not a directory (or does not exist)",
                dir.display()
            )));
        }
        if result.exit_code != Some(0) {
            return Err(ToolError::new(format!(
                "listing {} failed on the runner: {}",
                dir.display(),
                result.stderr.trim()
            )));
        }
        let mut scanned_full = false;
        let mut entries = Vec::new();
        let mut counts = [0_usize; 2];
        for line in result.stdout.lines() {
            let (is_dir, path) = match line.split_once(' ') {
                Some(("d", path)) => (true, path),
                Some(("f", path)) => (false, path),
                _ => continue,
            };
            counts[usize::from(is_dir)] += 1;
            if counts[usize::from(is_dir)] >= per_kind {
                scanned_full = true;
            }
            let absolute = paths::normalize(Path::new(path));
            if let Some(pattern) = &options.pattern {
                let relative = absolute.strip_prefix(&dir.absolute).unwrap_or(&absolute);
                if !pattern.matches(relative) {
                    continue;
                }
            }
            entries.push(WalkEntry {
                display: self.display(&absolute),
                absolute,
                is_dir,
            });
        }
        entries.sort_by(|a, b| a.absolute.cmp(&b.absolute));
        let truncated = scanned_full || entries.len() > options.limit;
        entries.truncate(options.limit);
        Ok(Walk { entries, truncated })
    }

    pub async fn grep(&self, query: GrepQuery) -> Result<GrepOutcome, ToolError> {
        // The runner's grep speaks POSIX extended regexes; validating with the
        // local engine first gives the same error for the same bad pattern.
        grep_regex::RegexMatcherBuilder::new()
            .build(&query.pattern)
            .map_err(|error| {
                ToolError::new(format!("invalid regex {:?}: {error}", query.pattern))
            })?;
        let target = &query.target.absolute;
        let limit = if query.glob.is_some() {
            SCAN_LIMIT
        } else {
            query.max_results + 1
        };
        let case = if query.case_insensitive { " -i" } else { "" };
        let script = format!(
            "t={}; if [ ! -e \"$t\" ]; then exit {MISSING_EXIT_CODE}; fi; \
             find \"$t\" -name .git -prune -o -type f -print0 \
             | xargs -0 -r grep -nH{case} -E -e {} -- 2>/dev/null | head -n {limit}",
            quote(&target.to_string_lossy()),
            quote(&query.pattern),
        );
        let result = self.helper(&script).await?;
        if result.exit_code == Some(MISSING_EXIT_CODE) {
            return Err(ToolError::new(format!(
                "failed to search {}: not found",
                query.target.display()
            )));
        }
        let mut outcome = GrepOutcome::default();
        let mut lines = 0;
        for line in result.stdout.lines() {
            lines += 1;
            let Some((path, line_number, text)) = parse_grep_line(line) else {
                continue;
            };
            let absolute = paths::normalize(Path::new(path));
            if paths::is_vcs_metadata(absolute.strip_prefix(target).unwrap_or(&absolute)) {
                continue;
            }
            if let Some(glob) = &query.glob {
                let relative = absolute.strip_prefix(target).unwrap_or(&absolute);
                if !glob.matches(relative) {
                    continue;
                }
            }
            outcome.hits.push(GrepHit {
                display: self.display(&absolute),
                line_number,
                text: truncate_line(text, MAX_GREP_LINE_CHARS).into_owned(),
            });
        }
        outcome.hits.sort_by(|a, b| {
            (a.display.as_str(), a.line_number).cmp(&(b.display.as_str(), b.line_number))
        });
        outcome.truncated = lines >= limit || outcome.hits.len() > query.max_results;
        outcome.hits.truncate(query.max_results);
        Ok(outcome)
    }

    fn display(&self, absolute: &Path) -> String {
        paths::display_path(absolute, absolute.strip_prefix(&self.root).ok())
    }
}

/// Splits `path:line:text` as `grep -nH` prints it. The path is absolute and
/// may itself contain `:`, so the first `:<digits>:` after its start wins.
fn parse_grep_line(line: &str) -> Option<(&str, u64, &str)> {
    let bytes = line.as_bytes();
    let mut search_from = 1;
    while let Some(offset) = line[search_from..].find(':') {
        let colon = search_from + offset;
        let digits_end = bytes[colon + 1..]
            .iter()
            .position(|b| !b.is_ascii_digit())
            .map(|n| colon + 1 + n);
        if let Some(end) = digits_end
            && end > colon + 1
            && bytes[end] == b':'
            && let Ok(number) = line[colon + 1..end].parse()
        {
            return Some((&line[..colon], number, &line[end + 1..]));
        }
        search_from = colon + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grep_lines() {
        assert_eq!(
            parse_grep_line("/w/src/a.rs:12:fn main() {"),
            Some(("/w/src/a.rs", 12, "fn main() {"))
        );
        assert_eq!(
            parse_grep_line("/w/odd:name:3:x:1:y"),
            Some(("/w/odd:name", 3, "x:1:y"))
        );
        assert_eq!(parse_grep_line("/w/a:7:"), Some(("/w/a", 7, "")));
        assert_eq!(parse_grep_line("Binary file /w/x matches"), None);
        assert_eq!(parse_grep_line("/w/a:12"), None);
    }
}
