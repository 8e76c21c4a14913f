"""Drives `roder mcp-server` with the `mcp` SDK's own client (PyPI), for
mcp_server_e2e.rs.

    python3 mcp_client.py RODER_BINARY WORKSPACE [timeout]

Lists the tools, runs a task in WORKSPACE, continues its thread, asks for a
thread that does not exist and a relative workspace, runs a task in the
runner `local` and one in a runner that is not configured; prints one JSON
object with what it saw.
"""

import asyncio
import json
import os
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def summary(result):
    return {
        "is_error": bool(result.is_error),
        "text": "\n".join(block.text for block in result.content if getattr(block, "text", None)),
        "structured": result.structured_content,
    }


async def main(roder, workspace):
    params = StdioServerParameters(command=roder, args=["mcp-server"], env=dict(os.environ))
    async with Client(params) as client:
        tools = await client.list_tools()
        first = await client.call_tool("run_task", {"prompt": "write note.txt", "workspace": workspace})
        thread_id = first.structured_content["threadId"]
        second = await client.call_tool("continue_thread", {"thread_id": thread_id, "prompt": "and now?"})
        missing = await client.call_tool("continue_thread", {"thread_id": "no-such-thread", "prompt": "hi"})
        relative = await client.call_tool("run_task", {"prompt": "x", "workspace": "relative/dir"})
        in_runner = await client.call_tool("run_task", {"prompt": "write in the runner", "runner": "local"})
        unknown_runner = await client.call_tool("run_task", {"prompt": "x", "runner": "nope"})
    print(json.dumps({
        "tools": {tool.name: tool.input_schema for tool in tools.tools},
        "first": summary(first),
        "second": summary(second),
        "missing": summary(missing),
        "relative": summary(relative),
        "in_runner": summary(in_runner),
        "unknown_runner": summary(unknown_runner),
    }))


async def timeout(roder, workspace):
    """One task whose model never answers, with timeout_seconds = 1."""
    params = StdioServerParameters(command=roder, args=["mcp-server"], env=dict(os.environ))
    async with Client(params) as client:
        result = await client.call_tool(
            "run_task", {"prompt": "wait", "workspace": workspace, "timeout_seconds": 1}
        )
    print(json.dumps(summary(result)))


if len(sys.argv) > 3 and sys.argv[3] == "timeout":
    asyncio.run(timeout(sys.argv[1], sys.argv[2]))
else:
    asyncio.run(main(sys.argv[1], sys.argv[2]))
