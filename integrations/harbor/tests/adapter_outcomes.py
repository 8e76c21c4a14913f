"""How the adapter ends a run for each `roder exec` exit code, against a
stand-in environment (no container): 0 and 3 finish it, 124 is Harbor's
AgentTimeoutError, 1 a NonZeroAgentExitCodeError classified from Roder's
turn_failed events only; the instruction goes to stdin through the exec
environment, never into the command line; the config is the container-as-
sandbox one. Run by crates/roder-cli/tests/harbor_trial_e2e.rs with
Harbor's venv:

    PYTHONPATH=integrations/harbor python integrations/harbor/tests/adapter_outcomes.py
"""

import asyncio
import json
import tempfile
from pathlib import Path

from harbor.agents.installed.base import ApiRateLimitError, NonZeroAgentExitCodeError
from harbor.environments.base import ExecResult
from harbor.models.agent.context import AgentContext
from harbor.trial.errors import AgentTimeoutError

from roder_harbor import Roder

INSTRUCTION = "fix the bug; pkill -f must not see this"


class StandIn:
    """Records every exec and upload; the run command exits `code`."""

    default_user = None

    def __init__(self, code: int, stdout: str = ""):
        self.code = code
        self.stdout = stdout
        self.execs = []
        self.uploads = {}

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        self.execs.append((command, env or {}))
        if " exec --json" in command:
            return ExecResult(return_code=self.code, stdout=self.stdout, stderr="")
        return ExecResult(return_code=0, stdout="", stderr="")

    async def upload_file(self, source_path, target_path):
        self.uploads[target_path] = Path(source_path).read_text()


async def run(code: int, stdout: str = ""):
    agent = Roder(
        logs_dir=Path(tempfile.mkdtemp()),
        model_name="fake/m",
        base_url="http://127.0.0.1:8765/v1",
        deadline_sec=50,
    )
    environment = StandIn(code, stdout)
    try:
        await agent.run(INSTRUCTION, environment, AgentContext())
        return environment, None
    except Exception as error:  # the outcome under test
        return environment, error


async def main():
    environment, error = await run(0)
    assert error is None, error
    command, env = next((c, e) for c, e in environment.execs if " exec --json" in c)
    assert INSTRUCTION not in command, command
    assert env["RODER_INSTRUCTION"] == INSTRUCTION
    assert "exec --json --deadline 50 -" in command, command
    assert env["RODER_HOME"] == "/logs/agent/roder-home"
    config = environment.uploads["/logs/agent/roder-home/config.toml"]
    for line in ('model = "harbor/m"', 'mode = "none"', 'network = "on"', 'pass = ["*"]',
                 'kind = "openai-chat"', 'base_url = "http://127.0.0.1:8765/v1"'):
        assert line in config, config
    assert "api_key_env" not in config, "no key given, none required"

    _, error = await run(3)
    assert error is None, f"exit 3 (an incomplete answer) finishes the run: {error!r}"

    _, error = await run(124)
    assert isinstance(error, AgentTimeoutError), repr(error)

    # A tool's output mentioning a rate limit is not Roder failing on one.
    tool_output = json.dumps({"event": {"type": "tool_call_completed", "output": "rate limit"}})
    _, error = await run(1, tool_output + "\n")
    assert type(error) is NonZeroAgentExitCodeError, repr(error)
    failed = json.dumps({"event": {"type": "turn_failed", "error": "429 Too Many Requests: rate limit"}})
    _, error = await run(1, tool_output + "\n" + failed + "\n")
    assert isinstance(error, ApiRateLimitError), repr(error)
    print("adapter outcomes: 6 passed, 0 failed")


asyncio.run(main())
