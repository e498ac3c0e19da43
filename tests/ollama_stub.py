"""A loopback HTTP server that speaks the part of Ollama's API memlink uses
(`GET /api/tags`, `POST /api/chat`), so tests run the real `ollama` client.

Each chat request takes the next scripted reply: ("json", text) answers with ``text`` as
the assistant message, ("status", code, error) answers with an HTTP error, ("hang", s)
waits ``s`` seconds before answering. Requests are recorded for assertions."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OllamaStub:
    def __init__(self, models: list[str] | None = None):
        self.models = models if models is not None else ["tiny:latest"]
        self.script: list[tuple] = []
        self.requests: list[dict] = []
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output clean
                pass

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _stream(self, body: dict, content: str) -> None:
                """Newline-delimited JSON chunks, as Ollama streams a chat reply."""
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.end_headers()
                pieces = [w + " " for w in content.split(" ")]
                pieces[-1] = pieces[-1].rstrip()
                for piece in pieces + [""]:
                    chunk = {"model": body.get("model", ""), "created_at": "2026-11-30T00:00:00Z",
                             "message": {"role": "assistant", "content": piece}, "done": piece == ""}
                    self.wfile.write((json.dumps(chunk) + "\n").encode())
                    self.wfile.flush()
                self.close_connection = True

            def do_GET(self):
                if self.path == "/api/tags":
                    self._send(200, {"models": [
                        {"name": m, "model": m, "modified_at": "2026-11-01T00:00:00Z", "size": 1, "digest": "0" * 12,
                         "details": {"format": "gguf", "family": "tiny", "parameter_size": "1M", "quantization_level": "Q4"}}
                        for m in stub.models
                    ]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.requests.append({"path": self.path, "body": body})
                if self.path != "/api/chat":
                    self._send(404, {"error": "not found"})
                    return
                reply = stub.script.pop(0) if stub.script else ("status", 500, "no scripted reply")
                if reply[0] == "hang":
                    time.sleep(reply[1])
                    reply = ("json", "{}")
                if reply[0] == "status":
                    self._send(reply[1], {"error": reply[2]})
                    return
                if body.get("stream"):
                    self._stream(body, reply[1])
                    return
                self._send(200, {
                    "model": body.get("model", ""), "created_at": "2026-11-30T00:00:00Z",
                    "message": {"role": "assistant", "content": reply[1]},
                    "done": True, "done_reason": "stop",
                })

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.host = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "OllamaStub":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
