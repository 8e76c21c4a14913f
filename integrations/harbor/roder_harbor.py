"""Roder as a Harbor installed agent (Harbor 0.25, ``harbor==0.25.*``).

Select it with ``harbor run -a roder_harbor:Roder`` with this folder on
``PYTHONPATH``. Installing needs no network: ``--ak binary_path=PATH`` (or
``RODER_BINARY``) names a prebuilt ``roder`` on the host, best the static one
from ``scripts/build-static.sh``, which is uploaded into the task container.

* ``-m provider/model`` is Roder's model (``openai/...``, ``anthropic/...``
  and ``openrouter/...`` are built in). ``--ak base_url=URL`` points an
  OpenAI-compatible Chat Completions provider at URL instead; its key comes
  from ``--ae OPENAI_API_KEY=...`` (never ``--ak``: Harbor stores kwargs in
  plain text). ``--ak config=PATH`` passes a whole ``config.toml``.
* The task container is the sandbox: Roder runs with ``[sandbox] mode =
  "none"``, the network on and every variable of the container passed to
  its commands (provider keys excepted, which Roder never passes).
* ``RODER_HOME`` is ``/logs/agent/roder-home``, so the thread comes back with
  the trial; the event stream is ``/logs/agent/roder-events.jsonl``.
* The instruction reaches ``roder exec -`` on standard input, never argv, so
  a task's ``pkill -f`` cannot match Roder by it.
* Exit code 3 (an incomplete answer) finishes the run; 124 (``--ak
  deadline_sec=N`` passed) is Harbor's ``AgentTimeoutError``; any other
  failure is classified from Roder's ``turn_failed`` events only.
* Afterwards ``roder threads export ID --format atif`` writes
  ``agent/trajectory.json``, and the trial's token counts come from its
  ``final_metrics``.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from pydantic import Field

from harbor.agents.agent_auth_resolution import ModelConnectionSpec
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import (
    BaseInstalledAgent,
    NonZeroAgentExitCodeError,
    filter_jsonl_events,
    with_prompt_template,
)
from harbor.agents.options import InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from harbor.models.model_api_format import ModelApiFormat
from harbor.trial.errors import AgentTimeoutError

INSTALL_DIR = "/installed-agent"
BINARY = f"{INSTALL_DIR}/roder"
LOGS = "/logs/agent"
HOME = f"{LOGS}/roder-home"
EVENTS = f"{LOGS}/roder-events.jsonl"
STDERR = f"{LOGS}/roder-stderr.txt"
TRAJECTORY = f"{LOGS}/trajectory.json"
# The variable holding the key of a `--ak base_url` provider.
BASE_URL_KEY = "OPENAI_API_KEY"
# roder exec's exit codes (crates/roder-cli/src/exec.rs).
EXIT_INCOMPLETE = 3
EXIT_DEADLINE = 124


class RoderOptions(InstalledAgentOptions):
    """``--ak`` options of the Roder adapter."""

    binary_path: str | None = Field(
        default=None,
        description="Host path of the roder binary to upload (default: $RODER_BINARY).",
    )
    deadline_sec: int | None = Field(
        default=None,
        ge=1,
        description=(
            "roder exec --deadline: stop the turn cleanly (and save it) after this "
            "many seconds; set it a little below the task's agent timeout."
        ),
    )


def roder_config(model: str, base_url: str | None, key_present: bool) -> str:
    """The config.toml the adapter writes when the user gives none."""
    lines = []
    if base_url is not None:
        # `-m provider/model` with a custom endpoint: the model part goes to it.
        name = model.split("/", 1)[-1]
        lines.append(f"model = {json.dumps('harbor/' + name)}")
    else:
        lines.append(f"model = {json.dumps(model)}")
    lines += [
        "",
        "# The task container is the sandbox.",
        "[sandbox]",
        'mode = "none"',
        'network = "on"',
        "",
        "[sandbox.env]",
        'pass = ["*"]  # the container\'s whole environment (provider keys excepted)',
    ]
    if base_url is not None:
        lines += [
            "",
            "[providers.harbor]",
            'kind = "openai-chat"',
            f"base_url = {json.dumps(base_url)}",
        ]
        if key_present:
            lines.append(f"api_key_env = {json.dumps(BASE_URL_KEY)}")
    return "\n".join(lines) + "\n"


def is_turn_failure(event: dict[str, Any]) -> bool:
    """Roder's own failure events: what error classification may read."""
    inner = event.get("event")
    return isinstance(inner, dict) and inner.get("type") == "turn_failed"


