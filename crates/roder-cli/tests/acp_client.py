"""An editor for `roder acp`, written with the official ACP Python SDK
(PyPI `agent-client-protocol`), driven by crates/roder-cli/tests/acp_e2e.rs.

usage: acp_client.py SCENARIO --roder PATH --workspace DIR --raw FILE [options]

The agent runs as `sh -c 'roder acp ... | tee RAW'`, so the test can check
that every line the agent wrote on stdout is a JSON-RPC message. Each
scenario checks what the SDK saw; any failure prints `FAIL: ...` and exits 1.
The last stdout line is a JSON summary for the Rust side.
"""

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    EnvVariable,
    FileSystemCapabilities,
    Implementation,
    McpServerStdio,
    RequestPermissionResponse,
)


class Editor:
    """The client side: records updates and answers permission requests."""

    def __init__(self, answer: str) -> None:
        self.answer = answer  # allow_once, reject_once, cancel
        self.conn: Any = None
        self.log: list[tuple[str, str]] = []  # (kind, toolCallId or text)
        self.updates: list[dict] = []
        self.permissions: list[dict] = []
        self.errors: list[str] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        data = update.model_dump(by_alias=True, exclude_none=True, mode="json")
        data["sessionId"] = session_id
        self.updates.append(data)
        kind = data["sessionUpdate"]
        self.log.append((kind, data.get("toolCallId", "")))
        if kind == "tool_call_update" and not any(
            k == "tool_call" and i == data["toolCallId"] for k, i in self.log
        ):
            self.errors.append(f"tool_call_update for unannounced {data['toolCallId']}")

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list, **kwargs: Any
    ) -> RequestPermissionResponse:
        call = tool_call.model_dump(by_alias=True, exclude_none=True, mode="json")
        self.permissions.append(
            {
                "toolCall": call,
                "options": [o.model_dump(by_alias=True, exclude_none=True, mode="json") for o in options],
            }
        )
        self.log.append(("permission", call["toolCallId"]))
        if not any(k == "tool_call" and i == call["toolCallId"] for k, i in self.log):
            self.errors.append(f"permission for unannounced tool call {call['toolCallId']}")
        if self.answer == "cancel":
            await self.conn.cancel(session_id=session_id)
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        chosen = next((o for o in options if o.option_id == self.answer), None)
        if chosen is None:
            self.errors.append(f"option {self.answer} not offered: {[o.option_id for o in options]}")
            chosen = options[0]
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id)
        )

    def of_kind(self, kind: str) -> list[dict]:
        return [u for u in self.updates if u["sessionUpdate"] == kind]

    def check(self, condition: bool, what: str) -> None:
        if not condition:
            self.errors.append(what)


def text_of(updates: list[dict]) -> str:
    return "".join(u["content"].get("text", "") for u in updates)


async def start(args: argparse.Namespace, editor: Editor, wire: list):
    command = f'exec "$0" acp "$@" | tee "{args.raw}"'
    extra = ["--runner", args.runner] if args.runner else (["--worktree"] if args.worktree else [])
    if args.profile:
        extra += ["--profile", args.profile]
    return spawn_agent_process(
        editor,
        "sh",
        "-c",
        command,
        args.roder,
        *extra,
        env=dict(os.environ),
        cwd=args.workspace,
        # Inherited: an undrained pipe would block a chatty agent.
        transport_kwargs={"stderr": None},
        observers=[lambda event: wire.append((event.direction.value, event.message))],
    )


async def initialize(conn: Any, editor: Editor) -> Any:
    init = await conn.initialize(
        protocol_version=PROTOCOL_VERSION,
        client_capabilities=ClientCapabilities(
            terminal=False,
            fs=FileSystemCapabilities(read_text_file=False, write_text_file=False),
        ),
        client_info=Implementation(name="acp-e2e", version="0.1"),
    )
    editor.check(init.protocol_version == 1, f"protocolVersion {init.protocol_version}")
    return init


