"""The local HTTP server `make run` starts (``infra.local_run``): its connections send without Nagle's delay.

Chalice's request handler writes an answer's headers and body in two writes. With Nagle's algorithm on, the
body waits for the ACK of the headers, which a keep-alive client delays (40 ms on Linux), so every answer on
a kept-alive connection took 40 ms more than its work."""
from __future__ import annotations

import http.client
import socket
from typing import Any

from infra.local_run import _request_handler
from tests.local_http import serve_group, stop


def test_every_connection_of_the_local_server_sends_at_once() -> None:
    nodelay: list[int] = []

    class Probe(_request_handler("platform")):  # type: ignore[misc]
        def handle(self) -> None:  # once per connection, after ``setup`` configured its socket
            nodelay.append(self.connection.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            super().handle()

    server = serve_group("platform", Probe)
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.server.server_address[1], timeout=30)
        for _ in range(3):  # one kept-alive connection, where the delay showed
            conn.request("POST", "/v1/agents", body=b"{}", headers={"Content-Type": "application/json"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 401  # no token: answered by the app, through the handler
        conn.close()
    finally:
        stop(server.server)
    assert len(nodelay) == 1  # the three requests shared the connection
    assert nodelay[0] != 0


def test_a_client_gone_before_its_answer_ends_the_connection_quietly(capfd: Any) -> None:
    """Writing an answer to a client that left (a browser tab closed mid-page) fails with a broken pipe or a
    reset; the handler ends that connection without the traceback ``socketserver`` printed for each."""
    gone: list[type[OSError]] = [BrokenPipeError, ConnectionResetError]

    class Leaving(_request_handler("platform")):  # type: ignore[misc]
        def _send_http_response(self, code: int, headers: Any, body: Any) -> None:
            raise gone.pop(0)()  # the write to the departed client fails

    server = serve_group("platform", Leaving)
    try:
        for _ in range(2):
            with socket.create_connection(server.server.server_address, timeout=30) as client:
                client.sendall(b"GET /v1/me HTTP/1.1\r\nHost: x\r\n\r\n")
                assert client.recv(1) == b""  # the server closed the connection, no answer
    finally:
        stop(server.server)
    assert not gone  # both failures were met
    assert "Traceback" not in capfd.readouterr().err
