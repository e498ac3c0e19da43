"""A loopback HTTP server that speaks the part of Ollama's API memlink uses
(`GET /api/tags`, `POST /api/show`, `POST /api/chat`), so tests run the real `ollama`
client. Models named in ``embedding`` are embedding models: `/api/show` gives them the
capability "embedding" (chat models get "completion") and a BERT family, as Ollama does.

Each chat request takes the next scripted reply: ("json", text) answers with ``text`` as
the assistant message, ("status", code, error) answers with an HTTP error, ("hang", s)
waits ``s`` seconds before answering, ("cut", text) streams ``text`` and breaks the
connection off mid-stream, ("slow", text, s) streams it a word every ``s`` seconds,
("held", text, event) streams its first word and the rest once ``event`` is set,
("stepped", text, semaphore) a word each time ``semaphore`` is released.
Chat requests are recorded ({path, body}) in ``requests``; ``hits`` records the path of
every request, whatever it is.

Run as a program it serves until killed, for the app in a real terminal
(tools/tmux_journey.sh --journeys): every streamed chat request gets REPLY a word at a time,
and a structured request (extraction) gets a 503, as a model that cannot do it would:

    python tests/ollama_stub.py [--model NAME] [--pause SECONDS] REPLY   # prints its host"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class OllamaStub:
    def __init__(self, models: list[str] | None = None, embedding: list[str] | None = None):
        self.embedding = list(embedding or [])
        self.models = (models if models is not None else ["tiny:latest"]) + self.embedding
        self.script: list[tuple] = []
        self.requests: list[dict] = []
        self.hits: list[str] = []
        self.streams: tuple | None = None  # the reply to every streamed chat once the script is empty
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

            def _stream(self, body: dict, content: str, pause: float = 0.0, held: threading.Event | None = None,
                        steps: threading.Semaphore | None = None) -> None:
                """Newline-delimited JSON chunks, as Ollama streams a chat reply (``pause``
                seconds between them, as a model writing; ``held``: the rest only once it
                is set, a reply still being written for as long as a test needs; ``steps``:
                each next piece once released)."""
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
                    if held is not None:
                        held.wait(60)
                    if steps is not None and piece:  # (nothing to wait for after the last)
                        steps.acquire(timeout=60)
                    if pause:
                        time.sleep(pause)
                self.close_connection = True

            def do_GET(self):
                stub.hits.append(self.path)
                if self.path == "/api/tags":
                    self._send(200, {"models": [
                        {"name": m, "model": m, "modified_at": "2026-11-01T00:00:00Z", "size": 1, "digest": "0" * 12,
                         "details": stub.details(m)}
                        for m in stub.models
                    ]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                stub.hits.append(self.path)
                if self.path == "/api/show":
                    name = stub.known(str(body.get("model", "")))
                    if name is None:
                        self._send(404, {"error": f"model '{body.get('model')}' not found"})
                    else:
                        self._send(200, {"modified_at": "2026-11-01T00:00:00Z", "details": stub.details(name),
                                         "model_info": {}, "capabilities": stub.capabilities(name)})
                    return
                if self.path != "/api/chat":
                    self._send(404, {"error": "not found"})
                    return
                stub.requests.append({"path": self.path, "body": body})
                if stub.script:
                    reply = stub.script.pop(0)
                elif stub.streams is not None:
                    reply = stub.streams if body.get("stream") else ("status", 503, "this stand-in only streams replies")
                else:
                    reply = ("status", 500, "no scripted reply")
                if reply[0] == "hang":
                    time.sleep(reply[1])
                    reply = ("json", "{}")
                if reply[0] == "status":
                    self._send(reply[1], {"error": reply[2]})
                    return
                if reply[0] == "cut":  # a chunked stream that breaks off after its first piece
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-ndjson")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = (json.dumps({"model": body.get("model", ""), "created_at": "2026-11-30T00:00:00Z",
                                         "message": {"role": "assistant", "content": reply[1]}, "done": False}) + "\n").encode()
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                    self.close_connection = True
                    return
                if reply[0] == "slow":  # ("slow", text, seconds between pieces)
                    self._stream(body, reply[1], reply[2])
                    return
                if reply[0] == "held":  # ("held", text, threading.Event): its first piece, the rest once set
                    self._stream(body, reply[1], held=reply[2])
                    return
                if reply[0] == "stepped":  # ("stepped", text, threading.Semaphore): a piece per release
                    self._stream(body, reply[1], steps=reply[2])
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

    def known(self, name: str) -> str | None:
        """The pulled model a request names (``llama3.2`` is ``llama3.2:latest``)."""
        for candidate in (name, f"{name}:latest"):
            if candidate in self.models:
                return candidate
        return None

    def is_embedding(self, name: str) -> bool:
        return name in self.embedding or f"{name}:latest" in self.embedding

    def capabilities(self, name: str) -> list[str]:
        return ["embedding"] if self.is_embedding(name) else ["completion"]

    def details(self, name: str) -> dict:
        family = "nomic-bert" if self.is_embedding(name) else "tiny"
        return {"format": "gguf", "family": family, "parameter_size": "1M", "quantization_level": "Q4"}

    def count(self, path: str) -> int:
        return self.hits.count(path)

    def __enter__(self) -> OllamaStub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="A stand-in Ollama on a free loopback port, until killed.")
    parser.add_argument("reply", help="what every streamed chat reply says")
    parser.add_argument("--model", default="llama3.2", help="the one chat model it has")
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between streamed words")
    args = parser.parse_args()
    server = OllamaStub(models=[args.model if ":" in args.model else f"{args.model}:latest"])
    server.streams = ("slow", args.reply, args.pause)
    print(server.host, flush=True)
    server.server.serve_forever()
