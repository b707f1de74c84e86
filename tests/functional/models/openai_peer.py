"""A small OpenAI-compatible server on loopback (a real HTTP peer, stdlib ``http.server``) that records
every call. It answers like a grounded model: it quotes the first sentence of passage [1] verbatim,
and also makes two citations that must be dropped (a passage that was not retrieved, and a quote that
is not in the passage)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_http import send_body, serve, stop, url_of

KEY = "sk-test-loopback-123"


@dataclass
class Peer:
    url: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    server: Any = None

    def stop(self) -> None:
        stop(self.server)


def _answer(body: dict[str, Any]) -> str:
    system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
    m = re.search(r"^\[1\] [^\n]*\n([^\n]*?[.!?])", system, re.M)
    quote = m.group(1) if m else ""
    return (f'The handbook says so [1: "{quote}"]. The moon is cheese [9: "The moon is cheese."]. '
            f'Also invented [1: "This sentence is not in the passage."].')


def start() -> Peer:
    peer = Peer("")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            peer.calls.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                self.send_response(401)
                self.end_headers()
                return
            if self.path == "/v1/embeddings":
                data = [{"index": i, "embedding": [float(len(t)), 1.0]} for i, t in enumerate(body["input"])]
                self._json({"data": data, "model": body["model"]})
                return
            text = _answer(body)
            if not body.get("stream"):
                self._json({"id": "cmpl-1", "object": "chat.completion", "model": body["model"],
                            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                         "finish_reason": "stop"}],
                            "usage": {"prompt_tokens": 321, "completion_tokens": 45}})
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for i in range(0, len(text), 17):
                chunk = {"choices": [{"index": 0, "delta": {"content": text[i:i + 17]}}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            self.wfile.write(f"data: {json.dumps({'choices': [], 'usage': {'prompt_tokens': 321, 'completion_tokens': 45}})}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

        def _json(self, obj: Any) -> None:
            send_body(self, obj)

    peer.server = serve(Handler)
    peer.url = url_of(peer.server)
    return peer
