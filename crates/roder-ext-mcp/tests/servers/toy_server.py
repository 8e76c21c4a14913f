"""A small MCP server written with the `mcp` SDK (PyPI), for Roder's tests.

    python3 toy_server.py stdio
    python3 toy_server.py http TOKEN_VARIABLE

Over HTTP it binds 127.0.0.1 on a free port, prints `PORT <n>` on stdout once
it listens, and refuses any request without `Authorization: Bearer <token>`,
the token being the named variable's value.
"""

import os
import socket
import sys

from pydantic import BaseModel

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image

server = MCPServer("toy")


@server.tool()
def echo(text: str) -> str:
    """Returns its argument."""
    return f"echo: {text}"


@server.tool()
def env(name: str) -> str:
    """The value of one of the server's environment variables, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool()
def picture() -> list:
    """Returns a caption and a tiny PNG."""
    return ["a red pixel", Image(data=b"\x89PNG\r\n\x1a\nfake", format="png")]


class Measure(BaseModel):
    length: int
    words: int


@server.tool(structured_output=True)
def measure(text: str) -> Measure:
    """Structured output: the length and word count of a text."""
    return Measure(length=len(text), words=len(text.split()))


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool()
def shout_to_stderr(text: str) -> str:
    """Writes text to stderr and returns a short note."""
    print(text, file=sys.stderr, flush=True)
    return "wrote to stderr"


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleeps, then says so."""
    import anyio

    await anyio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def pid() -> str:
    """The server's process id."""
    return str(os.getpid())


def serve_http(token_variable: str) -> None:
    import uvicorn

    token = os.environ[token_variable]
    app = server.streamable_http_app()

    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await app(scope, receive, send)

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(guarded, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if mode == "http":
        serve_http(sys.argv[2])
    else:
        server.run("stdio")
