//! `roder` in a shell: completion scripts for bash, zsh and fish (bash's
//! really completes), `--version` naming the git commit of the build, and
//! `NO_COLOR` honoured by help, usage errors and logs alike.

use std::process::Output;

async fn roder(args: &[&str], env: &[(&str, &str)]) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_roder"));
    command
        .args(args)
        .current_dir(home.path())
        .env("RODER_HOME", home.path())
        .env_remove("RODER_MODEL")
        .env_remove("NO_COLOR")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .env_remove("RUST_LOG");
    for (name, value) in env {
        command.env(name, value);
    }
    tokio::time::timeout(std::time::Duration::from_secs(60), command.output())
        .await
        .expect("roder should finish within 60 s")
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SUBCOMMANDS: [&str; 10] = [
    "exec",
    "app-server",
    "threads",
    "runners",
    "sandbox",
    "mcp-server",
    "config",
    "doctor",
    "completions",
    "help",
];

#[tokio::test]
async fn completions_are_generated_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _roder"),
        ("zsh", "#compdef roder"),
        ("fish", "complete -c roder"),
    ] {
        let run = roder(&["completions", shell], &[]).await;
        assert_eq!(run.status.code(), Some(0), "{shell}: {}", text(&run.stderr));
        let script = text(&run.stdout);
        assert!(script.contains(marker), "{shell}:\n{script}");
        for subcommand in SUBCOMMANDS {
            assert!(script.contains(subcommand), "{shell} lacks {subcommand}");
        }
    }
    let unknown = roder(&["completions", "tcsh"], &[]).await;
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("tcsh"));

    // bash, the shell every machine here has, runs the script and
    // completes with it.
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        script.path(),
        roder(&["completions", "bash"], &[]).await.stdout,
    )
    .unwrap();
    let completed = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(roder th); COMP_CWORD=1; _roder roder th roder; printf '%s\\n' \"${{COMPREPLY[@]}}\"; \
             COMP_WORDS=(roder completions ''); COMP_CWORD=2; _roder roder '' completions; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.path().display()
        ))
        .output()
        .unwrap();
    let words = text(&completed.stdout);
    assert!(completed.status.success(), "{}", text(&completed.stderr));
    assert!(words.lines().any(|word| word == "threads"), "{words}");
    assert!(
        ["bash", "zsh", "fish"]
            .iter()
            .all(|shell| words.lines().any(|word| word == *shell)),
        "{words}"
    );
}

#[tokio::test]
async fn version_names_the_commit_of_the_build() {
    let run = roder(&["--version"], &[]).await;
    assert_eq!(run.status.code(), Some(0));
    // What build.rs read; outside a git checkout (a tarball) it says so.
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map_or("unknown".to_string(), |output| {
            text(&output.stdout).trim().to_string()
        });
    assert_eq!(
        text(&run.stdout),
        format!("roder {} (commit {head})\n", env!("CARGO_PKG_VERSION"))
    );
}

#[tokio::test]
async fn no_color_turns_colour_off_in_help_errors_and_logs() {
    const ESCAPE: char = '\u{1b}';
    let logs = [("RUST_LOG", "debug")];
    // Forced on (what a terminal would get), each place is coloured ...
    let forced = [("CLICOLOR_FORCE", "1")];
    let help = roder(&["--help"], &forced).await;
    assert!(text(&help.stdout).contains(ESCAPE));
    let error = roder(&["--bogus"], &forced).await;
    assert!(text(&error.stderr).contains(ESCAPE));
    let logged = roder(&["sandbox", "status"], &[forced[0], logs[0]]).await;
    assert!(
        text(&logged.stderr).contains("DEBUG") && text(&logged.stderr).contains(ESCAPE),
        "{}",
        text(&logged.stderr)
    );
    // ... and NO_COLOR wins over it everywhere.
    let off = [forced[0], ("NO_COLOR", "1"), logs[0]];
    let help = roder(&["--help"], &off).await;
    assert!(!text(&help.stdout).contains(ESCAPE));
    let error = roder(&["--bogus"], &off).await;
    assert!(!text(&error.stderr).contains(ESCAPE));
    let logged = roder(&["sandbox", "status"], &off).await;
    assert!(text(&logged.stderr).contains("DEBUG"));
    assert!(!text(&logged.stderr).contains(ESCAPE));
    // Piped logs are plain without being asked.
    let piped = roder(&["sandbox", "status"], &logs).await;
    assert!(!text(&piped.stderr).contains(ESCAPE));
}
