//! `roder exec` as an approver: asks on the terminal.
//!
//! With `--mode default` or `accept_edits` and a terminal on stdin and
//! stderr, each ask of the exec's thread is shown on stderr (the command,
//! its directory and where it runs, or the diff of an edit) and answered
//! with one key. The terminal is in raw mode only while a key is awaited,
//! and restored right after (also when the ask is settled elsewhere: a
//! timeout, Ctrl-C). Without a terminal nothing is attached, and
//! `[approvals] no_approver` decides.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use roder_api::approval::{ApprovalAnswer, ApprovalDecision};
use roder_api::events::{ApprovalRequested, RoderEvent};
use roder_core::{ApproverGuard, Runtime};
use tokio::sync::oneshot;

/// Lines of a diff shown before the rest is summarized.
const DIFF_LINES: usize = 40;

/// The keys and what they decide, in the order they are offered.
const KEYS: [(u8, ApprovalDecision, &str); 5] = [
    (b'y', ApprovalDecision::AllowOnce, "allow once"),
    (b't', ApprovalDecision::AllowThread, "allow for this thread"),
    (b'a', ApprovalDecision::AllowAlways, "always allow"),
    (b'n', ApprovalDecision::Reject, "reject"),
    (b's', ApprovalDecision::RejectAndStop, "reject and stop"),
];

/// Whether asks can be put to a person here.
pub fn available() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Answers the thread's asks on the terminal while it lives.
pub struct TerminalApprover {
    task: tokio::task::JoinHandle<()>,
    _attached: ApproverGuard,
}

impl TerminalApprover {
    pub fn start(runtime: Arc<Runtime>, thread_id: &str) -> Self {
        let attached = runtime.attach_approver(thread_id);
        let events = runtime.subscribe_events();
        let task = tokio::spawn(answer_asks(runtime, thread_id.to_string(), events));
        Self {
            task,
            _attached: attached,
        }
    }
}

