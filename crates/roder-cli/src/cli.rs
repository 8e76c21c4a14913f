//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// `roder --version`: the package version and the git commit the binary
/// was built from (`unknown` when built outside a git checkout; see
/// `build.rs`).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RODER_GIT_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(name = "roder", version = VERSION, about = "An agent runtime for coding agents")]
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
    Exec(ExecCommand),
    /// Serve the runtime over JSON-RPC: stdio by default, WebSocket with --listen.
    AppServer(AppServerArgs),
    /// Saved threads.
    Threads {
        #[command(subcommand)]
        command: ThreadsCommand,
    },
    /// Runner sandboxes.
    Runners {
        #[command(subcommand)]
        command: RunnersCommand,
    },
    /// Remove what no live thread of this home needs: checkpoints past
    /// `[checkpoints] keep_turns`, copies of deleted threads, containers
    /// whose thread is gone. Never another home's.
    Gc(CollectArgs),
    /// The sandbox policy and what enforces it here.
    Sandbox {
        #[command(subcommand)]
        command: SandboxCommand,
    },
    /// Serve Roder as an MCP server on stdio: tools that run a task in a
    /// workspace and continue a thread.
    McpServer(McpServerArgs),
    /// Agent profiles: list, show, pack archives.
    Profiles {
        #[command(subcommand)]
        command: ProfilesCommand,
    },
    /// Serve Roder as an Agent Client Protocol agent on stdio, for editors
    /// (Zed, JetBrains IDEs, ...): one session per thread, approvals asked
    /// in the editor.
    Acp(AcpArgs),
    /// The effective configuration, or a starter config.toml.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Whether each part Roder needs works on this machine (model keys,
    /// Docker, the sandbox mechanisms, git), and how to fix what does not.
    Doctor {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// A shell completion script on stdout, e.g.
    /// `roder completions bash > ~/.local/share/bash-completion/completions/roder`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

#[derive(Debug, Args)]
pub struct ExecCommand {
    #[command(flatten)]
    pub args: ExecArgs,
    /// Work in a fresh git worktree of the repository holding the workspace
    /// (the user's checkout is untouched); its path is printed on stderr.
    #[arg(long, conflicts_with_all = ["thread", "runner"])]
    pub worktree: bool,
}

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// What the agent should do; `-` reads it from standard input (it then
    /// stays out of the process's arguments, where `ps` and `pkill -f` see).
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
    /// Which calls run without asking: plan, default, accept_edits or
    /// bypass (default: bypass, a non-interactive run). In default and
    /// accept_edits, with a terminal on stdin and stderr, a call that needs
    /// approval is asked there (one key per decision); without one,
    /// `[approvals] no_approver` decides.
    #[arg(long, value_parser = parse_mode)]
    pub mode: Option<roder_api::policy_mode::PolicyMode>,
    #[command(flatten)]
    pub profile: ProfileArgs,
}

/// Which agent profile a new thread runs as (`roder exec`, `roder profiles
/// show`).
#[derive(Debug, Clone, Default, Args)]
pub struct ProfileArgs {
    /// The profile: builtin:NAME, a name from the archive, the workspace's
    /// .roder/profiles or $RODER_HOME/profiles, or a path (default:
    /// default_profile in config.toml, else none).
    #[arg(long = "profile")]
    pub selector: Option<String>,
    /// A profile archive to look the name up in first: an http(s) URL, or
    /// a local .tar file (embedded), with its digest and size.
    #[arg(long = "profile-archive", requires_all = ["digest", "size"])]
    pub archive: Option<String>,
    /// The archive's digest, sha256:HEX.
    #[arg(long = "profile-digest", id = "digest", requires = "archive")]
    pub digest: Option<String>,
    /// The archive's size in bytes.
    #[arg(long = "profile-size", id = "size", requires = "archive")]
    pub size: Option<u64>,
    /// The archive's id (its roder-bundle.toml id; default: read from the
    /// archive).
    #[arg(long = "profile-archive-id", requires = "archive")]
    pub archive_id: Option<String>,
}

/// `roder profiles ...`.
#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// Every profile a bare name can reach, in lookup order, and what
    /// shadows what.
    List {
        /// The workspace whose .roder/profiles is read (default: the
        /// current directory).
        #[arg(long, short = 'C')]
        workspace: Option<PathBuf>,
    },
    /// A profile's fields; with --resolved, after extends, each with the
    /// place it came from.
    Show {
        /// The selector (same as --profile).
        #[arg(conflicts_with = "selector")]
        name: Option<String>,
        #[command(flatten)]
        profile: ProfileArgs,
        #[arg(long)]
        resolved: bool,
        #[arg(long, short = 'C')]
        workspace: Option<PathBuf>,
    },
    /// Packs DIR (with roder-bundle.toml at its root) into a profile
    /// archive and prints its reference.
    Pack {
        dir: PathBuf,
        /// Where to write the archive (default: ID.tar in the current
        /// directory).
        #[arg(long, short = 'o')]
        out: Option<PathBuf>,
    },
}

