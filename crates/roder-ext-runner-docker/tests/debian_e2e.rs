//! End to end in the Debian sandbox image (`scripts/build-debian-image.sh`):
//! a scripted thread bound to a docker destination on
//! `roder-sandbox-debian:latest` writes a small Python project whose test
//! fails, runs it, fixes the module with `edit`, runs it again, commits with
//! git and compiles a C file, all through the builtin tools and all inside
//! the container. The busybox image has none of python3, git or cc, so this
//! is the test that shows real work runs in a sandbox.

mod support;

use std::sync::Arc;

use roder_api::events::RoderEvent;
use roder_core::{CreateThreadRequest, StartTurnRequest, ThreadRunnerSelection};
use roder_ext_runner_docker::DockerRunnerProvider;
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use serde_json::json;
use support::runtime::*;
use support::*;

/// The image `scripts/build-debian-image.sh` builds.
const DEBIAN_IMAGE: &str = "roder-sandbox-debian:latest";

/// The provider, or `None` when the test must skip: no daemon (as in
/// `support`), or no Debian image outside CI. Under `CI=true` a missing
/// image fails the test, since CI builds it and a skip would prove nothing.
async fn debian_provider(test: &str) -> Option<DockerRunnerProvider> {
    let provider = provider(test).await?;
    let docker = provider.docker().await.expect("the Docker daemon answers");
    if docker.inspect_image(DEBIAN_IMAGE).await.is_err() {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!(
                "the image {DEBIAN_IMAGE} is missing under CI=true: .ci/run builds it with scripts/build-debian-image.sh"
            );
        }
        eprintln!(
            "\n!!! SKIPPING {test}: the image {DEBIAN_IMAGE} is missing; build it with scripts/build-debian-image.sh (about 2 min) !!!\n"
        );
        return None;
    }
    Some(provider)
}

const MODULE: &str = "def add(a, b):\n    return a - b\n";
const TESTS: &str = "import unittest\n\nfrom calc import add\n\n\n\
class AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\n\
if __name__ == \"__main__\":\n    unittest.main()\n";
const C_FILE: &str = "#include <stdio.h>\n\nint main(void) {\n    printf(\"hello from cc %d\\n\", 6 * 7);\n    return 0;\n}\n";

/// A round calling one tool.
fn call(id: &str, tool: &str, args: serde_json::Value) -> ScriptedRound {
    tool_round(&[(id, tool, &args.to_string())])
}

