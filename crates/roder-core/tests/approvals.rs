//! Approvals through the runtime: every mode against every class of
//! effects, rules, previews, each decision, the timeout, an interrupt, and
//! what happens with nobody to ask.

mod support;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use roder_api::approval::{
    ApprovalAnswer, ApprovalDecision, ApprovalRequirement, ApprovalRules, CallScope, DecidedBy,
    NoApprover, ThreadApprovals, ToolEffects,
};
use roder_api::events::{ApprovalRequested, EventEnvelope, RoderEvent};
use roder_api::extension::{ExtensionRegistryBuilder, ToolProviderId};
use roder_api::policy_mode::PolicyMode;
use roder_api::tools::{
    ToolCall, ToolContributor, ToolExecutionContext, ToolExecutor, ToolRegistry, ToolResult,
    ToolSpec,
};
use roder_core::{ApprovalsConfig, Runtime, RuntimeConfig, StartTurnRequest, TurnOptions};
use roder_ext_jsonl_thread_store::store::JsonlThreadStoreFactory;
use roder_testkit::{ScriptedEngine, ScriptedRound, final_round, tool_round};
use support::{completed_tools, until_turn_ends};

/// A tool that declares `effects` and records every call that ran.
struct Probe {
    name: &'static str,
    effects: ToolEffects,
    ran: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl ToolExecutor for Probe {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.to_string(),
            description: String::new(),
            parameters: serde_json::json!({"type": "object"}),
        }
    }

    fn effects(&self) -> ToolEffects {
        self.effects
    }

    fn call_scope(&self, arguments: &serde_json::Value) -> Result<CallScope, String> {
        Ok(CallScope {
            command: arguments["command"].as_str().map(str::to_string),
            paths: arguments["path"]
                .as_str()
                .map(|path| vec![path.to_string()])
                .unwrap_or_default(),
        })
    }

    async fn execute(
        &self,
        _ctx: ToolExecutionContext,
        call: ToolCall,
    ) -> anyhow::Result<ToolResult> {
        self.ran
            .lock()
            .unwrap()
            .push(format!("{}:{}", self.name, call.arguments));
        Ok(ToolResult::ok(&call, "done", serde_json::Value::Null))
    }
}

struct Probes {
    ran: Arc<Mutex<Vec<String>>>,
}

const PROBES: [(&str, ToolEffects); 5] = [
    ("probe_read", ToolEffects::READ),
    ("probe_edit", ToolEffects::WRITE),
    ("probe_exec", ToolEffects::EXECUTE),
    ("probe_net", ToolEffects::NETWORK),
    ("probe_undeclared", ToolEffects::UNDECLARED),
];

impl ToolContributor for Probes {
    fn id(&self) -> ToolProviderId {
        "probes".into()
    }

    fn contribute(&self, registry: &mut ToolRegistry) -> anyhow::Result<()> {
        for (name, effects) in PROBES {
            registry.register(Arc::new(Probe {
                name,
                effects,
                ran: self.ran.clone(),
            }))?;
        }
        Ok(())
    }
}

struct Setup {
    runtime: Arc<Runtime>,
    engine: Arc<ScriptedEngine>,
    ran: Arc<Mutex<Vec<String>>>,
    workspace: tempfile::TempDir,
    _store: tempfile::TempDir,
}

fn setup(rounds: Vec<ScriptedRound>, adjust: impl FnOnce(&mut RuntimeConfig)) -> Setup {
    let workspace = tempfile::tempdir().unwrap();
    let store = tempfile::tempdir().unwrap();
    let engine = ScriptedEngine::new(rounds);
    let ran = Arc::new(Mutex::new(Vec::new()));
    let mut builder = ExtensionRegistryBuilder::new();
    builder.inference_engine(engine.clone());
    builder.thread_store_factory(Arc::new(JsonlThreadStoreFactory {
        base_path: store.path().to_path_buf(),
    }));
    builder
        .tool_contributor(roder_tools::builtin_coding_tools_contributor(workspace.path()).unwrap());
    builder.tool_contributor(Arc::new(Probes { ran: ran.clone() }));
    let mut config = RuntimeConfig {
        workspace: Some(workspace.path().display().to_string()),
        ..RuntimeConfig::default()
    };
    adjust(&mut config);
    let runtime = Arc::new(Runtime::new(builder.build().unwrap(), config).unwrap());
    Setup {
        runtime,
        engine,
        ran,
        workspace,
        _store: store,
    }
}

