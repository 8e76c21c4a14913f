//! Tests of [`crate::run`] with real processes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::{CommandSpec, DRAIN_GRACE, Ending, OutputMode, Stream, run};

pub(crate) fn shell(script: &str, cwd: &Path, output: OutputMode) -> CommandSpec {
    CommandSpec {
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        env_remove: Vec::new(),
        env: Vec::new(),
        timeout: None,
        output,
        confinement: None,
    }
}

/// A process that is gone or a zombie (killed, not yet reaped) no longer runs.
pub(crate) fn process_is_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

/// Polls a condition the kernel reports no event for, until `within`.
pub(crate) fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    condition()
}

/// Reads a pid a command wrote as `echo $pid > file` (complete once the
/// newline is there).
pub(crate) fn read_pid(path: &Path) -> i32 {
    assert!(
        eventually(Duration::from_secs(10), || std::fs::read_to_string(path)
            .is_ok_and(|text| text.ends_with('\n'))),
        "{} was never written",
        path.display()
    );
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

async fn read_pid_async(path: PathBuf) -> i32 {
    tokio::task::spawn_blocking(move || read_pid(&path))
        .await
        .unwrap()
}

fn kill(pid: i32) {
    // SAFETY: plain kill of a pid this test started.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
    }
}

/// Output per stream, for assertions.
#[derive(Default)]
struct Collected {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Collected {
    fn sink(&mut self) -> impl FnMut(Stream, &[u8]) + Send + '_ {
        |stream, bytes| match stream {
            Stream::Stdout => self.stdout.extend_from_slice(bytes),
            Stream::Stderr => self.stderr.extend_from_slice(bytes),
        }
    }
}

/// A script leaving a background child in the group and an orphan (its
/// parent subshell exits at once, so it is reparented away from the shell,
/// but stays in the group), writing both pids, then waiting.
const TREE: &str = "(sleep 30 & echo $! > orphan); sleep 30 & echo $! > in_group; wait";
const TREE_PARTS: [&str; 2] = ["orphan", "in_group"];

#[tokio::test]
async fn exit_code_and_interleaved_output_propagate() {
    let dir = tempfile::tempdir().unwrap();
    let mut collected = Collected::default();
    let finished = run(
        &shell(
            "echo out; echo err >&2; echo out2; exit 3",
            dir.path(),
            OutputMode::Combined,
        ),
        &CancellationToken::new(),
        &mut collected.sink(),
    )
    .await
    .unwrap();
    assert_eq!(collected.stdout, b"out\nerr\nout2\n");
    assert!(collected.stderr.is_empty());
    assert_eq!(
        finished.ending,
        Ending::Exited {
            code: Some(3),
            signal: None
        }
    );
    assert!(finished.output_complete);
}

#[tokio::test]
async fn separate_streams_stay_separate_in_the_requested_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut collected = Collected::default();
    let mut spec = shell(
        "pwd; echo \"$ADDED\" >&2; echo \"${HOME:-unset}\"",
        dir.path(),
        OutputMode::Separate,
    );
    spec.env.push(("ADDED".into(), "yes".into()));
    spec.env_remove.push("HOME".into());
    let finished = run(&spec, &CancellationToken::new(), &mut collected.sink())
        .await
        .unwrap();
    let expected = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(
        String::from_utf8(collected.stdout).unwrap(),
        format!("{}\nunset\n", expected.display())
    );
    assert_eq!(collected.stderr, b"yes\n");
    assert_eq!(
        finished.ending,
        Ending::Exited {
            code: Some(0),
            signal: None
        }
    );
}

#[tokio::test]
async fn non_utf8_output_arrives_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let mut collected = Collected::default();
    run(
        &shell("printf 'a\\377\\376b'", dir.path(), OutputMode::Separate),
        &CancellationToken::new(),
        &mut collected.sink(),
    )
    .await
    .unwrap();
    assert_eq!(collected.stdout, [b'a', 0xff, 0xfe, b'b']);
}