impl Drop for TerminalApprover {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer_asks(
    runtime: Arc<Runtime>,
    thread_id: String,
    mut events: tokio::sync::broadcast::Receiver<roder_api::events::EventEnvelope>,
) {
    loop {
        let envelope = match events.recv().await {
            Ok(envelope) => envelope,
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        };
        let RoderEvent::ApprovalRequested(ask) = envelope.event else {
            continue;
        };
        if ask.thread_id != thread_id || !runtime.is_approval_pending(&ask.approval_id) {
            continue;
        }
        eprint!("{}", render(&ask));
        let _ = std::io::stderr().flush();
        let cancel = Arc::new(AtomicBool::new(false));
        let key = read_key(cancel.clone());
        tokio::pin!(key);
        let decision = loop {
            tokio::select! {
                key = &mut key => break key,
                event = events.recv() => match event {
                    Ok(envelope) => {
                        if let RoderEvent::ApprovalResolved(resolved) = &envelope.event
                            && resolved.approval_id == ask.approval_id
                        {
                            cancel.store(true, Ordering::SeqCst);
                            eprintln!("\r\nroder: settled by {} ({})", resolved.by, resolved.decision.as_str());
                            break None;
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                        cancel.store(true, Ordering::SeqCst);
                        return;
                    }
                },
            }
        };
        let Some(decision) = decision else {
            continue;
        };
        eprintln!("\r\nroder: {}", decision.as_str());
        let answer = ApprovalAnswer {
            decision,
            message: None,
        };
        if let Err(error) = runtime.resolve_approval(&ask.approval_id, answer, "terminal") {
            tracing::debug!("the terminal's answer was not taken: {error:#}");
        }
    }
}

/// The ask as the person reads it, ending with the keys.
fn render(ask: &ApprovalRequested) -> String {
    let mut out = format!(
        "\nroder: approval needed: {} ({})\n  {}\n",
        ask.tool_name, ask.effects, ask.preview.summary
    );
    for file in &ask.preview.files {
        let lines: Vec<&str> = file.diff.lines().collect();
        for line in lines.iter().take(DIFF_LINES) {
            out.push_str(&format!("  {line}\n"));
        }
        if lines.len() > DIFF_LINES {
            out.push_str(&format!("  … {} more lines\n", lines.len() - DIFF_LINES));
        }
    }
    let keys: Vec<String> = KEYS
        .iter()
        .filter(|(_, decision, _)| {
            !ask.rules.is_empty()
                || !matches!(
                    decision,
                    ApprovalDecision::AllowThread | ApprovalDecision::AllowAlways
                )
        })
        .map(|(key, decision, label)| {
            let scope = match decision {
                ApprovalDecision::AllowThread | ApprovalDecision::AllowAlways => {
                    let rules: Vec<String> = ask.rules.iter().map(ToString::to_string).collect();
                    format!(" ({})", rules.join(", "))
                }
                _ => String::new(),
            };
            format!("[{}] {label}{scope}", *key as char)
        })
        .collect();
    out.push_str(&format!("  {} ? ", keys.join("  ")));
    out
}

/// The next decision key typed on the terminal (`None`: cancelled, or the
/// terminal went away). Reads on its own thread, so a key that never comes
/// holds no async thread and no shutdown.
async fn read_key(cancel: Arc<AtomicBool>) -> Option<ApprovalDecision> {
    let (sender, receiver) = oneshot::channel();
    std::thread::spawn(move || {
        let _ = sender.send(raw::read_decision(&cancel));
    });
    receiver.await.ok().flatten()
}

fn decision_of(byte: u8) -> Option<ApprovalDecision> {
    KEYS.iter()
        .find(|(key, _, _)| *key == byte.to_ascii_lowercase())
        .map(|(_, decision, _)| *decision)
}

/// The terminal in raw mode for one key.
mod raw {
    use super::*;

    /// Restores the terminal's mode when dropped.
    struct RawMode {
        saved: libc::termios,
    }

    impl RawMode {
        fn enter() -> Option<Self> {
            // SAFETY: tcgetattr fills a termios we own; fd 0 is stdin.
            let mut attributes: libc::termios = unsafe { std::mem::zeroed() };
            if unsafe { libc::tcgetattr(0, &mut attributes) } != 0 {
                return None;
            }
            let saved = attributes;
            // One key at a time, not echoed; Ctrl-C still signals.
            attributes.c_lflag &= !(libc::ICANON | libc::ECHO);
            attributes.c_cc[libc::VMIN] = 1;
            attributes.c_cc[libc::VTIME] = 0;
            // SAFETY: a valid termios for fd 0.
            if unsafe { libc::tcsetattr(0, libc::TCSANOW, &attributes) } != 0 {
                return None;
            }
            Some(Self { saved })
        }
    }

    impl Drop for RawMode {
        fn drop(&mut self) {
            // SAFETY: the attributes read from fd 0 before.
            unsafe {
                libc::tcsetattr(0, libc::TCSANOW, &self.saved);
            }
        }
    }

    /// Waits for a decision key, checking `cancel` ten times a second.
    pub(super) fn read_decision(cancel: &AtomicBool) -> Option<ApprovalDecision> {
        let _raw = RawMode::enter()?;
        while !cancel.load(Ordering::SeqCst) {
            let mut poll = libc::pollfd {
                fd: 0,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready =
                unsafe { libc::poll(&mut poll, 1, Duration::from_millis(100).as_millis() as i32) };
            if ready < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return None;
            }
            if ready == 0 {
                continue;
            }
            let mut byte = 0u8;
            // SAFETY: reads at most one byte into `byte`.
            let read = unsafe { libc::read(0, (&mut byte as *mut u8).cast(), 1) };
            if read <= 0 {
                // The terminal closed.
                return None;
            }
            if let Some(decision) = decision_of(byte) {
                return Some(decision);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roder_api::approval::{CallPreview, ToolEffects};

    #[test]
    fn keys_map_to_decisions_and_the_prompt_offers_them() {
        assert_eq!(decision_of(b'y'), Some(ApprovalDecision::AllowOnce));
        assert_eq!(decision_of(b'S'), Some(ApprovalDecision::RejectAndStop));
        assert_eq!(decision_of(b'x'), None);
        let mut ask = ApprovalRequested {
            thread_id: "t".into(),
            turn_id: "u".into(),
            approval_id: "a".into(),
            call_id: "c".into(),
            tool_name: "exec_command".into(),
            effects: ToolEffects::EXECUTE,
            preview: CallPreview {
                summary: "run `make` in /w (on this host)".into(),
                ..CallPreview::default()
            },
            rules: vec!["exec:make".parse().unwrap()],
            expires_at: time::OffsetDateTime::UNIX_EPOCH,
        };
        let prompt = render(&ask);
        assert!(prompt.contains("run `make` in /w"), "{prompt}");
        assert!(prompt.contains("[a] always allow (exec:make)"), "{prompt}");
        ask.rules.clear();
        let prompt = render(&ask);
        assert!(
            !prompt.contains("[a]") && prompt.contains("[y] allow once"),
            "{prompt}"
        );
    }
}
