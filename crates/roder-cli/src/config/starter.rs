//! `roder config init`: a commented starter `config.toml`, so a newcomer is
//! set up in one step. It holds a provider table for each API key found in
//! the environment (the others commented out), the default model of the
//! first of them, the sandbox section with its defaults, and commented
//! examples of a local server, a docker runner and an MCP server. An
//! existing file is never replaced without `--force`.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

/// A provider whose API key variable `config init` looks for.
struct Known {
    name: &'static str,
    variable: &'static str,
    table: &'static str,
    /// The model of `model = "NAME/MODEL"` when this is the first key found.
    model: &'static str,
}

/// In order of preference for the default model.
const KNOWN: &[Known] = &[
    Known {
        name: "openai",
        variable: "OPENAI_API_KEY",
        table: "kind = \"openai-responses\"\napi_key_env = \"OPENAI_API_KEY\"\n",
        model: "gpt-5",
    },
    Known {
        name: "anthropic",
        variable: "ANTHROPIC_API_KEY",
        table: "kind = \"anthropic\"\napi_key_env = \"ANTHROPIC_API_KEY\"\n",
        model: "claude-sonnet-4-5",
    },
    Known {
        name: "openrouter",
        variable: "OPENROUTER_API_KEY",
        table: "kind = \"openai-chat\"\nbase_url = \"https://openrouter.ai/api/v1\"\napi_key_env = \"OPENROUTER_API_KEY\"\n",
        model: "openai/gpt-5",
    },
];

const HEADER: &str = "\
# Roder's configuration, written by `roder config init`.
# `roder config show` prints what is in force; `roder doctor` checks that it
# works on this machine. API keys never go in this file: a provider names the
# environment variable that holds its key.
";

const OPTIONS: &str = "\
# reasoning_effort = \"medium\"        # minimal, low, medium or high
# auto_compact_token_limit = 100000  # compact a thread's context past this many tokens
";

const LOCAL_EXAMPLE: &str = "\
[providers.local]
kind = \"openai-chat\"
base_url = \"http://127.0.0.1:11434/v1\"
";

const SANDBOX: &str = "
# How commands are confined: these are the defaults.
[sandbox]
mode = \"enforce\"        # \"none\" runs commands unconfined (an explicit opt-out)
mechanism = \"landlock\"  # or \"bubblewrap\" (Debian's bubblewrap): no network at all, its own process tree, read-only .git/hooks
network = \"off\"         # \"on\" lets commands reach the network
writable_roots = []     # absolute paths commands may write besides the workspace and a private TMPDIR
# env = { pass = [\"CARGO_HOME\"], set = { RUST_BACKTRACE = \"1\" } }  # besides PATH, HOME, LANG, TERM; never a key
# limits = { output_bytes = 1048576, max_processes = 256, memory_mib = 2048, cpus = 2.0 }  # docker enforces all of them, host commands only output_bytes
";

