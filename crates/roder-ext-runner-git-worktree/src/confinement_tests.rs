//! Commands of a git-worktree session under the sandbox policy, with real
//! worktrees, real processes and a real TCP listener: escapes fail and
//! leave the host unchanged, while `git status`, `diff` and `commit` work
//! (the repository's common git dir is writable for them).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use roder_api::remote_runner::{
    RemoteRunnerProvider, RemoteRunnerSession, RunnerCommandResult, RunnerDestination,
    RunnerManifest,
};
use roder_api::sandbox_policy::{HostMechanism, NetworkAccess, SandboxPolicy};
use roder_ext_runner_unix_local::test_support::sh;
use serde_json::json;

use crate::GitWorktreeRunnerProvider;
use crate::test_support::{TestRepo, materialize, materializer};

/// A repository, a worktree of it, and a session confined by `policy`
/// (`None`: no `sandbox` key, the default policy).
struct Fixture {
    repo: TestRepo,
    _root: tempfile::TempDir,
    checkout: PathBuf,
    session: Arc<dyn RemoteRunnerSession>,
}

async fn fixture(policy: Option<&SandboxPolicy>) -> Fixture {
    let repo = TestRepo::new().await;
    let (root, materializer) = materializer();
    let made = materialize(&materializer, &repo, "wt-1").await;
    let mut config = json!({"worktree_id": "wt-1"});
    if let Some(policy) = policy {
        config["sandbox"] = serde_json::to_value(policy).unwrap();
    }
    let session = GitWorktreeRunnerProvider::new(materializer.root().to_path_buf())
        .create_session(RunnerDestination {
            id: "thread-t1".to_string(),
            provider_id: "git-worktree".to_string(),
            config,
            default_manifest: RunnerManifest::default(),
        })
        .await
        .unwrap();
    Fixture {
        repo,
        _root: root,
        checkout: made.cwd,
        session,
    }
}

impl Fixture {
    async fn run(&self, script: &str) -> RunnerCommandResult {
        self.session.run_command(sh("c", script)).await.unwrap()
    }
}

fn have_bwrap() -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join("bwrap").is_file()));
    if !found {
        println!("note: bwrap is not installed; bubblewrap cases skipped (CI installs it)");
    }
    found
}

/// The policies to try: the default (Landlock), and bubblewrap when here.
fn policies() -> Vec<Option<SandboxPolicy>> {
    let mut policies = vec![None];
    if have_bwrap() {
        policies.push(Some(SandboxPolicy {
            mechanism: HostMechanism::Bubblewrap,
            ..SandboxPolicy::default()
        }));
    }
    policies
}

fn unique(name: &str) -> String {
    use std::hash::{BuildHasher as _, RandomState};
    let salt = RandomState::new().hash_one(std::time::SystemTime::now());
    format!("roder-escape-{name}-{}-{salt}", std::process::id())
}

const IDENTITY: &str =
    "-c user.name=Agent -c user.email=agent@example.invalid -c commit.gpgsign=false";

#[tokio::test]
async fn git_status_diff_and_commit_work_in_a_confined_worktree() {
    for policy in policies() {
        let fixture = fixture(policy.as_ref()).await;
        let before = fixture.repo.worktrees().await;
        let result = fixture
            .run(&format!(
                "echo changed > README.md && git status --porcelain && git diff --stat && git {IDENTITY} commit -q -am 'agent change' && git log --format=%s -1"
            ))
            .await;
        assert_eq!(result.exit_code, Some(0), "{policy:?}: {}", result.stderr);
        assert!(result.stdout.contains(" M README.md"), "{}", result.stdout);
        assert!(
            result.stdout.contains("1 file changed"),
            "{}",
            result.stdout
        );
        assert!(
            result.stdout.ends_with("agent change\n"),
            "{}",
            result.stdout
        );
        // The commit is in the repository (objects live in its common dir).
        let head = crate::test_support::git(&fixture.checkout, &["log", "--format=%s", "-1"]).await;
        assert_eq!(head, "agent change\n");
        assert_eq!(fixture.repo.worktrees().await, before);
    }
}

