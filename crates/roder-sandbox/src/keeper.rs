//! The keeper: the process Roder forks for every command, which forks the
//! real command and then stays behind to watch both ends.
//!
//! Why a process and not a flag: `PR_SET_PDEATHSIG` fires when the forking
//! *thread* exits, and tokio's blocking threads exit when idle, so it would
//! kill healthy commands and cannot be trusted to fire for the process. The
//! keeper instead holds a pidfd on the Roder process and on the command and
//! sleeps in `poll`:
//!
//! * the command exits: the keeper reaps it and exits with the same status
//!   (re-raising the same signal for a signal death), so `Child::wait` on the
//!   keeper reports what the command did;
//! * Roder dies (any way, SIGKILL included): the keeper kills the command's
//!   process group, then, being a child subreaper, every descendant that
//!   escaped the group and got reparented to it, generation by generation,
//!   until it has no children left;
//! * Roder asks it to stop (SIGTERM, see [`STOP_SIGNALS`]): the same tree
//!   kill, then the keeper dies by SIGKILL like a killed command would.
//!
//! Layout: the keeper leads its own process group (set by std's
//! `process_group(0)` before this hook runs); the command leads another one,
//! so the keeper can kill the command's group without killing itself. The
//! command also gets `PR_SET_PDEATHSIG(SIGKILL)` against the keeper, which is
//! single-threaded, so there the flag means what it says.
//!
//! Everything here runs between `fork` and `exec` in a child of a
//! multi-threaded process: only async-signal-safe libc calls, no allocation,
//! no locks, no panics.

use std::io;

use libc::{c_int, pid_t};

/// Signals Roder (or a service manager) sends the keeper to stop the tree.
/// They are blocked and read through a signalfd, so a handler inherited from
/// Roder never runs in the keeper.
pub(crate) const STOP_SIGNALS: [c_int; 4] =
    [libc::SIGTERM, libc::SIGHUP, libc::SIGINT, libc::SIGQUIT];

/// The signal [`crate::Supervised`] sends to ask for a stop.
pub(crate) const STOP_SIGNAL: c_int = libc::SIGTERM;

/// How often the keeper re-checks when a pidfd or the signalfd could not be
/// opened (kernels before 5.3): the fallback is polling, not giving up.
const FALLBACK_TICK_MS: c_int = 50;

/// Exit status of a command whose keeper vanished before it could exec.
const KEEPER_GONE_STATUS: c_int = 137;

/// Installs the keeper into `command`; std must already be told to put the
/// child in a new process group (`process_group(0)`).
pub(crate) fn install(command: &mut tokio::process::Command) {
    // SAFETY: getpid has no preconditions. Read before the fork: in the
    // keeper, this is the parent to watch.
    let supervisor = unsafe { libc::getpid() };
    // SAFETY: the hook runs in the forked child before exec; `fork_keeper`
    // only makes async-signal-safe libc calls and never allocates.
    unsafe {
        command.pre_exec(move || fork_keeper(supervisor));
    }
}

/// Runs in the child std forked. Returns (and lets std exec) only in the
/// command; the keeper itself never returns.
fn fork_keeper(supervisor: pid_t) -> io::Result<()> {
    // SAFETY: plain syscalls on this process; see the module docs.
    unsafe {
        let keeper = libc::getpid();
        // Set before the fork so no orphan of the command can slip past it.
        // Not inherited by the command.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        let command = libc::fork();
        if command < 0 {
            return Err(io::Error::last_os_error());
        }
        if command == 0 {
            libc::setpgid(0, 0);
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != keeper {
                libc::_exit(KEEPER_GONE_STATUS);
            }
            return Ok(());
        }
        // Both sides set the group, so it exists whichever runs first.
        libc::setpgid(command, command);
        keep(supervisor, command)
    }
}

/// The keeper's whole life after the fork.
unsafe fn keep(supervisor: pid_t, command: pid_t) -> ! {
    // SAFETY: async-signal-safe syscalls only; the fds are our own.
    unsafe {
        reset_signal_dispositions();
        // Stdio (so the command's output pipes reach EOF when it is done) and
        // std's close-on-exec status pipe (so `spawn` returns once the
        // command has exec'd) and everything else inherited from Roder.
        close_all_fds();

        let mut stop_mask: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut stop_mask);
        for signal in STOP_SIGNALS {
            libc::sigaddset(&mut stop_mask, signal);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &stop_mask, std::ptr::null_mut());
        let signal_fd = libc::signalfd(-1, &stop_mask, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if signal_fd < 0 {
            // Without a signalfd a stop request must still stop something:
            // default dispositions kill the keeper, and PDEATHSIG the command.
            libc::sigprocmask(libc::SIG_UNBLOCK, &stop_mask, std::ptr::null_mut());
        }
        let supervisor_fd = pidfd_open(supervisor);
        let command_fd = pidfd_open(command);
        // Roder may have died before the pidfd existed: then we are already
        // someone else's child.
        if libc::getppid() != supervisor {
            stop_tree(command);
        }
        let mut watch_supervisor = supervisor_fd >= 0;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: signal_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: command_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: if watch_supervisor { supervisor_fd } else { -1 },
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let tick = if signal_fd >= 0 && command_fd >= 0 && watch_supervisor {
                -1
            } else {
                FALLBACK_TICK_MS
            };
            // Whatever woke us (or EINTR), the checks below read the facts.
            libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, tick);

            let mut status: c_int = 0;
            let reaped = libc::waitpid(command, &mut status, libc::WNOHANG);
            if reaped == command {
                exit_like(status);
            }
            if reaped < 0 && errno() == libc::ECHILD {
                // Cannot happen (only we reap it); do not spin if it does.
                libc::_exit(1);
            }
            if fds[0].revents & libc::POLLIN != 0 {
                stop_tree(command);
            }
            if libc::getppid() != supervisor {
                stop_tree(command);
            }
            if fds[2].revents != 0 {
                // Readable while our parent is still Roder: an old kernel
                // reporting the main thread's exit. Tick instead of spinning.
                watch_supervisor = false;
            }
        }
    }
}