class Roder(BaseInstalledAgent):
    """Roder, an agent runtime for coding agents, run by ``roder exec``."""

    options_model = RoderOptions
    capabilities = AgentCapabilities(atif=True, base_url=True, native_config=True)
    # Only an OpenAI-compatible endpoint can be pointed elsewhere; Harbor
    # injects no URL variable (the adapter writes Roder's config itself).
    MODEL_CONNECTION = ModelConnectionSpec(
        supported_api_formats=[ModelApiFormat.OPENAI_CHAT_COMPLETIONS],
        base_url_destination_names={"default": None},
    )

    @staticmethod
    def name() -> str:
        return "roder"

    def get_version_command(self) -> str | None:
        return f"{BINARY} --version"

    def parse_version(self, stdout: str) -> str:
        return stdout.strip().removeprefix("roder").strip()

    def _binary(self) -> Path:
        chosen = getattr(self.options, "binary_path", None) or os.environ.get("RODER_BINARY")
        if not chosen:
            raise ValueError(
                "the roder adapter needs a roder binary to upload: pass --ak binary_path=PATH "
                "or set RODER_BINARY (scripts/build-static.sh builds one that runs in any image)"
            )
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"roder binary not found: {path}")
        return path

    async def install(self, environment: BaseEnvironment) -> None:
        await environment.upload_file(self._binary(), BINARY)
        await self.exec_as_root(environment, f"chmod 755 {BINARY}")

    async def _config_text(self, environment: BaseEnvironment) -> str:
        source = self.config_source
        if isinstance(source, Path):
            return source.read_text()
        if source is not None:
            raise ValueError("--ak config must name a config.toml file, not inline JSON")
        if not self.model_name:
            raise ValueError("the roder adapter needs a model: -m provider/model")
        base_url = self._execution_base_url if self._base_url is not None else None
        return roder_config(
            self.model_name,
            base_url,
            self._get_env(BASE_URL_KEY) is not None,
        )

    def _exec_env(self) -> dict[str, str]:
        env = {"RODER_HOME": HOME, "NO_COLOR": "1"}
        for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY"):
            value = self._get_env(name)
            if value is not None:
                env[name] = value
        return env

    @with_prompt_template
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        await self.exec_as_agent(environment, f"mkdir -p {HOME}")
        await self._upload_config_text(
            environment,
            content=await self._config_text(environment),
            remote_path=f"{HOME}/config.toml",
            filename="config.toml",
        )
        deadline = getattr(self.options, "deadline_sec", None)
        flags = f"--deadline {int(deadline)} " if deadline else ""
        env = self._exec_env()
        env["RODER_INSTRUCTION"] = instruction
        # The instruction travels in the exec environment, then on roder's
        # stdin; the thread is exported whatever the turn's outcome.
        command = (
            f'printf "%s" "$RODER_INSTRUCTION" | env -u RODER_INSTRUCTION {BINARY} exec --json {flags}- '
            f"> {EVENTS} 2> {STDERR}; rc=$?; "
            f"thread=$(head -n 1 {EVENTS} | sed -n 's/.*\"thread_id\":\"\\([^\"]*\\)\".*/\\1/p'); "
            f'if [ -n "$thread" ]; then {BINARY} threads export "$thread" --format atif '
            f"> {TRAJECTORY}.part 2>> {STDERR} && mv {TRAJECTORY}.part {TRAJECTORY}; fi; "
            # A failure shows Harbor Roder's failure events and the end of
            # its stderr (the stream itself stays in the file: tool output
            # in it must not be classified as Roder's error).
            f"if [ $rc -ne 0 ] && [ $rc -ne {EXIT_INCOMPLETE} ]; then "
            f"grep '\"type\":\"turn_failed\"' {EVENTS}; tail -n 50 {STDERR} >&2; fi; "
            "exit $rc"
        )
        result = await environment.exec(command=command, env=env)
        code = result.return_code
        if code in (0, EXIT_INCOMPLETE):
            return
        if code == EXIT_DEADLINE:
            raise AgentTimeoutError(f"roder exec stopped at its deadline of {deadline} s")
        raise self._classify_exec_error(f"{BINARY} exec --json {flags}-", result)

    def _classify_exec_error(self, command: str, result: Any) -> NonZeroAgentExitCodeError:
        # Tool output and model text in the event stream must not match
        # Harbor's error patterns; only Roder's failure events may.
        result = result.model_copy(
            update={"stdout": filter_jsonl_events(result.stdout, is_turn_failure)}
        ) if hasattr(result, "model_copy") else result
        return super()._classify_exec_error(command, result)

    def populate_context_post_run(self, context: AgentContext) -> None:
        path = self.logs_dir / "trajectory.json"
        if not path.is_file():
            return
        try:
            metrics = json.loads(path.read_text()).get("final_metrics") or {}
        except (OSError, ValueError):
            return
        context.n_input_tokens = metrics.get("total_prompt_tokens")
        context.n_cache_tokens = metrics.get("total_cached_tokens")
        context.n_output_tokens = metrics.get("total_completion_tokens")
