"""A local JSON API for tests of ``http`` connectors, and its fixture."""
from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


class LocalApi:
    """A JSON API on a loopback port for ``http`` connectors: one page of one item; ``/moved`` redirects to
    the instance-metadata address. ``paths`` records every path asked for."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        paths = self.paths

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                paths.append(self.path.split("?", 1)[0])
                if self.path.startswith("/moved"):
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/iam/security-credentials/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"items": [{"id": 1, "updated_at": "2024-01-01T00:00:00Z"}], "next": None}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self) -> LocalApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api() -> Iterator[LocalApi]:
    a = LocalApi()
    yield a
    a.close()
