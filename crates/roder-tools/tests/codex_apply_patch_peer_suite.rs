//! The Codex apply-patch peer suite: the end-to-end scenarios of OpenAI
//! Codex's own `apply-patch` tests, run against Roder's `apply_patch` tool.
//!
//! The scenarios live outside the project, in
//! `../shared/peer-suites/codex-apply-patch/scenarios/` (their README names
//! the source revision and licence); they are read in place, never copied
//! into the repository. Each one is a starting tree (`input/`, absent for an
//! empty workspace), a patch (`patch.txt`) and the exact final tree
//! (`expected/`). As upstream's runner does, the input is copied into an empty
//! directory, the patch is applied there, and the resulting tree (files,
//! directories and bytes) must equal `expected/`.
//!
//! The patch goes through the registered tool executor, exactly as a model's
//! call would, in three workspaces: a local directory, a directory-backed
//! runner session, and a real `unix-local` runner session.
//!
//! One scenario differs on purpose: `015` expects Codex's partial
//! application (a file added before a failing hunk stays). Roder applies a
//! patch whole or not at all, so for `015` this test asserts Roder's
//! behaviour instead: the tree is unchanged and the error names the
//! operation and the file and says nothing was applied.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::Harness;
use roder_api::remote_runner::{RemoteRunnerProvider, RunnerDestination, RunnerManifest};
use roder_api::tools::ToolResult;
use roder_ext_runner_unix_local::UnixLocalRunnerProvider;
use serde_json::json;

/// The suite, relative to this crate's manifest directory.
const SUITE: &str = "../../../shared/peer-suites/codex-apply-patch";

/// How many scenarios the pinned upstream revision has (the suite's README:
/// revision 24a2d0c, 001..022 with two 020s).
const SCENARIO_COUNT: usize = 23;

/// The scenario where Roder deliberately differs from Codex.
const ALL_OR_NOTHING: &str = "015_failure_after_partial_success_leaves_changes";

/// Scenarios whose patch must be refused, with words the error must carry:
/// the operation and the file where the patch names one. Every refusal must
/// also say that nothing was applied.
const REFUSALS: &[(&str, &[&str])] = &[
    ("005_rejects_empty_patch", &["no file"]),
    ("006_rejects_missing_context", &["update", "modify.txt"]),
    (
        "007_rejects_missing_file_delete",
        &["delete", "missing.txt"],
    ),
    ("008_rejects_empty_update_hunk", &["update", "foo.txt"]),
    (
        "009_requires_existing_file_for_update",
        &["update", "missing.txt"],
    ),
    ("012_delete_directory_fails", &["delete", "dir"]),
    (
        "013_rejects_invalid_hunk_header",
        &["*** Frobnicate File: foo"],
    ),
    (ALL_OR_NOTHING, &["update", "missing.txt"]),
];

const NOTHING_APPLIED: &str = "nothing was applied";

/// A tree as upstream compares it: every file (with its bytes) and every
/// directory (`None`), by path relative to the root.
type Tree = BTreeMap<PathBuf, Option<Vec<u8>>>;

fn suite_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(SUITE);
    dir.join("scenarios").is_dir().then_some(dir)
}