#[tokio::test]
async fn a_signal_death_is_reported_as_that_signal() {
    // A shell ignores a signal that was ignored when it started, and tests
    // run as a background job inherit SIGINT ignored: give the command the
    // default disposition this test is about.
    // SAFETY: resetting a disposition to its default has no preconditions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
    }
    let dir = tempfile::tempdir().unwrap();
    for signal in [libc::SIGKILL, libc::SIGTERM, libc::SIGINT] {
        let finished = run(
            &shell(
                &format!("kill -{signal} $$"),
                dir.path(),
                OutputMode::Combined,
            ),
            &CancellationToken::new(),
            &mut |_, _| {},
        )
        .await
        .unwrap();
        assert_eq!(
            finished.ending,
            Ending::Exited {
                code: None,
                signal: Some(signal)
            }
        );
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_group_orphans_included() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = shell(TREE, dir.path(), OutputMode::Combined);
    spec.timeout = Some(Duration::from_millis(500));
    let finished = run(&spec, &CancellationToken::new(), &mut |_, _| {})
        .await
        .unwrap();
    assert_eq!(finished.ending, Ending::TimedOut);
    assert!(finished.wall < Duration::from_secs(10));
    for name in TREE_PARTS {
        let pid = read_pid(&dir.path().join(name));
        assert!(
            eventually(Duration::from_secs(1), || process_is_gone(pid)),
            "{name} sleep {pid} survived"
        );
    }
}

#[tokio::test]
async fn cancellation_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let token = CancellationToken::new();
    let canceller = {
        let token = token.clone();
        let path = dir.path().join("in_group");
        async move {
            read_pid_async(path).await;
            token.cancel();
        }
    };
    let spec = shell(TREE, dir.path(), OutputMode::Combined);
    let mut sink = |_: Stream, _: &[u8]| {};
    let (finished, ()) = tokio::join!(run(&spec, &token, &mut sink), canceller);
    assert_eq!(finished.unwrap().ending, Ending::Cancelled);
    for name in TREE_PARTS {
        let pid = read_pid(&dir.path().join(name));
        assert!(
            eventually(Duration::from_secs(1), || process_is_gone(pid)),
            "{name} sleep {pid} survived"
        );
    }
}

#[tokio::test]
async fn dropping_the_future_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let spec = shell(TREE, dir.path(), OutputMode::Separate);
    let token = CancellationToken::new();
    {
        let mut sink = |_: Stream, _: &[u8]| {};
        let running = run(&spec, &token, &mut sink);
        tokio::pin!(running);
        tokio::select! {
            _ = &mut running => panic!("the command should still be running"),
            _ = read_pid_async(dir.path().join("in_group")) => {}
        }
    }
    for name in TREE_PARTS {
        let pid = read_pid(&dir.path().join(name));
        assert!(
            eventually(Duration::from_secs(1), || process_is_gone(pid)),
            "{name} sleep {pid} survived"
        );
    }
}

#[tokio::test]
async fn a_background_process_holding_the_pipe_costs_at_most_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let mut collected = Collected::default();
    let finished = run(
        &shell(
            "sleep 30 & echo $! > pid; echo done",
            dir.path(),
            OutputMode::Combined,
        ),
        &CancellationToken::new(),
        &mut collected.sink(),
    )
    .await
    .unwrap();
    assert!(finished.wall < DRAIN_GRACE + Duration::from_secs(2));
    assert!(!finished.output_complete);
    assert_eq!(collected.stdout, b"done\n");
    // Deliberately backgrounded work outlives a command that finished.
    let pid = read_pid(&dir.path().join("pid"));
    assert!(!process_is_gone(pid));
    kill(pid);
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = shell("true", dir.path(), OutputMode::Combined);
    spec.program = "/definitely/not/a/program".into();
    let error = run(&spec, &CancellationToken::new(), &mut |_, _| {})
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
}

#[tokio::test]
async fn a_missing_directory_is_a_spawn_error() {
    let dir = tempfile::tempdir().unwrap();
    let spec = shell("true", &dir.path().join("nope"), OutputMode::Combined);
    let error = run(&spec, &CancellationToken::new(), &mut |_, _| {})
        .await
        .unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
}
