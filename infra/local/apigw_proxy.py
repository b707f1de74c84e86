"""API Gateway's Lambda proxy integration, played in front of a local server (``APIGW_PROXY=1 make run``).

What a deployed client sees and ``make run``'s streaming servers hide: the proxy sends the request on,
waits for the WHOLE response and only then answers, with a ``Content-Length`` (a response streamed in
pieces arrives as one body), and a response not complete within the integration timeout (29 s,
``APIGW_PROXY_TIMEOUT``) is a ``504`` with API Gateway's own body, ``{"message": "Endpoint request timed
out"}``, whatever the server goes on doing. Hop-by-hop headers are dropped both ways.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_TIMEOUT_S = 29.0
HOP_BY_HOP = {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
              "transfer-encoding", "upgrade", "content-length", "host"}
TIMED_OUT = json.dumps({"message": "Endpoint request timed out"}).encode()


def enabled() -> bool:
    return os.environ.get("APIGW_PROXY", "") == "1"


def timeout_s() -> float:
    return float(os.environ.get("APIGW_PROXY_TIMEOUT", DEFAULT_TIMEOUT_S))


def free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class ApiGatewayProxy:
    """Listens on ``host:port`` (0: any free port) and forwards to ``host:target_port``."""

    def __init__(self, host: str, port: int, target_port: int, timeout: float | None = None) -> None:
        self.host, self.target_port = host, target_port
        self.timeout = timeout if timeout is not None else timeout_s()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
                pass

            def __getattr__(self, name: str) -> Any:
                if name.startswith("do_"):
                    return self._forward
                raise AttributeError(name)

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                status, headers, data = proxy.call(self.command, self.path, dict(self.headers.items()), body)
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self.port = int(self.server.server_address[1])

    def start(self) -> ApiGatewayProxy:
        threading.Thread(target=self.server.serve_forever, name=f"apigw-{self.port}", daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def call(self, method: str, path: str, headers: dict[str, str],
             body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
        """The whole response of the server, or API Gateway's 504 past the integration timeout."""
        deadline = time.monotonic() + self.timeout
        conn = http.client.HTTPConnection(self.host, self.target_port, timeout=self.timeout)
        try:
            conn.request(method, path, body=body, headers={k: v for k, v in headers.items() if k.lower() not in HOP_BY_HOP})
            resp = conn.getresponse()
            chunks = []
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError
                if conn.sock is not None:
                    conn.sock.settimeout(remaining)
                chunk = resp.read1(65536)
                if not chunk:
                    break
                chunks.append(chunk)
            kept = [(k, v) for k, v in resp.getheaders() if k.lower() not in HOP_BY_HOP]
            return resp.status, kept, b"".join(chunks)
        except TimeoutError:
            return 504, [("Content-Type", "application/json"), ("x-amzn-ErrorType", "InternalServerErrorException")], \
                TIMED_OUT
        except OSError:
            return 502, [("Content-Type", "application/json")], json.dumps({"message": "Internal server error"}).encode()
        finally:
            conn.close()