#[tokio::test]
async fn writes_outside_the_checkout_fail_and_leave_the_host_unchanged() {
    for policy in policies() {
        let fixture = fixture(policy.as_ref()).await;
        let parent = fixture.checkout.parent().unwrap().to_path_buf();
        let name = unique("parent");
        let up = fixture.run(&format!("cd .. && touch {name}")).await;
        assert_ne!(up.exit_code, Some(0), "{policy:?}");
        assert!(
            up.stderr.contains("Permission denied") || up.stderr.contains("Read-only"),
            "{}",
            up.stderr
        );
        assert!(!parent.join(&name).exists());

        let in_tmp = Path::new("/tmp").join(unique("tmp"));
        let tmp = fixture.run(&format!("echo x > {}", in_tmp.display())).await;
        assert_ne!(tmp.exit_code, Some(0));
        assert!(!in_tmp.exists());

        let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
        let name = unique("home");
        let at_home = fixture.run(&format!("touch \"$HOME/{name}\"")).await;
        assert_ne!(at_home.exit_code, Some(0));
        assert!(!home.join(&name).exists());

        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), fixture.checkout.join("link")).unwrap();
        let through = fixture.run("echo x > link/through-link.txt").await;
        assert_ne!(through.exit_code, Some(0));
        assert!(!outside.path().join("through-link.txt").exists());

        // The repository's own work tree is outside the worktree too.
        let main_tree = fixture.repo.path().join(unique("main"));
        let into_main = fixture.run(&format!("touch {}", main_tree.display())).await;
        assert_ne!(into_main.exit_code, Some(0));
        assert!(!main_tree.exists());
    }
}

#[tokio::test]
async fn bubblewrap_keeps_the_common_dirs_hooks_read_only() {
    if !have_bwrap() {
        return;
    }
    let policy = SandboxPolicy {
        mechanism: HostMechanism::Bubblewrap,
        ..SandboxPolicy::default()
    };
    let fixture = fixture(Some(&policy)).await;
    let common = fixture.repo.path().join(".git");
    let result = fixture
        .run(&format!(
            "echo 'touch /tmp/pwned' > {}/hooks/post-checkout",
            common.display()
        ))
        .await;
    assert_ne!(result.exit_code, Some(0));
    assert!(result.stderr.contains("Read-only"), "{}", result.stderr);
    assert!(!common.join("hooks/post-checkout").exists());
    let config = fixture.run("git config core.hooksPath /tmp").await;
    assert_ne!(config.exit_code, Some(0), "{}", config.stdout);
}

#[tokio::test]
async fn tcp_is_refused_with_the_network_off_and_accepted_with_it_on() {
    for network in [NetworkAccess::Off, NetworkAccess::On] {
        let policy = SandboxPolicy {
            network,
            ..SandboxPolicy::default()
        };
        let fixture = fixture(Some(&policy)).await;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let result = fixture
            .run(&format!(
                "bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected'"
            ))
            .await;
        // A connection the command made is queued before its connect returned.
        let accepted = tokio::time::timeout(Duration::from_millis(1), listener.accept())
            .await
            .is_ok();
        assert_eq!(accepted, network.allows(), "{network:?}: {}", result.stderr);
        assert_eq!(
            result.exit_code == Some(0),
            network.allows(),
            "{}",
            result.stderr
        );
    }
}

const CHILD_ENV: &str = "RODER_WORKTREE_ENV_CHILD";

/// Re-runs [`env_child`] in a process whose real environment holds
/// credentials (the test process's own is never mutated).
#[test]
fn env_shows_no_credential_even_when_passed() {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "confinement_tests::env_child",
            "--ignored",
            "--nocapture",
        ])
        .env(CHILD_ENV, "1")
        .env("OPENAI_API_KEY", "sk-openai-secret")
        .env("GITHUB_TOKEN", "ghp-secret")
        .env("KEPT_VAR", "kept-value")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("worktree env checked"), "{stdout}");
}

#[tokio::test]
#[ignore = "run by env_shows_no_credential_even_when_passed with credentials set"]
async fn env_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let mut policy = SandboxPolicy::default();
    policy.env.pass = ["OPENAI_API_KEY", "GITHUB_TOKEN", "KEPT_VAR"]
        .map(String::from)
        .to_vec();
    let fixture = fixture(Some(&policy)).await;
    let result = fixture.run("env").await;
    assert_eq!(result.exit_code, Some(0), "{}", result.stderr);
    assert!(
        result.stdout.contains("KEPT_VAR=kept-value"),
        "{}",
        result.stdout
    );
    assert!(!result.stdout.contains("secret"), "{}", result.stdout);
    println!("worktree env checked");
}
