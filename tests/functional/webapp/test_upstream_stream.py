"""The web app's forwarder passes an upstream event stream on as it arrives, and closing it (the browser
went away) closes the upstream connection. The upstream is a stdlib HTTP server on loopback that writes
one event, then waits at a gate the test opens: "the first event passed, the stream is not over" is a
state, not a race."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from chalicelib.webapp import upstream
from tests.local_http import serve, stop, url_of


class _Upstream:
    def __init__(self) -> None:
        self.gate, self.ended, self.broken = threading.Event(), threading.Event(), False
        upstream_ = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                self.send_response(201)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                try:
                    for n in range(200):
                        data = f"id: {n + 1}\nevent: content_delta\ndata: {{\"text\":\"piece {n} é\"}}\n\n".encode()
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                        if n == 0:
                            upstream_.gate.wait(30)
                    self.wfile.write(b"0\r\n\r\n")
                except OSError:
                    upstream_.broken = True
                finally:
                    upstream_.ended.set()

        self.server = serve(Handler)
        self.url = url_of(self.server, "/v1/chats")


@pytest.fixture
def peer() -> Iterator[_Upstream]:
    p = _Upstream()
    yield p
    p.gate.set()
    stop(p.server)


def test_the_first_event_passes_before_the_stream_ends(peer: _Upstream) -> None:
    answer = upstream.send("POST", peer.url, "token", b"{}", {"content-type": "application/json"})
    assert answer.status == 201 and answer.stream is not None and answer.body == b""
    assert answer.headers["Content-Type"].startswith("text/event-stream")
    first = next(answer.stream)
    assert first.startswith("id: 1\nevent: content_delta") and not peer.ended.is_set()
    peer.gate.set()
    rest = "".join(answer.stream)
    assert (first + rest).count("event: content_delta") == 200 and "piece 199 é" in rest
    assert peer.ended.wait(10) and not peer.broken


def test_closing_the_relay_closes_the_upstream_connection(peer: _Upstream) -> None:
    answer = upstream.send("POST", peer.url, "token", b"{}", {"content-type": "application/json"})
    assert answer.stream is not None
    next(answer.stream)
    answer.stream.close()  # type: ignore[attr-defined]  what the local server does when the browser left
    peer.gate.set()
    assert peer.ended.wait(10) and peer.broken
