"""A minimal OpenAI-compatible chat-completions server on 127.0.0.1, for benchmarks only.

``python benchmarks/_loopback_server.py`` binds an ephemeral port, prints it on one line and
answers every ``POST .../chat/completions`` with the same two-word reply and constant usage,
over HTTP/1.1 keep-alive. It reads each request body in full (so the client's cost of sending a
long history is paid) and does nothing else with it: no parsing, no work that grows with the
history. It runs in its own process so its work is not counted in the client's turn, and exits
at the end of its standard input.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

REPLY = json.dumps(
    {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": 0,
        "model": "loopback",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "ok fine"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall

    def do_POST(self) -> None:  # the standard library's name
        length = int(self.headers.get("content-length") or 0)
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                return
            remaining -= len(chunk)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(REPLY)))
        self.end_headers()
        self.wfile.write(REPLY)

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the benchmark closes our input
    server.shutdown()


if __name__ == "__main__":
    main()
