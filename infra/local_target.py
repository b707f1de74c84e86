"""Where an operator command run from the work tree points: at what ``AWS_ENDPOINT_URL`` / ``AWS_PROFILE``
name when one is set (LocalStack, a deployment), otherwise at the emulator of a running `make run`
(``.local/run.json``, or ``LOCAL_STATE_DIR``) with its dummy credentials. Nothing running (no ``run.json``,
or one left by a `make run` that was killed) stops the command with a message saying so."""
from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit


def configure() -> None:
    if os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_PROFILE"):
        return
    from infra.demo_token import load_run_info, point_at

    info = load_run_info()
    endpoint = info["urls"]["aws_endpoint"]
    if not answers(endpoint):
        raise SystemExit(f"the emulator at {endpoint} (from run.json) does not answer: start the platform "
                         "with `make run` first")
    point_at(info)


def answers(url: str) -> bool:
    """Whether something accepts connections at ``url``'s host and port."""
    parts = urlsplit(url)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), timeout=2):
            return True
    except OSError:
        return False