async def basics(args, editor, conn, process, summary):
    init = await initialize(conn, editor)
    caps = init.agent_capabilities
    editor.check(caps.load_session is True, "loadSession not advertised")
    sessions = caps.session_capabilities
    editor.check(
        sessions is not None and sessions.list is not None and sessions.resume is not None
        and sessions.close is not None,
        f"session capabilities {sessions}",
    )
    editor.check(caps.prompt_capabilities.image and caps.prompt_capabilities.embedded_context, "prompt caps")
    await conn.authenticate(method_id="none")
    new = await conn.new_session(cwd=args.workspace, mcp_servers=[])
    sid = new.session_id
    summary["sessionId"] = sid
    editor.check(new.modes.current_mode_id == "default", f"mode {new.modes.current_mode_id}")
    ids = [o.root.id if hasattr(o, "root") else o.id for o in new.config_options]
    editor.check(ids == ["mode", "model", "reasoning_effort", "profile"], f"config options {ids}")
    await conn.set_session_mode(session_id=sid, mode_id="accept_edits")
    changed = await conn.set_config_option(session_id=sid, config_id="reasoning_effort", value="high")
    values = {
        (o.root if hasattr(o, "root") else o).id: (o.root if hasattr(o, "root") else o).current_value
        for o in changed.config_options
    }
    editor.check(values.get("reasoning_effort") == "high", f"after set: {values}")
    editor.check(values.get("mode") == "accept_edits", f"mode after set_mode: {values}")
    # Lines that are not messages get errors; the session goes on.
    for garbage in [b"this is not json\n", b"[1, 2]\n",
                    b'{"jsonrpc":"2.0","id":"garbage-1","method":"_roder/nope","params":{}}\n']:
        process.stdin.write(garbage)
    await process.stdin.drain()
    resource = {"type": "resource", "resource": {"uri": "file:///notes/plan.md", "text": "PLAN-TEXT"}}
    link = {"type": "resource_link", "uri": "file:///notes/extra.md", "name": "extra.md"}
    image = {"type": "image", "mimeType": "image/png", "data": "iVBORw0KGgo="}
    done = await conn.prompt(session_id=sid, prompt=[text_block("say hello"), resource, link, image])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    editor.check("Hello from roder" in text_of(editor.of_kind("agent_message_chunk")), "no answer text")
    editor.check("pondering" in text_of(editor.of_kind("agent_thought_chunk")), "no thought")
    editor.check(len(editor.of_kind("current_mode_update")) == 1, "no current_mode_update")
    editor.check(len(editor.of_kind("config_option_update")) >= 2, "no config_option_update")
    editor.check(len(editor.of_kind("usage_update")) >= 1, "no usage_update")
    listed = await conn.list_sessions(cwd=args.workspace)
    editor.check(sid in [s.session_id for s in listed.sessions], "session/list misses the session")
    await conn.resume_session(session_id=sid, cwd=args.workspace, mcp_servers=[])
    await conn.close_session(session_id=sid)
    try:
        await conn.prompt(session_id=sid, prompt=[text_block("after close")])
        editor.errors.append("a prompt after session/close was taken")
    except Exception as error:  # noqa: BLE001 - any JSON-RPC error is right
        summary["afterClose"] = str(error)


async def approvals(args, editor, conn, process, summary):
    await initialize(conn, editor)
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[])).session_id
    editor.answer = "allow_once"
    first = await conn.prompt(session_id=sid, prompt=[text_block("write allowed.txt")])
    editor.check(first.stop_reason == "end_turn", f"stopReason {first.stop_reason}")
    editor.answer = "reject_once"
    second = await conn.prompt(session_id=sid, prompt=[text_block("write rejected.txt")])
    editor.check(second.stop_reason == "end_turn", f"stopReason {second.stop_reason}")
    order = [(k, i) for k, i in editor.log if k in ("tool_call", "permission")]
    editor.check(
        order == [("tool_call", "call-allow"), ("permission", "call-allow"),
                  ("tool_call", "call-reject"), ("permission", "call-reject")],
        f"order {order}",
    )
    asked = editor.permissions[0]
    diffs = [c for c in asked["toolCall"].get("content", []) if c["type"] == "diff"]
    editor.check(len(diffs) == 1 and diffs[0]["newText"] == "allowed\n", f"permission diff {asked}")
    editor.check(asked["toolCall"].get("kind") == "edit", f"kind {asked['toolCall']}")
    names = {o["optionId"]: o["name"] for o in asked["options"]}
    editor.check(set(names) >= {"allow_once", "reject_once"}, f"options {names}")
    summary["options"] = names
    finals = {u["toolCallId"]: u.get("status") for u in editor.of_kind("tool_call_update") if u.get("status")
              in ("completed", "failed")}
    summary["finals"] = finals
    announced = [u for u in editor.of_kind("tool_call") if u["toolCallId"] == "call-allow"][0]
    editor.check(announced.get("status", "pending") == "pending", f"announced {announced}")
    editor.check(announced["locations"][0]["path"].endswith("allowed.txt"), f"locations {announced}")


