//! The model-wire peer suite (`../shared/peer-suites/model-wire/`): real
//! recorded OpenAI and Anthropic streams and error bodies, and
//! `scenarios.json`, which says what to serve to one turn and how the turn
//! must end. The recordings stay in that folder (they are other projects'
//! test data, see its README); this module only reads them, so engine tests
//! can serve them from a [`super::FakeModelServer`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use super::recorded::{RecordedReply, sse_event_spans};

/// `scenarios.json` and the folder it is in.
#[derive(Debug, Clone)]
pub struct ModelWireSuite {
    root: PathBuf,
    pub scenarios: Vec<Scenario>,
}

#[derive(Debug, Clone, Deserialize)]
struct ScenarioFile {
    scenarios: Vec<Scenario>,
}

/// One scenario: the replies of one turn, in order, and its outcome.
#[derive(Debug, Clone, Deserialize)]
pub struct Scenario {
    pub name: String,
    /// `openai-responses`, `openai-chat` or `anthropic`: also the folder
    /// its files are in.
    pub api: String,
    pub steps: Vec<Step>,
    /// `complete` or `fail`.
    pub expect: String,
    /// How many model requests the turn must make, when the scenario says.
    #[serde(default)]
    pub requests: Option<usize>,
    #[serde(default)]
    pub error_contains: Option<String>,
    /// Streams for the turn's later rounds (after tool results), in order.
    #[serde(default)]
    pub followups: Vec<String>,
    /// Serve the last step again for every request after the steps.
    #[serde(default)]
    pub repeat_last: bool,
    /// Round 2's request must carry round 1's signed thinking block.
    #[serde(default)]
    pub sends_back_signature: bool,
    #[serde(default)]
    pub note: Option<String>,
}

impl Scenario {
    pub fn expects_failure(&self) -> bool {
        self.expect == "fail"
    }
}

/// One reply: a recorded file, or a stream composed of parts of files.
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    #[serde(default)]
    pub file: Option<String>,
    /// The status an error body is served with (200 when absent).
    #[serde(default)]
    pub status: Option<u16>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub compose: Vec<ComposePart>,
}

/// Events `[from, to)` of a file (all of them without `events`).
#[derive(Debug, Clone, Deserialize)]
pub struct ComposePart {
    pub file: String,
    #[serde(default)]
    pub events: Option<(usize, usize)>,
}

impl ModelWireSuite {
    /// The suite beside the workspace: `<manifest_dir>/../../../shared/
    /// peer-suites/model-wire`, `None` when that folder does not exist (CI
    /// guarantees it does).
    /// The suite beside the workspace, or `None` when it is absent.
    pub fn locate(manifest_dir: &str) -> Option<PathBuf> {
        let root = Path::new(manifest_dir).join("../../../shared/peer-suites/model-wire");
        root.join("scenarios.json").is_file().then_some(root)
    }

    /// [`locate`](Self::locate) for the peer-suite tests: with
    /// `RODER_REQUIRE_PEER_SUITES` set (CI) an absent suite is a failure, so
    /// the tests can never pass by skipping.
    pub fn locate_for_test(manifest_dir: &str) -> Option<PathBuf> {
        let found = Self::locate(manifest_dir);
        assert!(
            found.is_some() || std::env::var_os("RODER_REQUIRE_PEER_SUITES").is_none(),
            "RODER_REQUIRE_PEER_SUITES is set but the model-wire peer suite is not beside {manifest_dir}"
        );
        found
    }

    pub fn load(root: &Path) -> anyhow::Result<Self> {
        let path = root.join("scenarios.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let file: ScenarioFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a scenario list", path.display()))?;
        Ok(Self {
            root: root.to_path_buf(),
            scenarios: file.scenarios,
        })
    }

    /// The scenarios of one API, in file order.
    pub fn for_api<'a>(&'a self, api: &'a str) -> impl Iterator<Item = &'a Scenario> + 'a {
        self.scenarios.iter().filter(move |s| s.api == api)
    }

    /// The bytes of `api/file`.
    pub fn file(&self, api: &str, file: &str) -> anyhow::Result<Vec<u8>> {
        let path = self.root.join(api).join(file);
        std::fs::read(&path).with_context(|| format!("reading recording {}", path.display()))
    }

    /// The bytes a step serves (a file, or its composed parts).
    pub fn step_body(&self, api: &str, step: &Step) -> anyhow::Result<Vec<u8>> {
        if let Some(file) = &step.file {
            return self.file(api, file);
        }
        let mut body = Vec::new();
        for part in &step.compose {
            let bytes = self.file(api, &part.file)?;
            match part.events {
                None => body.extend_from_slice(&bytes),
                Some((from, to)) => {
                    for (start, end) in sse_event_spans(&bytes)
                        .into_iter()
                        .skip(from)
                        .take(to.saturating_sub(from))
                    {
                        body.extend_from_slice(bytes.get(start..end).unwrap_or(&[]));
                    }
                }
            }
        }
        anyhow::ensure!(
            !body.is_empty(),
            "a step of a {api} scenario names neither a file nor parts to compose"
        );
        Ok(body)
    }

    /// The reply a step serves: its body with its status and headers.
    pub fn step_reply(&self, api: &str, step: &Step) -> anyhow::Result<RecordedReply> {
        let body = self.step_body(api, step)?;
        let mut reply = match step.status {
            Some(status) if status != 200 => RecordedReply::json(status, body),
            _ => RecordedReply::sse(body),
        };
        for (name, value) in &step.headers {
            reply = reply.header(name, value);
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenarios_parse_and_composed_steps_take_the_named_events() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("anthropic")).unwrap();
        std::fs::write(
            dir.path().join("anthropic/a.sse"),
            "data: 0\n\ndata: 1\n\ndata: 2\n\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("anthropic/b.sse"), "data: e\n\n").unwrap();
        std::fs::write(
            dir.path().join("scenarios.json"),
            r#"{"scenarios": [{"name": "x", "api": "anthropic", "expect": "fail",
                "requests": 1, "steps": [{"compose": [
                  {"file": "a.sse", "events": [0, 2]}, {"file": "b.sse"}]},
                  {"file": "b.sse", "status": 429, "headers": {"x-should-retry": "true"}}]}]}"#,
        )
        .unwrap();
        let suite = ModelWireSuite::load(dir.path()).unwrap();
        let scenario = &suite.scenarios[0];
        assert!(scenario.expects_failure());
        assert_eq!(
            suite.step_body("anthropic", &scenario.steps[0]).unwrap(),
            b"data: 0\n\ndata: 1\n\ndata: e\n\n".to_vec()
        );
        let reply = suite.step_reply("anthropic", &scenario.steps[1]).unwrap();
        assert_eq!(reply.status, 429);
        assert_eq!(
            reply.headers,
            vec![("x-should-retry".to_string(), "true".to_string())]
        );
        assert!(ModelWireSuite::locate("/nonexistent/a/b").is_none());
    }
}