/// Answers every ask of `thread_id` with `decide(ask)`, from its own task,
/// as a client would; returns the asks it saw when the turn ends.
fn approver(
    runtime: &Arc<Runtime>,
    thread_id: &str,
    decide: impl Fn(&ApprovalRequested) -> Option<ApprovalDecision> + Send + 'static,
) -> tokio::task::JoinHandle<Vec<ApprovalRequested>> {
    let runtime = runtime.clone();
    let thread_id = thread_id.to_string();
    let mut events = runtime.subscribe_events();
    let guard = runtime.attach_approver(&thread_id);
    tokio::spawn(async move {
        let _guard = guard;
        let mut asks = Vec::new();
        while let Ok(envelope) = events.recv().await {
            if envelope.thread_id != thread_id {
                continue;
            }
            match &envelope.event {
                RoderEvent::ApprovalRequested(ask) => {
                    asks.push(ask.clone());
                    if let Some(decision) = decide(ask) {
                        let answer = ApprovalAnswer {
                            decision,
                            message: Some("not now".into()),
                        };
                        runtime
                            .resolve_approval(&ask.approval_id, answer, "test-client")
                            .unwrap();
                    }
                }
                event if event.is_terminal() => return asks,
                _ => {}
            }
        }
        asks
    })
}

async fn run_turn(setup: &Setup, thread_id: &str, mode: Option<PolicyMode>) -> Vec<EventEnvelope> {
    let mut events = setup.runtime.subscribe_events();
    setup
        .runtime
        .start_turn_with(
            StartTurnRequest::new(thread_id, "go"),
            TurnOptions {
                policy_mode: mode,
                ..TurnOptions::default()
            },
        )
        .await
        .unwrap();
    until_turn_ends(&mut events, thread_id).await
}