fn parse_mode(text: &str) -> Result<roder_api::policy_mode::PolicyMode, String> {
    text.parse()
}

#[derive(Debug, Args)]
pub struct AppServerArgs {
    /// Listen for WebSocket clients here (HOST:PORT: 127.0.0.1:0, localhost:0,
    /// [::1]:8080; port 0 picks one and prints the address) instead of
    /// serving stdio. A host name is resolved once, now.
    #[arg(long, value_parser = roder_app_server::resolve_listen_address)]
    pub listen: Option<std::net::SocketAddr>,
    /// Environment variable holding the bearer token clients must present;
    /// required to listen on a non-loopback address.
    #[arg(long)]
    pub token_env: Option<String>,
    /// The local workspace of threads started without one.
    #[arg(long, short = 'C')]
    pub workspace: Option<PathBuf>,
    /// The thread store, over config.toml's `store`: "jsonl" or a
    /// postgres:// URL shared by replicas.
    #[arg(long)]
    pub store: Option<String>,
    /// Seconds a thread may go without an event before its sandbox is
    /// released by its destination's `on_idle` (paused by default; its next
    /// turn resumes it). 0 never releases one before the server stops.
    #[arg(long, default_value_t = 600)]
    pub idle_timeout: u64,
}

#[derive(Debug, Args)]
pub struct McpServerArgs {
    /// The workspace of tasks that name none.
    #[arg(long, short = 'C')]
    pub workspace: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct AcpArgs {
    /// Run each new session's tools in the runner named in config
    /// ([runners.NAME], e.g. a docker sandbox).
    #[arg(long, conflicts_with = "worktree")]
    pub runner: Option<String>,
    /// Give each new session a fresh git worktree of the repository holding
    /// its directory (the editor's checkout is untouched).
    #[arg(long)]
    pub worktree: bool,
    /// Each new session's thread runs as this profile (resolved in the
    /// session's directory; default: default_profile in config.toml).
    #[command(flatten)]
    pub profile: ProfileArgs,
}

#[derive(Debug, Subcommand)]
pub enum ThreadsCommand {
    /// Every saved thread, most recent first.
    List,
    /// One thread's conversation.
    Show { thread_id: String },
    /// Delete a thread (its worktree, if any, is kept; see `roder runners gc`
    /// for its sandbox).
    Delete { thread_id: String },
    /// A thread as a document for other tools, on stdout: `atif`, the
    /// Agent Trajectory Interchange Format (Harbor's `trajectory.json`).
    Export {
        thread_id: String,
        #[arg(long, value_enum, default_value_t = ExportFormat::Atif)]
        format: ExportFormat,
    },
    /// Compact a thread now: the model summarizes its older history (or old
    /// tool outputs are pruned); the full history stays in the log.
    Compact { thread_id: String },
    /// Put a thread back to the end of turn N: its workspace is restored
    /// from the checkpoint taken when turn N+1 started, and later turns
    /// leave out the undone ones (the log keeps them).
    Rollback {
        thread_id: String,
        #[arg(long)]
        turn: u32,
    },
    /// A new thread with this one's conversation up to turn N (default: now)
    /// and a copy of its workspace there; prints the new thread's id.
    Fork {
        thread_id: String,
        #[arg(long)]
        turn: Option<u32>,
    },
}

/// What `roder threads export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// ATIF-v1.7 JSON: steps, tool calls with their observations,
    /// reasoning, per-step and final token metrics.
    Atif,
}

#[derive(Debug, Subcommand)]
pub enum RunnersCommand {
    /// This home's docker sandboxes: each container, its state (running,
    /// paused, ...) and its thread.
    List,
    /// Remove this home's docker containers whose thread no longer exists
    /// (never another home's); lists what it removed and what it kept.
    Gc(GcArgs),
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Also remove containers without a home label (made before home ids)
    /// whose thread is not in this home. Only safe when no other Roder home
    /// uses this Docker daemon.
    #[arg(long)]
    pub include_unlabelled: bool,
}

#[derive(Debug, Args)]
pub struct CollectArgs {
    /// List what would be removed and the bytes it frees; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Keep the checkpoints of each thread's last N turns (default:
    /// `[checkpoints] keep_turns`, else 10).
    #[arg(long, value_name = "N")]
    pub keep_turns: Option<usize>,
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Per backend: which protections of the policy are active on this
    /// machine, which are not, and why.
    Status {
        /// One JSON object instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the configuration in force (never secrets).
    Show,
    /// Write a commented starter config.toml: providers for the API keys
    /// in the environment, the default model, the sandbox defaults.
    Init {
        /// Replace an existing config.toml.
        #[arg(long)]
        force: bool,
    },
}
