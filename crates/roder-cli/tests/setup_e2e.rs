//! A newcomer's first steps through the real binary: `roder config init`
//! writes a starter that `roder config show` loads and prints back (and
//! that print loads to the same settings), never replaces a file without
//! `--force`; `roder doctor` says what works on this machine.

mod support;

use std::path::Path;
use std::process::Output;

/// `roder ARGS` with exactly the key variables `keys` set (to `sk-test-…`).
async fn roder(home: &Path, args: &[&str], keys: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"));
    command
        .args(args)
        .current_dir(home)
        .env("RODER_HOME", home)
        .env_remove("RODER_MODEL");
    for variable in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "OPENROUTER_API_KEY",
        "FAKE_MODEL_KEY",
    ] {
        command.env_remove(variable);
    }
    for variable in keys {
        command.env(variable, format!("sk-test-{variable}"));
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .expect("roder should finish within 60 s")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `config show`'s output without the lines naming the home.
async fn shown(home: &Path, keys: &[&str]) -> String {
    let run = roder(home, &["config", "show"], keys).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    text(&run.stdout)
        .lines()
        .filter(|line| !line.starts_with("# home"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn config_init_writes_a_starter_that_config_show_round_trips() {
    let home = tempfile::tempdir().unwrap();
    let init = roder(home.path(), &["config", "init"], &["OPENAI_API_KEY"]).await;
    assert_eq!(init.status.code(), Some(0), "{}", text(&init.stderr));
    assert!(init.stdout.is_empty());
    assert!(
        text(&init.stderr).contains("providers: openai"),
        "{}",
        text(&init.stderr)
    );
    let written = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(
        !written.contains("sk-test"),
        "no key in the file:\n{written}"
    );
    assert!(written.contains("# [runners.box]") && written.contains("# [mcp_servers.git]"));

    let first = shown(home.path(), &["OPENAI_API_KEY"]).await;
    for line in [
        "model = \"openai/gpt-5\"  # from config.toml",
        "api_key_env = \"OPENAI_API_KEY\"  # set",
        "[sandbox]",
        "mode = \"enforce\"",
        "mechanism = \"landlock\"",
        "network = \"off\"",
    ] {
        assert!(first.lines().any(|shown| shown == line), "{line}:\n{first}");
    }
    assert!(!first.contains("sk-test"), "{first}");
    // What show prints is itself a config that loads to the same settings.
    let again = tempfile::tempdir().unwrap();
    std::fs::write(again.path().join("config.toml"), &first).unwrap();
    assert_eq!(shown(again.path(), &["OPENAI_API_KEY"]).await, first);

    // An existing file is left alone...
    let refused = roder(home.path(), &["config", "init"], &["ANTHROPIC_API_KEY"]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("already exists")
            && text(&refused.stderr).contains("--force"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.toml")).unwrap(),
        written
    );
    // ... unless forced, even when it does not load.
    std::fs::write(home.path().join("config.toml"), "modle = 1\n").unwrap();
    let forced = roder(
        home.path(),
        &["config", "init", "--force"],
        &["ANTHROPIC_API_KEY"],
    )
    .await;
    assert_eq!(forced.status.code(), Some(0), "{}", text(&forced.stderr));
    let replaced = shown(home.path(), &["ANTHROPIC_API_KEY"]).await;
    assert!(
        replaced.contains("model = \"anthropic/claude-sonnet-4-5\"  # from config.toml"),
        "{replaced}"
    );
}

/// `doctor --json`'s parts by name.
fn parts_of(report: &serde_json::Value) -> std::collections::BTreeMap<String, serde_json::Value> {
    report["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|part| (part["part"].as_str().unwrap().to_string(), part.clone()))
        .collect()
}

#[tokio::test]
async fn doctor_reports_each_part_and_how_to_fix_it() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "model = \"fake/m\"\n[providers.fake]\nkind = \"openai-chat\"\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"FAKE_MODEL_KEY\"\n",
    )
    .unwrap();

    let run = roder(home.path(), &["doctor", "--json"], &["FAKE_MODEL_KEY"]).await;
    let report: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}{}", text(&run.stdout), text(&run.stderr)));
    let parts = parts_of(&report);
    let works = |name: &str| {
        let part = &parts[name];
        assert_eq!(part["works"], true, "{name}: {part}");
    };
    works("config");
    works("provider fake");
    assert_eq!(parts["provider fake"]["needed"], true);
    // This machine's sandbox mechanisms, really run: Landlock always (the
    // kernel has it), bubblewrap where .ci/run installed it.
    works("landlock");
    assert_eq!(parts["landlock"]["needed"], true, "the default mechanism");
    if support::installed("bwrap", &["--version"], "apt-get install bubblewrap") {
        works("bubblewrap");
    }
    if roder_ext_runner_docker::daemon_socket_present() {
        works("docker");
    } else if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("no Docker daemon socket; CI runs the docker tests");
    }
    works("git");
    assert_eq!(report["ok"], true, "{report:#}");
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));

    // The default model's key missing: that part fails, with its fix, and
    // doctor exits 1; a provider nobody uses may lack its key.
    let run = roder(home.path(), &["doctor", "--json"], &[]).await;
    assert_eq!(run.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    let parts = parts_of(&report);
    let fake = &parts["provider fake"];
    assert_eq!(fake["works"], false);
    assert!(
        fake["fix"]
            .as_str()
            .unwrap()
            .starts_with("export FAKE_MODEL_KEY="),
        "{fake}"
    );
    assert_eq!(parts["provider anthropic"]["needed"], false);
    assert_eq!(report["ok"], false);

    // A config that does not load is a failing part, not a refusal to look.
    std::fs::write(home.path().join("config.toml"), "modle = 1\n").unwrap();
    let run = roder(home.path(), &["doctor"], &[]).await;
    assert_eq!(run.status.code(), Some(1));
    let table = text(&run.stdout);
    let config = table
        .lines()
        .find(|line| line.split_whitespace().nth(1) == Some("config"))
        .unwrap_or_else(|| panic!("{table}"));
    assert!(
        config.starts_with("FAIL") && config.contains("modle"),
        "{table}"
    );
    assert!(table.contains("roder config init --force"), "{table}");
    assert!(
        table.lines().any(|line| line.starts_with("ok    landlock")),
        "{table}"
    );
}
