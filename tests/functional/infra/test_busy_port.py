"""`make run` with a port already taken stops at once, names the port and its group, and says how to
choose another (LOCAL_PORTS), without a traceback and before seeding anything."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_busy_port_is_named_with_the_fix(tmp_path: Path) -> None:
    with socket.socket() as taken, socket.socket() as free:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        free.bind(("127.0.0.1", 0))
        port, spare = taken.getsockname()[1], free.getsockname()[1]
        free.close()
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_ENDPOINT_URL")}
        env.update(LOCAL_PORTS=f"platform={spare},gateway={port}", LOCAL_STATE_DIR=str(tmp_path),
                   AWS_ENDPOINT_URL="http://127.0.0.1:9")  # no emulator: only the group ports are checked
        done = subprocess.run([sys.executable, "-m", "infra.local_run"], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 1
    assert f"{port} (gateway)" in done.stderr and "already in use" in done.stderr  # other groups' ports may be busy too
    assert f"gateway={port + 100}" in done.stderr and "LOCAL_PORTS=" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not (tmp_path / "run.json").exists()  # stopped before seeding