const RUNNER_EXAMPLE: &str = "\
[runners.box]
provider = \"docker\"
config = { image = \"roder-sandbox:latest\" }
";

const MCP_EXAMPLE: &str = "\
[mcp_servers.git]
command = \"mcp-server-git\"
args = [\"--repository\", \".\"]
";

fn commented(block: &str) -> String {
    block.lines().map(|line| format!("# {line}\n")).collect()
}

/// The starter file when the variables `is_set` says are set hold keys,
/// and the names of the providers it configures.
fn starter(is_set: impl Fn(&str) -> bool) -> (String, Vec<&'static str>) {
    let found: Vec<&Known> = KNOWN
        .iter()
        .filter(|known| is_set(known.variable))
        .collect();
    let mut text = HEADER.to_string();
    text.push_str(
        "\n# The model new threads use, as provider/model (RODER_MODEL and --model override it).\n",
    );
    match found.first() {
        Some(first) => text.push_str(&format!("model = \"{}/{}\"\n", first.name, first.model)),
        None => {
            let variables: Vec<&str> = KNOWN.iter().map(|known| known.variable).collect();
            text.push_str(&format!(
                "# No API key was found in the environment ({}): export one and run\n# `roder config init --force`, or use a local server (below).\nmodel = \"openai/gpt-5\"\n",
                variables.join(", ")
            ));
        }
    }
    text.push_str(OPTIONS);
    for known in KNOWN {
        let table = format!("[providers.{}]\n{}", known.name, known.table);
        if found.iter().any(|found| found.name == known.name) {
            text.push_str(&format!("\n# {} is set.\n{table}", known.variable));
        } else {
            text.push_str(&format!(
                "\n# {} is not set: export it and uncomment this table to use {}.\n{}",
                known.variable,
                known.name,
                commented(&table)
            ));
        }
    }
    text.push_str("\n# A local OpenAI-compatible server (Ollama, vLLM, llama.cpp's server) needs no key;\n# select it with model = \"local/MODEL\".\n");
    text.push_str(&commented(LOCAL_EXAMPLE));
    text.push_str(SANDBOX);
    text.push_str("\n# A runner: `roder exec --runner box` runs the tools in a Docker container\n# (scripts/build-sandbox-image.sh builds the image).\n");
    text.push_str(&commented(RUNNER_EXAMPLE));
    text.push_str("\n# An MCP server whose tools the model gets (as mcp__git__TOOL).\n");
    text.push_str(&commented(MCP_EXAMPLE));
    (text, found.iter().map(|known| known.name).collect())
}

/// Writes `home/config.toml`; refuses to replace one unless `force`.
pub fn init(home: &Path, force: bool) -> anyhow::Result<ExitCode> {
    let path = home.join("config.toml");
    let (text, providers) =
        starter(|variable| std::env::var(variable).is_ok_and(|key| !key.trim().is_empty()));
    std::fs::create_dir_all(home)
        .map_err(|error| anyhow::anyhow!("cannot create {}: {error}", home.display()))?;
    if force {
        // A whole file or none: written beside it, then renamed over it.
        let temporary = home.join(".config.toml.new");
        std::fs::write(&temporary, &text)
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
    } else {
        // `create_new`: an existing file (even one created a moment ago by
        // someone else) is refused, never truncated.
        let created = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path);
        let mut file = match created {
            Ok(file) => file,
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                eprintln!(
                    "roder: {} already exists and was left as it is; edit it, or pass --force to replace it with a starter",
                    path.display()
                );
                return Ok(ExitCode::FAILURE);
            }
            Err(error) => anyhow::bail!("cannot create {}: {error}", path.display()),
        };
        file.write_all(text.as_bytes())
            .map_err(|error| anyhow::anyhow!("cannot write {}: {error}", path.display()))?;
    }
    let configured = if providers.is_empty() {
        "no API key found in the environment".to_string()
    } else {
        format!("providers: {}", providers.join(", "))
    };
    eprintln!(
        "roder: wrote {} ({configured}); `roder config show` prints it, `roder doctor` checks this machine",
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::super::file::{ConfigFile, ProviderKind};
    use super::*;

    #[test]
    fn providers_follow_the_keys_in_the_environment() {
        let (text, providers) = starter(|variable| variable == "ANTHROPIC_API_KEY");
        assert_eq!(providers, vec!["anthropic"]);
        let file = ConfigFile::parse(&text).unwrap();
        assert_eq!(file.model.as_deref(), Some("anthropic/claude-sonnet-4-5"));
        assert_eq!(file.providers.keys().collect::<Vec<_>>(), vec!["anthropic"]);
        assert_eq!(file.providers["anthropic"].kind, ProviderKind::Anthropic);
        assert_eq!(file.sandbox, Some(Default::default()));
        assert!(file.runners.is_empty() && file.mcp_servers.is_empty());
        assert!(text.contains("# OPENAI_API_KEY is not set"), "{text}");

        let (text, providers) = starter(|_| true);
        assert_eq!(providers, vec!["openai", "anthropic", "openrouter"]);
        let file = ConfigFile::parse(&text).unwrap();
        assert_eq!(file.model.as_deref(), Some("openai/gpt-5"));
        assert_eq!(
            file.providers["openrouter"].api_key_env.as_deref(),
            Some("OPENROUTER_API_KEY")
        );

        let (text, providers) = starter(|_| false);
        assert!(providers.is_empty());
        let file = ConfigFile::parse(&text).unwrap();
        assert_eq!(file.model.as_deref(), Some("openai/gpt-5"));
        assert!(file.providers.is_empty());
        assert!(text.contains("No API key was found"), "{text}");
    }

    #[test]
    fn the_commented_examples_parse_once_uncommented() {
        let examples = format!("{LOCAL_EXAMPLE}{RUNNER_EXAMPLE}{MCP_EXAMPLE}");
        let file = ConfigFile::parse(&examples).unwrap();
        assert_eq!(file.runners["box"].provider, "docker");
        assert_eq!(
            super::super::mcp_servers::servers(&file.mcp_servers)
                .unwrap()
                .len(),
            1
        );
        let (text, _) = starter(|_| false);
        for example in [LOCAL_EXAMPLE, RUNNER_EXAMPLE, MCP_EXAMPLE] {
            assert!(text.contains(&commented(example)), "{text}");
        }
    }
}
