"""A local HTTP peer for tests: a request handler class served on a free loopback port by a daemon thread,
and the one way its handlers answer with a whole body."""
from __future__ import annotations

import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


class PeerServer(ThreadingHTTPServer):
    """A loopback peer's server: a client that leaves before its answer (a test done with it, a refused
    request) ends that connection quietly, where ``socketserver`` printed a traceback."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


def serve(handler: type[BaseHTTPRequestHandler], tls: ssl.SSLContext | None = None) -> ThreadingHTTPServer:
    """``handler`` served on 127.0.0.1 (a free port: ``server.server_address[1]``), TLS when ``tls`` is given;
    stop it with ``stop``."""
    server = PeerServer(("127.0.0.1", 0), handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def serve_group(group: str, handler_cls: type | None = None) -> Any:
    """The route group's app served as `make run` serves it (``infra.local_run``'s request handler for the
    group, or ``handler_cls``) on a free loopback port by a daemon thread: its port is
    ``server.server.server_address[1]``; stop it with ``stop(server.server)``."""
    from chalice.config import Config
    from chalice.local import LocalDevServer

    from chalicelib.groups import create_app
    from infra.local_run import _request_handler

    app = create_app(group)
    config = Config.create(chalice_app=app, app_name=f"aiplat-{group}", chalice_stage="local", project_dir=str(ROOT))
    server = LocalDevServer(app, config, "127.0.0.1", 0, handler_cls=handler_cls or _request_handler(group))
    threading.Thread(target=server.server.serve_forever, daemon=True).start()
    return server


def url_of(server: ThreadingHTTPServer, path: str = "", scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{server.server_address[1]}{path}"


def stop(server: ThreadingHTTPServer) -> None:
    server.shutdown()
    server.server_close()


def send_body(handler: BaseHTTPRequestHandler, body: Any, status: int = 200,
              content_type: str | None = "application/json") -> None:
    """Answer with ``body`` (bytes as they are, anything else as JSON) and its length."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(status)
    if content_type is not None:
        handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(raw)))
    handler.end_headers()
    handler.wfile.write(raw)