fn scenarios(suite: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(suite.join("scenarios"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("patch.txt").is_file())
        .collect();
    found.sort();
    found
}

fn read_tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, tree: &mut Tree) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().to_path_buf();
            if path.is_dir() {
                tree.insert(relative, None);
                walk(root, &path, tree);
            } else {
                tree.insert(relative, Some(std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut tree = Tree::new();
    if root.is_dir() {
        walk(root, root, &mut tree);
    }
    tree
}

fn write_tree(root: &Path, tree: &Tree) {
    for (relative, contents) in tree {
        let path = root.join(relative);
        match contents {
            None => std::fs::create_dir_all(&path).unwrap(),
            Some(bytes) => {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, bytes).unwrap();
            }
        }
    }
}

/// The differences between two trees, one line each, for the report.
fn differences(actual: &Tree, expected: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    for (path, want) in expected {
        match (actual.get(path), want) {
            (None, _) => out.push(format!("missing {}", path.display())),
            (Some(got), want) if got != want => out.push(format!(
                "{} differs: got {:?}, expected {:?}",
                path.display(),
                got.as_deref().map(String::from_utf8_lossy),
                want.as_deref().map(String::from_utf8_lossy),
            )),
            _ => {}
        }
    }
    for path in actual.keys().filter(|path| !expected.contains_key(*path)) {
        out.push(format!("unexpected {}", path.display()));
    }
    out
}

/// What one scenario did in one workspace.
struct Run {
    name: String,
    input: Tree,
    expected: Tree,
    result: ToolResult,
    after: Tree,
}

async fn run_scenario(h: Harness, scenario: &Path) -> Run {
    let name = scenario.file_name().unwrap().to_string_lossy().into_owned();
    let input = read_tree(&scenario.join("input"));
    let expected = read_tree(&scenario.join("expected"));
    let patch = std::fs::read_to_string(scenario.join("patch.txt")).unwrap();
    write_tree(&h.root(), &input);
    let result = h.call("apply_patch", json!({ "patch": patch })).await;
    let after = read_tree(&h.root());
    Run {
        name,
        input,
        expected,
        result,
        after,
    }
}

/// Why a run does not behave as required, or `None` if it does.
fn verdict(run: &Run) -> Option<String> {
    let refusal = REFUSALS.iter().find(|(name, _)| *name == run.name);
    if run.name == ALL_OR_NOTHING {
        // Roder's documented difference: the whole patch is refused.
        let unchanged = differences(&run.after, &run.input);
        if !unchanged.is_empty() {
            return Some(format!(
                "all-or-nothing: the tree changed: {}",
                unchanged.join("; ")
            ));
        }
        if run.after == run.expected {
            return Some("all-or-nothing: the tree matches Codex's partial result".into());
        }
    } else {
        let diff = differences(&run.after, &run.expected);
        if !diff.is_empty() {
            return Some(diff.join("; "));
        }
    }
    match refusal {
        None if run.result.is_error => {
            Some(format!("expected success, got error: {}", run.result.text))
        }
        None => None,
        Some(_) if !run.result.is_error => Some(format!(
            "expected an error result, got success: {}",
            run.result.text
        )),
        Some((_, words)) => {
            let text = &run.result.text;
            let lower = text.to_lowercase();
            let missing: Vec<&str> = words
                .iter()
                .copied()
                .chain([NOTHING_APPLIED])
                .filter(|word| !lower.contains(&word.to_lowercase()))
                .collect();
            (!missing.is_empty())
                .then(|| format!("the error {text:?} does not mention {missing:?}"))
        }
    }
}

async fn run_suite<F, Fut>(workspace: &str, harness: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Harness>,
{
    let Some(suite) = suite_dir() else {
        assert!(
            std::env::var_os("RODER_REQUIRE_PEER_SUITES").is_none(),
            "RODER_REQUIRE_PEER_SUITES is set but the Codex apply-patch peer suite is not at {}",
            Path::new(env!("CARGO_MANIFEST_DIR")).join(SUITE).display()
        );
        println!(
            "SKIPPED: the Codex apply-patch peer suite is not at {} \
             (CI provides it; `.ci/run` fails without it)",
            Path::new(env!("CARGO_MANIFEST_DIR")).join(SUITE).display()
        );
        return;
    };
    let scenarios = scenarios(&suite);
    assert_eq!(
        scenarios.len(),
        SCENARIO_COUNT,
        "the peer suite at {} should hold the {SCENARIO_COUNT} scenarios of its pinned revision",
        suite.display()
    );
    for (name, _) in REFUSALS {
        assert!(
            scenarios.iter().any(|path| path.ends_with(name)),
            "scenario {name} is missing from {}",
            suite.display()
        );
    }

    let mut failures = Vec::new();
    let mut matching_codex = 0;
    for scenario in &scenarios {
        let run = run_scenario(harness().await, scenario).await;
        let outcome = if run.result.is_error {
            format!("refused: {}", run.result.text)
        } else {
            "applied".to_string()
        };
        match verdict(&run) {
            Some(why) => failures.push(format!("{}: {why}", run.name)),
            None if run.name == ALL_OR_NOTHING => {
                println!("{workspace} {}: all-or-nothing, {outcome}", run.name);
            }
            None => {
                matching_codex += 1;
                println!("{workspace} {}: matches Codex, {outcome}", run.name);
            }
        }
    }
    println!(
        "{workspace}: {matching_codex} of {} Codex scenarios match Codex; \
         {ALL_OR_NOTHING} asserted as all-or-nothing{}",
        scenarios.len(),
        if failures.is_empty() { "" } else { " (FAILED)" }
    );
    assert!(
        failures.is_empty(),
        "{workspace}: scenarios that fail:\n{}",
        failures.join("\n")
    );
    assert_eq!(matching_codex, SCENARIO_COUNT - 1);
}

#[tokio::test]
async fn codex_scenarios_in_a_local_directory() {
    run_suite("local", || async { Harness::local() }).await;
}

#[tokio::test]
async fn codex_scenarios_through_a_directory_runner_session() {
    run_suite("dir-runner", || async { Harness::dir_remote() }).await;
}

#[tokio::test]
async fn codex_scenarios_through_a_unix_local_runner_session() {
    run_suite("unix-local", || async {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let session = UnixLocalRunnerProvider::default()
            .create_session(RunnerDestination {
                id: "codex-peer-suite".to_string(),
                provider_id: "unix-local".to_string(),
                config: json!({ "root": root.display().to_string() }),
                default_manifest: RunnerManifest::default(),
            })
            .await
            .unwrap();
        Harness::with_session(dir, session)
    })
    .await;
}

/// The verdict itself must be able to fail: a tree that differs, a refusal
/// that succeeded and an error without the required words are reported.
#[test]
fn the_verdict_catches_mismatches() {
    let tree = |files: &[(&str, &str)]| -> Tree {
        files
            .iter()
            .map(|(path, text)| (PathBuf::from(path), Some(text.as_bytes().to_vec())))
            .collect()
    };
    let result = |is_error: bool, text: &str| ToolResult {
        id: "call".into(),
        name: "apply_patch".into(),
        text: text.into(),
        data: serde_json::Value::Null,
        is_error,
    };
    let run = |name: &str, after: Tree, result: ToolResult| Run {
        name: name.into(),
        input: tree(&[("a", "old\n")]),
        expected: tree(&[("a", "new\n")]),
        result,
        after,
    };
    assert!(
        verdict(&run(
            "001_add_file",
            tree(&[("a", "new\n")]),
            result(false, "ok")
        ))
        .is_none()
    );
    assert!(
        verdict(&run(
            "001_add_file",
            tree(&[("a", "old\n")]),
            result(false, "ok")
        ))
        .is_some()
    );
    assert!(
        verdict(&run(
            "001_add_file",
            tree(&[("a", "new\n")]),
            result(true, "x")
        ))
        .is_some()
    );

    let refused = |text: &str, is_error: bool| {
        let mut run = run(
            "006_rejects_missing_context",
            tree(&[("a", "old\n")]),
            result(is_error, text),
        );
        run.expected = run.input.clone();
        verdict(&run)
    };
    assert!(refused("update modify.txt failed; nothing was applied", true).is_none());
    assert!(refused("update modify.txt failed", true).is_some());
    assert!(refused("update modify.txt; nothing was applied", false).is_some());

    let partial = run(
        ALL_OR_NOTHING,
        tree(&[("a", "new\n")]),
        result(true, "update missing.txt: nothing was applied"),
    );
    assert!(verdict(&partial).is_some());
}
