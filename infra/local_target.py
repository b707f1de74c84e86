"""Where an operator command run from the work tree points: at what ``AWS_ENDPOINT_URL`` / ``AWS_PROFILE``
name when one is set (LocalStack, a deployment), otherwise at the emulator of a running `make run`
(``.local/run.json``, or ``LOCAL_STATE_DIR``) with its dummy credentials."""
from __future__ import annotations

import os


def configure() -> None:
    if os.environ.get("AWS_ENDPOINT_URL") or os.environ.get("AWS_PROFILE"):
        return
    from infra.demo_token import load_run_info, point_at

    point_at(load_run_info())
