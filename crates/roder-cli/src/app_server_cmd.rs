//! `roder app-server`: the runtime behind JSON-RPC, on stdio or WebSocket.
//!
//! SIGINT, SIGTERM and SIGHUP shut it down cleanly: every turn running in
//! this process is interrupted (its commands killed, its log closed with
//! `TurnInterrupted`), then the server stops and the process exits 0.

use std::collections::HashSet;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use roder_api::events::RoderEvent;
use roder_app_server::{
    ConnectionLimits, WsServerConfig, bind_ws_following, serve_stdio_following,
};
use roder_core::Runtime;
use tokio::sync::broadcast::error::RecvError;

use crate::cli::AppServerArgs;
use crate::config::Settings;
use crate::exec::StopSignals;
use crate::wiring;

pub async fn run(settings: &Settings, args: AppServerArgs) -> anyhow::Result<ExitCode> {
    let mut signals = StopSignals::register()?;
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    let settings = &crate::config::store::with_flag(settings, args.store.as_deref())?;
    crate::config::store::prepare(settings).await?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let follow = crate::config::store::follow_source(settings)?;
    let turns = TurnTracker::start(&wired.runtime);
    let idle_release = (args.idle_timeout > 0).then(|| {
        wired
            .runtime
            .spawn_idle_release(std::time::Duration::from_secs(args.idle_timeout))
    });
    let stop = {
        let runtime = wired.runtime.clone();
        async move {
            let signal = signals.recv().await;
            eprintln!(
                "roder: {}: interrupting running turns and shutting down",
                signal.name()
            );
            turns.interrupt_all(&runtime).await;
        }
    };
    let outcome = match args.listen {
        None => {
            tokio::select! {
                served = serve_stdio_following(
                    wired.runtime.clone(),
                    tokio::io::stdin(),
                    crate::stdout::tokio(),
                    ConnectionLimits::default(),
                    follow,
                ) => served,
                () = stop => {
                    // tokio reads stdin on a blocking thread that the
                    // runtime's shutdown would wait on until the client
                    // closes stdin; the turns are interrupted and saved, so
                    // leave now.
                    wired.shutdown().await;
                    std::process::exit(0);
                }
            }
        }
        Some(listen) => {
            let token = match &args.token_env {
                Some(variable) => Some(std::env::var(variable).map_err(|_| {
                    anyhow::anyhow!("--token-env names {variable}, which is not set")
                })?),
                None => None,
            };
            let server = bind_ws_following(
                wired.runtime.clone(),
                WsServerConfig {
                    listen,
                    token,
                    ..WsServerConfig::default()
                },
                follow,
            )
            .await?;
            // The one line on stdout: where to connect.
            crate::outln!("ws://{}", server.local_addr())?;
            eprintln!(
                "roder: app server listening on ws://{}, its web page at http://{}/",
                server.local_addr(),
                server.local_addr()
            );
            server.serve_with_shutdown(stop).await
        }
    };
    if let Some(idle_release) = idle_release {
        idle_release.abort();
    }
    wired.shutdown().await;
    outcome.map(|()| ExitCode::SUCCESS)
}

/// The threads that started a turn in this process, from the event bus, so
/// shutdown interrupts running turns without loading every thread's log.
#[derive(Clone, Default)]
struct TurnTracker {
    threads: Arc<Mutex<HashSet<String>>>,
    /// Set when the bus dropped events: then every thread is checked.
    lagged: Arc<std::sync::atomic::AtomicBool>,
}

impl TurnTracker {
    fn start(runtime: &Runtime) -> Self {
        let tracker = Self::default();
        let mut events = runtime.subscribe_events();
        let recorder = tracker.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(envelope) => {
                        if let RoderEvent::TurnStarted(started) = &envelope.event {
                            recorder
                                .threads
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .insert(started.thread_id.clone());
                        }
                    }
                    Err(RecvError::Lagged(_)) => recorder
                        .lagged
                        .store(true, std::sync::atomic::Ordering::SeqCst),
                    Err(RecvError::Closed) => return,
                }
            }
        });
        tracker
    }

    /// Interrupts every running turn and waits until each has ended.
    async fn interrupt_all(&self, runtime: &Arc<Runtime>) {
        let mut threads: Vec<String> = self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .cloned()
            .collect();
        if self.lagged.load(std::sync::atomic::Ordering::SeqCst) {
            match runtime.list_threads().await {
                Ok(all) => threads.extend(all.into_iter().map(|thread| thread.thread_id)),
                Err(error) => tracing::warn!("could not list threads to interrupt: {error:#}"),
            }
        }
        let mut interrupts = tokio::task::JoinSet::new();
        for thread_id in threads {
            let runtime = runtime.clone();
            interrupts.spawn(async move {
                let Ok(Some(turn_id)) = runtime.running_turn(&thread_id).await else {
                    return;
                };
                if let Err(error) = runtime.interrupt_turn(&thread_id, &turn_id).await {
                    // It may have ended on its own meanwhile.
                    tracing::debug!("interrupting turn {turn_id} of {thread_id}: {error:#}");
                }
            });
        }
        while interrupts.join_next().await.is_some() {}
    }
}
