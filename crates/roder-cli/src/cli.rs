//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "roder", version, about = "An agent runtime for coding agents")]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Roder's home: config.toml, threads/, worktrees/.
    #[arg(long, global = true, env = "RODER_HOME")]
    pub home: Option<PathBuf>,
    /// The model as provider/model (overrides RODER_MODEL and the config file).
    #[arg(long, global = true)]
    pub model: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one non-interactive turn: progress on stderr, the answer on stdout.
    Exec(ExecArgs),
    /// Saved threads.
    Threads {
        #[command(subcommand)]
        command: ThreadsCommand,
    },
    /// The effective configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// What the agent should do.
    pub prompt: String,
    /// The workspace the agent works in (default: the current directory).
    #[arg(long, short = 'C')]
    pub workspace: Option<PathBuf>,
    /// Continue a saved thread instead of starting a new one.
    #[arg(long)]
    pub thread: Option<String>,
    /// Run the tools in the runner named in config ([runners.NAME]).
    #[arg(long)]
    pub runner: Option<String>,
    /// Print every event as a JSON line on stdout instead of progress.
    #[arg(long)]
    pub json: bool,
    /// Stop the turn after this many seconds.
    #[arg(long)]
    pub deadline: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// Every saved thread, most recent first.
    List,
    /// One thread's conversation.
    Show { thread_id: String },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the configuration in force (never secrets).
    Show,
}
