//! The real `roder-executor` binary, driven through the client over its
//! stdin and stdout: commands, kills, files.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use roder_executor::client::{Executor, ExecutorError, Finished, Output};
use roder_executor::message::{Ending, ExecSpec, FileKind};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

struct Helper {
    executor: Executor,
    _child: Child,
}

fn bytes_of<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    reader: R,
) -> impl Stream<Item = std::io::Result<Bytes>> + Send + Unpin + 'static {
    Box::pin(futures::stream::unfold(reader, |mut reader| async move {
        let mut chunk = vec![0; 64 * 1024];
        match reader.read(&mut chunk).await {
            Ok(0) => None,
            Ok(read) => {
                chunk.truncate(read);
                Some((Ok(Bytes::from(chunk)), reader))
            }
            Err(error) => Some((Err(error), reader)),
        }
    }))
}

async fn helper() -> Helper {
    let mut child = Command::new(env!("CARGO_BIN_EXE_roder-executor"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let executor = Executor::connect(bytes_of(stdout), stdin, Duration::from_secs(10))
        .await
        .unwrap();
    Helper {
        executor,
        _child: child,
    }
}

fn spec(argv: &[&str], cwd: &Path, timeout_ms: u64) -> ExecSpec {
    ExecSpec {
        argv: argv.iter().map(|arg| arg.as_bytes().to_vec()).collect(),
        cwd: cwd.as_os_str().as_encoded_bytes().to_vec(),
        env: vec![b"RODER_TEST_VAR=yes".to_vec()],
        timeout_ms,
        stdin: false,
    }
}

async fn run(
    executor: &Executor,
    spec: ExecSpec,
) -> (Result<Finished, ExecutorError>, Vec<u8>, Vec<u8>) {
    let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
    let result = executor
        .run(
            spec,
            std::future::pending(),
            &mut |stream, data| match stream {
                Output::Stdout => stdout.extend_from_slice(data),
                Output::Stderr => stderr.extend_from_slice(data),
            },
        )
        .await;
    (result, stdout, stderr)
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
    }
}

async fn all_dead(pids: &[u32]) -> bool {
    for _ in 0..200 {
        if pids.iter().all(|pid| dead(*pid)) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

fn pids_in(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn commands_report_output_and_exit_status() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    let (result, stdout, stderr) = run(
        &helper.executor,
        spec(
            &[
                "sh",
                "-c",
                "echo out; echo err >&2; echo $RODER_TEST_VAR; pwd; exit 3",
            ],
            dir.path(),
            0,
        ),
    )
    .await;
    assert_eq!(result.unwrap().ending, Ending::Exited(3));
    let expected = format!(
        "out\nyes\n{}\n",
        dir.path().canonicalize().unwrap().display()
    );
    assert_eq!(String::from_utf8(stdout).unwrap(), expected);
    assert_eq!(stderr, b"err\n");

    let (result, _, _) = run(
        &helper.executor,
        spec(&["sh", "-c", "kill -9 $$"], dir.path(), 0),
    )
    .await;
    assert_eq!(result.unwrap().ending, Ending::Exited(128 + 9));
}

#[tokio::test]
async fn a_command_that_cannot_start_is_an_error_naming_why() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    let (result, _, _) = run(&helper.executor, spec(&["/no/such/program"], dir.path(), 0)).await;
    let Err(ExecutorError::Failed { errno, .. }) = result else {
        panic!("expected a start failure, got {result:?}");
    };
    assert_eq!(errno, libc::ENOENT);
    let (result, _, _) = run(
        &helper.executor,
        spec(&["true"], &dir.path().join("missing"), 0),
    )
    .await;
    assert!(
        matches!(
            result,
            Err(ExecutorError::Failed {
                errno: libc::ENOENT,
                ..
            })
        ),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let helper = helper().await;
    // A background child, a child in its own session, and the shell itself.
    let script = format!(
        "sleep 100 & echo $! > {p}.1; setsid sleep 101 & echo $! > {p}.2; echo $$ > {p}.3; cat {p}.1 {p}.2 {p}.3 > {p}; echo started; wait",
        p = pids.display()
    );
    let (result, stdout, _) = run(
        &helper.executor,
        spec(&["sh", "-c", &script], dir.path(), 500),
    )
    .await;
    assert_eq!(result.unwrap().ending, Ending::TimedOut);
    assert_eq!(stdout, b"started\n");
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 3);
    assert!(all_dead(&pids).await, "survivors among {pids:?}");
}

#[tokio::test]
async fn cancelling_kills_the_tree_and_reports_killed() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let helper = helper().await;
    let script = format!("sleep 100 & echo $! $$ > {}; wait", pids.display());
    let (fire, cancelled) = tokio::sync::oneshot::channel::<()>();
    let ready = pids.clone();
    tokio::spawn(async move {
        while !ready.exists() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let _ = fire.send(());
    });
    let result = helper
        .executor
        .run(
            spec(&["sh", "-c", &script], dir.path(), 0),
            async {
                let _ = cancelled.await;
            },
            &mut |_, _| {},
        )
        .await;
    assert_eq!(result.unwrap().ending, Ending::Killed);
    assert!(all_dead(&pids_in(&pids)).await);
}

#[tokio::test]
async fn dropping_a_running_command_kills_it() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let helper = helper().await;
    let script = format!("echo $$ > {}; sleep 100", pids.display());
    let process = helper
        .executor
        .spawn(spec(&["sh", "-c", &script], dir.path(), 0))
        .unwrap();
    while !pids.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    drop(process);
    assert!(all_dead(&pids_in(&pids)).await);
}

