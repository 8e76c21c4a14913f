//! `roder`: run a coding agent from the command line, inspect saved threads,
//! or serve the runtime to other programs.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// Stdout goes through `stdout.rs`, which handles a reader that went away.
#![deny(clippy::print_stdout)]

mod acp_cmd;
mod app_server_cmd;
mod cli;
mod config;
mod doctor;
mod exec;
mod export_cmd;
mod gc_cmd;
mod home_id;
mod mcp_server_cmd;
mod mcp_tools;
mod preflight;
mod profiles_cmd;
mod progress;
mod prompt_input;
mod protection_reports;
mod rewind_cmd;
mod runners_cmd;
mod sandbox_cmd;
mod stdout;
mod telemetry;
mod terminal_approver;
mod threads_cmd;
mod wiring;
mod worktree_exec;

#[cfg(test)]
#[path = "../build/git_commit.rs"]
mod git_commit;

use std::process::ExitCode;

use clap::{CommandFactory as _, Parser};

use crate::cli::{
    Cli, Command, ConfigCommand, GlobalArgs, RunnersCommand, SandboxCommand, ThreadsCommand,
};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Usage errors, and --help and --version (on stdout).
        Err(error) => {
            if error
                .print()
                .is_err_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
            {
                stdout::exit_as_sigpipe();
            }
            return ExitCode::from(u8::try_from(error.exit_code()).unwrap_or(2));
        }
    };
    let outcome = match cli.command {
        // These work whatever config.toml says, or when it does not load.
        Command::Completions { shell } => {
            init_logging(None);
            completions(shell)
        }
        Command::Config {
            command: ConfigCommand::Init { force },
        } => {
            init_logging(None);
            config::Settings::home(&cli.global).and_then(|home| config::starter::init(&home, force))
        }
        Command::Doctor { json } => {
            init_logging(None);
            let loaded = config::Settings::load(&cli.global);
            config::Settings::home(&cli.global)
                .and_then(|home| block_on(new_runtime()?, doctor::run(&home, loaded, json)))
        }
        command => with_settings(command, &cli.global),
    };
    stdout::exit_if_closed();
    match outcome {
        Ok(code) => code,
        Err(error) => {
            eprintln!("roder: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Loads the settings (before the async runtime starts: plain blocking file
/// I/O), then runs `command`. A config file that does not parse is exit
/// code 2; a bad model label, like every other failure, 1.
fn with_settings(command: Command, global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    match config::Settings::load(global) {
        Ok(settings) => {
            let runtime = new_runtime()?;
            // Export first (in the runtime's context: gRPC needs it), so
            // its layer is part of the subscriber logging installs.
            let telemetry = {
                let _context = runtime.enter();
                telemetry::start(settings.telemetry.clone())
            };
            match telemetry {
                Ok(telemetry) => {
                    init_logging(telemetry.as_ref().map(telemetry::layer));
                    block_on(runtime, async {
                        let outcome = run(command, settings).await;
                        telemetry::stop(telemetry).await;
                        outcome
                    })
                }
                Err(error) => {
                    init_logging(None);
                    Err(error)
                }
            }
        }
        Err(error) => {
            init_logging(None);
            eprintln!("roder: {error:#}");
            let code = if error.is::<config::ModelError>() {
                1
            } else {
                2
            };
            Ok(ExitCode::from(code))
        }
    }
}

fn new_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| anyhow::anyhow!("could not start the async runtime: {error}"))
}

fn block_on(
    runtime: tokio::runtime::Runtime,
    command: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    let outcome = runtime.block_on(command);
    // Before the runtime's drop, which would wait for a blocking read of
    // stdin (the stdio servers') that only the client can end.
    stdout::exit_if_closed();
    outcome
}

/// `roder completions SHELL`: generated into memory first, since the
/// generator panics on a failed write.
fn completions(shell: clap_complete::Shell) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "roder", &mut script);
    stdout::print(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

async fn run(command: Command, settings: config::Settings) -> anyhow::Result<ExitCode> {
    match command {
        Command::Exec(exec) if exec.worktree => worktree_exec::run(&settings, exec.args).await,
        Command::Exec(exec) => exec::run(&settings, exec.args).await,
        Command::AppServer(args) => app_server_cmd::run(&settings, args).await,
        Command::McpServer(args) => mcp_server_cmd::run(&settings, args).await,
        Command::Acp(args) => acp_cmd::run(&settings, args).await,
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
            command: ThreadsCommand::Export { thread_id, format },
        } => export_cmd::export(&settings, &thread_id, format).await,
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
        Command::Gc(args) => gc_cmd::run(&settings, &args).await,
        Command::Sandbox {
            command: SandboxCommand::Status { json },
        } => sandbox_cmd::status(&settings, json),
        Command::Profiles { command } => profiles_cmd::run(&settings, command).await,
        Command::Config {
            command: ConfigCommand::Show,
        } => {
            stdout::print(&settings.show())?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Config {
            command: ConfigCommand::Init { .. },
        }
        | Command::Doctor { .. }
        | Command::Completions { .. } => {
            anyhow::bail!("this command runs before the settings load (see main)")
        }
    }
}

/// Logs go to stderr, quiet unless `RUST_LOG` asks; coloured by clap's
/// rule for stderr (a terminal, unless `NO_COLOR` is set or `CLICOLOR=0`;
/// `CLICOLOR_FORCE` forces colour), so help, errors and logs agree.
fn init_logging(
    export: Option<Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>>,
) {
    use tracing_subscriber::Layer as _;
    // The OpenTelemetry SDK's own logs are left out: an unreachable
    // collector is reported once, by roder-ext-telemetry.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(
            "warn,opentelemetry=off,opentelemetry_sdk=off,opentelemetry_otlp=off",
        )
    });
    let colour = anstream::AutoStream::choice(&std::io::stderr()) != anstream::ColorChoice::Never;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_filter(filter);
    let _ = tracing_subscriber::registry()
        .with(export)
        .with(logs)
        .try_init();
}
