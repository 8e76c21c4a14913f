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
        let local_limit = roder_api::deadline::runner_command_give_up_after(request.timeout_ms);
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
            let Some((is_dir, path)) = parse_walk_line(line) else {
                continue;
            };
            counts[usize::from(is_dir)] += 1;
            if counts[usize::from(is_dir)] >= per_kind {
                scanned_full = true;
            }
            let absolute = paths::normalize(Path::new(path));
            // `find` prints paths under the listed directory; anything else
            // is the tail of a file name holding a newline.
            let Ok(relative) = absolute.strip_prefix(&dir.absolute) else {
                continue;
            };
            if let Some(pattern) = &options.pattern
                && !pattern.matches(relative)
            {
                continue;
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
            // `find` names files under the target (or the target itself);
            // anything else is the tail of a line that held a newline.
            let Ok(relative) = absolute.strip_prefix(target) else {
                continue;
            };
            if paths::is_vcs_metadata(relative) {
                continue;
            }
            if let Some(glob) = &query.glob
                && !glob.matches(relative)
            {
                continue;
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

/// One line of the listing script: `d <path>` for a directory, `f <path>`
/// for anything else. `None` for a line of any other shape (the runner's
/// output is not trusted to be well formed).
fn parse_walk_line(line: &str) -> Option<(bool, &str)> {
    match line.split_once(' ')? {
        ("d", path) if !path.is_empty() => Some((true, path)),
        ("f", path) if !path.is_empty() => Some((false, path)),
        _ => None,
    }
}

/// Splits `path:line:text` as `grep -nH` prints it. The path may itself
/// contain `:`, so the first `:<digits>:` after a non-empty path wins.
/// Works on the line's bytes (`:` and digits are ASCII, so every split lands
/// on a character boundary) and returns `None` for any other shape: an empty
/// line, `Binary file … matches`, a line number too large for `u64`.
fn parse_grep_line(line: &str) -> Option<(&str, u64, &str)> {
    let bytes = line.as_bytes();
    bytes
        .iter()
        .enumerate()
        .skip(1)
        .filter(|(_, byte)| **byte == b':')
        .find_map(|(colon, _)| {
            let after = bytes.get(colon + 1..)?;
            let digits = after
                .iter()
                .take_while(|byte| byte.is_ascii_digit())
                .count();
            if digits == 0 || after.get(digits) != Some(&b':') {
                return None;
            }
            let number = line.get(colon + 1..colon + 1 + digits)?.parse().ok()?;
            Some((line.get(..colon)?, number, line.get(colon + digits + 2..)?))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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

    /// The two panics, and their neighbours.
    #[test]
    fn odd_grep_lines_are_skipped_not_fatal() {
        assert_eq!(parse_grep_line(""), None);
        assert_eq!(parse_grep_line(":"), None);
        assert_eq!(parse_grep_line(":1:"), None);
        assert_eq!(parse_grep_line("é"), None);
        assert_eq!(parse_grep_line("é:1:x"), Some(("é", 1, "x")));
        assert_eq!(parse_grep_line("/é/ü:3:€"), Some(("/é/ü", 3, "€")));
        assert_eq!(parse_grep_line("😀:"), None);
        assert_eq!(parse_grep_line("/a:99999999999999999999999:x"), None);
        assert_eq!(
            parse_grep_line("/a:99999999999999999999999:x:2:y"),
            Some(("/a:99999999999999999999999:x", 2, "y"))
        );
    }

    #[test]
    fn parses_walk_lines() {
        assert_eq!(parse_walk_line("d /w/src"), Some((true, "/w/src")));
        assert_eq!(parse_walk_line("f /w/a b.txt"), Some((false, "/w/a b.txt")));
        for odd in ["", "d", "d ", "x /w/a", "é /w", "/w/a", " f /w/a"] {
            assert_eq!(parse_walk_line(odd), None, "{odd:?}");
        }
    }

    /// A path as `find` could print it: absolute, no newline, and no
    /// `:<digits>` inside (which `grep -nH` output cannot tell apart from
    /// the line number).
    fn grep_path() -> impl Strategy<Value = String> {
        "/[^\n:]{0,12}(:[^\n:0-9][^\n:]{0,6}){0,3}"
    }

    proptest! {
        /// Runner output is any bytes a provider decoded lossily: no line of
        /// it makes either parser panic.
        #[test]
        fn parsers_take_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let text = String::from_utf8_lossy(&bytes);
            for line in text.lines().chain([text.as_ref()]) {
                let _ = parse_grep_line(line);
                let _ = parse_walk_line(line);
            }
        }

        #[test]
        fn parsers_take_arbitrary_text(line in any::<String>()) {
            if let Some((path, number, text)) = parse_grep_line(&line) {
                // The parts are the line's own text, in order.
                prop_assert!(!path.is_empty());
                prop_assert!(line.starts_with(path) && line.ends_with(text));
                prop_assert!(path.len() + text.len() + 2 < line.len() + usize::from(number == 0));
            }
            if let Some((_, path)) = parse_walk_line(&line) {
                prop_assert!(!path.is_empty());
            }
        }

        #[test]
        fn grep_lines_roundtrip(path in grep_path(), number in any::<u64>(), text in "[^\n]{0,20}") {
            let line = format!("{path}:{number}:{text}");
            prop_assert_eq!(parse_grep_line(&line), Some((path.as_str(), number, text.as_str())));
        }

        #[test]
        fn walk_lines_roundtrip(is_dir in any::<bool>(), path in "[^\n]{1,20}") {
            let line = format!("{} {path}", if is_dir { "d" } else { "f" });
            prop_assert_eq!(parse_walk_line(&line), Some((is_dir, path.as_str())));
        }
    }
}
