//! Every benchmark runs end to end in smoke mode (`roder-bench --smoke
//! all`): tiny sizes, figures that mean nothing, but a bench that no longer
//! runs (an API it drives changed, a check inside it fails) fails CI here
//! instead of going unnoticed until someone measures.
//!
//! The benches drive real parts (Docker, PostgreSQL, Chromium, the MCP and
//! ACP Python packages), which `.ci/run` installs; the benches that spawn
//! `roder` use the debug binary beside this one, built here if missing.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn roder_beside(bench: &str) -> PathBuf {
    PathBuf::from(bench).with_file_name("roder")
}

#[test]
fn every_bench_runs_in_smoke_mode() {
    let bench = env!("CARGO_BIN_EXE_roder-bench");
    let roder = roder_beside(bench);
    if !roder.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "roder-cli", "--bin", "roder"])
            .status()
            .unwrap();
        assert!(status.success(), "cannot build roder for the benches");
    }
    let output = Command::new(bench)
        .args(["--smoke", "all"])
        .env("RODER_BIN", &roder)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "roder-bench --smoke all failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut benches = BTreeSet::new();
    for line in stdout.lines() {
        let figure: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|error| panic!("not a figure line ({error}): {line}"));
        assert_eq!(figure["smoke"], true, "{line}");
        assert!(figure["value"].is_number(), "{line}");
        benches.insert(figure["bench"].as_str().unwrap().to_string());
    }
    let listed = Command::new(bench).arg("--list").output().unwrap();
    assert!(listed.status.success());
    let expected: BTreeSet<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert!(expected.len() >= 15, "{expected:?}");
    assert_eq!(benches, expected, "every bench printed at least one figure");
}
