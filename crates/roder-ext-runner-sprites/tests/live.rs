//! The basic flow against the real Sprites API.
//!
//! Ignored by default and skipped unless `RODER_SPRITES_LIVE=1`; it needs
//! `SPRITES_TOKEN` (and optionally `SPRITES_API_URL`). It creates one sprite
//! and deletes it again at the end.
//!
//! ```sh
//! RODER_SPRITES_LIVE=1 SPRITES_TOKEN=… cargo test -p roder-ext-runner-sprites --test live -- --ignored
//! ```

use roder_api::remote_runner::{
    RemoteRunnerProvider, RunnerCommandRequest, RunnerDestination, RunnerFileReadRequest,
    RunnerFileWriteRequest, RunnerManifest, RunnerPortRequest,
};
use roder_ext_runner_sprites::{LIVE_ENV, PROVIDER_ID, SpritesRunnerProvider};
use serde_json::json;

fn command(id: &str, program: &str, args: &[&str]) -> RunnerCommandRequest {
    RunnerCommandRequest {
        command_id: id.to_string(),
        program: program.to_string(),
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: None,
        env: Vec::new(),
        timeout_ms: Some(120_000),
    }
}

#[tokio::test]
#[ignore = "talks to the real Sprites API; set RODER_SPRITES_LIVE=1 and SPRITES_TOKEN"]
async fn live_sprites_basic_flow() {
    if std::env::var(LIVE_ENV).ok().as_deref() != Some("1") {
        eprintln!("set {LIVE_ENV}=1 to run the live Sprites test");
        return;
    }
    let provider = SpritesRunnerProvider::default();
    let session = provider
        .create_session(RunnerDestination {
            id: "sprites-live".to_string(),
            provider_id: PROVIDER_ID.to_string(),
            config: json!({
                "sprite_name_prefix": "roder-live",
                "cleanup": "delete-on-close",
                "working_dir": "/home/sprite/roder-live",
            }),
            default_manifest: RunnerManifest::default(),
        })
        .await
        .unwrap();
    let state = session.state();
    eprintln!("created sprite {}", state.session_id);

    let outcome = async {
        let result = session
            .run_command(command("py", "python3", &["-c", "print(2+2)"]))
            .await?;
        anyhow::ensure!(result.exit_code == Some(0), "python3 failed: {result:?}");
        anyhow::ensure!(result.stdout.trim() == "4", "unexpected stdout: {result:?}");

        let result = session
            .run_command(command("sh", "sh", &["-c", "pwd; echo oops >&2; exit 3"]))
            .await?;
        anyhow::ensure!(result.exit_code == Some(3), "{result:?}");
        anyhow::ensure!(
            result.stdout.trim() == "/home/sprite/roder-live",
            "{result:?}"
        );
        anyhow::ensure!(result.stderr.contains("oops"), "{result:?}");

        session
            .write_file(RunnerFileWriteRequest {
                path: "nested/proof.txt".into(),
                contents: b"hello from roder\n".to_vec(),
            })
            .await?;
        let read = session
            .read_file(RunnerFileReadRequest {
                path: "nested/proof.txt".into(),
            })
            .await?;
        anyhow::ensure!(read.contents == b"hello from roder\n", "{read:?}");
        let missing = session
            .read_file(RunnerFileReadRequest {
                path: "does-not-exist.txt".into(),
            })
            .await;
        anyhow::ensure!(missing.is_err(), "reading a missing file must fail");

        // The server gives an exec no environment of its own: the provider's
        // PATH and HOME are what the command sees.
        let result = session
            .run_command(command("env", "sh", &["-c", "printf '%s' \"$HOME\""]))
            .await?;
        anyhow::ensure!(result.stdout == "/home/sprite", "{result:?}");

        let mut slow = command("slow", "sleep", &["31"]);
        slow.timeout_ms = Some(2_000);
        let result = session.run_command(slow).await?;
        anyhow::ensure!(result.exit_code.is_none(), "{result:?}");
        eprintln!("timeout note: {}", result.stderr.trim());
        // Aborting the request made the server kill it: wait (bounded) until gone.
        let gone = session
            .run_command(command(
                "gone",
                "sh",
                &[
                    "-c",
                    "command -v ps >/dev/null || exit 2; for i in $(seq 100); do ps -eo args | grep -qx 'sleep 31' || exit 0; sleep 0.1; done; exit 1",
                ],
            ))
            .await?;
        anyhow::ensure!(
            gone.exit_code == Some(0),
            "the timed-out command is still running (or ps is missing): {gone:?}"
        );

        let snapshot = session.snapshot().await?;
        anyhow::ensure!(snapshot.is_some(), "snapshot must be Some");
        eprintln!("checkpoint {:?}", snapshot);

        let port = session
            .expose_port(RunnerPortRequest {
                port: 8080,
                label: None,
            })
            .await?;
        anyhow::ensure!(port.url.is_some(), "{port:?}");

        let detached = session.detach().await?;
        let rejoined = provider.rejoin_session(detached).await?;
        let read = rejoined
            .read_file(RunnerFileReadRequest {
                path: "nested/proof.txt".into(),
            })
            .await?;
        anyhow::ensure!(read.contents == b"hello from roder\n", "{read:?}");
        rejoined.close().await?;
        Ok(())
    }
    .await;

    if outcome.is_err() {
        // Do not leak a sprite when an assertion failed half way.
        let _ = session.close().await;
        if let Ok(again) = provider.rejoin_session(state.clone()).await {
            let _ = again.close().await;
        }
    }
    outcome.unwrap();
    assert!(
        provider.resume_session(state).await.is_err(),
        "the sprite was deleted"
    );
}
