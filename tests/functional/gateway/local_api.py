"""A local JSON API for tests of ``http`` connectors, and its fixture."""
from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.local_http import send_body, serve, stop


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
                send_body(self, {"items": [{"id": 1, "updated_at": "2024-01-01T00:00:00Z"}], "next": None})

        self.server = serve(Handler)
        self.port = self.server.server_address[1]

    def __enter__(self) -> LocalApi:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        stop(self.server)


@pytest.fixture
def api() -> Iterator[LocalApi]:
    a = LocalApi()
    yield a
    a.close()
