//! `roder app-server`: the runtime behind JSON-RPC, on stdio or WebSocket.

use std::process::ExitCode;

use roder_app_server::{WsServerConfig, bind_ws, serve_stdio};

use crate::cli::AppServerArgs;
use crate::config::Settings;
use crate::wiring;

pub async fn run(settings: &Settings, args: AppServerArgs) -> anyhow::Result<ExitCode> {
    let workspace = match &args.workspace {
        Some(path) => path.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = tokio::fs::canonicalize(&workspace)
        .await
        .map_err(|error| anyhow::anyhow!("workspace {}: {error}", workspace.display()))?;
    let wired = wiring::runtime(settings, &workspace, |_| {})?;
    let outcome = match args.listen {
        None => {
            serve_stdio(
                wired.runtime.clone(),
                tokio::io::stdin(),
                tokio::io::stdout(),
            )
            .await
        }
        Some(listen) => {
            let token = match &args.token_env {
                Some(variable) => Some(std::env::var(variable).map_err(|_| {
                    anyhow::anyhow!("--token-env names {variable}, which is not set")
                })?),
                None => None,
            };
            let server = bind_ws(
                wired.runtime.clone(),
                WsServerConfig {
                    listen,
                    token,
                    ..WsServerConfig::default()
                },
            )
            .await?;
            // The one line on stdout: where to connect.
            println!("ws://{}", server.local_addr());
            eprintln!(
                "roder: app server listening on ws://{}",
                server.local_addr()
            );
            server
                .serve_with_shutdown(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await
        }
    };
    wired.shutdown().await;
    outcome.map(|()| ExitCode::SUCCESS)
}