async def cancel(args, editor, conn, process, summary):
    await initialize(conn, editor)
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[])).session_id
    editor.answer = "cancel"
    stopped = await conn.prompt(session_id=sid, prompt=[text_block("touch cancelled.txt")])
    editor.check(stopped.stop_reason == "cancelled", f"stopReason {stopped.stop_reason}")
    editor.check(len(editor.permissions) == 1, "no permission request")
    again = await conn.prompt(session_id=sid, prompt=[text_block("are you there")])
    editor.check(again.stop_reason == "end_turn", f"next prompt: {again.stop_reason}")
    editor.check("still here" in text_of(editor.of_kind("agent_message_chunk")), "next answer missing")


async def write(args, editor, conn, process, summary):
    """First process of the load test: a session with an edit and a command."""
    await initialize(conn, editor)
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[])).session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    done = await conn.prompt(session_id=sid, prompt=[text_block("write kept.txt")])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    summary["sessionId"] = sid


async def load(args, editor, conn, process, summary, wire):
    init = await initialize(conn, editor)
    editor.check(init.agent_capabilities.load_session, "loadSession")
    await conn.load_session(session_id=args.session, cwd=args.workspace, mcp_servers=[])
    # The response must come after every replayed update (wire order).
    response_at = next(
        i for i, (d, m) in enumerate(wire)
        if d == "incoming" and "result" in m and isinstance(m["result"], dict) and "modes" in m["result"]
    )
    updates_at = [i for i, (d, m) in enumerate(wire) if d == "incoming" and m.get("method") == "session/update"]
    editor.check(updates_at and max(updates_at) < response_at, f"updates {updates_at} response {response_at}")
    replayed = [m["params"]["update"] for i, (d, m) in enumerate(wire) if i in set(updates_at)]
    kinds = [u["sessionUpdate"] for u in replayed]
    summary["replayed"] = kinds
    editor.check("user_message_chunk" in kinds, "no user message replayed")
    editor.check("agent_message_chunk" in kinds, "no answer replayed")
    calls = [u for u in replayed if u["sessionUpdate"] == "tool_call"]
    editor.check([c["toolCallId"] for c in calls] == ["call-keep", "call-echo"], f"calls {calls}")
    diffs = [c for u in replayed if u["sessionUpdate"] == "tool_call_update"
             for c in u.get("content", []) if c["type"] == "diff"]
    editor.check(any(d["newText"].startswith("kept") for d in diffs), f"diffs {diffs}")
    done = [u for u in replayed if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"]
    editor.check(len(done) == 2, f"completed {done}")
    # The loaded session takes prompts.
    again = await conn.prompt(session_id=args.session, prompt=[text_block("and now?")])
    editor.check(again.stop_reason == "end_turn", f"after load: {again.stop_reason}")


async def mcp(args, editor, conn, process, summary):
    await initialize(conn, editor)
    server = McpServerStdio(name="time", command=args.mcp_command,
                            args=["--local-timezone", "UTC"], env=[EnvVariable(name="TZ", value="UTC")])
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[server])).session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    done = await conn.prompt(session_id=sid, prompt=[text_block("what time is it")])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    finals = [u for u in editor.of_kind("tool_call_update") if u.get("status") == "completed"]
    editor.check(len(finals) == 1, f"finals {editor.of_kind('tool_call_update')}")
    summary["output"] = finals[0].get("rawOutput", {}).get("output", "") if finals else ""