fn probe_round() -> ScriptedRound {
    tool_round(&[
        ("r", "probe_read", r#"{"path":"a.txt"}"#),
        ("e", "probe_edit", r#"{"path":"src/a.rs"}"#),
        ("x", "probe_exec", r#"{"command":"make"}"#),
        ("n", "probe_net", r#"{}"#),
        ("u", "probe_undeclared", r#"{}"#),
    ])
}

fn started_by(events: &[EventEnvelope]) -> Vec<(String, DecidedBy)> {
    events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ToolCallStarted(started) => Some((
                started.tool_name.clone(),
                started.approved_by.clone().unwrap(),
            )),
            _ => None,
        })
        .collect()
}

/// Each mode against each class of effects, with an approver that rejects
/// every ask: what ran, what asked, what was refused without asking.
#[tokio::test]
async fn every_mode_against_every_effect() {
    let table: [(PolicyMode, &[&str], &[&str]); 4] = [
        (PolicyMode::Plan, &["probe_read"], &[]),
        (
            PolicyMode::Default,
            &["probe_read"],
            &["probe_edit", "probe_exec", "probe_net", "probe_undeclared"],
        ),
        (
            PolicyMode::AcceptEdits,
            &["probe_read", "probe_edit"],
            &["probe_exec", "probe_net", "probe_undeclared"],
        ),
        (
            PolicyMode::Bypass,
            &[
                "probe_read",
                "probe_edit",
                "probe_exec",
                "probe_net",
                "probe_undeclared",
            ],
            &[],
        ),
    ];
    for (mode, should_run, should_ask) in table {
        let setup = setup(vec![probe_round(), final_round("done")], |_| {});
        let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
        let asker = approver(&setup.runtime, &thread_id, |_| {
            Some(ApprovalDecision::Reject)
        });
        let events = run_turn(&setup, &thread_id, Some(mode)).await;
        let asked: Vec<String> = asker
            .await
            .unwrap()
            .into_iter()
            .map(|ask| ask.tool_name)
            .collect();
        let ran: Vec<String> = setup
            .ran
            .lock()
            .unwrap()
            .iter()
            .map(|entry| entry.split(':').next().unwrap().to_string())
            .collect();
        assert_eq!(ran, should_run, "{mode}: what ran");
        assert_eq!(asked, should_ask, "{mode}: what asked");
        let by_mode = started_by(&events)
            .into_iter()
            .all(|(_, by)| by == DecidedBy::Mode { mode });
        assert!(
            by_mode,
            "{mode}: every call that ran was let run by the mode"
        );
        // What did not run was refused with a result the model reads.
        for completed in completed_tools(&events) {
            let name = completed.tool_name.unwrap();
            if !should_run.contains(&name.as_str()) {
                assert!(completed.is_error, "{mode}: {name}");
                let text = completed.output.unwrap();
                assert!(
                    text.contains("rejected this call") || text.contains("plan mode forbids"),
                    "{mode}: {name}: {text}"
                );
            }
        }
        // The plan mode offers only the reading tools.
        if mode == PolicyMode::Plan {
            let offered: Vec<String> = setup.engine.requests()[0]
                .tools
                .iter()
                .map(|tool| tool.name.clone())
                .collect();
            assert!(offered.contains(&"probe_read".to_string()));
            assert!(offered.contains(&"grep".to_string()));
            for hidden in ["probe_edit", "probe_exec", "write_file", "exec_command"] {
                assert!(!offered.contains(&hidden.to_string()), "{hidden}");
            }
        }
    }
}

#[tokio::test]
async fn a_deny_rule_holds_under_bypass() {
    let setup = setup(
        vec![
            tool_round(&[
                ("rm", "exec_command", r#"{"cmd":"rm keep.txt"}"#),
                ("ls", "exec_command", r#"{"cmd":"ls"}"#),
                ("probe", "probe_undeclared", r#"{}"#),
            ]),
            final_round("done"),
        ],
        |config| {
            config.policy_mode = PolicyMode::Bypass;
            config.approvals.rules = ApprovalRules {
                allow: vec!["exec:rm".parse().unwrap()],
                deny: vec!["exec:rm".parse().unwrap(), "tool:probe_*".parse().unwrap()],
            };
        },
    );
    std::fs::write(setup.workspace.path().join("keep.txt"), "keep").unwrap();
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let events = run_turn(&setup, &thread_id, None).await;
    let completed = completed_tools(&events);
    let rm = completed.iter().find(|call| call.call_id == "rm").unwrap();
    assert!(rm.is_error);
    assert!(
        rm.output
            .as_deref()
            .unwrap()
            .contains("deny rule `exec:rm`"),
        "{rm:?}"
    );
    assert!(setup.workspace.path().join("keep.txt").exists());
    let ls = completed.iter().find(|call| call.call_id == "ls").unwrap();
    assert!(!ls.is_error, "{ls:?}");
    assert!(
        setup.ran.lock().unwrap().is_empty(),
        "the denied tool never ran"
    );
    // A tool denied whole is not offered at all.
    let offered: Vec<String> = setup.engine.requests()[0]
        .tools
        .iter()
        .map(|tool| tool.name.clone())
        .collect();
    assert!(!offered.iter().any(|name| name.starts_with("probe_")));
    assert!(offered.contains(&"exec_command".to_string()));
}

#[tokio::test]
async fn an_ask_shows_the_diff_before_anything_is_written_and_allow_writes_it() {
    let setup = setup(
        vec![
            tool_round(&[(
                "w",
                "write_file",
                r#"{"path":"notes/new.md","content":"fresh line\n"}"#,
            )]),
            final_round("done"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let target = setup.workspace.path().join("notes/new.md");
    let probe = target.clone();
    let asker = approver(&setup.runtime, &thread_id, move |_| {
        // Asked before anything is written.
        assert!(!probe.exists());
        Some(ApprovalDecision::AllowOnce)
    });
    let events = run_turn(&setup, &thread_id, None).await;
    let asks = asker.await.unwrap();
    assert_eq!(asks.len(), 1);
    let preview = &asks[0].preview;
    assert_eq!(preview.files.len(), 1);
    assert_eq!(Path::new(&preview.files[0].path), target);
    assert!(
        preview.files[0].diff.contains("+fresh line"),
        "{}",
        preview.files[0].diff
    );
    assert_eq!(preview.files[0].old_text, None);
    assert_eq!(asks[0].effects, ToolEffects::WRITE);
    assert_eq!(
        asks[0]
            .rules
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        vec!["write:notes/new.md"]
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "fresh line\n");
    assert_eq!(
        started_by(&events),
        vec![(
            "write_file".to_string(),
            DecidedBy::Client {
                client_id: "test-client".into()
            }
        )]
    );
    // The log holds the ask, its resolution and then the start, in order.
    let order: Vec<&str> = events
        .iter()
        .filter_map(|envelope| match &envelope.event {
            RoderEvent::ApprovalRequested(_) => Some("requested"),
            RoderEvent::ApprovalResolved(_) => Some("resolved"),
            RoderEvent::ToolCallStarted(_) => Some("started"),
            _ => None,
        })
        .collect();
    assert_eq!(order, vec!["requested", "resolved", "started"]);
}

#[tokio::test]
async fn a_command_preview_names_its_directory_and_host() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch made.txt"}"#)]),
            final_round("done"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let asker = approver(&setup.runtime, &thread_id, |_| {
        Some(ApprovalDecision::Reject)
    });
    let events = run_turn(&setup, &thread_id, None).await;
    let asks = asker.await.unwrap();
    let command = asks[0].preview.command.clone().unwrap();
    assert_eq!(command.command, "touch made.txt");
    assert_eq!(
        Path::new(&command.cwd).canonicalize().unwrap(),
        setup.workspace.path().canonicalize().unwrap()
    );
    assert_eq!(command.runs_on, roder_api::approval::RunsOn::Host);
    assert!(!setup.workspace.path().join("made.txt").exists());
    let result = &completed_tools(&events)[0];
    assert!(result.is_error);
    let text = result.output.as_deref().unwrap();
    assert!(
        text.contains("rejected this call") && text.contains("not now"),
        "{text}"
    );
}

#[tokio::test]
async fn allow_thread_keeps_a_rule_that_answers_the_next_call() {
    let setup = setup(
        vec![
            tool_round(&[("one", "exec_command", r#"{"cmd":"echo one"}"#)]),
            tool_round(&[("two", "exec_command", r#"{"cmd":"echo one --again"}"#)]),
            final_round("done"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let asker = approver(&setup.runtime, &thread_id, |_| {
        Some(ApprovalDecision::AllowThread)
    });
    let events = run_turn(&setup, &thread_id, None).await;
    assert_eq!(
        asker.await.unwrap().len(),
        1,
        "the second call was not asked"
    );
    let started = started_by(&events);
    assert_eq!(
        started[1].1,
        DecidedBy::Rule {
            rule: "exec:echo one".into()
        }
    );
    let metadata = setup.runtime.thread_metadata(&thread_id).await.unwrap();
    assert_eq!(
        metadata.approvals.rules.allow,
        vec!["exec:echo one".parse().unwrap()]
    );
    // Kept with the thread only: the runtime's own rules are unchanged.
    assert!(setup.runtime.approval_rules().is_empty());
}

#[tokio::test]
async fn allow_always_and_reject_always_become_runtime_rules() {
    let setup = setup(
        vec![
            tool_round(&[
                ("a", "exec_command", r#"{"cmd":"echo allowed"}"#),
                ("b", "exec_command", r#"{"cmd":"echo refused"}"#),
            ]),
            final_round("done"),
        ],
        |config| {
            config
                .model_parallel_tool_calls
                .insert("mock".into(), false);
        },
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let asker = approver(&setup.runtime, &thread_id, |ask| {
        Some(if ask.call_id == "a" {
            ApprovalDecision::AllowAlways
        } else {
            ApprovalDecision::RejectAlways
        })
    });
    run_turn(&setup, &thread_id, None).await;
    asker.await.unwrap();
    let rules = setup.runtime.approval_rules();
    assert_eq!(rules.allow, vec!["exec:echo allowed".parse().unwrap()]);
    assert_eq!(rules.deny, vec!["exec:echo refused".parse().unwrap()]);
}

#[tokio::test]
async fn reject_and_stop_ends_the_turn_as_interrupted() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch no.txt"}"#)]),
            final_round("never reached"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let asker = approver(&setup.runtime, &thread_id, |_| {
        Some(ApprovalDecision::RejectAndStop)
    });
    let events = run_turn(&setup, &thread_id, None).await;
    asker.await.unwrap();
    assert!(matches!(
        events.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
    assert!(!setup.workspace.path().join("no.txt").exists());
    let result = &completed_tools(&events)[0];
    assert!(
        result
            .output
            .as_deref()
            .unwrap()
            .contains("stopped the turn")
    );
    assert_eq!(
        setup.engine.requests().len(),
        1,
        "no model request after the stop"
    );
    // The next turn works.
    setup.engine.push_round(final_round("back"));
    let next = run_turn(&setup, &thread_id, None).await;
    assert!(matches!(
        next.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

#[tokio::test]
async fn an_unanswered_ask_times_out_and_the_call_is_rejected() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch late.txt"}"#)]),
            final_round("done"),
        ],
        |config| config.approvals.timeout = Duration::from_secs(1),
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let asker = approver(&setup.runtime, &thread_id, |_| None);
    let events = run_turn(&setup, &thread_id, None).await;
    assert_eq!(asker.await.unwrap().len(), 1);
    let resolved = events
        .iter()
        .find_map(|envelope| match &envelope.event {
            RoderEvent::ApprovalResolved(resolved) => Some(resolved.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(resolved.by, DecidedBy::Timeout);
    assert_eq!(resolved.decision, ApprovalDecision::Reject);
    let text = completed_tools(&events)[0].output.clone().unwrap();
    assert!(text.contains("within 1 s"), "{text}");
    assert!(!setup.workspace.path().join("late.txt").exists());
    assert!(matches!(
        events.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
}

#[tokio::test]
async fn interrupting_a_turn_rejects_its_pending_ask() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch never.txt"}"#)]),
            final_round("never reached"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let _approver = setup.runtime.attach_approver(&thread_id);
    let mut events = setup.runtime.subscribe_events();
    let turn_id = setup
        .runtime
        .start_turn(StartTurnRequest::new(&thread_id, "go"))
        .await
        .unwrap();
    let asked = support::wait_for(&mut events, &thread_id, |event| {
        matches!(event, RoderEvent::ApprovalRequested(_))
    })
    .await;
    let RoderEvent::ApprovalRequested(ask) = asked.event else {
        unreachable!()
    };
    assert_eq!(
        setup.runtime.pending_approvals(&thread_id),
        vec![ask.clone()]
    );
    setup
        .runtime
        .interrupt_turn(&thread_id, &turn_id)
        .await
        .unwrap();
    let rest = until_turn_ends(&mut events, &thread_id).await;
    let resolved = rest
        .iter()
        .find_map(|envelope| match &envelope.event {
            RoderEvent::ApprovalResolved(resolved) => Some(resolved.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(resolved.by, DecidedBy::Interrupt);
    assert!(matches!(
        rest.last().unwrap().event,
        RoderEvent::TurnInterrupted(_)
    ));
    assert!(!setup.workspace.path().join("never.txt").exists());
    assert!(!setup.runtime.is_approval_pending(&ask.approval_id));
    let late = setup.runtime.resolve_approval(
        &ask.approval_id,
        ApprovalAnswer {
            decision: ApprovalDecision::AllowOnce,
            message: None,
        },
        "late",
    );
    assert!(late.unwrap_err().to_string().contains("is not pending"));
}

#[tokio::test]
async fn with_nobody_attached_no_approver_decides_without_asking() {
    for (no_approver, runs) in [(NoApprover::Allow, true), (NoApprover::Reject, false)] {
        let setup = setup(
            vec![
                tool_round(&[("x", "exec_command", r#"{"cmd":"touch made.txt"}"#)]),
                final_round("done"),
            ],
            |config| {
                config.approvals = ApprovalsConfig {
                    no_approver,
                    ..ApprovalsConfig::default()
                }
            },
        );
        let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
        let events = run_turn(&setup, &thread_id, None).await;
        assert!(
            !events
                .iter()
                .any(|envelope| matches!(envelope.event, RoderEvent::ApprovalRequested(_))),
            "nobody is asked"
        );
        assert_eq!(setup.workspace.path().join("made.txt").exists(), runs);
        if runs {
            assert_eq!(
                started_by(&events),
                vec![("exec_command".to_string(), DecidedBy::NoApprover)]
            );
        } else {
            let text = completed_tools(&events)[0].output.clone().unwrap();
            assert!(text.contains("no approver is attached"), "{text}");
        }
    }
}

#[tokio::test]
async fn a_thread_that_requires_an_approver_waits_for_one_to_attach() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch made.txt"}"#)]),
            final_round("done"),
        ],
        |config| {
            config.approvals.no_approver = NoApprover::Reject;
        },
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    setup
        .runtime
        .set_thread_approvals(
            &thread_id,
            ThreadApprovals {
                requirement: ApprovalRequirement::Required,
                ..ThreadApprovals::default()
            },
        )
        .await
        .unwrap();
    let mut events = setup.runtime.subscribe_events();
    setup
        .runtime
        .start_turn(StartTurnRequest::new(&thread_id, "go"))
        .await
        .unwrap();
    support::wait_for(&mut events, &thread_id, |event| {
        matches!(event, RoderEvent::ApprovalRequested(_))
    })
    .await;
    // An approver attaching late finds the pending ask and answers it.
    let _late = setup.runtime.attach_approver(&thread_id);
    let pending = setup.runtime.pending_approvals(&thread_id);
    assert_eq!(pending.len(), 1);
    setup
        .runtime
        .resolve_approval(
            &pending[0].approval_id,
            ApprovalAnswer {
                decision: ApprovalDecision::AllowOnce,
                message: None,
            },
            "late-client",
        )
        .unwrap();
    let rest = until_turn_ends(&mut events, &thread_id).await;
    assert!(matches!(
        rest.last().unwrap().event,
        RoderEvent::TurnCompleted(_)
    ));
    assert!(setup.workspace.path().join("made.txt").exists());
}

#[tokio::test]
async fn a_thread_mode_applies_and_a_turn_mode_overrides_it() {
    let setup = setup(
        vec![
            tool_round(&[("x", "exec_command", r#"{"cmd":"touch a.txt"}"#)]),
            final_round("done"),
            tool_round(&[("y", "exec_command", r#"{"cmd":"touch b.txt"}"#)]),
            final_round("done"),
        ],
        |_| {},
    );
    let thread_id = setup.runtime.create_thread(None).await.unwrap().thread_id;
    let metadata = setup
        .runtime
        .set_thread_policy_mode(&thread_id, Some(PolicyMode::Bypass))
        .await
        .unwrap();
    assert_eq!(
        setup.runtime.thread_policy_mode(&metadata),
        PolicyMode::Bypass
    );
    let _approver = setup.runtime.attach_approver(&thread_id);
    let events = run_turn(&setup, &thread_id, None).await;
    assert_eq!(
        started_by(&events)[0].1,
        DecidedBy::Mode {
            mode: PolicyMode::Bypass
        }
    );
    let events = run_turn(&setup, &thread_id, Some(PolicyMode::Plan)).await;
    assert!(started_by(&events).is_empty());
    assert!(!setup.workspace.path().join("b.txt").exists());
}