#[tokio::test]
async fn a_thread_fixes_a_python_project_and_uses_git_and_cc_in_the_debian_image() {
    let test = "a_thread_fixes_a_python_project_and_uses_git_and_cc_in_the_debian_image";
    let Some(provider) = debian_provider(test).await else {
        return;
    };
    let label = TestLabel::new(&provider).await;
    let host = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();

    // `-B`: the fix keeps calc.py's size and lands within the same second,
    // so a cached calc.pyc (checked by mtime and size) would still be used.
    let unittest = json!({"cmd": "python3 -B -m unittest -v 2>&1"});
    let mut rounds = Vec::new();
    rounds.push(call(
        "m",
        "write_file",
        json!({"path": "calc.py", "content": MODULE}),
    ));
    rounds.push(call(
        "t",
        "write_file",
        json!({"path": "test_calc.py", "content": TESTS}),
    ));
    rounds.push(call("u1", "exec_command", unittest.clone()));
    rounds.push(call(
        "e",
        "edit",
        json!({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"}),
    ));
    rounds.push(call("u2", "exec_command", unittest));
    rounds.push(call(
        "c",
        "write_file",
        json!({"path": "hello.c", "content": C_FILE}),
    ));
    rounds.push(call(
        "cc",
        "exec_command",
        json!({"cmd": "cc -Wall -Werror -o /tmp/hello hello.c && /tmp/hello && cat /etc/debian_version"}),
    ));
    rounds.push(call(
        "g",
        "exec_command",
        json!({"cmd": "git init -q && git add -A && git -c user.email=a@b -c user.name=n commit -q -m x && git log --format=%s && git ls-files"}),
    ));
    rounds.push(final_round("fixed"));
    let engine = ScriptedEngine::new(rounds);

    let runtime = runtime(
        std::slice::from_ref(&engine),
        store.path(),
        host.path(),
        Arc::new(provider),
    );
    let mut events = runtime.subscribe_events();
    let mut request = CreateThreadRequest::in_workspace(host.path().display().to_string());
    request.runner = Some(ThreadRunnerSelection {
        provider_id: "docker".to_string(),
        config: label.config(json!({"image": DEBIAN_IMAGE})),
        workspace: "/workspace".to_string(),
        read_roots: Vec::new(),
    });
    let thread = runtime.create_thread_with(request).await.unwrap().thread_id;
    runtime
        .start_turn(StartTurnRequest::new(&thread, "fix calc.add"))
        .await
        .unwrap();
    let turn = until_turn_ends(&mut events, &thread).await;
    assert!(
        matches!(
            turn.last().map(|envelope| &envelope.event),
            Some(RoderEvent::TurnCompleted(_))
        ),
        "{:#?}",
        turn.last()
    );

    let outputs = tool_outputs(&turn);
    let tools: Vec<&str> = outputs.iter().map(|(tool, _, _)| tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "write_file",
            "write_file",
            "exec_command",
            "edit",
            "exec_command",
            "write_file",
            "exec_command",
            "exec_command"
        ],
        "{outputs:#?}"
    );
    for index in [0, 1, 3, 5] {
        let (tool, output, is_error) = &outputs[index];
        assert!(!is_error, "{tool} failed: {output}");
    }

    let (_, failing, failing_is_error) = &outputs[2];
    assert!(
        *failing_is_error,
        "a failing test run is a failed call: {failing}"
    );
    assert!(failing.contains("Exit code: 1\n"), "{failing}");
    assert!(failing.contains("Status: failed"), "{failing}");
    assert!(failing.contains("test_add (test_calc.AddTest"), "{failing}");
    assert!(failing.contains("AssertionError: -1 != 5"), "{failing}");
    assert!(failing.contains("FAILED (failures=1)"), "{failing}");

    let (_, passing, passing_is_error) = &outputs[4];
    assert!(!passing_is_error, "{passing}");
    assert!(passing.contains("Exit code: 0\n"), "{passing}");
    assert!(passing.contains("Ran 1 test"), "{passing}");
    assert!(passing.contains("\nOK"), "{passing}");
    assert!(!passing.contains("FAILED"), "{passing}");

    let (_, compiled, compiled_is_error) = &outputs[6];
    assert!(!compiled_is_error, "{compiled}");
    assert!(compiled.contains("Exit code: 0\n"), "{compiled}");
    assert!(compiled.contains("hello from cc 42\n"), "{compiled}");
    assert!(
        compiled.contains("\n12."),
        "the commands ran in Debian 12 (bookworm): {compiled}"
    );

    let (_, committed, committed_is_error) = &outputs[7];
    assert!(!committed_is_error, "{committed}");
    assert!(committed.contains("Exit code: 0\n"), "{committed}");
    let listing: Vec<&str> = committed
        .split("Output:\n")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .collect();
    assert_eq!(
        listing,
        ["x", "calc.py", "hello.c", "test_calc.py"],
        "{committed}"
    );

    assert!(
        std::fs::read_dir(host.path()).unwrap().next().is_none(),
        "nothing is written on the host"
    );
    let containers = label.containers().await;
    assert_eq!(containers.len(), 1, "{containers:?}");
    let docker = DockerRunnerProvider::connect()
        .unwrap()
        .docker()
        .await
        .unwrap();
    let inspected = docker
        .inspect_container(&containers[0], None)
        .await
        .unwrap();
    assert_eq!(
        inspected.config.and_then(|config| config.image).as_deref(),
        Some(DEBIAN_IMAGE)
    );
    drop(runtime);
    // `label` drops here and removes the thread's container.
}