/// Kills the command's group, then every process reparented to the keeper,
/// until none is left; then dies by SIGKILL.
unsafe fn stop_tree(command: pid_t) -> ! {
    // SAFETY: async-signal-safe syscalls; pids come from our own children.
    unsafe {
        libc::kill(-command, libc::SIGKILL);
        loop {
            if !kill_children() {
                // No /proc: the group kill is all we can do; reap the command.
                let mut status: c_int = 0;
                libc::waitpid(command, &mut status, 0);
                break;
            }
            let mut status: c_int = 0;
            if libc::waitpid(-1, &mut status, 0) < 0 && errno() != libc::EINTR {
                break; // ECHILD: nothing left.
            }
        }
        libc::kill(libc::getpid(), libc::SIGKILL);
        libc::_exit(KEEPER_GONE_STATUS)
    }
}

/// SIGKILLs each current child of the keeper and the group it leads, read
/// from `/proc/thread-self/children` (the keeper has one thread). `false`
/// when that file cannot be read.
unsafe fn kill_children() -> bool {
    let mut buffer = [0_u8; 4096];
    // SAFETY: a NUL-terminated path, a stack buffer of the length passed.
    let read = unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let read = libc::read(fd, buffer.as_mut_ptr().cast(), buffer.len());
        libc::close(fd);
        read
    };
    let Ok(read) = usize::try_from(read) else {
        return false;
    };
    let mut pid: pid_t = 0;
    let mut digits = false;
    for &byte in buffer.iter().take(read) {
        if byte.is_ascii_digit() {
            pid = pid
                .saturating_mul(10)
                .saturating_add(pid_t::from(byte - b'0'));
            digits = true;
        } else {
            // Only a number followed by a separator is whole: a full buffer
            // may end mid-number, and the next round reads it again.
            if digits && pid > 1 {
                // SAFETY: `pid` is our child, so neither it nor a group it
                // leads can have been reused by an unrelated process.
                unsafe {
                    libc::kill(pid, libc::SIGKILL);
                    libc::kill(-pid, libc::SIGKILL);
                }
            }
            pid = 0;
            digits = false;
        }
    }
    true
}

/// Exits the way the command did: same code, or death by the same signal.
unsafe fn exit_like(status: c_int) -> ! {
    // SAFETY: async-signal-safe syscalls on this process.
    unsafe {
        if libc::WIFEXITED(status) {
            libc::_exit(libc::WEXITSTATUS(status));
        }
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            // The command already dumped core if it was going to.
            let no_core = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            libc::setrlimit(libc::RLIMIT_CORE, &no_core);
            let mut only: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut only);
            libc::sigaddset(&mut only, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &only, std::ptr::null_mut());
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(1)
    }
}

/// Handlers Roder installed (tokio's SIGCHLD, SIGINT, ...) survive the fork
/// but must not run in the keeper: their fds are closed or reused here.
unsafe fn reset_signal_dispositions() {
    // SAFETY: a zeroed sigaction with SIG_DFL is a valid argument; errors
    // (signals glibc reserves, SIGKILL, SIGSTOP) are expected and ignored.
    unsafe {
        let mut default: libc::sigaction = std::mem::zeroed();
        default.sa_sigaction = libc::SIG_DFL;
        libc::sigemptyset(&mut default.sa_mask);
        for signal in 1..65 {
            if signal != libc::SIGKILL && signal != libc::SIGSTOP {
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}

unsafe fn close_all_fds() {
    // SAFETY: closing fds this process owns; nothing here uses them again.
    unsafe {
        if libc::syscall(libc::SYS_close_range, 0_u32, u32::MAX, 0_u32) == 0 {
            return;
        }
        // close_range needs Linux 5.9; before that, close up to the limit.
        let mut limit: libc::rlimit = std::mem::zeroed();
        let top = if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 {
            limit.rlim_cur.min(65_536)
        } else {
            1024
        };
        let top = c_int::try_from(top).unwrap_or(1024);
        for fd in 0..top {
            libc::close(fd);
        }
    }
}

/// A pidfd for `pid` (close-on-exec), or -1 when the kernel has none.
unsafe fn pidfd_open(pid: pid_t) -> c_int {
    // SAFETY: pidfd_open takes a pid and flags and returns an fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0_u32) };
    c_int::try_from(fd).unwrap_or(-1)
}

fn errno() -> c_int {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