async def sandboxed(args, editor, conn, process, summary):
    """A session whose tools run elsewhere (`--runner` or `--worktree`)."""
    await initialize(conn, editor)
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[])).session_id
    await conn.set_session_mode(session_id=sid, mode_id="bypass")
    done = await conn.prompt(session_id=sid, prompt=[text_block("where am I")])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    finals = [u for u in editor.of_kind("tool_call_update") if u.get("status") in ("completed", "failed")]
    summary["finals"] = finals
    summary["output"] = finals[0].get("rawOutput", {}).get("output", "") if finals else ""
    await conn.close_session(session_id=sid)


async def profiled(args, editor, conn, process, summary):
    """A session of `roder acp --profile`: its mode comes from the profile."""
    await initialize(conn, editor)
    new = await conn.new_session(cwd=args.workspace, mcp_servers=[])
    summary["sessionId"] = new.session_id
    summary["mode"] = new.modes.current_mode_id
    done = await conn.prompt(session_id=new.session_id, prompt=[text_block("plan it")])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    summary["answer"] = text_of(editor.of_kind("agent_message_chunk"))


def option_values(options: Any) -> dict:
    return {(o.root if hasattr(o, "root") else o).id: (o.root if hasattr(o, "root") else o).current_value
            for o in options}


async def choose_profile(args, editor, conn, process, summary):
    """The profile config option, chosen before the first prompt, once."""
    await initialize(conn, editor)
    new = await conn.new_session(cwd=args.workspace, mcp_servers=[])
    sid = new.session_id
    summary["sessionId"] = sid
    summary["before"] = option_values(new.config_options)
    changed = await conn.set_config_option(session_id=sid, config_id="profile", value="builtin:plan")
    summary["after"] = option_values(changed.config_options)
    try:
        await conn.set_config_option(session_id=sid, config_id="profile", value="builtin:review")
        summary["second"] = "accepted"
    except Exception as error:  # the SDK raises the JSON-RPC error
        summary["second"] = f"{error} {getattr(error, 'data', '')}"
    done = await conn.prompt(session_id=sid, prompt=[text_block("plan it")])
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    summary["modeUpdates"] = [u.get("currentModeId") for u in editor.of_kind("current_mode_update")]


async def traced(args, editor, conn, process, summary):
    """A prompt carrying the caller's trace context in `_meta`."""
    await initialize(conn, editor)
    sid = (await conn.new_session(cwd=args.workspace, mcp_servers=[])).session_id
    done = await conn.prompt(session_id=sid, prompt=[text_block("traced")], traceparent=args.traceparent)
    editor.check(done.stop_reason == "end_turn", f"stopReason {done.stop_reason}")
    try:
        await conn.prompt(session_id=sid, prompt=[text_block("bad")], traceparent="not-a-traceparent")
        summary["bad"] = "accepted"
    except Exception as error:
        summary["bad"] = f"{error} {getattr(error, 'data', '')}"


SCENARIOS = {"traced": traced, "choose_profile": choose_profile, "profiled": profiled, "basics": basics, "approvals": approvals, "cancel": cancel, "write": write,
             "mcp": mcp, "sandboxed": sandboxed}


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=[*SCENARIOS, "load"])
    parser.add_argument("--roder", required=True)
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--raw", required=True)
    parser.add_argument("--session")
    parser.add_argument("--runner")
    parser.add_argument("--worktree", action="store_true")
    parser.add_argument("--mcp-command")
    parser.add_argument("--profile")
    parser.add_argument("--traceparent")
    args = parser.parse_args()
    editor = Editor("allow_once")
    summary: dict[str, Any] = {}
    wire: list = []
    async with (await start(args, editor, wire)) as (conn, process):
        if args.scenario == "load":
            await asyncio.wait_for(load(args, editor, conn, process, summary, wire), 120)
        else:
            await asyncio.wait_for(SCENARIOS[args.scenario](args, editor, conn, process, summary), 120)
        # End of input ends the agent.
        process.stdin.close()
        code = await asyncio.wait_for(process.wait(), 30)
        editor.check(code == 0, f"roder acp exited with {code}")
    summary["errors"] = editor.errors
    summary["log"] = editor.log
    for error in editor.errors:
        print("FAIL:", error)
    print(json.dumps(summary))
    return 1 if editor.errors else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
