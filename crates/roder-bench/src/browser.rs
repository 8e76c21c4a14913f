//! A headless Chromium driven by Selenium through the driver the browser
//! test uses (`crates/roder-cli/tests/web/driver.py`, one JSON command per
//! line), run by the venv `.ci/run` makes (`~/.cache/roder-ci/venv-web`).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

const DRIVER: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../roder-cli/tests/web/driver.py"
);

pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Browser {
    pub async fn start() -> anyhow::Result<Self> {
        let home = std::env::var_os("HOME").unwrap_or_default();
        let python = PathBuf::from(home).join(".cache/roder-ci/venv-web/bin/python");
        anyhow::ensure!(
            python.exists(),
            "{} is missing: `python3 -m venv ~/.cache/roder-ci/venv-web && ~/.cache/roder-ci/venv-web/bin/pip install selenium`, and `apt-get install chromium chromium-driver` (what .ci/run does)",
            python.display()
        );
        let mut child = tokio::process::Command::new(python)
            .arg(DRIVER)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("starting the browser driver")?;
        let stdin = child.stdin.take().context("driver stdin")?;
        let lines = BufReader::new(child.stdout.take().context("driver stdout")?).lines();
        let mut browser = Self {
            child,
            stdin,
            lines,
        };
        browser.answer().await.context("starting Chromium")?;
        Ok(browser)
    }

    async fn answer(&mut self) -> anyhow::Result<Value> {
        let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
            .await
            .context("the browser did not answer within 90 s")??
            .context("the browser driver exited")?;
        let answer: Value = serde_json::from_str(&line)?;
        if answer["ok"] == true {
            Ok(answer["value"].clone())
        } else {
            anyhow::bail!("browser: {}", answer["error"])
        }
    }

    pub async fn send(&mut self, command: Value) -> anyhow::Result<Value> {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.flush().await?;
        self.answer()
            .await
            .with_context(|| format!("browser command {command}"))
    }

    pub async fn get(&mut self, url: &str) -> anyhow::Result<()> {
        self.send(json!({"op": "get", "url": url})).await.map(drop)
    }

    pub async fn wait_js(&mut self, script: &str) -> anyhow::Result<Value> {
        self.send(json!({"op": "wait_js", "script": script, "timeout": 60}))
            .await
    }

    pub async fn quit(mut self) {
        let _ = self.stdin.write_all(b"{\"op\": \"quit\"}\n").await;
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}
