"""Serve route groups over real HTTP for browser tests: moto's ThreadedMotoServer on a free port and
``chalice.local`` dev servers for the chosen groups, with the request handler `make run` uses
(``infra.local_run``), all on 127.0.0.1 (URLs use ``localhost`` so the WebAuthn relying-party ID is a
valid domain). The identity browser tests use it: they need only these groups, in this process."""
from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chalice.config import Config
from chalice.local import LocalDevServer
from moto.server import ThreadedMotoServer

from chalicelib.core import process_state
from chalicelib.groups import create_app
from infra.bootstrap import bootstrap_all
from infra.local_run import _request_handler
from tests.functional.conftest import reset_process_state
from tests.integration.sso_peers import free_port

ENV_NAMES = ("AWS_ENDPOINT_URL", "AUTH_URL", "BASE_URL", "APP_URL", "GATEWAY_URL", "MAIL_OUTBOX_DIR",
             "DOMAIN_VERIFICATION_URL")


@dataclass
class LiveStack:
    urls: dict[str, str]
    outbox: str
    _servers: list[Any] = field(default_factory=list, repr=False)


def live_stack(groups: tuple[str, ...], outbox: str, extra_env: dict[str, str] | None = None) -> Iterator[LiveStack]:
    saved = {name: os.environ.get(name) for name in ENV_NAMES}
    moto = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    moto.start()
    ports = {g: free_port() for g in groups}
    urls = {g: f"http://localhost:{p}" for g, p in ports.items()}
    os.environ.update({"AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto._port}", "MAIL_OUTBOX_DIR": outbox,
                       **({"AUTH_URL": urls["identity"]} if "identity" in urls else {}),
                       **({"BASE_URL": urls["platform"]} if "platform" in urls else {}),
                       **({"APP_URL": urls["app"]} if "app" in urls else {}), **(extra_env or {})})
    reset_process_state()
    process_state.reset_all(derived=True)  # clients and bound models are per endpoint
    bootstrap_all()
    servers = []
    for group, port in ports.items():
        app = create_app(group)
        server = LocalDevServer(app, Config.create(chalice_app=app), "127.0.0.1", port,
                                handler_cls=_request_handler(group))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
    try:
        yield LiveStack(urls, outbox, servers)
    finally:
        for server in servers:
            server.server.shutdown()
            server.server.server_close()
        moto.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        reset_process_state()
        process_state.reset_all(derived=True)
