//! A real Chromium driven by Selenium (`tests/web/driver.py`, run by the
//! venv `.ci/run` makes at `~/.cache/roder-ci/venv-web`), one command at a
//! time, so a test scripts the browser while it drives the server and the
//! fake model itself.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The Python of the venv holding `selenium`.
pub fn venv_python() -> PathBuf {
    let home = std::env::var_os("HOME").unwrap_or_default();
    Path::new(&home).join(".cache/roder-ci/venv-web/bin/python")
}

/// Whether the browser, its driver and Selenium are installed (under
/// `CI=true` their absence fails the test: `.ci/run` installs them).
pub fn available() -> bool {
    let install = "apt-get install chromium chromium-driver; python3 -m venv ~/.cache/roder-ci/venv-web && ~/.cache/roder-ci/venv-web/bin/pip install selenium";
    super::installed("chromium", &["--version"], install)
        && super::installed("chromedriver", &["--version"], install)
        && super::installed(
            venv_python().to_str().unwrap_or("python"),
            &["-c", "import selenium"],
            install,
        )
}

pub struct Browser {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    shots: PathBuf,
}

impl Browser {
    /// Starts Chromium (headless); screenshots go to `shots`.
    pub async fn start(shots: &Path) -> Self {
        std::fs::create_dir_all(shots).unwrap();
        let mut child = tokio::process::Command::new(venv_python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/web/driver.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut browser = Self {
            child,
            stdin,
            lines,
            shots: shots.to_path_buf(),
        };
        let ready = browser.answer("start").await;
        assert_eq!(ready, Ok(json!("ready")));
        browser
    }

    async fn answer(&mut self, what: &str) -> Result<Value, String> {
        let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("the browser did not answer {what} within 90 s"))
            .unwrap()
            .unwrap_or_else(|| panic!("the browser driver exited during {what}"));
        let answer: Value = serde_json::from_str(&line).unwrap();
        if answer["ok"] == true {
            Ok(answer["value"].clone())
        } else {
            Err(answer["error"].as_str().unwrap_or("?").to_string())
        }
    }

    /// Runs one command; `Err` carries the driver's error.
    pub async fn try_send(&mut self, command: Value) -> Result<Value, String> {
        let mut line = command.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.flush().await.unwrap();
        self.answer(&command.to_string()).await
    }

    /// Runs one command and fails the test (with a screenshot) if it fails.
    pub async fn send(&mut self, command: Value) -> Value {
        match self.try_send(command.clone()).await {
            Ok(value) => value,
            Err(error) => {
                let _ = self.screenshot("failure").await;
                panic!("browser: {command} failed: {error}")
            }
        }
    }

    pub async fn get(&mut self, url: &str) {
        self.send(json!({"op": "get", "url": url})).await;
    }

    /// The texts of the elements at `css` (containing `text`), once there is one.
    pub async fn wait(&mut self, css: &str, text: Option<&str>) -> Vec<String> {
        let found = self
            .send(json!({"op": "wait", "css": css, "text": text}))
            .await;
        serde_json::from_value(found).unwrap()
    }

    /// Waits until `script` (a JavaScript expression body with `return`) is truthy.
    pub async fn wait_js(&mut self, script: &str) -> Value {
        self.send(json!({"op": "wait_js", "script": script})).await
    }

    pub async fn js(&mut self, script: &str) -> Value {
        self.send(json!({"op": "js", "script": script})).await
    }

    pub async fn click(&mut self, css: &str, text: Option<&str>) {
        self.send(json!({"op": "click", "css": css, "text": text}))
            .await;
    }

    pub async fn type_into(&mut self, css: &str, text: &str) {
        self.send(json!({"op": "type", "css": css, "text": text}))
            .await;
    }

    /// Saves `NAME.png` among the screenshots; returns its path.
    pub async fn screenshot(&mut self, name: &str) -> Result<PathBuf, String> {
        let path = self.shots.join(format!("{name}.png"));
        self.try_send(json!({"op": "screenshot", "path": path}))
            .await
            .map(|_| path)
    }

    pub async fn quit(mut self) {
        let _ = self.stdin.write_all(b"{\"op\": \"quit\"}\n").await;
        let _ = tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await;
    }
}
