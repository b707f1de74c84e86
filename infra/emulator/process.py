"""The emulator (a moto server) in a process of its own, for measurements that must keep its work out of
the measured process: a clean worker's peak memory, a function's cold start."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

START_TIMEOUT_S = 30


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def moto_process(env: dict[str, str]) -> Iterator[str]:
    """A moto server on a free loopback port, started with ``env`` (without any ``AWS_ENDPOINT_URL*``), until
    it accepts connections; yields its endpoint URL and stops it (by its PID) on exit."""
    port = free_port()
    env = {k: v for k, v in env.items() if not k.startswith("AWS_ENDPOINT_URL")}
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the moto server on port {port} did not start") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
