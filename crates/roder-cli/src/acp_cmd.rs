//! `roder acp`: Roder as an Agent Client Protocol agent on stdio, for
//! editors (see `crates/roder-acp`). Only protocol messages go to stdout;
//! logs go to stderr. The editor closing stdin ends it: running turns are
//! interrupted and saved. SIGINT, SIGTERM and SIGHUP do the same.

use std::process::ExitCode;

use roder_acp::AcpOptions;

use crate::cli::AcpArgs;
use crate::config::Settings;
use crate::exec::StopSignals;
use crate::wiring;

pub async fn run(settings: &Settings, args: AcpArgs) -> anyhow::Result<ExitCode> {
    let mut signals = StopSignals::register()?;
    // Sessions bring their own directory; this one roots nothing but the
    // tools of a thread without one.
    let workspace = std::env::current_dir()?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let runner = match &args.runner {
        Some(name) => Some(crate::exec::runner_selection(settings, name)?),
        None => None,
    };
    let profile = crate::profiles_cmd::request(settings, &args.profile)
        .await?
        .map(|request| request.to_spec());
    // What the profile option offers: builtins, $RODER_HOME/profiles and
    // the .roder/profiles of the directory `roder acp` starts in.
    let listing = crate::profiles_cmd::resolver(settings, Some(&workspace));
    let profiles = tokio::task::spawn_blocking(move || listing.list())
        .await??
        .into_iter()
        .filter(|listed| listed.shadowed_by.is_none())
        .map(|listed| listed.selector)
        .collect();
    let options = AcpOptions {
        runner,
        profile,
        profiles,
        worktree: args.worktree,
        models: vec![format!(
            "{}/{}",
            settings.model.provider, settings.model.model
        )],
        context_window: settings
            .providers
            .get(&settings.model.provider)
            .and_then(|provider| provider.context_window),
        ..AcpOptions::default()
    };
    let outcome = tokio::select! {
        served = roder_acp::serve_stdio(
            wired.runtime.clone(),
            tokio::io::stdin(),
            crate::stdout::tokio(),
            options,
        ) => served,
        signal = signals.recv() => {
            eprintln!("roder: {}: interrupting running turns", signal.name());
            for (thread_id, turn_id) in wired.runtime.running_turns() {
                if let Err(error) = wired.runtime.interrupt_turn(&thread_id, &turn_id).await {
                    tracing::debug!("interrupting turn {turn_id} of {thread_id}: {error:#}");
                }
            }
            wired.shutdown().await;
            // stdin is read on a blocking thread the runtime's shutdown
            // would wait on until the editor closes it.
            std::process::exit(0);
        }
    };
    wired.shutdown().await;
    outcome.map(|()| ExitCode::SUCCESS)
}
