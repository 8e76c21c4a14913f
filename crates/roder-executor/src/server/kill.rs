//! Killing a command's whole tree: every process whose environment holds
//! the command's marker. The environment is inherited by everything a
//! command starts (background children, `setsid` daemons, re-parented
//! orphans), which a process-group kill alone would miss.

use std::time::Duration;

/// Most rounds of scan-and-kill: a dying tree can fork once more between a
/// scan and its kill, so the scan repeats until it finds nobody.
const MAX_ROUNDS: usize = 50;

/// Kills the process group `group` and every process whose environment has
/// the entry `marker` (`NAME=value`, matched whole). Each round stops the
/// whole set before killing it, so no parent runs on after its child died.
pub fn kill_marked(marker: &[u8], group: Option<i32>) {
    if let Some(group) = group.filter(|group| *group > 0) {
        // SAFETY: killpg only sends a signal; a stale group id fails with
        // ESRCH, which is ignored.
        unsafe {
            libc::killpg(group, libc::SIGKILL);
        }
    }
    let own = std::process::id();
    for round in 0..MAX_ROUNDS {
        let pids = marked(marker, own);
        if pids.is_empty() {
            return;
        }
        for signal in [libc::SIGSTOP, libc::SIGKILL] {
            for pid in &pids {
                // SAFETY: kill only sends a signal to a pid read from /proc.
                unsafe {
                    libc::kill(*pid, signal);
                }
            }
        }
        if round > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The pids (other than `own`) whose environment holds `marker`. Zombies
/// have no environment left, so the dead are not found again.
fn marked(marker: &[u8], own: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ
                    .split(|byte| *byte == 0)
                    .any(|entry| entry == marker)
            })
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}
