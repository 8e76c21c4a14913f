//! Resolving profiles from builtins and directories on disk.

use roder_api::policy_mode::PolicyMode;
use roder_api::profile::ProfileSource;
use roder_profiles::{ProfileError, ProfileRequest, Resolver};

struct Dirs {
    home: tempfile::TempDir,
    workspace: tempfile::TempDir,
}

impl Dirs {
    fn new() -> Dirs {
        Dirs {
            home: tempfile::tempdir().unwrap(),
            workspace: tempfile::tempdir().unwrap(),
        }
    }

    fn write_home(&self, name: &str, text: &str) {
        let dir = self.home.path().join("profiles");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn write_workspace(&self, name: &str, text: &str) {
        let dir = self.workspace.path().join(".roder/profiles");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn resolver(&self) -> Resolver {
        Resolver::new(Some(self.home.path().to_path_buf()))
            .with_workspace(Some(self.workspace.path().to_path_buf()))
    }
}

fn by(selector: &str) -> ProfileRequest {
    ProfileRequest {
        selector: selector.into(),
        archive: None,
    }
}

#[tokio::test]
async fn builtins_are_normalised_once() {
    let resolver = Resolver::new(None);
    let plan = resolver.resolve(&by("builtin:plan")).await.unwrap();
    assert_eq!(plan.canonical, "builtin:plan");
    assert_eq!(plan.policy_mode, Some(PolicyMode::Plan));
    assert_eq!(plan.source, ProfileSource::Builtin);
    let error = resolver
        .resolve(&by("builtin:builtin:plan"))
        .await
        .unwrap_err();
    assert!(matches!(error, ProfileError::Selector(_)), "{error}");
    // A bare builtin name is not a builtin: builtins need the prefix.
    let error = resolver.resolve(&by("plan")).await.unwrap_err();
    assert!(error.to_string().contains("builtin: prefix"), "{error}");
    let default = resolver.resolve(&by("")).await.unwrap();
    assert_eq!(default.canonical, "builtin:default");
    assert_eq!(default.selector, "");
}

#[tokio::test]
async fn the_workspace_shadows_the_home_and_default_profile_applies() {
    let dirs = Dirs::new();
    dirs.write_home("tester.md", "+++\ndescription = \"home\"\n+++\nHome.\n");
    dirs.write_workspace(
        "tester.toml",
        "description = \"workspace\"\ninstructions = \"Workspace.\"\n",
    );
    let resolver = dirs.resolver().with_default_profile(Some("tester".into()));
    let snapshot = resolver.resolve(&by("")).await.unwrap();
    assert_eq!(snapshot.canonical, "tester");
    assert_eq!(snapshot.description, "workspace");
    assert!(
        matches!(snapshot.source, ProfileSource::File { ref path } if path.contains(".roder/profiles/tester.toml"))
    );
    let listed = resolver.list().unwrap();
    let home_entry = listed
        .iter()
        .find(|entry| entry.origin.ends_with("profiles/tester.md"))
        .unwrap();
    assert!(
        home_entry
            .shadowed_by
            .as_deref()
            .unwrap()
            .contains(".roder/profiles/tester.toml")
    );
}

#[tokio::test]
async fn a_claude_code_subagent_file_loads_as_it_is() {
    let dirs = Dirs::new();
    dirs.write_workspace(
        "code-reviewer.md",
        "---\nname: code-reviewer\ndescription: Expert code review specialist. Proactively reviews code for quality.\n\
         tools: Read, Grep, Glob, Bash\nmodel: inherit\n---\n\nYou are a senior code reviewer ensuring high standards.\n\n\
         When invoked:\n1. Run git diff to see recent changes\n2. Focus on modified files\n",
    );
    let snapshot = dirs.resolver().resolve(&by("code-reviewer")).await.unwrap();
    assert_eq!(snapshot.name, "code-reviewer");
    assert_eq!(
        snapshot.tools,
        vec!["read_file", "grep", "glob", "shell", "exec_command"]
    );
    assert_eq!(snapshot.model, None);
    assert!(
        snapshot
            .instructions
            .starts_with("You are a senior code reviewer")
    );
}

#[tokio::test]
async fn extends_merges_and_denies_add_up_and_cycles_are_refused() {
    let dirs = Dirs::new();
    dirs.write_home(
        "base.md",
        "+++\nmodel = \"mock/base-model\"\ndisallowed_tools = [\"exec:git push\"]\nlimits = { max_tool_calls = 9 }\n+++\nBase.\n",
    );
    dirs.write_home(
        "child.md",
        "+++\nextends = \"base\"\ndisallowed_tools = [\"write_file\"]\n+++\n",
    );
    let snapshot = dirs.resolver().resolve(&by("child")).await.unwrap();
    assert_eq!(snapshot.model.as_deref(), Some("mock/base-model"));
    assert_eq!(snapshot.instructions, "Base.", "an empty body inherits");
    assert_eq!(
        snapshot.disallowed_tools,
        vec!["exec:git push", "write_file"]
    );
    assert_eq!(snapshot.limits.max_tool_calls, Some(9));
    assert!(snapshot.origins["model"].ends_with("profiles/base.md"));

    dirs.write_home("a.md", "+++\nextends = \"b\"\n+++\n");
    dirs.write_home("b.md", "+++\nextends = \"a\"\n+++\n");
    let error = dirs.resolver().resolve(&by("a")).await.unwrap_err();
    assert!(error.to_string().contains("cycle"), "{error}");
}

#[tokio::test]
async fn unknown_keys_and_literal_secrets_are_refused_by_name() {
    let dirs = Dirs::new();
    dirs.write_home("typo.md", "+++\nallowed_tools = [\"read_file\"]\n+++\n");
    let error = dirs.resolver().resolve(&by("typo")).await.unwrap_err();
    assert!(error.to_string().contains("\"allowed_tools\""), "{error}");

    dirs.write_home(
        "leaky.md",
        "+++\n[mcp_servers.github]\nurl = \"https://mcp.example/github\"\nbearer_token_env_var = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"\n+++\n",
    );
    let error = dirs.resolver().resolve(&by("leaky")).await.unwrap_err();
    assert!(error.to_string().contains("GitHub token"), "{error}");

    dirs.write_home("mismatch.md", "+++\nname = \"other\"\n+++\n");
    let error = dirs.resolver().resolve(&by("mismatch")).await.unwrap_err();
    assert!(error.to_string().contains("make them agree"), "{error}");
}