#[tokio::test]
async fn commands_run_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    // Each waits for the other's file: run one after the other, both would
    // time out.
    let a = spec(
        &["sh", "-c", "touch a; while [ ! -e b ]; do sleep 0.01; done"],
        dir.path(),
        10_000,
    );
    let b = spec(
        &["sh", "-c", "touch b; while [ ! -e a ]; do sleep 0.01; done"],
        dir.path(),
        10_000,
    );
    let (first, second) = tokio::join!(run(&helper.executor, a), run(&helper.executor, b));
    assert_eq!(first.0.unwrap().ending, Ending::Exited(0));
    assert_eq!(second.0.unwrap().ending, Ending::Exited(0));
}

#[tokio::test]
async fn large_binary_output_and_files_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    let data: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let path = dir.path().join("sub/dir/blob.bin");
    let path_bytes = path.as_os_str().as_encoded_bytes();
    helper
        .executor
        .write_file(path_bytes, &data, 0)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), data);
    assert_eq!(
        helper
            .executor
            .read_file(path_bytes, 1 << 30)
            .await
            .unwrap(),
        data
    );
    let (result, stdout, _) = run(
        &helper.executor,
        spec(&["cat", "sub/dir/blob.bin"], dir.path(), 0),
    )
    .await;
    assert_eq!(
        result.unwrap(),
        Finished {
            ending: Ending::Exited(0),
            output_complete: true
        }
    );
    assert!(
        stdout == data,
        "stdout differs from the file ({} bytes)",
        stdout.len()
    );

    let stat = helper.executor.stat(path_bytes).await.unwrap();
    assert_eq!(
        (stat.kind, stat.size, stat.mode),
        (FileKind::File, data.len() as u64, 0o644)
    );
    let listing = helper
        .executor
        .list(dir.path().join("sub").as_os_str().as_encoded_bytes())
        .await
        .unwrap();
    assert_eq!(listing, vec![(b"dir".to_vec(), FileKind::Dir)]);

    std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("link")).unwrap();
    let resolved = helper
        .executor
        .resolve(
            dir.path()
                .join("link/dir/new/file")
                .as_os_str()
                .as_encoded_bytes(),
        )
        .await
        .unwrap();
    let expected = dir.path().canonicalize().unwrap().join("sub/dir/new/file");
    assert_eq!(resolved, expected.as_os_str().as_encoded_bytes());
}

#[tokio::test]
async fn file_errors_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    let missing = dir.path().join("missing");
    let error = helper
        .executor
        .read_file(missing.as_os_str().as_encoded_bytes(), 10)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ExecutorError::Failed {
                errno: libc::ENOENT,
                ..
            }
        ),
        "{error:?}"
    );
    let directory = dir.path().as_os_str().as_encoded_bytes();
    let error = helper.executor.read_file(directory, 10).await.unwrap_err();
    assert!(
        matches!(
            error,
            ExecutorError::Failed {
                errno: libc::EISDIR,
                ..
            }
        ),
        "{error:?}"
    );
    let error = helper
        .executor
        .write_file(directory, b"x", 0)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("is a directory"), "{error}");
    let big = dir.path().join("big");
    std::fs::write(&big, vec![0; 100]).unwrap();
    let error = helper
        .executor
        .read_file(big.as_os_str().as_encoded_bytes(), 10)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            ExecutorError::Failed {
                errno: libc::EFBIG,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn an_interactive_process_reads_its_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let helper = helper().await;
    let mut interactive = spec(&["cat"], dir.path(), 0);
    interactive.stdin = true;
    let mut process = helper.executor.spawn(interactive).unwrap();
    process.write_stdin(b"ping\n").unwrap();
    let event = process.next().await.unwrap();
    assert_eq!(
        event,
        roder_executor::client::ProcessEvent::Output(Output::Stdout, b"ping\n".to_vec())
    );
    process.close_stdin().unwrap();
    loop {
        if let roder_executor::client::ProcessEvent::Finished(finished) =
            process.next().await.unwrap()
        {
            assert_eq!(finished.ending, Ending::Exited(0));
            break;
        }
    }
}

#[tokio::test]
async fn the_helper_kills_everything_and_exits_when_the_host_goes_away() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // The helper's stdin goes through a copy task; aborting it closes the
    // stream as a host's death (`kill -9`) would, with no kill sent first.
    let mut child = Command::new(env!("CARGO_BIN_EXE_roder-executor"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (client_side, mut proxy_side) = tokio::io::duplex(1 << 16);
    let copy = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut proxy_side, &mut stdin).await;
    });
    let executor = Executor::connect(bytes_of(stdout), client_side, Duration::from_secs(10))
        .await
        .unwrap();
    let script = format!("sleep 100 & echo $! $$ > {}; wait", pids.display());
    let mut process = executor
        .spawn(spec(&["sh", "-c", &script], dir.path(), 0))
        .unwrap();
    while !pids.exists() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    copy.abort();
    let _ = copy.await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status}");
    assert!(all_dead(&pids_in(&pids)).await);
    // The command was killed, whether or not its end made it out before
    // the helper exited; then the connection knows the helper is gone.
    match process.next().await {
        Ok(roder_executor::client::ProcessEvent::Finished(finished)) => {
            assert_eq!(finished.ending, Ending::Killed)
        }
        Err(ExecutorError::Lost(_)) => {}
        other => panic!("expected the command killed or the helper gone, got {other:?}"),
    }
    for _ in 0..200 {
        if executor.is_closed() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(executor.is_closed());
}
