"""A scripted OpenAI-compatible Chat Completions server (stdlib only) that
runs inside a Harbor task container, so a trial of the Roder adapter needs
no model service: each POST /v1/chat/completions streams the next reply of
SCRIPT, with usage. Test fixture; never a model.

    python3 fake_model.py PORT
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# What the model "does": think and write the file the task asks for, then
# say so.
SCRIPT = [
    {
        "reasoning": "The task wants /app/hello.txt; one command writes it.",
        "tool_call": {
            "id": "call-write",
            "name": "exec_command",
            "arguments": json.dumps({"cmd": "printf 'Hello, Harbor!\\n' > /app/hello.txt && cat /app/hello.txt"}),
        },
        "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "cached": 300},
    },
    {
        "text": "Wrote /app/hello.txt.",
        "usage": {"prompt_tokens": 1300, "completion_tokens": 8, "cached": 1200},
    },
]


def chunks(reply):
    """The SSE chunks of one reply."""
    def chunk(delta, finish=None):
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "fake",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    yield chunk({"role": "assistant", "content": ""})
    if "reasoning" in reply:
        yield chunk({"reasoning_content": reply["reasoning"]})
    if "tool_call" in reply:
        call = reply["tool_call"]
        yield chunk({"tool_calls": [{"index": 0, "id": call["id"], "type": "function",
                                     "function": {"name": call["name"], "arguments": call["arguments"]}}]})
        yield chunk({}, "tool_calls")
    else:
        yield chunk({"content": reply["text"]})
        yield chunk({}, "stop")
    usage = reply["usage"]
    yield {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake",
        "choices": [],
        "usage": {
            "prompt_tokens": usage["prompt_tokens"],
            "completion_tokens": usage["completion_tokens"],
            "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"],
            "prompt_tokens_details": {"cached_tokens": usage["cached"]},
        },
    }


class Handler(BaseHTTPRequestHandler):
    served = 0

    def do_GET(self):
        self.send_response(404)
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        if not self.path.endswith("/chat/completions") or Handler.served >= len(SCRIPT):
            self.send_response(404)
            self.end_headers()
            return
        reply = SCRIPT[Handler.served]
        Handler.served += 1
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for data in chunks(reply):
            self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True

    def log_message(self, format, *args):
        sys.stderr.write("fake model: " + format % args + "\n")


if __name__ == "__main__":
    port = int(sys.argv[1])
    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
