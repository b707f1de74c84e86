"""A scripted OpenAI-compatible server on loopback (stdlib ``http.server``, real HTTP): a test double of
the model only, for the answers a real model cannot give deterministically (exact grounding cases,
injections obeyed, malformed streams, slowness). Each test sets what it answers:

- ``answer``: the assistant text (plain, or streamed in pieces when the request says ``stream``);
- ``reply``: a function of the request body giving another text for some requests (None: ``answer``);
- ``models``: what ``GET /v1/models`` lists (``None``: answer 404 there, as a non-OpenAI server would);
- ``key``: the Bearer key it requires (``None``: none); a wrong or missing key answers 401;
- ``delay``: seconds to wait before answering; ``malformed``: stream a broken event; ``html``: answer a
  web page instead of JSON;
- ``gate`` and ``gate_after``: a streamed answer sends its first ``gate_after`` pieces, then waits until
  the test sets ``gate`` (so "the first pieces arrived, the answer is not complete" is a state, not a
  race); ``pace``: seconds between the pieces after the gate (a model still writing); ``hold`` and
  ``hold_after``: a second gate, after that many pieces (a model that has not finished whatever its
  reader does until the test lets it). ``ended`` is set
  when the stream ends, ``broken`` when the client closed it first (the platform stopped the model),
  ``pieces_sent`` counts what was written.
Every request is recorded (path, Authorization header, body).
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.local_http import send_body, serve, stop, url_of


@dataclass
class ScriptedPeer:
    answer: str = "OK."
    models: list[str] | None = field(default_factory=lambda: ["small"])
    key: str | None = None
    delay: float = 0.0
    malformed: bool = False
    html: bool = False
    tool_calls: list[dict[str, Any]] | None = None
    reply: Any = None  # (request body) -> str | None
    gate: threading.Event | None = None
    gate_after: int = 0
    pace: float = 0.0
    hold: threading.Event | None = None
    hold_after: int = 0
    ended: threading.Event = field(default_factory=threading.Event)
    broken: bool = False
    pieces_sent: int = 0
    calls: list[dict[str, Any]] = field(default_factory=list)
    server: Any = None
    url: str = ""

    def stop(self) -> None:
        stop(self.server)

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])


def start(**script: Any) -> ScriptedPeer:
    peer = ScriptedPeer(**script)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _authorised(self) -> bool:
            if peer.key is not None and self.headers.get("Authorization") != f"Bearer {peer.key}":
                self._send(401, b'{"error": "unauthorized"}')
                return False
            return True

        def _send(self, status: int, raw: bytes, ctype: str = "application/json") -> None:
            send_body(self, raw, status, ctype)

        def do_GET(self) -> None:  # noqa: N802
            peer.calls.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": None})
            if not self._authorised():
                return
            if peer.html:
                self._send(200, b"<html><body>Welcome</body></html>", "text/html")
            elif self.path == "/v1/models" and peer.models is not None:
                self._send(200, json.dumps({"object": "list", "data": [{"id": m, "object": "model"}
                                                                        for m in peer.models]}).encode())
            else:
                self._send(404, b'{"error": "not found"}')

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            peer.calls.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
            if not self._authorised():
                return
            if peer.delay:
                time.sleep(peer.delay)
            if peer.html:
                self._send(200, b"<html><body>Welcome</body></html>", "text/html")
                return
            text = (peer.reply(body) if peer.reply is not None else None) or peer.answer
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if peer.tool_calls is not None:
                message = {"role": "assistant", "content": None, "tool_calls": peer.tool_calls}
            if not body.get("stream"):
                self._send(200, json.dumps({"object": "chat.completion", "model": body.get("model"),
                                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                            "usage": {"prompt_tokens": 100, "completion_tokens": 20}}).encode())
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            try:
                for n, i in enumerate(range(0, len(text), 11)):
                    if peer.gate is not None and n == peer.gate_after:
                        peer.gate.wait(60)
                    if peer.hold is not None and n == peer.hold_after:
                        peer.hold.wait(60)
                    if peer.gate is not None and n >= peer.gate_after and peer.pace:
                        time.sleep(peer.pace)
                    chunk = {"choices": [{"index": 0, "delta": {"content": text[i:i + 11]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    peer.pieces_sent += 1
                if peer.malformed:
                    self.wfile.write(b"data: {not json\n\n")
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
            except OSError:  # the client closed the stream: stop writing, as a model server does
                peer.broken = True
                self.close_connection = True
            finally:
                peer.ended.set()

    peer.server = serve(Handler)
    peer.url = url_of(peer.server)
    return peer
