//! The helper binary this build carries (see `build.rs`), and whether a
//! container can run it.

/// The static `roder-executor` built with this crate; empty when the build
/// could not make it.
static BINARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/roder-executor"));

/// Why [`BINARY`] is empty (empty when it is not).
static UNAVAILABLE: &str = include_str!(concat!(env!("OUT_DIR"), "/roder-executor.unavailable"));

/// The helper's bytes, or why this build has none.
pub fn embedded() -> Result<&'static [u8], String> {
    if BINARY.is_empty() {
        let reason = if UNAVAILABLE.is_empty() {
            "the build made no helper binary"
        } else {
            UNAVAILABLE
        };
        Err(format!(
            "this Roder was built without the sandbox executor ({reason})"
        ))
    } else {
        Ok(BINARY)
    }
}

/// Docker's name (an image's `Architecture`) for the architecture the
/// helper was built for: the host's, as `build.rs` builds for the target.
pub fn docker_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// A short digest of the helper's bytes, naming the copy in a container so
/// two Roder builds sharing a container never run each other's helper.
pub fn digest(bytes: &[u8]) -> String {
    // FNV-1a: not a security boundary (the container is the sandbox), only
    // a name that changes with the contents.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}
