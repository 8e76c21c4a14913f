//! Builds the sandbox executor (`roder-executor`) as a static binary for
//! the target, so every build of the docker runner carries a helper it can
//! copy into a container whatever libc (or none) the image has.
//!
//! A nested `cargo build` of the workspace's `roder-executor` package, with
//! `+crt-static`, into its own target directory under `OUT_DIR` (so it
//! never waits on the outer build's lock) and offline (the outer build has
//! fetched every package already). When the static build cannot be made
//! (no static libc, another target), the runner is built without a helper
//! and says why at run time, where it falls back to plain execs; the build
//! itself never fails for it. `RODER_EXECUTOR_BINARY` names a prebuilt
//! helper to embed instead.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").unwrap_or_default());
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    let executor = manifest.join("../roder-executor");
    println!("cargo:rerun-if-changed={}", executor.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        executor.join("Cargo.toml").display()
    );
    println!("cargo:rerun-if-env-changed=RODER_EXECUTOR_BINARY");
    let binary = out.join("roder-executor");
    let unavailable = out.join("roder-executor.unavailable");
    let made = match env::var_os("RODER_EXECUTOR_BINARY") {
        Some(prebuilt) => std::fs::copy(&prebuilt, &binary)
            .map(|_| ())
            .map_err(|error| format!("cannot copy RODER_EXECUTOR_BINARY {prebuilt:?}: {error}")),
        None => build_static(&manifest, &out, &binary),
    };
    let reason = match made {
        Ok(()) => String::new(),
        Err(reason) => {
            println!("cargo:warning=the sandbox executor is not embedded: {reason}");
            let _ = std::fs::write(&binary, b"");
            reason
        }
    };
    if let Err(error) = std::fs::write(&unavailable, reason) {
        println!(
            "cargo:warning=cannot write {}: {error}",
            unavailable.display()
        );
    }
}

fn build_static(manifest: &Path, out: &Path, binary: &Path) -> Result<(), String> {
    let target = env::var("TARGET").map_err(|_| "TARGET is not set".to_string())?;
    if !target.contains("linux") {
        return Err(format!(
            "the executor is built for Linux only, not {target}"
        ));
    }
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let target_dir = out.join("executor-target");
    let mut command = Command::new(cargo);
    command
        .args(["build", "--release", "--offline", "--quiet"])
        .args(["-p", "roder-executor", "--bin", "roder-executor"])
        .arg("--target")
        .arg(&target)
        .arg("--target-dir")
        .arg(&target_dir)
        .arg("--manifest-path")
        .arg(manifest.join("../../Cargo.toml"))
        .env(
            "CARGO_ENCODED_RUSTFLAGS",
            "-Ctarget-feature=+crt-static\x1f-Cstrip=symbols",
        )
        // The outer build's wrappers (clippy-driver) and flags are its own.
        .env_remove("RUSTFLAGS")
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("RUSTC_WRAPPER")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR");
    let output = command
        .output()
        .map_err(|error| format!("cannot run cargo: {error}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" | ");
        return Err(format!(
            "the static build failed ({}): {last}",
            output.status
        ));
    }
    let built = target_dir
        .join(&target)
        .join("release")
        .join("roder-executor");
    std::fs::copy(&built, binary)
        .map(|_| ())
        .map_err(|error| format!("cannot copy {}: {error}", built.display()))
}
