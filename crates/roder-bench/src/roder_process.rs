//! What the benches that drive the real `roder` binary share: where the
//! binary is and how much CPU its finished runs used.

use std::path::PathBuf;

/// The release `roder` beside this bench (or `RODER_BIN`).
pub fn binary() -> anyhow::Result<PathBuf> {
    if let Ok(path) = std::env::var("RODER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let beside = std::env::current_exe()?.with_file_name("roder");
    anyhow::ensure!(
        beside.exists(),
        "{} does not exist; run `cargo build --release -p roder-cli` first (or set RODER_BIN)",
        beside.display()
    );
    Ok(beside)
}

/// User+system CPU seconds of all waited-for children.
pub fn children_cpu_s() -> anyhow::Result<f64> {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a whole rusage into the pointer it is given.
    let status = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, usage.as_mut_ptr()) };
    anyhow::ensure!(status == 0, "getrusage failed");
    // SAFETY: initialised by the successful call above.
    let usage = unsafe { usage.assume_init() };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 / 1e6;
    Ok(seconds(usage.ru_utime) + seconds(usage.ru_stime))
}
