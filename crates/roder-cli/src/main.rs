//! `roder`: run a coding agent from the command line, inspect saved threads,
//! or serve the runtime to other programs.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

mod app_server_cmd;
mod cli;
mod config;
mod exec;
mod home_id;
mod mcp_server_cmd;
mod mcp_tools;
mod progress;
mod protection_reports;
mod rewind_cmd;
mod runners_cmd;
mod sandbox_cmd;
mod terminal_approver;
mod threads_cmd;
mod wiring;
mod worktree_exec;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, ConfigCommand, RunnersCommand, SandboxCommand, ThreadsCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    // Read before the async runtime starts: plain blocking file I/O.
    let settings = match config::Settings::load(&cli.global) {
        Ok(settings) => settings,
        Err(error) => {
            eprintln!("roder: {error:#}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("roder: could not start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command, settings)) {
        Ok(code) => code,
        Err(error) => {
            eprintln!("roder: {error:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(command: Command, settings: config::Settings) -> anyhow::Result<ExitCode> {
    match command {
        Command::Exec(exec) if exec.worktree => worktree_exec::run(&settings, exec.args).await,
        Command::Exec(exec) => exec::run(&settings, exec.args).await,
        Command::AppServer(args) => app_server_cmd::run(&settings, args).await,
        Command::McpServer(args) => mcp_server_cmd::run(&settings, args).await,
        Command::Threads {
            command: ThreadsCommand::List,
        } => threads_cmd::list(&settings).await,
        Command::Threads {
            command: ThreadsCommand::Show { thread_id },
        } => threads_cmd::show(&settings, &thread_id).await,
        Command::Threads {
            command: ThreadsCommand::Delete { thread_id },
        } => threads_cmd::delete(&settings, &thread_id).await,
        Command::Threads {
            command: ThreadsCommand::Compact { thread_id },
        } => threads_cmd::compact(&settings, &thread_id).await,
        Command::Threads {
            command: ThreadsCommand::Rollback { thread_id, turn },
        } => rewind_cmd::rollback(&settings, &thread_id, turn).await,
        Command::Threads {
            command: ThreadsCommand::Fork { thread_id, turn },
        } => rewind_cmd::fork(&settings, &thread_id, turn).await,
        Command::Runners {
            command: RunnersCommand::Gc(args),
        } => runners_cmd::gc(&settings, &args).await,
        Command::Runners {
            command: RunnersCommand::List,
        } => runners_cmd::list(&settings).await,
        Command::Sandbox {
            command: SandboxCommand::Status { json },
        } => sandbox_cmd::status(&settings, json),
        Command::Config {
            command: ConfigCommand::Show,
        } => {
            print!("{}", settings.show());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Logs go to stderr, quiet unless `RUST_LOG` asks.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
